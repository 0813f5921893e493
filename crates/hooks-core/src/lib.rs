#![doc = include_str!("../README.md")]
//!
//! # One answer type per question
//!
//! In the API's terms: a driver feeds [`Input`]s to [`Session::handle`],
//! drains [`Output`]s with [`Session::poll_output`], and wakes the session at
//! [`Session::poll_timeout`] with [`Session::handle_timeout`]; time is a
//! [`Time`]; a hook's input fields are [`InputField`]s.
//!
//! Each question has its own call and its own answer type, so an answer that
//! cannot happen does not type-check: [`Session::end_turn`] is answered by a
//! [`TurnVerdict`] ([`Session::take_verdict`]), [`Session::tools_requested`]
//! by one [`ToolGate`] per call ([`Session::take_tool_gates`]),
//! [`Session::compacted`] by the pairs to re-inject
//! ([`Session::take_reinjections`]), [`Session::abort`] at once by an
//! [`EndReason`]; the [`session`] module has the whole table.
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
//! - [`event`]: events and reasons \[O1\], \[S5\], guard events \[F2\].
//! - [`session`]: the state machine: one round mechanism for every hook point,
//!   the policy of each, deadlines, kills and restarts \[S1\]-\[S6\],
//!   \[P1\]-\[P3\], \[E1\]-\[E7\], \[R5\], \[C4\], \[T1\]-\[T5\], and required
//!   gates, whose failed calls fail closed with text the agent writes
//!   \[F1\]-\[F3\].
//! - `testing` (the `testing` feature): proptest strategies and the
//!   reference driver in virtual time, for property tests of the policy, of
//!   a driver of one's own, or of an invariant of one's own.

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
mod gate;
pub mod inject;
pub mod input;
pub mod name;
pub mod session;
#[cfg(feature = "testing")]
pub mod testing;
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
    AbortReason, AskError, CallId, Carried, HookContext, Input, Output, ServerId, ServerSetup,
    ServerState, Session, SetupError, ToolGate, ToolRun, ToolUse, TurnVerdict, UsageError,
};
pub use time::Time;
