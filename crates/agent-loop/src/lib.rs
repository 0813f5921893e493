//! `agent-loop`: the tool-calling model loop with the hook points wired in.
//!
//! The modules are private; what is public is re-exported here:
//!
//! - The model: the [`Model`] trait at the boundary ([`ModelRequest`],
//!   [`ModelResponse`], [`ModelError`]); [`providers`] behind it
//!   (OpenAI-compatible Chat Completions, Anthropic Messages, a scripted JSON
//!   Lines model).
//! - The gateway: the [`Gateway`] trait to tools and hooks, and the plain
//!   data that crosses it ([`ToolDef`], [`ToolOutput`], [`parse_arguments`],
//!   and [`tool_uses`] / [`spread`] for a gateway on the `hooks-core` policy);
//!   implemented for `hooks_mcp::Host` by the `mcp` feature (on by default).
//!   Without it the crate does not depend on MCP: bring your own gateway
//!   (`examples/custom_gateway.rs`).
//! - The loop: [`Agent::run_prompt`] and [`Agent::end_session`], with [`AgentSettings`] and
//!   [`CompactionSettings`] (when to compact, where to cut, the fresh
//!   history \[P2\]).
//! - The history: [`Message`], the hook pairs ([`injection_pair`]) \[I1\],
//!   and the pairing rule every request keeps ([`check_pairing`]).
//! - The one event stream: [`AgentEvent`] into a [`Sink`] \[O1\], \[O2\].
//! - Sessions that survive the process, in [`transcript`]: the JSON Lines
//!   [`transcript::Transcript`] written as the loop goes (a
//!   [`transcript::SessionObserver`] of the history,
//!   [`Agent::with_observer`]), read back by [`transcript::read`] into a
//!   [`transcript::SavedSession`] that [`Agent::resume`] continues.
//!
//! The loop decides nothing about hooks itself: whether to stop, continue or
//! inject comes from `hooks-core` through the gateway.

// Every public item says what it is for: this crate is used on its own.
#![deny(missing_docs)]
#![doc = include_str!("../README.md")]

mod agent;
mod approval;
mod compaction;
mod event;
mod gateway;
#[cfg(feature = "mcp")]
mod mcp;
mod message;
mod model;
pub mod providers;
pub mod transcript;

pub use agent::{Agent, AgentSettings, CUT_MARK, DEFAULT_SYSTEM_PROMPT, PromptOutcome};
pub use approval::{
    Answer, Approval, ApprovalMode, ApprovalRequest, Approver, DecidedBy, Nobody, Standing,
    ToolOwner, pattern_matches,
};
pub use compaction::CompactionSettings;
pub use event::{AgentEvent, CompactionKind, Emitted, Sink};
pub use gateway::{
    Gateway, JsonObject, ToolDef, ToolOutput, ToolReport, ToolSettings, cancelled_output,
    parse_arguments, spread, tool_uses,
};
#[cfg(feature = "mcp")]
pub use mcp::hook_sink;
pub use message::{Message, PairingError, ToolCall, check_pairing, injection_pair};
pub use model::{Model, ModelError, ModelRequest, ModelResponse, TextSink, Usage};
