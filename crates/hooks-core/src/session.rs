//! The hook policy of one agent session, as a state machine.
//!
//! [`Session`] takes what happened ([`Input`], each with the current
//! [`Time`]) and the loop's questions, one method each with its own answer
//! type:
//!
//! | question | hook point | answer, taken with |
//! |---|---|---|
//! | [`Session::session_start`] | `_SessionStart` \[E1\] | pairs, [`Session::take_session_context`] |
//! | [`Session::prompt_submitted`] | `_UserPromptSubmit` \[E2\] | pairs, [`Session::take_prompt_context`] |
//! | [`Session::tools_requested`] | `_PreToolUse` \[E3\] | one [`ToolGate`] per call, [`Session::take_tool_gates`] |
//! | [`Session::tools_ran`] | `_PostToolUse` \[E4\] | extra [`HookText`]s per call, [`Session::take_tool_notes`] |
//! | [`Session::end_turn`] | `_Stop` \[S1\]-\[S5\] | a [`TurnVerdict`], [`Session::take_verdict`] |
//! | [`Session::compacting`] | `_PreCompact` \[E5\] | pins as pairs, [`Session::take_pins`] |
//! | [`Session::compacted`] | `_PostCompact` \[P1\]-\[P3\] | pairs, [`Session::take_reinjections`] |
//! | [`Session::session_end`] | `_SessionEnd` \[E6\] | done, [`Session::take_session_end`] |
//! | [`Session::abort`] | none | an [`EndReason`], at once |
//!
//! Every hook point runs through one round mechanism: the allowlisted servers
//! that are up and list the hook are called at once, each call with its own
//! deadline \[T1\], \[C4\] and the input its schema asked for \[K1\]-\[K3\]; a hook
//! point nobody up lists costs nothing \[E7\]. The core queues what the driver
//! must do and what to report ([`Output`]) for [`Session::poll_output`]. It
//! never waits: when it needs to be woken, it says when through
//! [`Session::poll_timeout`], and the driver calls [`Session::handle_timeout`]
//! then.
//!
//! What it decides: which servers to call for a hook round, with what input
//! and by when \[T1\], \[K1\]; what their answers mean \[R1\]-\[R5\]; whether the
//! prompt goes on or ends, and why \[S1\]-\[S5\], \[G1\]-\[G2\]; what to inject
//! \[I1\]-\[I3\], \[P1\]-\[P3\], \[E1\]-\[E5\]; which tool call is refused \[E3\];
//! which call to cancel, which server to kill, and when a server may be
//! restarted \[T2\]-\[T5\]; and, for a required gate, what the agent says in
//! place of an answer it did not give \[F1\] and when to say the gate is
//! down or back \[F2\].
//!
//! What it does not do: start processes, send requests, keep the history, or
//! read a clock. Those belong to the driver (`hooks-mcp`) and the loop
//! (`agent-loop`).

use crate::prelude::*;

use alloc::collections::VecDeque;
use core::fmt;
use core::time::Duration;

use serde_json::{Map, Value};

use crate::answer::{HookReply, Outcome, cut};
use crate::catalog::{ModelTool, ServerTools, Warning};
use crate::config::{BudgetScope, DeclineRule, HookConfig, HookTimeout};
use crate::event::{
    DownCause, EndReason, Event, PolicyDecision, RoundId, SessionEndReason, StopReason,
};
use crate::gate::GateFailure;
use crate::inject::{HookText, Injection};
use crate::input::{Facts, InputField, ListedTool};
use crate::name::{self, HookPoint, ServerName};
use crate::time::Time;

/// Kills, crashes and failed starts a server may have in one session before
/// it stays down \[T4\].
pub const FAILURE_LIMIT: u32 = 3;

/// The wait before the first restart; it doubles with each failure \[T4\].
pub const RESTART_BACKOFF: Duration = Duration::from_millis(250);

/// The longest a `_SessionEnd` call may take, whatever the hook timeout \[E6\].
pub const SESSION_END_DEADLINE: Duration = Duration::from_secs(1);

/// What one round may inject, all servers together, in bytes \[R5\].
pub const MAX_ROUND_INJECTION_BYTES: usize = 64 * 1024;

/// Consecutive hook timeouts that get a server killed \[T3\].
const TIMEOUTS_TO_KILL: u32 = 2;

/// A server, by its position in configuration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(pub usize);

/// One hook call, numbered from 1 in the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId(pub u64);

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Why the loop is ending a prompt on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// The person cancelled \[T5\].
    Cancelled,
    /// The loop's round limit was reached.
    MaxRounds,
    /// The loop failed (model API error, say).
    Failed,
}

impl From<AbortReason> for EndReason {
    /// The end reason an abort gives the prompt \[S5\].
    fn from(reason: AbortReason) -> EndReason {
        match reason {
            AbortReason::Cancelled => EndReason::Cancelled,
            AbortReason::MaxRounds => EndReason::MaxRounds,
            AbortReason::Failed => EndReason::Failed,
        }
    }
}

/// One configured server: its name and what its configuration entry says
/// beside: its own hook timeout \[C4\], and whether it is a required gate
/// \[F1\].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSetup {
    /// The server's name \[N1\].
    pub name: ServerName,
    /// Overrides [`HookConfig::timeout`] for this server's hook calls \[C4\].
    pub hook_timeout: Option<HookTimeout>,
    /// `"required": true`: its hooks must answer \[F1\]. A hook call of it
    /// that times out, errors, crashes, or cannot be made because it is not
    /// up counts as an answer the agent writes, naming it and what went
    /// wrong: an objection at `_Stop`, a refusal at `_PreToolUse`, text to
    /// inject at every other hook point but `_SessionEnd`, where it is
    /// nothing. A server that is not up fails so at each hook point it listed
    /// when it was last up; one that never came up, at `_Stop` and
    /// `_PreToolUse`. Its going down and coming back are reported
    /// ([`Event::GuardDown`], [`Event::GuardUp`] \[F2\]). On a server the
    /// allowlist does not let hook it has no effect but a warning at start-up
    /// ([`Warning::RequiredNotAllowlisted`] \[F3\]).
    pub required: bool,
}

impl From<ServerName> for ServerSetup {
    /// A server with the session's hook timeout, not required.
    fn from(name: ServerName) -> ServerSetup {
        ServerSetup {
            name,
            hook_timeout: None,
            required: false,
        }
    }
}

/// What only the loop knows about the session, given to hooks that ask for
/// it (`session_id`, `cwd`) \[K2\].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookContext {
    /// The agent's session id.
    pub session_id: String,
    /// The agent's working directory.
    pub cwd: String,
}

/// What a session carries into its continuation in another process (from a
/// saved transcript): read with [`Session::carried`], given back with
/// [`Session::resume`] (all of it, before any server starts) or
/// [`Session::restore`] (the budget and rounds, between prompts) \[S3\],
/// \[T4\].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// `_Stop` objections charged in the budget's scope \[S3\], \[G1\].
    pub budget_used: u32,
    /// Hook rounds asked so far. The continued session numbers its rounds
    /// after them, so the synthetic call ids of its pairs (`sprout-R-I`)
    /// stay unique in the history it inherits \[I1\].
    pub rounds: u64,
    /// Kills, crashes and failed starts so far in the session, by server
    /// name, for each server with at least one \[T4\], sorted by name (so
    /// two equal states compare equal): the configured servers and those a
    /// continuation carried through without having them configured. A
    /// server at
    /// [`FAILURE_LIMIT`] stays down for the rest of the session, in every
    /// process that continues it.
    pub failures: Vec<(ServerName, u32)>,
}

