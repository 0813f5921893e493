//! `sprout acp`: Sprout as an Agent Client Protocol agent over stdio.
//!
//! Editors (Zed, JetBrains) and desktop apps drive agents with ACP: JSON-RPC
//! 2.0, one message per line. This module serves `initialize`,
//! `session/new` (the client's `cwd` and `mcpServers`), `session/prompt`,
//! `session/cancel` and `session/close` with the official `agent-client-protocol` SDK. Each session
//! is its own agent with its own MCP servers and its own hook budget \[S3\]; one
//! prompt runs at a time per session (a second gets an error, not a queue).
//!
//! What the client sees: the model's text as `agent_message_chunk`, tool calls
//! as `tool_call` / `tool_call_update`, each hook round as a tool call of its
//! own (title, per-server outcomes, the decision: one message when the round
//! decides within 100 ms, else progress at most every 100 ms, with every event
//! of the round in `_meta["sprout/events"]`), server failures and warnings as
//! thought chunks with the event in `_meta["sprout/event"]`, and the prompt's
//! end as a stop reason with our reason in `_meta["sprout/end"]` (a failure is
//! a JSON-RPC error instead).
//!
//! Stdout carries nothing but protocol frames; logs go to stderr. Frames are
//! read with a size cap: an oversized or malformed frame is answered with a
//! JSON-RPC error and the connection goes on. Updates are written by us, not
//! the SDK, into one buffer that the SDK's responses share; updates are
//! bounded there by being dropped, responses (one per request) by stdin
//! not being read while the buffer is full (`framing`).
//!
//! The module's files, one job each: `serve` (the SDK's handlers and the
//! connection), `session` (the session table: sessions, one prompt at a
//! time, the tasks, close and disconnect), `updates` (our events and end
//! reasons as ACP updates and stop reasons), `ask` (questions to the person
//! through the client: project trust, tool approval), `framing` (the bytes
//! on stdio).
//! Here: what every session is made of ([`AcpConfig`]) and what can end the
//! connection ([`AcpError`]).

use std::sync::{Arc, Mutex};

use agent_client_protocol as acp;
use agent_loop::{AgentSettings, Model};
use hooks_core::HookConfig;
use hooks_mcp::HostOptions;

mod ask;
mod framing;
mod serve;
mod session;
mod updates;

pub(crate) use serve::serve;

/// What every session is made of.
#[derive(Clone)]
pub(crate) struct AcpConfig {
    /// The hook policy.
    pub(crate) hooks: HookConfig,
    /// Host settings.
    pub(crate) host: HostOptions,
    /// Loop settings.
    pub(crate) agent: AgentSettings,
    /// The model, shared by sessions.
    pub(crate) model: Arc<dyn Model>,
    /// The frame size cap.
    pub(crate) max_frame_bytes: usize,
    /// Servers every session gets before the client's own: those of
    /// `--mcp-config`, or `None` to read `.mcp.json` in each session's `cwd`.
    pub(crate) servers: Option<crate::trust::Servers>,
    /// Whether tool calls wait for the person's approval \[U4\].
    pub(crate) approval: agent_loop::ApprovalMode,
    /// Where sessions' transcripts are written; `None` when not saved.
    pub(crate) save_in: Option<std::path::PathBuf>,
    /// Where `session/load` looks for saved sessions.
    pub(crate) sessions_dir: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for AcpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpConfig")
            .field("hooks", &self.hooks)
            .field("model", &self.model.describe())
            .finish_non_exhaustive()
    }
}

/// What ends `sprout acp` with a failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AcpError {
    /// The SDK's connection failed.
    #[error("the ACP connection failed: {0}")]
    Connection(acp::Error),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
