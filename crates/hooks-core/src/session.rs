//! The hook policy of one agent session, as a state machine.
//!
//! [`Session`] takes what happened ([`Input`], each with the current
//! [`Time`]) and the loop's questions, one method each with its own answer
//! type: [`Session::end_turn`] is answered by a [`TurnVerdict`],
//! [`Session::compacted`] by the pairs to re-inject, [`Session::abort`] at once
//! by an [`EndReason`]. It queues what the driver must do and what to report
//! ([`Output`]) for [`Session::poll_output`]. It never waits: when it needs to
//! be woken, it says when through [`Session::poll_timeout`], and the driver
//! calls [`Session::handle_timeout`] then.
//!
//! What it decides: which servers to call for a hook round and by when
//! \[T1\]; what their answers mean \[R1\]-\[R4\]; whether the prompt goes on or ends,
//! and why \[S1\]-\[S5\]; what to inject \[I1\]-\[I3\], \[P1\]-\[P3\]; which call to cancel,
//! which server to kill, and when a server may be restarted \[T2\]-\[T5\].
//!
//! What it does not do: start processes, send requests, keep the history, or
//! read a clock. Those belong to the driver (`hooks-mcp`) and the loop
//! (`agent-loop`).

use crate::prelude::*;

use alloc::collections::VecDeque;
use core::fmt;
use core::time::Duration;

use crate::answer::{HookReply, Outcome};
use crate::catalog::{ModelTool, ServerTools, Warning};
use crate::config::HookConfig;
use crate::event::{DownCause, EndReason, Event, PolicyDecision, RoundId, StopReason};
use crate::inject::Injection;
use crate::name::{self, HookPoint, ServerName};
use crate::time::Time;

/// Kills, crashes and failed starts a server may have in one session before
/// it stays down \[T4\].
pub const FAILURE_LIMIT: u32 = 3;

/// The wait before the first restart; it doubles with each failure \[T4\].
pub const RESTART_BACKOFF: Duration = Duration::from_millis(250);

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