/// One model tool call that resolved to a real tool ([`Session::resolve`]),
/// about to run \[E3\].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolUse {
    /// Its server.
    pub server: ServerId,
    /// Its bare tool name.
    pub tool: String,
    /// Its arguments, as the model gave them.
    pub arguments: Value,
}

/// One model tool call that ran \[E4\].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRun {
    /// The call.
    pub call: ToolUse,
    /// The text of its result.
    pub output: String,
    /// Whether its result is an error.
    pub is_error: bool,
}

/// Something that happened to a server or a hook call, fed to
/// [`Session::handle`]. The loop's questions are methods of their own
/// ([`Session::end_turn`], [`Session::compacted`], …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A server started (or restarted) and listed these tools.
    ServerStarted {
        /// The server.
        server: ServerId,
        /// Its `tools/list`, all pages, in order: names and, for hooks, the
        /// property names of their input schemas \[K1\].
        tools: Vec<ListedTool>,
    },
    /// A start or restart failed.
    ServerStartFailed {
        /// The server.
        server: ServerId,
        /// What went wrong, for people.
        reason: String,
    },
    /// A server that was up exited or closed its session on its own.
    ServerExited {
        /// The server.
        server: ServerId,
        /// What was seen, for people.
        reason: String,
    },
    /// The loop is about to use this server for a tool call: restart it if it
    /// is down and its backoff has passed \[T4\].
    ServerWanted {
        /// The server.
        server: ServerId,
    },
    /// A hook call came back.
    HookReplied {
        /// The call.
        call: CallId,
        /// What came back.
        reply: HookReply,
    },
}

/// What the core asks of the driver and tells the loop, drained with
/// [`Session::poll_output`].
///
/// Outputs are work and reports, never answers: a question's answer waits
/// in its own slot ([`Session::take_verdict`], [`Session::take_reinjections`],
/// …) and is ready once the step that decides it has queued everything it does
/// (the round's calls, cancellations, kills, and the events that report them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Call `hook` on `server` with input `arguments` \[H5\], \[K1\]; `deadline`
    /// is when the core will give up on it \[T1\].
    CallHook {
        /// The call, to name in [`Input::HookReplied`].
        call: CallId,
        /// The server.
        server: ServerId,
        /// The hook point.
        hook: HookPoint,
        /// The input to send: `{}` unless the hook's schema named fields.
        arguments: Map<String, Value>,
        /// The call's deadline.
        deadline: Time,
    },
    /// Cancel this call on the wire (`notifications/cancelled`); its answer,
    /// if one still comes, is discarded \[T2\].
    CancelCall {
        /// The call.
        call: CallId,
    },
    /// Kill the server: its process group for stdio, its session for HTTP
    /// \[T3\]. Do not report its exit as [`Input::ServerExited`].
    KillServer {
        /// The server.
        server: ServerId,
    },
    /// Start the server (first start or restart), then report
    /// [`Input::ServerStarted`] or [`Input::ServerStartFailed`] \[T4\].
    StartServer {
        /// The server.
        server: ServerId,
    },
    /// Something to show or log \[O1\].
    Event(Event),
}

/// The answer to [`Session::end_turn`]: what the loop does with the model's
/// response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnVerdict {
    /// The response carries tool calls: run them. Not gated \[S1\].
    RunTools,
    /// `_Stop` objected: append these pairs and ask the model again \[S4\].
    Continue {
        /// In configuration order \[I3\]; never empty.
        injections: Vec<Injection>,
    },
    /// The prompt is over \[S5\].
    End {
        /// Why; never [`EndReason::Cancelled`], which only
        /// [`Session::abort`] gives.
        reason: EndReason,
    },
}

/// The answer to [`Session::tools_requested`] for one tool call \[E3\].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolGate {
    /// Run it: nobody refused (empty, error and timeout all mean run, but
    /// for a required gate, whose error or timeout refuses \[F1\]).
    Run,
    /// Do not run it: its result is an error result whose content is these
    /// envelopes, one text item each, so the model sees why.
    Refused {
        /// In configuration order \[I3\]; never empty.
        refusals: Vec<HookText>,
    },
}

/// A decided answer, waiting to be taken by its typed getter.
#[derive(Debug)]
enum Answer {
    SessionContext(Vec<Injection>),
    PromptContext(Vec<Injection>),
    Gates(Vec<ToolGate>),
    Notes(Vec<Vec<HookText>>),
    Turn(TurnVerdict),
    Pins(Vec<Injection>),
    Reinject(Vec<Injection>),
    SessionEnd,
}

/// Why a driver's question got no answer. The core's own questions fail only
/// with a [`UsageError`]; a driver that waits for a hook round and can be
/// cancelled adds [`AskError::Cancelled`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AskError {
    /// The question cannot be asked in the current state.
    Usage(UsageError),
    /// The prompt was cancelled while the question's hook round ran; the
    /// driver called [`Session::abort`], so the prompt has ended with
    /// [`EndReason::Cancelled`] \[T5\].
    Cancelled,
}

impl From<UsageError> for AskError {
    fn from(e: UsageError) -> AskError {
        AskError::Usage(e)
    }
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskError::Usage(e) => fmt::Display::fmt(e, f),
            AskError::Cancelled => f.write_str("the prompt was cancelled during a hook round"),
        }
    }
}

impl core::error::Error for AskError {}

/// A misuse of the API: an input that cannot happen in the current state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UsageError {
    /// [`Session::begin_prompt`] while a prompt runs.
    PromptRunning,
    /// A question while no prompt runs.
    NoPrompt,
    /// A question while a hook round is in flight.
    RoundInFlight,
    /// A [`ServerId`] that is not in the configuration.
    UnknownServer(ServerId),
    /// A question after [`Session::session_end`].
    SessionEnded,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::PromptRunning => f.write_str("a prompt is already running"),
            UsageError::NoPrompt => f.write_str("no prompt is running"),
            UsageError::RoundInFlight => {
                f.write_str("a hook round is in flight; wait for its answer")
            }
            UsageError::UnknownServer(id) => write!(f, "no server has id {}", id.0),
            UsageError::SessionEnded => f.write_str("the session has ended"),
        }
    }
}

impl core::error::Error for UsageError {}

/// Why a session could not be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupError {
    /// Two servers share a name.
    DuplicateServer(ServerName),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::DuplicateServer(name) => {
                write!(
                    f,
                    "MCP server {name} is configured twice; server names must be unique"
                )
            }
        }
    }
}

impl core::error::Error for SetupError {}

/// Where a server stands, as [`Session::server_state`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerState {
    /// Starting or restarting; not called until it is up.
    Starting,
    /// Up: may be called.
    Up,
    /// Down; a restart may be tried from `retry_at` on \[T4\].
    Down {
        /// When the backoff ends.
        retry_at: Time,
    },
    /// Down for the rest of the session; its tools are no longer offered \[T4\].
    Retired,
}

#[derive(Debug)]
struct Server {
    name: ServerName,
    may_hook: bool,
    /// A required gate: `required` in its entry, and `may_hook` \[F1\], \[F3\].
    required: bool,
    /// What took it down last. Invariant: `Some` whenever `state` is `Down`
    /// or `Retired` (the text of a required gate says it \[F1\]).
    last_down: Option<DownCause>,
    /// A required gate whose [`Event::GuardDown`] was the last guard event
    /// about it: its next start reports [`Event::GuardUp`] \[F2\].
    guard_down: bool,
    /// This server's own hook timeout \[C4\], else the session's.
    hook_timeout: HookTimeout,
    /// The latest listing; kept while the server is down so that it can be
    /// restarted on use.
    tools: ServerTools,
    state: ServerState,
    /// Invariant: below `TIMEOUTS_TO_KILL` whenever the server is up.
    consecutive_timeouts: u32,
    /// Invariant: below `FAILURE_LIMIT` unless `state` is `Retired`.
    failures: u32,
    starts: u32,
    /// Whether it ever started and listed its tools.
    listed: bool,
}

