//! `agent-loop`: the tool-calling model loop with the hook points wired in.
//!
//! - [`model`]: the [`Model`] trait at the boundary; [`providers`] behind it
//!   (OpenAI-compatible Chat Completions, Anthropic Messages, a scripted JSON
//!   Lines model).
//! - [`gateway`]: the [`Gateway`] trait to tools and hooks, and the plain
//!   data that crosses it; implemented for `hooks_mcp::Host` by the `mcp`
//!   feature (on by default). Without it the crate does not depend on MCP:
//!   bring your own gateway (`examples/custom_gateway.rs`).
//! - [`agent`]: [`Agent::run_prompt`], the loop itself.
//! - [`compaction`]: pure decisions: when to compact, where to cut, the fresh
//!   history \[P2\].
//! - [`message`]: the provider-neutral history and the hook pairs \[I1\].
//! - [`event`]: the one event stream \[O1\], \[O2\].
//!
//! The loop decides nothing about hooks itself: whether to stop, continue or
//! inject comes from `hooks-core` through the gateway.

// Every public item says what it is for: this crate is used on its own.
#![deny(missing_docs)]

pub mod agent;
pub mod compaction;
pub mod event;
pub mod gateway;
#[cfg(feature = "mcp")]
mod mcp;
pub mod message;
pub mod model;
pub mod providers;

pub use agent::{Agent, AgentSettings, PromptOutcome};
pub use event::{AgentEvent, Sink};
pub use gateway::{Gateway, ToolDef, ToolOutput, ToolReport, ToolSettings};
#[cfg(feature = "mcp")]
pub use mcp::hook_sink;
pub use message::{Message, ToolCall};
pub use model::{Model, ModelError, ModelRequest, ModelResponse, Usage};
