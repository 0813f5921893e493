//! `agent-loop`: the tool-calling model loop with the hook points wired in.
//!
//! Not built yet. This crate will hold the model trait and its providers
//! (OpenAI-compatible Chat Completions, Anthropic Messages, a scripted JSON Lines
//! model), tool execution, context compaction, and the `_Stop` / `_PostCompact`
//! hook points, driven by `hooks-core` through `hooks-mcp`.
//!
//! Today it holds nothing that pretends to work.