#[derive(Debug)]
struct PendingCall {
    id: CallId,
    server: ServerId,
    /// Which of the question's subjects (tool calls; else the only one) it
    /// asks about.
    subject: usize,
    deadline: Time,
    outcome: Option<Outcome>,
}

#[derive(Debug)]
struct Round {
    id: RoundId,
    hook: HookPoint,
    /// How many subjects the question asked about.
    subjects: usize,
    started: Time,
    /// Grouped by server in configuration order, which is the injection
    /// order \[I3\], then by subject.
    calls: Vec<PendingCall>,
    /// Required gates that could not be called because they are not up, in
    /// configuration order, each with why: every subject gets their
    /// answer \[F1\].
    unreachable: Vec<(ServerId, GateFailure)>,
}

/// A running prompt.
#[derive(Debug, Default)]
struct Prompt {
    /// The last model response of this prompt was an end-of-turn that
    /// `_Stop` objected to, and no tool call came since \[S2\].
    objected: bool,
    /// `_Stop` questions asked in this prompt: the next round's `attempt`
    /// is one more \[K2\].
    stop_rounds: u32,
}

/// The hook policy of one agent session. See the crate docs for the drive loop.
#[derive(Debug)]
pub struct Session {
    config: HookConfig,
    /// In configuration order; `ServerId` indexes it.
    servers: Vec<Server>,
    prompt: Option<Prompt>,
    /// The hook round in flight. Invariant: `Some` only while a prompt runs,
    /// or for `_SessionEnd` after the last one.
    round: Option<Round>,
    /// Objected end-of-turns in this session, or in this prompt for
    /// [`BudgetScope::Prompt`] \[S3\], \[G1\].
    /// Invariant: at most `config.stop_budget`.
    budget_used: u32,
    /// The loop's facts for every hook (`session_id`, `cwd`), once
    /// [`Session::session_start`] gave them.
    context: Option<HookContext>,
    /// What the last `_PreCompact` round pinned, for the next `_PostCompact`
    /// input \[E5\], \[K2\].
    pins: Vec<(ServerName, String)>,
    /// Why the session ended, once [`Session::session_end`] was asked.
    ended: Option<SessionEndReason>,
    next_round: u64,
    next_call: u64,
    /// Failure counts carried in by [`Session::resume`] for servers that
    /// are not configured here: given back by [`Session::carried`], so a
    /// later continuation that configures them again still counts them
    /// \[T4\].
    unconfigured_failures: Vec<(ServerName, u32)>,
    /// The latest time seen; inputs that carry an earlier time use this one.
    now: Time,
    outputs: VecDeque<Output>,
    /// The answer to the question asked last, once decided and until taken.
    answer: Option<Answer>,
}

impl Session {
    /// A session over `servers`, in configuration order: [`ServerName`]s, or
    /// [`ServerSetup`]s for servers with their own hook timeout \[C4\] or
    /// that are required gates \[F1\]. Queues a [`Output::StartServer`] for
    /// each, a warning for every allowlist entry that names no server \[A3\],
    /// and one for every required server the allowlist does not let hook
    /// \[F3\].
    pub fn new<S: Into<ServerSetup>>(
        config: HookConfig,
        servers: Vec<S>,
    ) -> Result<Session, SetupError> {
        Session::resume(config, servers, &Carried::default())
    }

    /// A session that continues one saved by another process: as
    /// [`Session::new`], with `carried` applied before any server is
    /// started. The `_Stop` budget used and the rounds asked count as in
    /// [`Session::restore`]; each configured server named in
    /// `carried.failures` starts with those failures \[T4\] (so one that
    /// had 2 of [`FAILURE_LIMIT`] gets one more try), and one that
    /// reached the limit is not started at all: it is
    /// [`ServerState::Retired`] from the start, its tools are not offered,
    /// and one [`Event::ServerDown`] with [`DownCause::BeforeResume`] says
    /// so. Servers are matched by name; a carried server that is not
    /// configured has no effect but is carried on by
    /// [`Session::carried`]; a configured one that is not carried starts
    /// with none. A required gate retired so also gets its
    /// [`Event::GuardDown`] \[F2\].
    pub fn resume<S: Into<ServerSetup>>(
        config: HookConfig,
        servers: Vec<S>,
        carried: &Carried,
    ) -> Result<Session, SetupError> {
        let servers: Vec<ServerSetup> = servers.into_iter().map(Into::into).collect();
        for (i, setup) in servers.iter().enumerate() {
            if servers[..i].iter().any(|s| s.name == setup.name) {
                return Err(SetupError::DuplicateServer(setup.name.clone()));
            }
        }
        let mut outputs = VecDeque::new();
        if let crate::config::Allowlist::Names(listed) = &config.allowlist {
            for entry in listed {
                if !servers.iter().any(|s| s.name.as_str() == entry) {
                    outputs.push_back(Output::Event(Event::Warning(
                        Warning::UnknownAllowlistEntry {
                            name: entry.clone(),
                        },
                    )));
                }
            }
        }
        for setup in servers.iter().filter(|s| s.required) {
            if !config.allowlist.allows(setup.name.as_str()) {
                // [F3]: required on a server that may not hook does nothing.
                outputs.push_back(Output::Event(Event::Warning(
                    Warning::RequiredNotAllowlisted {
                        server: setup.name.clone(),
                    },
                )));
            }
        }
        let servers: Vec<Server> = servers
            .into_iter()
            .map(|setup| Server {
                may_hook: config.allowlist.allows(setup.name.as_str()),
                required: setup.required && config.allowlist.allows(setup.name.as_str()),
                last_down: None,
                guard_down: false,
                hook_timeout: setup.hook_timeout.unwrap_or(config.timeout),
                name: setup.name,
                tools: ServerTools::default(),
                state: ServerState::Starting,
                consecutive_timeouts: 0,
                failures: 0,
                starts: 0,
                listed: false,
            })
            .collect();
        let mut session = Session {
            config,
            servers,
            prompt: None,
            round: None,
            budget_used: 0,
            context: None,
            pins: Vec::new(),
            ended: None,
            next_round: 1,
            next_call: 1,
            unconfigured_failures: Vec::new(),
            now: Time::ZERO,
            outputs,
            answer: None,
        };
        session.carry_in(carried);
        for id in 0..session.servers.len() {
            if session.servers[id].state == ServerState::Retired {
                // [T4]: it used its failures before; it stays down, and
                // the person is told so once, here.
                let server = &mut session.servers[id];
                server.last_down = Some(DownCause::BeforeResume);
                session.outputs.push_back(Output::Event(Event::ServerDown {
                    server: server.name.clone(),
                    cause: DownCause::BeforeResume,
                    failures: server.failures,
                    retry_at: None,
                }));
                session.guard_down(ServerId(id), DownCause::BeforeResume);
            } else {
                session.start(ServerId(id));
            }
        }
        Ok(session)
    }

    /// The name of a server. Panics on an id not from this session.
    pub fn server_name(&self, id: ServerId) -> &ServerName {
        &self.servers[id.0].name
    }

    /// The id of the server with this name.
    pub fn server_id(&self, name: &str) -> Option<ServerId> {
        self.servers
            .iter()
            .position(|s| s.name.as_str() == name)
            .map(ServerId)
    }

    /// Where a server stands. Panics on an id not from this session.
    pub fn server_state(&self, id: ServerId) -> ServerState {
        self.servers[id.0].state
    }

