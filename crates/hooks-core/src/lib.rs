//! `hooks-core`: the MCP-driven lifecycle hook policy as a pure, deterministic
//! state machine.
//!
//! Any MCP server may expose tools whose bare name starts with `_`: lifecycle
//! hooks. They are hidden from the model, refused if the model calls them, and
//! called by the agent itself at eight hook points: `_SessionStart` and
//! `_UserPromptSubmit` (their text is added after the prompt), `_PreToolUse`
//! (non-empty text refuses that tool call, and the model reads why),
//! `_PostToolUse` (text after the tool's output), `_Stop` when the model wants
//! to end its turn (non-empty text is an objection and the agent keeps going),
//! `_PreCompact` (pins the summary must keep), `_PostCompact` after the context
//! was compacted (its text is re-injected) and `_SessionEnd` (told, never
//! waited on for more than a second). A hook gets `{}` unless its input schema
//! names fields of a fixed table ([`InputField`]). Hooks are advisory: a
//! per-call deadline, an objection budget (per session or per prompt) and the
//! "model declined twice" rule keep a slow, buggy or hostile hook from trapping
//! the agent; a hook point nobody lists costs nothing. The rule ids in brackets (`\[S3\]`) are those of the project's
//! `SEMANTICS.md`.
//!
//! This crate makes every decision of that policy and nothing else.
//!
//! # No IO, no clock, no async
//!
//! The crate is `#![no_std]` (with `alloc`) and depends on `serde` and
//! `serde_json` only, so the compiler refuses any use of files, sockets,
//! processes, threads or clocks here. It starts no process,
//! sends no request, reads no clock and never blocks. Time comes in as a
//! [`Time`] value with every input; when the core needs to be woken it says so
//! through [`Session::poll_timeout`]. The same inputs always give the same
//! outputs: ids are counters, every ordered output follows configuration order.
//!
//! # Driving a session
//!
//! A driver (in Sprout, `hooks-mcp`) owns the servers and the clock. It feeds
//! [`Input`]s to [`Session::handle`], drains [`Output`]s with
//! [`Session::poll_output`], acts on them, and calls
//! [`Session::handle_timeout`] when the time from [`Session::poll_timeout`] has
//! come. Here with every server answering at once, in virtual time:
//!
//! ```
//! use hooks_core::*;
//!
//! let config = HookConfig::from_values(Some("*"), Some("2500"), Some("3")).unwrap();
//! let todo = ServerName::new("todo").unwrap();
//! let mut session = Session::new(config, vec![todo]).unwrap();
//! let mut now = Time::ZERO;
//!
//! // The driver does what each output asks; this stand-in server objects once.
//! let mut objections_left = 1;
//! let mut drive = |session: &mut Session, now: Time| {
//!     while let Some(output) = session.poll_output() {
//!         match output {
//!             Output::StartServer { server } => {
//!                 let tools = vec![ListedTool::named("todo"), ListedTool::named("_Stop")];
//!                 session.handle(now, Input::ServerStarted { server, tools }).unwrap();
//!             }
//!             Output::CallHook { call, .. } => {
//!                 let text = if objections_left > 0 { "1 item open" } else { "" };
//!                 objections_left -= 1;
//!                 let reply = HookReply::Result(vec![ReplyPart::Text(text.into())]);
//!                 session.handle(now, Input::HookReplied { call, reply }).unwrap();
//!             }
//!             Output::Event(event) => println!("{}", serde_json::to_string(&event).unwrap()),
//!             Output::CancelCall { .. } | Output::KillServer { .. } => {}
//!         }
//!     }
//! };
//! drive(&mut session, now);
//! assert_eq!(session.model_tools().map(|(_, t)| t.qualified.as_str()).collect::<Vec<_>>(), ["todo__todo"]);
//!
//! session.begin_prompt(now).unwrap();
//! // The model ends its turn: `_Stop` objects, the loop injects and goes on.
//! session.end_turn(now, StopReason::EndTurn, 0, "Done.").unwrap();
//! drive(&mut session, now);
//! let Some(TurnVerdict::Continue { injections }) = session.take_verdict() else { panic!() };
//! assert_eq!(injections[0].tool_name, "todo___Stop");
//! assert_eq!(injections[0].content, r#"{"hook":"_Stop","server":"todo","text":"1 item open"}"#);
//!
//! // The model works, then ends again; nobody objects now.
//! now = now + std::time::Duration::from_millis(40);
//! session.end_turn(now, StopReason::ToolUse, 1, "").unwrap();
//! assert_eq!(session.take_verdict(), Some(TurnVerdict::RunTools));
//! session.end_turn(now, StopReason::EndTurn, 0, "Done now.").unwrap();
//! drive(&mut session, now);
//! assert_eq!(session.take_verdict(), Some(TurnVerdict::End { reason: EndReason::NoObjection }));
//! assert_eq!(session.budget_used(), 1);
//! ```
//!
//! Each question has its own call and its own answer type, so an answer that
//! cannot happen does not type-check: [`Session::end_turn`] is answered by a
//! [`TurnVerdict`] ([`Session::take_verdict`]), [`Session::tools_requested`]
//! by one [`ToolGate`] per call ([`Session::take_tool_gates`]),
//! [`Session::compacted`] by the pairs to re-inject
//! ([`Session::take_reinjections`]), [`Session::abort`] at once by an
//! [`EndReason`]; the [`session`] module has the whole table. A real driver does not answer inline: it starts
//! the calls, then waits for the first of (a reply, the deadline from
//! [`Session::poll_timeout`], a cancellation) and feeds that in, until the
//! answer is there.
//!
//! # Map
//!
//! - [`name`]: server names, qualified tool names, hook points \[N1\]-\[N3\], \[H1\].
//! - [`config`]: the allowlist, the deadline, the budget and stop governance,
//!   validated \[A1\]-\[A2\], \[C1\]-\[C2\], \[G1\]-\[G2\].
//! - [`catalog`]: sorting a listing into model tools and hooks, with what each
//!   hook's schema asked for and warnings \[N3\], \[N4\], \[H2\], \[H4\], \[K4\].
//! - [`input`]: hook input by schema \[K1\]-\[K3\].
//! - [`answer`]: reading a reply into an [`Outcome`] \[R1\]-\[R4\].
//! - [`inject`]: the synthetic call/result pairs and the envelope \[I1\]-\[I2\].
//! - [`event`]: events and reasons \[O1\], \[S5\].
//! - [`session`]: the state machine: one round mechanism for every hook point,
//!   the policy of each, deadlines, kills and restarts \[S1\]-\[S6\],
//!   \[P1\]-\[P3\], \[E1\]-\[E7\], \[R5\], \[C4\], \[T1\]-\[T5\].