/// Something that happened to a server or a hook call, fed to
/// [`Session::handle`]. The loop's questions are methods of their own
/// ([`Session::end_turn`], [`Session::compacted`], [`Session::abort`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A server started (or restarted) and listed these bare tool names.
    ServerStarted {
        /// The server.
        server: ServerId,
        /// Its `tools/list`, all pages, in order.
        tools: Vec<String>,
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
/// in its own slot ([`Session::take_verdict`], [`Session::take_reinjections`])
/// and is ready once the step that decides it has queued everything it does
/// (the round's calls, cancellations, kills, and the events that report them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Call `hook` on `server` with input `{}` \[H5\]; `deadline` is when the
    /// core will give up on it \[T1\].
    CallHook {
        /// The call, to name in [`Input::HookReplied`].
        call: CallId,
        /// The server.
        server: ServerId,
        /// The hook point.
        hook: HookPoint,
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

/// A decided answer, waiting to be taken by its typed getter.
#[derive(Debug)]
enum Answer {
    Turn(TurnVerdict),
    Reinject(Vec<Injection>),
}

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
    outcome: Option<Outcome>,
}

#[derive(Debug)]
struct Round {
    id: RoundId,
    hook: HookPoint,
    started: Time,
    deadline: Time,
    /// In configuration order, which is the injection order \[I3\].
    calls: Vec<PendingCall>,
}

#[derive(Debug)]
enum Phase {
    /// No prompt runs.
    Idle,
    /// A prompt runs and no round is in flight. `objected`: the last model
    /// response of this prompt was an end-of-turn that `_Stop` objected to,
    /// and no tool call came since \[S2\].
    Prompt { objected: bool },
    /// A hook round is in flight. `objected` is kept for after the round.
    Round { round: Round, objected: bool },
}

/// The hook policy of one agent session. See the crate docs for the drive loop.
#[derive(Debug)]
pub struct Session {
    config: HookConfig,
    /// In configuration order; `ServerId` indexes it.
    servers: Vec<Server>,
    phase: Phase,
    /// Objected end-of-turns in this session \[S3\].
    /// Invariant: at most `config.stop_budget`.
    budget_used: u32,
    next_round: u64,
    next_call: u64,
    /// The latest time seen; inputs that carry an earlier time use this one.
    now: Time,
    outputs: VecDeque<Output>,
    /// The answer to the question asked last, once decided and until taken.
    answer: Option<Answer>,
}

impl Session {
    /// A session over `servers`, in configuration order. Queues a
    /// [`Output::StartServer`] for each, and a warning for every allowlist
    /// entry that names no server \[A3\].
    pub fn new(config: HookConfig, servers: Vec<ServerName>) -> Result<Session, SetupError> {
        for (i, name) in servers.iter().enumerate() {
            if servers[..i].contains(name) {
                return Err(SetupError::DuplicateServer(name.clone()));
            }
        }
        let mut outputs = VecDeque::new();
        if let crate::config::Allowlist::Names(listed) = &config.allowlist {
            for entry in listed {
                if !servers.iter().any(|s| s.as_str() == entry) {
                    outputs.push_back(Output::Event(Event::Warning(
                        Warning::UnknownAllowlistEntry {
                            name: entry.clone(),
                        },
                    )));
                }
            }
        }
        let servers: Vec<Server> = servers
            .into_iter()
            .map(|name| Server {
                may_hook: config.allowlist.allows(name.as_str()),
                name,
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
            phase: Phase::Idle,
            budget_used: 0,
            next_round: 1,
            next_call: 1,
            now: Time::ZERO,
            outputs,
            answer: None,
        };
        for id in 0..session.servers.len() {
            session.start(ServerId(id));
        }
        Ok(session)
    }

    /// The configuration.
    pub fn config(&self) -> &HookConfig {
        &self.config
    }

    /// Number of configured servers.
    pub fn server_count(&self) -> usize {
        self.servers.len()
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

    /// Whether the allowlist lets this server hook \[A2\].
    pub fn may_hook(&self, id: ServerId) -> bool {
        self.servers[id.0].may_hook
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

    /// `_Stop` objections charged so far in this session \[S3\].
    pub fn budget_used(&self) -> u32 {
        self.budget_used
    }

    /// Whether a prompt is running.
    pub fn in_prompt(&self) -> bool {
        !matches!(self.phase, Phase::Idle)
    }

    /// When the core next needs [`Session::handle_timeout`]: the deadline of
    /// the round in flight, if any. Only [`Session::handle`] and
    /// [`Session::handle_timeout`] change the answer, so a driver asks again
    /// after each of them.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        match &self.phase {
            Phase::Round { round, .. } => Some(round.deadline),
            _ => None,
        }
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

    /// A prompt begins.
    pub fn begin_prompt(&mut self, now: Time) -> Result<(), UsageError> {
        self.now = self.now.max(now);
        match self.phase {
            Phase::Idle => {
                self.phase = Phase::Prompt { objected: false };
                self.answer = None;
                self.restart_unlisted();
                Ok(())
            }
            _ => Err(UsageError::PromptRunning),
        }
    }

    /// The model answered with `stop` and `tool_calls` tool calls: may the
    /// turn end? Answered by a [`TurnVerdict`] in [`Session::take_verdict`],
    /// at once or after a `_Stop` round \[S1\]-\[S5\].
    pub fn end_turn(
        &mut self,
        now: Time,
        stop: StopReason,
        tool_calls: usize,
    ) -> Result<(), UsageError> {
        self.now = self.now.max(now);
        let objected = self.prompt_ready()?;
        self.answer = None;
        self.on_model(objected, stop, tool_calls);
        Ok(())
    }

    /// The history was compacted, removing `removed_messages` messages
    /// \[P1\]: what goes back in? Answered by the `_PostCompact` pairs
    /// (possibly none) in [`Session::take_reinjections`], at once or after a
    /// round \[P2\].
    pub fn compacted(&mut self, now: Time, removed_messages: usize) -> Result<(), UsageError> {
        self.now = self.now.max(now);
        let objected = self.prompt_ready()?;
        self.answer = None;
        if removed_messages == 0 || self.config.allowlist.is_off() {
            self.answer = Some(Answer::Reinject(Vec::new()));
        } else {
            self.start_round(HookPoint::PostCompact, objected);
        }
        Ok(())
    }

    /// The loop ends the prompt on its own. A round in flight ends now: its
    /// calls are cancelled \[T5\] and its question gets no answer. Returns why
    /// the prompt ended \[S5\].
    pub fn abort(&mut self, now: Time, reason: AbortReason) -> Result<EndReason, UsageError> {
        self.now = self.now.max(now);
        self.answer = None;
        self.on_abort(reason)
    }

    /// The answer to [`Session::end_turn`], once decided; taken once.
    #[must_use]
    pub fn take_verdict(&mut self) -> Option<TurnVerdict> {
        match self.answer.take() {
            Some(Answer::Turn(verdict)) => Some(verdict),
            other => {
                self.answer = other;
                None
            }
        }
    }

    /// The answer to [`Session::compacted`], once decided: the pairs to append
    /// before the next request, in configuration order \[I3\]; taken once.
    #[must_use]
    pub fn take_reinjections(&mut self) -> Option<Vec<Injection>> {
        match self.answer.take() {
            Some(Answer::Reinject(injections)) => Some(injections),
            other => {
                self.answer = other;
                None
            }
        }
    }

    /// Tells the core that `now` has come: calls past their deadline time out
    /// \[T1\]-\[T3\], and the round they belonged to is decided.
    pub fn handle_timeout(&mut self, now: Time) {
        self.now = self.now.max(now);
        let Phase::Round { round, .. } = &self.phase else {
            return;
        };
        if self.now < round.deadline {
            return;
        }
        let expired: Vec<(usize, ServerId)> = round
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.outcome.is_none())
            .map(|(i, c)| (i, c.server))
            .collect();
        for (index, server) in expired {
            let s = &mut self.servers[server.0];
            s.consecutive_timeouts += 1;
            let kill = s.consecutive_timeouts >= TIMEOUTS_TO_KILL;
            let call = self.call_at(index);
            let outcome = if kill {
                self.outputs.push_back(Output::KillServer { server });
                Outcome::Killed
            } else {
                self.outputs.push_back(Output::CancelCall { call });
                Outcome::Timeout
            };
            self.resolve_call(index, outcome);
            if kill {
                self.go_down(server, DownCause::Killed);
            }
        }
        self.decide_if_done();
    }

    fn check(&self, id: ServerId) -> Result<ServerId, UsageError> {
        if id.0 < self.servers.len() {
            Ok(id)
        } else {
            Err(UsageError::UnknownServer(id))
        }
    }

    /// The prompt's `objected` flag if a prompt runs with no round in flight.
    fn prompt_ready(&self) -> Result<bool, UsageError> {
        match self.phase {
            Phase::Idle => Err(UsageError::NoPrompt),
            Phase::Round { .. } => Err(UsageError::RoundInFlight),
            Phase::Prompt { objected } => Ok(objected),
        }
    }

    fn on_model(&mut self, objected: bool, stop: StopReason, tool_calls: usize) {
        // [S1]: only an end-of-turn without tool calls is gated.
        if tool_calls > 0 {
            // [S2]: a tool call between two end-of-turns resets the rule.
            self.phase = Phase::Prompt { objected: false };
            self.answer = Some(Answer::Turn(TurnVerdict::RunTools));
            return;
        }
        let reason = if stop != StopReason::EndTurn {
            EndReason::Model(stop)
        } else if self.config.allowlist.is_off() {
            EndReason::HooksOff // [A1]
        } else if objected {
            EndReason::Declined // [S2]
        } else if self.budget_used >= self.config.stop_budget.get() {
            EndReason::BudgetSpent // [S3]
        } else {
            self.start_round(HookPoint::Stop, objected);
            return;
        };
        self.end_turn_with(None, reason);
    }

    fn start_round(&mut self, hook: HookPoint, objected: bool) {
        let id = RoundId(self.next_round);
        self.next_round += 1;
        let deadline = self.now + self.config.timeout.duration();
        let mut calls = Vec::new();
        let mut called = Vec::new();
        let mut left_out = Vec::new();
        for index in 0..self.servers.len() {
            let server = &self.servers[index];
            // A server that never listed its tools may list this hook: it
            // counts as left out, and is restarted when due [T4].
            if !server.may_hook || (server.listed && !server.tools.has_hook(hook)) {
                continue;
            }
            if !server.listed && server.state == ServerState::Retired {
                continue;
            }
            if server.state == ServerState::Up {
                let call = CallId(self.next_call);
                self.next_call += 1;
                calls.push(PendingCall {
                    id: call,
                    server: ServerId(index),
                    outcome: None,
                });
                called.push(server.name.clone());
                self.outputs.push_back(Output::CallHook {
                    call,
                    server: ServerId(index),
                    hook,
                    deadline,
                });
            } else {
                // [T4]: a down server sits this round out; its restart, if
                // due, happens beside the round, not in it.
                left_out.push(server.name.clone());
                self.restart_if_due(ServerId(index));
            }
        }
        self.outputs.push_back(Output::Event(Event::RoundStarted {
            round: id,
            hook,
            servers: called,
            left_out,
            deadline,
        }));
        let round = Round {
            id,
            hook,
            started: self.now,
            deadline,
            calls,
        };
        self.phase = Phase::Round { round, objected };
        self.decide_if_done();
    }

    fn on_reply(&mut self, call: CallId, reply: HookReply) {
        let Phase::Round { round, .. } = &self.phase else {
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
        let crashed = outcome == Outcome::Crashed;
        self.resolve_call(index, outcome);
        if crashed && self.servers[server.0].state == ServerState::Up {
            self.go_down(
                server,
                DownCause::Crashed("it exited during a hook call".into()),
            );
        }
        self.decide_if_done();
    }

    fn on_crash(&mut self, id: ServerId, reason: String) {
        // A call in flight to the crashed server ends now, as crashed.
        if let Phase::Round { round, .. } = &self.phase
            && let Some(index) = round
                .calls
                .iter()
                .position(|c| c.server == id && c.outcome.is_none())
        {
            self.resolve_call(index, Outcome::Crashed);
        }
        self.go_down(id, DownCause::Crashed(reason));
        self.decide_if_done();
    }

    fn on_abort(&mut self, reason: AbortReason) -> Result<EndReason, UsageError> {
        let round = match core::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => return Err(UsageError::NoPrompt),
            Phase::Prompt { .. } => None,
            Phase::Round { round, .. } => Some(round),
        };
        let mut ended_round = None;
        if let Some(round) = round {
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

    fn call_at(&self, index: usize) -> CallId {
        match &self.phase {
            Phase::Round { round, .. } => round.calls[index].id,
            // Only called with an index into the round in flight.
            _ => unreachable!("call_at outside a round"),
        }
    }

    /// Records the outcome of call `index` of the round in flight and emits
    /// its \[O1\] event.
    fn resolve_call(&mut self, index: usize, outcome: Outcome) {
        let Phase::Round { round, .. } = &mut self.phase else {
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
        let Phase::Round { round, objected } = &self.phase else {
            return;
        };
        if round.calls.iter().any(|c| c.outcome.is_none()) {
            return;
        }
        let objected = *objected;
        let Phase::Round { round, .. } = core::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        // [I3]: calls were made, and so are injected, in configuration order.
        let injections: Vec<Injection> = round
            .calls
            .iter()
            .filter_map(|c| {
                let text = c.outcome.as_ref()?.text()?;
                Some(Injection::new(
                    round.hook,
                    &self.servers[c.server.0].name,
                    c.server.0,
                    round.id.0,
                    text,
                ))
            })
            .collect();
        let servers: Vec<ServerName> = injections.iter().map(|i| i.server.clone()).collect();
        match round.hook {
            HookPoint::Stop if injections.is_empty() => {
                self.end_turn_with(Some(round.id), EndReason::NoObjection);
            }
            HookPoint::Stop => {
                // [S3]: one objected end-of-turn costs one, however many objected.
                self.budget_used += 1;
                self.phase = Phase::Prompt { objected: true };
                self.decided(
                    Some(round.id),
                    PolicyDecision::ObjectionHonoured {
                        servers,
                        budget_used: self.budget_used,
                        budget: self.config.stop_budget.get(),
                    },
                );
                self.answer = Some(Answer::Turn(TurnVerdict::Continue { injections }));
            }
            HookPoint::PostCompact => {
                self.phase = Phase::Prompt { objected };
                self.decided(Some(round.id), PolicyDecision::Reinject { servers });
                self.answer = Some(Answer::Reinject(injections));
            }
        }
    }

    fn end_prompt(&mut self, round: Option<RoundId>, reason: EndReason) {
        self.phase = Phase::Idle;
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

    fn on_started(&mut self, id: ServerId, listing: Vec<String>) {
        let server = &mut self.servers[id.0];
        if server.state != ServerState::Starting {
            return;
        }
        let (tools, warnings) = ServerTools::sort(&server.name, &listing);
        server.tools = tools;
        server.listed = true;
        server.state = ServerState::Up;
        server.consecutive_timeouts = 0;
        self.outputs.push_back(Output::Event(Event::ServerUp {
            server: server.name.clone(),
            model_tools: server.tools.model_tools.len(),
            hooks: server.tools.hooks.clone(),
        }));
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
        self.outputs.push_back(Output::Event(Event::ServerDown {
            server: server.name.clone(),
            cause,
            failures: server.failures,
            retry_at,
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