    /// The deadline of this server's hook calls: its own \[C4\] or the
    /// session's \[C1\]. Panics on an id not from this session.
    pub fn hook_timeout(&self, id: ServerId) -> HookTimeout {
        self.servers[id.0].hook_timeout
    }

    /// Whether the allowlist lets this server hook \[A2\].
    pub fn may_hook(&self, id: ServerId) -> bool {
        self.servers[id.0].may_hook
    }

    /// Whether this server is a required gate \[F1\]: its entry says
    /// `required` and the allowlist lets it hook (else `required` has no
    /// effect \[F3\]). For `sprout hooks list` \[F2\], beside
    /// [`Session::server_state`]. Panics on an id not from this session.
    pub fn is_required(&self, id: ServerId) -> bool {
        self.servers[id.0].required
    }

    /// The server's latest listing, sorted.
    pub fn server_tools(&self, id: ServerId) -> &ServerTools {
        &self.servers[id.0].tools
    }

    /// The tools to offer the model, in configuration then listing order.
    /// Never a hook \[H2\]; never a retired server's tool \[T4\].
    pub fn model_tools(&self) -> impl Iterator<Item = (ServerId, &ModelTool)> + '_ {
        self.servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state != ServerState::Retired)
            .flat_map(|(i, s)| s.tools.model_tools.iter().map(move |t| (ServerId(i), t)))
    }

    /// The server and bare name a model tool call goes to, or `None`: the
    /// caller then answers `unknown tool: NAME` without sending anything, the
    /// same for a hook as for a name that does not exist \[H3\].
    pub fn resolve(&self, model_name: &str) -> Option<(ServerId, &str)> {
        let (server, bare) = name::split_qualified(model_name)?;
        let id = self.server_id(server)?;
        let s = &self.servers[id.0];
        if s.state == ServerState::Retired {
            return None;
        }
        s.tools.model_tool(bare).map(|t| (id, t.bare.as_str()))
    }

    /// `_Stop` objections charged so far in the budget's scope: the session,
    /// or the running (else the last) prompt \[S3\], \[G1\].
    pub fn budget_used(&self) -> u32 {
        self.budget_used
    }

    /// What a continuation of this session in another process must carry
    /// over: the budget used and the rounds asked.
    pub fn carried(&self) -> Carried {
        let failures = self
            .servers
            .iter()
            .filter(|s| s.failures > 0)
            .map(|s| (s.name.clone(), s.failures))
            .chain(self.unconfigured_failures.iter().cloned());
        let mut failures: Vec<(ServerName, u32)> = failures.collect();
        failures.sort();
        Carried {
            budget_used: self.budget_used,
            rounds: self.next_round - 1,
            failures,
        }
    }

    /// Continues a session saved elsewhere: the `_Stop` budget it used
    /// counts here (at most this session's budget), and rounds are
    /// numbered after its rounds. Asked between prompts, before the
    /// session ends. With [`BudgetScope::Prompt`] the next prompt refills
    /// the budget as ever \[G1\]. Failure counts are not taken here: the
    /// servers have started by now, so they come in through
    /// [`Session::resume`], before the first start \[T4\].
    pub fn restore(&mut self, carried: &Carried) -> Result<(), UsageError> {
        if self.ended.is_some() {
            return Err(UsageError::SessionEnded);
        }
        if self.prompt.is_some() {
            return Err(UsageError::PromptRunning);
        }
        self.restore_budget(carried);
        Ok(())
    }

    fn restore_budget(&mut self, carried: &Carried) {
        self.budget_used = carried.budget_used.min(self.config.stop_budget.get());
        self.next_round = self.next_round.max(carried.rounds.saturating_add(1));
    }

    /// Takes `carried` in before any server starts: the budget and rounds,
    /// and each server's failures, at most [`FAILURE_LIMIT`] (at the limit
    /// it is retired) \[T4\].
    fn carry_in(&mut self, carried: &Carried) {
        self.restore_budget(carried);
        for (name, failures) in &carried.failures {
            let failures = (*failures).min(FAILURE_LIMIT);
            if failures == 0 {
                continue;
            }
            match self.servers.iter_mut().find(|s| s.name == *name) {
                Some(server) => {
                    server.failures = server.failures.max(failures);
                    if server.failures >= FAILURE_LIMIT {
                        server.state = ServerState::Retired;
                    }
                }
                None => match self
                    .unconfigured_failures
                    .iter_mut()
                    .find(|(n, _)| n == name)
                {
                    Some((_, kept)) => *kept = (*kept).max(failures),
                    None => self.unconfigured_failures.push((name.clone(), failures)),
                },
            }
        }
    }

    /// Whether a prompt is running.
    pub fn in_prompt(&self) -> bool {
        self.prompt.is_some()
    }

    /// When the core next needs [`Session::handle_timeout`]: the earliest
    /// deadline of a call in flight, if any. Only [`Session::handle`],
    /// [`Session::handle_timeout`] and the questions change the answer, so a
    /// driver asks again after each of them.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        let round = self.round.as_ref()?;
        round
            .calls
            .iter()
            .filter(|c| c.outcome.is_none())
            .map(|c| c.deadline)
            .min()
    }

    /// The next output, if any. Drain it after every input and question:
    /// outputs are the only way the core's work and reports leave it; then
    /// take the answer, if the question asked has one ready.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// Feeds one input. `Err` only for inputs that cannot happen in the
    /// current state; the state is then unchanged, except that the session's
    /// clock has moved to `now`.
    pub fn handle(&mut self, now: Time, input: Input) -> Result<(), UsageError> {
        self.now = self.now.max(now);
        match input {
            Input::ServerStarted { server, tools } => self.on_started(self.check(server)?, tools),
            Input::ServerStartFailed { server, reason } => {
                let id = self.check(server)?;
                if self.servers[id.0].state == ServerState::Starting {
                    self.go_down(id, DownCause::StartFailed(reason));
                }
            }
            Input::ServerExited { server, reason } => {
                let id = self.check(server)?;
                if self.servers[id.0].state == ServerState::Up {
                    self.on_crash(id, reason);
                }
            }
            Input::ServerWanted { server } => {
                let id = self.check(server)?;
                self.restart_if_due(id);
            }
            Input::HookReplied { call, reply } => self.on_reply(call, reply),
        }
        Ok(())
    }

    /// A prompt begins. With [`BudgetScope::Prompt`] the `_Stop` budget is
    /// refilled \[G1\].
    pub fn begin_prompt(&mut self, now: Time) -> Result<(), UsageError> {
        self.now = self.now.max(now);
        if self.ended.is_some() {
            return Err(UsageError::SessionEnded);
        }
        if self.prompt.is_some() {
            return Err(UsageError::PromptRunning);
        }
        self.prompt = Some(Prompt::default());
        self.answer = None;
        if self.config.stop_budget_scope == BudgetScope::Prompt {
            self.budget_used = 0;
        }
        self.restart_unlisted();
        Ok(())
    }

    /// The session starts (or resumes) \[E1\]: asked once, in its first
    /// prompt, before the first model request. `context` is what every
    /// later hook may be given as `session_id` and `cwd` \[K2\]. Answered by
    /// the `_SessionStart` pairs (possibly none) to append after the prompt,
    /// in [`Session::take_session_context`].
    pub fn session_start(&mut self, now: Time, context: HookContext) -> Result<(), UsageError> {
        self.ready(now)?;
        self.context = Some(context);
        self.ask(HookPoint::SessionStart, vec![Facts::default()]);
        Ok(())
    }

    /// A prompt arrived, with this text \[E2\]: asked before its first model
    /// request. Answered by the `_UserPromptSubmit` pairs (possibly none) to
    /// append right after the prompt, in [`Session::take_prompt_context`]. It
    /// cannot refuse the prompt.
    pub fn prompt_submitted(&mut self, now: Time, prompt: &str) -> Result<(), UsageError> {
        self.ready(now)?;
        let mut facts = Facts::default();
        facts.set_str(InputField::Prompt, prompt);
        self.ask(HookPoint::UserPromptSubmit, vec![facts]);
        Ok(())
    }

    /// The model asked for these tool calls, each resolved to a real tool
    /// \[E3\] (a call that resolves to nothing or to a hook is never asked
    /// about \[H3\]). All are asked about in one round, in parallel. Answered
    /// by one [`ToolGate`] per call, in the order given, in
    /// [`Session::take_tool_gates`].
    pub fn tools_requested(&mut self, now: Time, calls: Vec<ToolUse>) -> Result<(), UsageError> {
        self.ready(now)?;
        for call in &calls {
            self.check(call.server)?;
        }
        let subjects = calls.iter().map(|c| self.tool_facts(c)).collect();
        self.ask(HookPoint::PreToolUse, subjects);
        Ok(())
    }

    /// These tool calls ran (never one [`ToolGate::Refused`]) \[E4\].
    /// Answered by the `_PostToolUse` envelopes to append to each call's
    /// result after its own output (possibly none), one list per call in the
    /// order given, in [`Session::take_tool_notes`].
    pub fn tools_ran(&mut self, now: Time, runs: Vec<ToolRun>) -> Result<(), UsageError> {
        self.ready(now)?;
        for run in &runs {
            self.check(run.call.server)?;
        }
        let subjects = runs
            .iter()
            .map(|run| {
                let mut facts = self.tool_facts(&run.call);
                facts.set_str(InputField::Output, &run.output);
                facts.set(InputField::IsError, Value::Bool(run.is_error));
                facts
            })
            .collect();
        self.ask(HookPoint::PostToolUse, subjects);
        Ok(())
    }

    /// The model answered with `stop`, `tool_calls` tool calls and the text
    /// `last_assistant_message`: may the turn end? Answered by a
    /// [`TurnVerdict`] in [`Session::take_verdict`], at once or after a
    /// `_Stop` round \[S1\]-\[S5\], \[G1\]-\[G2\].
    pub fn end_turn(
        &mut self,
        now: Time,
        stop: StopReason,
        tool_calls: usize,
        last_assistant_message: &str,
    ) -> Result<(), UsageError> {
        self.ready(now)?;
        self.on_model(stop, tool_calls, last_assistant_message);
        Ok(())
    }

    /// The history is about to be compacted because it passed its threshold
    /// \[E5\]. Answered by the `_PreCompact` pins (possibly none) in
    /// [`Session::take_pins`]: the loop gives their text to the summariser
    /// and keeps the pairs verbatim in the fresh history; the next
    /// [`Session::compacted`] gives them to `_PostCompact` as `pins`.
    pub fn compacting(&mut self, now: Time) -> Result<(), UsageError> {
        self.ready(now)?;
        self.pins.clear();
        let mut facts = Facts::default();
        facts.set_str(InputField::Reason, "threshold");
        self.ask(HookPoint::PreCompact, vec![facts]);
        Ok(())
    }

    /// The history was compacted, removing `removed_messages` messages, with
    /// `summary` after a summary handoff (`None` after the truncation
    /// fallback) \[P1\]: what goes back in? Answered by the `_PostCompact`
    /// pairs (possibly none) in [`Session::take_reinjections`], at once or
    /// after a round \[P2\].
    pub fn compacted(
        &mut self,
        now: Time,
        removed_messages: usize,
        summary: Option<&str>,
    ) -> Result<(), UsageError> {
        self.ready(now)?;
        let pins = core::mem::take(&mut self.pins);
        if removed_messages == 0 {
            self.answer = Some(Answer::Reinject(Vec::new()));
            return Ok(());
        }
        let mut facts = Facts::default();
        if let Some(summary) = summary {
            facts.set_str(InputField::Summary, summary);
        }
        let pins = pins
            .iter()
            .map(|(server, text)| serde_json::json!({"server": server.as_str(), "text": text}))
            .collect();
        facts.set(InputField::Pins, Value::Array(pins));
        self.ask(HookPoint::PostCompact, vec![facts]);
        Ok(())
    }

    /// The session ends, for `reason` \[E6\]: asked once, when no prompt runs
    /// (abort a running one first). Every call's deadline is at most
    /// [`SESSION_END_DEADLINE`]; the answers are ignored. Answered when the
    /// round is over, in [`Session::take_session_end`]. No question may
    /// follow.
    pub fn session_end(&mut self, now: Time, reason: SessionEndReason) -> Result<(), UsageError> {
        self.now = self.now.max(now);
        if self.ended.is_some() {
            return Err(UsageError::SessionEnded);
        }
        if self.prompt.is_some() {
            return Err(UsageError::PromptRunning);
        }
        self.answer = None;
        self.ended = Some(reason);
        let mut facts = Facts::default();
        facts.set_str(InputField::Reason, reason.as_str());
        self.ask(HookPoint::SessionEnd, vec![facts]);
        Ok(())
    }

    /// The loop ends the prompt on its own. A round in flight ends now: its
    /// calls are cancelled \[T5\] and its question gets no answer. Returns why
    /// the prompt ended \[S5\].
    pub fn abort(&mut self, now: Time, reason: AbortReason) -> Result<EndReason, UsageError> {
        self.now = self.now.max(now);
        if self.prompt.is_none() {
            return Err(UsageError::NoPrompt);
        }
        self.answer = None;
        let mut ended_round = None;
        if let Some(round) = self.round.take() {
            // [T5]: cancel every call in flight; the round ends now.
            for call in round.calls.iter().filter(|c| c.outcome.is_none()) {
                self.outputs.push_back(Output::CancelCall { call: call.id });
            }
            for call in round.calls.iter().filter(|c| c.outcome.is_none()) {
                self.outputs.push_back(Output::Event(Event::HookCalled {
                    round: round.id,
                    hook: round.hook,
                    server: self.servers[call.server.0].name.clone(),
                    outcome: Outcome::Cancelled,
                    latency: self.now.saturating_since(round.started),
                }));
            }
            ended_round = Some(round.id);
        }
        let reason = EndReason::from(reason);
        self.end_prompt(ended_round, reason.clone());
        Ok(reason)
    }

    /// The answer to [`Session::session_start`], once decided; taken once.
    #[must_use]
    pub fn take_session_context(&mut self) -> Option<Vec<Injection>> {
        self.take(|a| match a {
            Answer::SessionContext(pairs) => Ok(pairs),
            other => Err(other),
        })
    }

    /// The answer to [`Session::prompt_submitted`], once decided; taken once.
    #[must_use]
    pub fn take_prompt_context(&mut self) -> Option<Vec<Injection>> {
        self.take(|a| match a {
            Answer::PromptContext(pairs) => Ok(pairs),
            other => Err(other),
        })
    }

    /// The answer to [`Session::tools_requested`], once decided: one gate
    /// per call asked about, in the order asked; taken once.
    #[must_use]
    pub fn take_tool_gates(&mut self) -> Option<Vec<ToolGate>> {
        self.take(|a| match a {
            Answer::Gates(gates) => Ok(gates),
            other => Err(other),
        })
    }

    /// The answer to [`Session::tools_ran`], once decided: per call, in the
    /// order given, the envelopes to append to its result, in configuration
    /// order \[I3\]; taken once.
    #[must_use]
    pub fn take_tool_notes(&mut self) -> Option<Vec<Vec<HookText>>> {
        self.take(|a| match a {
            Answer::Notes(notes) => Ok(notes),
            other => Err(other),
        })
    }

    /// The answer to [`Session::end_turn`], once decided; taken once.
    #[must_use]
    pub fn take_verdict(&mut self) -> Option<TurnVerdict> {
        self.take(|a| match a {
            Answer::Turn(verdict) => Ok(verdict),
            other => Err(other),
        })
    }

    /// The answer to [`Session::compacting`], once decided: the pins, in
    /// configuration order \[I3\]; taken once.
    #[must_use]
    pub fn take_pins(&mut self) -> Option<Vec<Injection>> {
        self.take(|a| match a {
            Answer::Pins(pairs) => Ok(pairs),
            other => Err(other),
        })
    }

    /// The answer to [`Session::compacted`], once decided: the pairs to append
    /// before the next request, in configuration order \[I3\]; taken once.
    #[must_use]
    pub fn take_reinjections(&mut self) -> Option<Vec<Injection>> {
        self.take(|a| match a {
            Answer::Reinject(pairs) => Ok(pairs),
            other => Err(other),
        })
    }

    /// The answer to [`Session::session_end`]: `Some` once its round is
    /// over (or was never needed \[E7\]); taken once.
    #[must_use]
    pub fn take_session_end(&mut self) -> Option<()> {
        self.take(|a| match a {
            Answer::SessionEnd => Ok(()),
            other => Err(other),
        })
    }

    /// Tells the core that `now` has come: calls past their deadline time out
    /// \[T1\]-\[T3\], and the round they belonged to is decided.
    pub fn handle_timeout(&mut self, now: Time) {
        self.now = self.now.max(now);
        let Some(round) = &self.round else {
            return;
        };
        // A server's calls of one round share their deadline: its timeouts
        // in one round count once [T3].
        let mut expired: Vec<ServerId> = Vec::new();
        for call in &round.calls {
            if call.outcome.is_none()
                && call.deadline <= self.now
                && !expired.contains(&call.server)
            {
                expired.push(call.server);
            }
        }
        for server in expired {
            let s = &mut self.servers[server.0];
            s.consecutive_timeouts += 1;
            if s.consecutive_timeouts >= TIMEOUTS_TO_KILL {
                self.outputs.push_back(Output::KillServer { server });
                self.resolve_server(server, &Outcome::Killed, false);
                self.go_down(server, DownCause::Killed);
            } else {
                self.resolve_server(server, &Outcome::Timeout, true);
            }
        }
        self.decide_if_done();
    }

    fn take<T>(&mut self, pick: impl FnOnce(Answer) -> Result<T, Answer>) -> Option<T> {
        match pick(self.answer.take()?) {
            Ok(answer) => Some(answer),
            Err(other) => {
                self.answer = Some(other);
                None
            }
        }
    }

    fn check(&self, id: ServerId) -> Result<ServerId, UsageError> {
        if id.0 < self.servers.len() {
            Ok(id)
        } else {
            Err(UsageError::UnknownServer(id))
        }
    }

    /// Moves the clock; `Ok` if a prompt runs with no round in flight, and
    /// then clears the last answer.
    fn ready(&mut self, now: Time) -> Result<(), UsageError> {
        self.now = self.now.max(now);
        if self.prompt.is_none() {
            return Err(if self.ended.is_some() {
                UsageError::SessionEnded
            } else {
                UsageError::NoPrompt
            });
        }
        if self.round.is_some() {
            return Err(UsageError::RoundInFlight);
        }
        self.answer = None;
        Ok(())
    }

    fn tool_facts(&self, call: &ToolUse) -> Facts {
        let mut facts = Facts::default();
        facts.set_str(InputField::Tool, &call.tool);
        facts.set_str(
            InputField::Server,
            self.servers[call.server.0].name.as_str(),
        );
        facts.set(InputField::Arguments, call.arguments.clone());
        facts
    }

    fn on_model(&mut self, stop: StopReason, tool_calls: usize, last_message: &str) {
        let Some(prompt) = &mut self.prompt else {
            return;
        };
        // [S1]: only an end-of-turn without tool calls is gated.
        if tool_calls > 0 {
            // [S2]: a tool call between two end-of-turns resets the rule.
            prompt.objected = false;
            self.answer = Some(Answer::Turn(TurnVerdict::RunTools));
            return;
        }
        let budget = self.config.stop_budget.get();
        let declines = self.config.stop_decline_rule == DeclineRule::On;
        let reason = if stop != StopReason::EndTurn {
            EndReason::Model(stop)
        } else if self.config.allowlist.is_off() {
            EndReason::HooksOff // [A1]
        } else if prompt.objected && declines {
            EndReason::Declined // [S2], [G2]
        } else if self.budget_used >= budget {
            EndReason::BudgetSpent // [S3]
        } else {
            prompt.stop_rounds += 1;
            let mut facts = Facts::default();
            facts.set(InputField::Attempt, Value::from(prompt.stop_rounds));
            facts.set(
                InputField::BudgetLeft,
                Value::from(budget - self.budget_used),
            );
            facts.set_str(InputField::LastAssistantMessage, last_message);
            self.ask(HookPoint::Stop, vec![facts]);
            return;
        };
        self.end_turn_with(None, reason);
    }

    /// Asks `hook` about each of `subjects` (the facts for its input): one
    /// round over every allowlisted server that is up and lists the hook,
    /// all calls at once. With nobody to call, or nothing to ask about, there
    /// is no round and no event, and the question is answered now \[E7\];
    /// but a required gate that is not up and fails closed here \[F1\] is
    /// someone to ask: it gets a round of its own, with no call, decided at
    /// once.
    fn ask(&mut self, hook: HookPoint, subjects: Vec<Facts>) {
        let mut common = Facts::default();
        if let Some(context) = &self.context {
            common.set_str(InputField::SessionId, &context.session_id);
            common.set_str(InputField::Cwd, &context.cwd);
        }
        let mut calls = Vec::new();
        let mut called = Vec::new();
        let mut left_out = Vec::new();
        let mut unreachable = Vec::new();
        // Each subject's facts with the common ones, made once for all
        // servers, when the first is called.
        let mut merged: Option<Vec<Facts>> = None;
        for index in 0..self.servers.len() {
            let server = &self.servers[index];
            // A server that never listed its tools may list this hook: it
            // counts as left out, and is restarted when due [T4].
            if !server.may_hook || (server.listed && !server.tools.has_hook(hook)) {
                continue;
            }
            let input = match (server.state, server.tools.hook(hook)) {
                (ServerState::Up, Some(listed)) => &listed.input,
                (ServerState::Up, None) => continue,
                _ => {
                    // [F1]: a required gate that is not up fails closed at
                    // each hook point it listed when last up; one that never
                    // came up listed nothing, and fails at the two points
                    // that gate.
                    let fails_closed = server.gates(hook)
                        && (server.listed
                            || matches!(hook, HookPoint::Stop | HookPoint::PreToolUse));
                    if !server.listed && server.state == ServerState::Retired && !fails_closed {
                        continue;
                    }
                    // [T4]: a down server sits this round out; its restart,
                    // if due, happens beside the round, not in it.
                    left_out.push(server.name.clone());
                    self.restart_if_due(ServerId(index));
                    if fails_closed && !subjects.is_empty() {
                        unreachable.push((ServerId(index), self.servers[index].not_up()));
                    }
                    continue;
                }
            };
            if subjects.is_empty() {
                continue;
            }
            let mut timeout = server.hook_timeout.duration();
            if hook == HookPoint::SessionEnd {
                timeout = timeout.min(SESSION_END_DEADLINE); // [E6]
            }
            let deadline = self.now + timeout;
            called.push(server.name.clone());
            let merged = merged.get_or_insert_with(|| {
                subjects
                    .iter()
                    .map(|facts| common.clone().with(facts))
                    .collect()
            });
            for (subject, facts) in merged.iter().enumerate() {
                let id = CallId(self.next_call);
                self.next_call += 1;
                calls.push(PendingCall {
                    id,
                    server: ServerId(index),
                    subject,
                    deadline,
                    outcome: None,
                });
                self.outputs.push_back(Output::CallHook {
                    call: id,
                    server: ServerId(index),
                    hook,
                    arguments: input.arguments(facts),
                    deadline,
                });
            }
        }
        if calls.is_empty() && unreachable.is_empty() {
            // [E7]: nobody to ask costs nothing; [S5]: `_Stop` says so.
            self.decide(hook, None, subjects.len(), Vec::new());
            return;
        }
        let id = RoundId(self.next_round);
        self.next_round += 1;
        let deadline = calls.iter().map(|c| c.deadline).max().unwrap_or(self.now);
        self.outputs.push_back(Output::Event(Event::RoundStarted {
            round: id,
            hook,
            servers: called,
            left_out,
            deadline,
        }));
        let decided = calls.is_empty();
        self.round = Some(Round {
            id,
            hook,
            subjects: subjects.len(),
            started: self.now,
            calls,
            unreachable,
        });
        if decided {
            // [F1]: only required gates that are not up: nothing to wait for.
            self.decide_if_done();
        }
    }

    fn on_reply(&mut self, call: CallId, reply: HookReply) {
        let Some(round) = &self.round else {
            return;
        };
        // [T2]: an answer to a call that already ended is discarded.
        let Some(index) = round
            .calls
            .iter()
            .position(|c| c.id == call && c.outcome.is_none())
        else {
            return;
        };
        let server = round.calls[index].server;
        let outcome = Outcome::read(round.hook, reply);
        if outcome.completed() {
            self.servers[server.0].consecutive_timeouts = 0; // [T3]
        }
        if outcome == Outcome::Crashed {
            if self.servers[server.0].state == ServerState::Up {
                self.on_crash(server, "during a hook call".into());
            } else {
                self.resolve_server(server, &Outcome::Crashed, false);
                self.decide_if_done();
            }
            return;
        }
        self.resolve_call(index, outcome);
        self.decide_if_done();
    }

    fn on_crash(&mut self, id: ServerId, reason: String) {
        // Every call in flight to the crashed server ends now, as crashed.
        self.resolve_server(id, &Outcome::Crashed, false);
        self.go_down(id, DownCause::Crashed(reason));
        self.decide_if_done();
    }

    /// Ends every call in flight to `server` in the round with `outcome`;
    /// with `cancel`, each is cancelled on the wire first \[T2\].
    fn resolve_server(&mut self, server: ServerId, outcome: &Outcome, cancel: bool) {
        let Some(round) = &self.round else {
            return;
        };
        let open: Vec<(usize, CallId)> = round
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.server == server && c.outcome.is_none())
            .map(|(i, c)| (i, c.id))
            .collect();
        for (index, call) in open {
            if cancel {
                self.outputs.push_back(Output::CancelCall { call });
            }
            self.resolve_call(index, outcome.clone());
        }
    }

    /// Records the outcome of call `index` of the round in flight and emits
    /// its \[O1\] event.
    fn resolve_call(&mut self, index: usize, outcome: Outcome) {
        let Some(round) = &mut self.round else {
            return;
        };
        let call = &mut round.calls[index];
        let event = Event::HookCalled {
            round: round.id,
            hook: round.hook,
            server: self.servers[call.server.0].name.clone(),
            outcome: outcome.clone(),
            latency: self.now.saturating_since(round.started),
        };
        call.outcome = Some(outcome);
        self.outputs.push_back(Output::Event(event));
    }

    /// Decides the round in flight once every call has an outcome.
    fn decide_if_done(&mut self) {
        let Some(round) = &self.round else {
            return;
        };
        if round.calls.iter().any(|c| c.outcome.is_none()) {
            return;
        }
        let Some(round) = self.round.take() else {
            return;
        };
        // [I3]: per subject, in configuration order.
        let mut texts = Vec::new();
        for subject in 0..round.subjects {
            let mut answers = Vec::new();
            for call in round.calls.iter().filter(|c| c.subject == subject) {
                let Some(outcome) = &call.outcome else {
                    continue;
                };
                let server = &self.servers[call.server.0];
                let text = match outcome.text() {
                    Some(text) => text.to_owned(),
                    // [F1]: a required gate's failed call is an answer the
                    // agent writes; any other server's means nothing [R3].
                    None if server.gates(round.hook) => {
                        let timeout = call.deadline.saturating_since(round.started);
                        match GateFailure::of_outcome(outcome, timeout) {
                            Some(failure) => failure.text(&server.name, round.hook),
                            None => continue,
                        }
                    }
                    None => continue,
                };
                answers.push(Answered {
                    subject,
                    server: call.server,
                    text,
                });
            }
            for (server, failure) in &round.unreachable {
                answers.push(Answered {
                    subject,
                    server: *server,
                    text: failure.text(&self.servers[server.0].name, round.hook),
                });
            }
            // Calls and unreachable gates are each in configuration order;
            // merged (stably) they are too [I3].
            answers.sort_by_key(|a| a.server);
            texts.extend(answers);
        }
        let texts = self.cap_round(round.id, round.hook, texts);
        self.decide(round.hook, Some(round.id), round.subjects, texts);
    }

    /// \[R5\]: what one round injects is capped at 64 KiB, in order; the first
    /// answer past the cap is cut, later ones dropped, each with a warning.
    fn cap_round(
        &mut self,
        round: RoundId,
        hook: HookPoint,
        texts: Vec<Answered>,
    ) -> Vec<Answered> {
        let mut left = MAX_ROUND_INJECTION_BYTES;
        let mut kept = Vec::with_capacity(texts.len());
        for mut answered in texts {
            if left == 0 {
                let server = self.servers[answered.server.0].name.clone();
                self.outputs
                    .push_back(Output::Event(Event::Warning(Warning::InjectionDropped {
                        round,
                        hook,
                        server,
                    })));
                continue;
            }
            if answered.text.len() > left {
                answered.text = cut(answered.text, left, "hook answer");
                left = 0;
            } else {
                left -= answered.text.len();
            }
            kept.push(answered);
        }
        kept
    }

    /// Answers the question of `hook` from the (capped) texts of its round,
    /// or at once when there was no round \[E7\].
    fn decide(
        &mut self,
        hook: HookPoint,
        round: Option<RoundId>,
        subjects: usize,
        texts: Vec<Answered>,
    ) {
        let pairs = |session: &Session| -> Vec<Injection> {
            texts
                .iter()
                .map(|t| {
                    Injection::new(
                        hook,
                        &session.servers[t.server.0].name,
                        t.server.0,
                        round.map_or(0, |r| r.0),
                        &t.text,
                    )
                })
                .collect()
        };
        let servers: Vec<ServerName> = texts
            .iter()
            .map(|t| self.servers[t.server.0].name.clone())
            .collect();
        let answer = match hook {
            HookPoint::Stop => {
                match round {
                    None => self.end_turn_with(None, EndReason::NoStopHook), // [S5]
                    Some(_) if texts.is_empty() => {
                        self.end_turn_with(round, EndReason::NoObjection);
                    }
                    Some(_) => {
                        // [S3]: one objected end-of-turn costs one, however many objected.
                        self.budget_used += 1;
                        if let Some(prompt) = &mut self.prompt {
                            prompt.objected = true;
                        }
                        self.decided(
                            round,
                            PolicyDecision::ObjectionHonoured {
                                servers,
                                budget_used: self.budget_used,
                                budget: self.config.stop_budget.get(),
                            },
                        );
                        self.answer = Some(Answer::Turn(TurnVerdict::Continue {
                            injections: pairs(self),
                        }));
                    }
                }
                return;
            }
            HookPoint::PostCompact => {
                if round.is_some() {
                    self.decided(round, PolicyDecision::Reinject { servers });
                }
                Answer::Reinject(pairs(self))
            }
            HookPoint::PreToolUse => {
                let mut gates = vec![ToolGate::Run; subjects];
                for t in &texts {
                    let refusal = HookText::new(hook, &self.servers[t.server.0].name, &t.text);
                    match &mut gates[t.subject] {
                        ToolGate::Refused { refusals } => refusals.push(refusal),
                        gate => {
                            *gate = ToolGate::Refused {
                                refusals: vec![refusal],
                            }
                        }
                    }
                }
                if round.is_some() {
                    let refused = (0..subjects)
                        .filter(|&i| gates[i] != ToolGate::Run)
                        .collect();
                    let asked = subjects;
                    self.decided(round, PolicyDecision::ToolsGated { asked, refused });
                }
                Answer::Gates(gates)
            }
            HookPoint::PostToolUse => {
                let mut notes = vec![Vec::new(); subjects];
                for t in &texts {
                    let note = HookText::new(hook, &self.servers[t.server.0].name, &t.text);
                    notes[t.subject].push(note);
                }
                if round.is_some() {
                    self.decided(round, PolicyDecision::Inject { hook, servers });
                }
                Answer::Notes(notes)
            }
            HookPoint::SessionEnd => {
                if round.is_some() {
                    let reason = self.ended.unwrap_or(SessionEndReason::Exit);
                    self.decided(round, PolicyDecision::SessionEnded { reason });
                }
                Answer::SessionEnd
            }
            HookPoint::SessionStart | HookPoint::UserPromptSubmit | HookPoint::PreCompact => {
                if round.is_some() {
                    self.decided(round, PolicyDecision::Inject { hook, servers });
                }
                let pairs = pairs(self);
                match hook {
                    HookPoint::SessionStart => Answer::SessionContext(pairs),
                    HookPoint::UserPromptSubmit => Answer::PromptContext(pairs),
                    _ => {
                        self.pins = texts
                            .iter()
                            .map(|t| (self.servers[t.server.0].name.clone(), t.text.clone()))
                            .collect();
                        Answer::Pins(pairs)
                    }
                }
            }
        };
        self.answer = Some(answer);
    }

    fn end_prompt(&mut self, round: Option<RoundId>, reason: EndReason) {
        self.prompt = None;
        self.decided(
            round,
            PolicyDecision::PromptEnded {
                reason: reason.clone(),
            },
        );
    }

    /// Ends the prompt as the answer to [`Session::end_turn`].
    fn end_turn_with(&mut self, round: Option<RoundId>, reason: EndReason) {
        self.end_prompt(round, reason.clone());
        self.answer = Some(Answer::Turn(TurnVerdict::End { reason }));
    }

    fn decided(&mut self, round: Option<RoundId>, decision: PolicyDecision) {
        self.outputs
            .push_back(Output::Event(Event::Decided { round, decision }));
    }

    fn on_started(&mut self, id: ServerId, listing: Vec<ListedTool>) {
        let server = &mut self.servers[id.0];
        if server.state != ServerState::Starting {
            return;
        }
        let (tools, warnings) = ServerTools::sort(&server.name, &listing);
        server.tools = tools;
        server.listed = true;
        server.state = ServerState::Up;
        server.consecutive_timeouts = 0;
        server.last_down = None;
        self.outputs.push_back(Output::Event(Event::ServerUp {
            server: server.name.clone(),
            model_tools: server.tools.model_tools.len(),
            hooks: server.tools.hook_points().collect(),
        }));
        if server.guard_down {
            // [F2]: the gate that was reported down is back.
            server.guard_down = false;
            self.outputs.push_back(Output::Event(Event::GuardUp {
                server: server.name.clone(),
            }));
        }
        for warning in warnings {
            self.outputs
                .push_back(Output::Event(Event::Warning(warning)));
        }
    }

    /// Counts a failure and takes the server down, or out for good \[T4\].
    fn go_down(&mut self, id: ServerId, cause: DownCause) {
        let now = self.now;
        let server = &mut self.servers[id.0];
        server.failures += 1;
        server.consecutive_timeouts = 0;
        let retry_at = (server.failures < FAILURE_LIMIT)
            .then(|| now + RESTART_BACKOFF * 2u32.pow(server.failures - 1));
        server.state = match retry_at {
            Some(retry_at) => ServerState::Down { retry_at },
            None => ServerState::Retired,
        };
        server.last_down = Some(cause.clone());
        self.outputs.push_back(Output::Event(Event::ServerDown {
            server: server.name.clone(),
            cause: cause.clone(),
            failures: server.failures,
            retry_at,
        }));
        self.guard_down(id, cause);
    }

    /// \[F2\]: a required gate that went down is reported at once, right
    /// after its [`Event::ServerDown`], each time: a failed restart and the
    /// failure that retires it are news too.
    fn guard_down(&mut self, id: ServerId, cause: DownCause) {
        let server = &mut self.servers[id.0];
        if !server.required {
            return;
        }
        server.guard_down = true;
        self.outputs.push_back(Output::Event(Event::GuardDown {
            server: server.name.clone(),
            cause,
            retired: server.state == ServerState::Retired,
        }));
    }

    /// Restarts, when due, every down server that never listed its tools: it
    /// has no tool a call could want, so a prompt's start is its next use \[T4\].
    fn restart_unlisted(&mut self) {
        for index in 0..self.servers.len() {
            if !self.servers[index].listed {
                self.restart_if_due(ServerId(index));
            }
        }
    }

    fn restart_if_due(&mut self, id: ServerId) {
        if let ServerState::Down { retry_at } = self.servers[id.0].state
            && self.now >= retry_at
        {
            self.start(id);
        }
    }

    fn start(&mut self, id: ServerId) {
        let server = &mut self.servers[id.0];
        server.state = ServerState::Starting;
        server.starts += 1;
        self.outputs.push_back(Output::StartServer { server: id });
        self.outputs.push_back(Output::Event(Event::ServerStarting {
            server: server.name.clone(),
            attempt: server.starts,
        }));
    }
}

impl Server {
    /// Whether a failure of this server at `hook` is an answer the agent
    /// writes \[F1\]: it is a required gate, and `hook` is not
    /// `_SessionEnd`, whose answers are ignored \[E6\].
    fn gates(&self, hook: HookPoint) -> bool {
        self.required && hook != HookPoint::SessionEnd
    }

    /// Why a call to this server cannot be made now, as its state and its
    /// last failure say \[F1\], \[T4\]. Asked only when it is not up.
    fn not_up(&self) -> GateFailure {
        match (self.state, &self.last_down) {
            (ServerState::Starting, Some(cause)) => GateFailure::Down {
                cause: cause.clone(),
                restarting: true,
            },
            (ServerState::Down { .. }, Some(cause)) => GateFailure::Down {
                cause: cause.clone(),
                restarting: false,
            },
            (ServerState::Retired, cause) => GateFailure::Retired {
                cause: cause.clone().unwrap_or(DownCause::BeforeResume),
            },
            // Starting for the first time (`Down` always has a cause).
            _ => GateFailure::Starting,
        }
    }
}

/// One non-empty answer of a round: to which subject, from which server.
#[derive(Debug)]
struct Answered {
    subject: usize,
    server: ServerId,
    text: String,
}