#![no_std]
// Every public item says what it is for: this crate is used on its own.
#![deny(missing_docs)]
// The policy needs strings, vectors and queues, nothing from the OS: with
// `no_std` the compiler, not a word scan, keeps IO and clocks out.
extern crate alloc;
#[cfg(test)]
extern crate std;

/// What `std`'s prelude would give every module, from `alloc`.
mod prelude {
    pub(crate) use alloc::borrow::ToOwned;
    pub(crate) use alloc::format;
    pub(crate) use alloc::string::String;
    #[cfg(test)]
    pub(crate) use alloc::string::ToString;
    pub(crate) use alloc::vec;
    pub(crate) use alloc::vec::Vec;
}

pub mod answer;
pub mod catalog;
pub mod config;
pub mod event;
pub mod inject;
pub mod input;
pub mod name;
pub mod session;
pub mod time;

pub use answer::{ErrorKind, HookReply, Outcome, ReplyPart};
pub use catalog::{ListedHook, ModelTool, ServerTools, Warning};
pub use config::{
    Allowlist, BudgetScope, ConfigError, DeclineRule, HookConfig, HookTimeout, StopBudget,
};
pub use event::{
    DownCause, EndReason, Event, PolicyDecision, RoundId, SessionEndReason, StopReason,
};
pub use inject::{HookText, Injection};
pub use input::{HookInput, InputField, ListedTool};
pub use name::{HookPoint, ServerName, ServerNameError};
pub use session::{
    AbortReason, AskError, CallId, HookContext, Input, Output, ServerId, ServerSetup, ServerState,
    Session, SetupError, ToolGate, ToolRun, ToolUse, TurnVerdict, UsageError,
};
pub use time::Time;
