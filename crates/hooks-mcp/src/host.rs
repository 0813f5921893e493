//! The driver: [`Host`] runs the `hooks-core` policy on live MCP servers.
//!
//! The host owns the core [`Session`], the connections, and the one clock
//! (tokio's, so its tests run it in paused time). It turns the core's
//! outputs into actions (start a connection, call a hook, cancel a call by
//! dropping its future, kill a server) and feeds what happens back in:
//! answers, crashes, finished starts, and deadlines the core asked to be
//! woken for. It decides nothing itself and has no timeout policy of its own
//! for hooks \[T1\]-\[T5\].
//!
//! Starts, restarts and exits happen in background tasks that report through
//! a channel; the host reads it whenever it runs, so a restart never blocks a
//! hook round \[T4\].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{AbortHandle, Abortable, BoxFuture};
use futures::stream::{FuturesUnordered, StreamExt};
use hooks_core::{
    AbortReason, AskError, CallId, Carried, EndReason, Event, HookConfig, HookContext, HookPoint,
    HookReply, HookText, Injection, Input, InputField, ListedTool, Output, ServerId, ServerName,
    ServerSetup, ServerState, Session, SessionEndReason, SetupError, StopReason, Time, ToolGate,
    ToolRun, ToolUse, TurnVerdict, UsageError, Warning,
};
use rmcp::model::{JsonObject, Tool};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::connection::{Connection, Ended, ListingLimits, StartError};
use crate::reply::{ToolOutput, hook_reply, tool_output};
use crate::spec::ServerSpec;

/// Where the host reports the core's events as they happen \[O1\], \[O2\].
/// Each event is given away: a sink that keeps it, or wraps it in events
/// of its own, needs no copy.
pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;

/// Settings of the host that are not hook policy.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Deadline for a server to start: spawn or connect, initialize, list.
    pub start_timeout: Duration,
    /// Most bytes of text a model tool result may have before it is cut.
    pub max_tool_output_bytes: usize,
    /// Bounds on each server's tool listing; past them its start fails.
    pub listing: ListingLimits,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            start_timeout: Duration::from_secs(10),
            max_tool_output_bytes: 64 * 1024,
            listing: ListingLimits::default(),
        }
    }
}

/// A tool as the model is offered it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelToolDef {
    /// The qualified name, `S__T` \[N2\].
    pub name: String,
    /// The server's description of it.
    pub description: Option<String>,
    /// Its JSON Schema for arguments.
    pub input_schema: serde_json::Value,
}

/// One server, as `sprout hooks list` shows it.
#[derive(Clone, Debug)]
pub struct ServerReport {
    /// Its name.
    pub name: ServerName,
    /// Up, down, retired…
    pub state: ServerState,
    /// Whether the allowlist lets it hook \[A2\].
    pub may_hook: bool,
    /// Model-visible tool names.
    pub model_tools: Vec<String>,
    /// Hook points it lists.
    pub hooks: Vec<HookPoint>,
    /// Each listed hook point with the input fields its schema asked for
    /// (none: it gets `{}`) \[K1\], in the order of `hooks`.
    pub hook_inputs: Vec<(HookPoint, Vec<InputField>)>,
    /// Why it is down, if it failed to start or exited.
    pub last_error: Option<String>,
    /// A required gate: its entry says `"required": true` and the
    /// allowlist lets it hook \[F1\] \[F2\].
    pub required: bool,
}

enum Notice {
    Started {
        server: ServerId,
        generation: u64,
        result: Result<(Arc<Connection>, Vec<Tool>), StartError>,
    },
    Ended {
        server: ServerId,
        generation: u64,
        reason: Ended,
    },
}

struct Slot {
    spec: ServerSpec,
    /// Bumped on every start and kill; notices of older generations are stale.
    generation: u64,
    /// Invariant: `Some` exactly when the core has this server up.
    conn: Option<Arc<Connection>>,
    /// The latest listing's tool definitions.
    tools: BTreeMap<String, Tool>,
    last_error: Option<String>,
    /// An end reported for the current generation before its start was:
    /// the server died right after starting.
    ended_early: Option<Ended>,
}

/// How the host reaches a server when it starts one.
#[derive(Clone)]
enum Connector {
    /// By its spec: spawn the child, or open the HTTP session.
    Spec,
    /// In this process, over an in-memory pipe: a fresh server from the
    /// factory on every start (the host's paused-time tests).
    #[cfg(test)]
    InProcess(Arc<dyn Fn(&ServerName) -> crate::server::ToolServer + Send + Sync>),
}

/// The hook calls of one round in flight.
#[derive(Default)]
struct Calls {
    in_flight: FuturesUnordered<Abortable<BoxFuture<'static, (CallId, HookReply)>>>,
    aborts: BTreeMap<CallId, AbortHandle>,
}

/// Live MCP servers under the hook policy. See the crate docs.
pub struct Host {
    session: Session,
    slots: Vec<Slot>,
    /// The one clock: `now()` is the time since this instant.
    epoch: tokio::time::Instant,
    notices_tx: mpsc::UnboundedSender<Notice>,
    notices_rx: mpsc::UnboundedReceiver<Notice>,
    options: HostOptions,
    sink: EventSink,
    warnings: Vec<Warning>,
    /// Killed connections, closed (and so reaped) at shutdown.
    killed: Vec<Arc<Connection>>,
    connector: Connector,
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Starts every server at once, each under the start deadline, and
    /// returns when each is up or has failed; one that fails is reported
    /// (an event with its name and the reason) and the others work.
    pub async fn start(
        specs: Vec<ServerSpec>,
        config: HookConfig,
        options: HostOptions,
        sink: EventSink,
    ) -> Result<Host, SetupError> {
        let fresh = Carried::default();
        Host::start_with(specs, config, &fresh, options, sink, Connector::Spec).await
    }

    /// As [`Host::start`], for a session that continues one saved by
    /// another process: the core is built with `carried`
    /// ([`Session::resume`]) before any server starts, so each server has
    /// only the failures left that the saved session had not used, and one
    /// that used them all is not started \[T4\].
    pub async fn resume(
        specs: Vec<ServerSpec>,
        config: HookConfig,
        carried: &Carried,
        options: HostOptions,
        sink: EventSink,
    ) -> Result<Host, SetupError> {
        Host::start_with(specs, config, carried, options, sink, Connector::Spec).await
    }

    async fn start_with(
        specs: Vec<ServerSpec>,
        config: HookConfig,
        carried: &Carried,
        options: HostOptions,
        sink: EventSink,
        connector: Connector,
    ) -> Result<Host, SetupError> {
        let setups: Vec<ServerSetup> = specs
            .iter()
            .map(|s| ServerSetup {
                name: s.name.clone(),
                hook_timeout: s.hook_timeout, // [C4]
                required: s.required,         // [F1]
            })
            .collect();
        let session = Session::resume(config, setups, carried)?;
        let (notices_tx, notices_rx) = mpsc::unbounded_channel();
        let slots = specs
            .into_iter()
            .map(|spec| Slot {
                spec,
                generation: 0,
                conn: None,
                tools: BTreeMap::new(),
                last_error: None,
                ended_early: None,
            })
            .collect();
        let mut host = Host {
            session,
            slots,
            epoch: tokio::time::Instant::now(),
            notices_tx,
            notices_rx,
            options,
            sink,
            warnings: Vec::new(),
            killed: Vec::new(),
            connector,
        };
        host.process(&mut Calls::default());
        while host.any_starting() {
            let Some(notice) = host.notices_rx.recv().await else {
                break;
            };
            host.on_notice(notice);
            host.process(&mut Calls::default());
        }
        Ok(host)
    }

    /// The policy state.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Continues a session saved by another process: its budget used and
    /// rounds asked ([`Session::restore`]). Asked between prompts.
    pub fn restore(&mut self, carried: &Carried) -> Result<(), UsageError> {
        self.session.restore(carried)
    }

    /// Warnings seen so far (\[N3\], \[N4\], \[H4\], \[A3\]).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The time since the host started, as the core counts it.
    pub fn now(&self) -> Time {
        Time::from_epoch(self.epoch.elapsed())
    }

    /// The tools to offer the model now: never a hook \[H2\], never a retired
    /// server's \[T4\].
    pub fn model_tools(&mut self) -> Vec<ModelToolDef> {
        self.pump();
        self.session
            .model_tools()
            .map(|(server, tool)| {
                let def = self.slots[server.0].tools.get(&tool.bare);
                ModelToolDef {
                    name: tool.qualified.clone(),
                    description: def.and_then(|d| d.description.as_ref().map(|s| s.to_string())),
                    input_schema: def
                        .map(|d| serde_json::Value::Object((*d.input_schema).clone()))
                        .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                }
            })
            .collect()
    }

    /// Every server with what it offers and whether it may hook.
    pub fn servers(&self) -> Vec<ServerReport> {
        (0..self.slots.len())
            .map(|i| {
                let id = ServerId(i);
                let tools = self.session.server_tools(id);
                ServerReport {
                    name: self.session.server_name(id).clone(),
                    state: self.session.server_state(id),
                    may_hook: self.session.may_hook(id),
                    model_tools: tools
                        .model_tools
                        .iter()
                        .map(|t| t.qualified.clone())
                        .collect(),
                    hooks: tools.hook_points().collect(),
                    hook_inputs: tools
                        .hooks
                        .iter()
                        .map(|h| (h.point, h.input.fields().to_vec()))
                        .collect(),
                    last_error: self.slots[i].last_error.clone(),
                    required: self.session.is_required(id),
                }
            })
            .collect()
    }

    /// Starts a prompt.
    pub fn begin_prompt(&mut self) -> Result<(), UsageError> {
        self.pump();
        let now = self.now();
        self.session.begin_prompt(now)?;
        self.process(&mut Calls::default());
        Ok(())
    }

    /// The session starts \[E1\]: runs the `_SessionStart` round, if any,
    /// and returns the pairs to add after the prompt. `context` is what
    /// every later hook may be given as `session_id` and `cwd` \[K2\].
    /// Cancelling `cancel` ends the round and the prompt at once \[T5\].
    pub async fn session_start(
        &mut self,
        context: HookContext,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        self.pump();
        let now = self.now();
        self.session.session_start(now, context)?;
        self.answer(Session::take_session_context, cancel).await
    }

    /// A prompt arrived \[E2\]: runs the `_UserPromptSubmit` round, if any,
    /// and returns the pairs to add right after the prompt.
    pub async fn prompt_submitted(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        self.pump();
        let now = self.now();
        self.session.prompt_submitted(now, prompt)?;
        self.answer(Session::take_prompt_context, cancel).await
    }

    /// The model asked for these tool calls, each resolved to a real tool
    /// \[E3\]: runs the `_PreToolUse` round, if any, and returns one gate per
    /// call, in order.
    pub async fn tools_requested(
        &mut self,
        calls: Vec<ToolUse>,
        cancel: &CancellationToken,
    ) -> Result<Vec<ToolGate>, AskError> {
        self.pump();
        let now = self.now();
        self.session.tools_requested(now, calls)?;
        self.answer(Session::take_tool_gates, cancel).await
    }

    /// These tool calls ran \[E4\]: runs the `_PostToolUse` round, if any,
    /// and returns per call the envelopes to append to its result.
    pub async fn tools_ran(
        &mut self,
        runs: Vec<ToolRun>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<HookText>>, AskError> {
        self.pump();
        let now = self.now();
        self.session.tools_ran(now, runs)?;
        self.answer(Session::take_tool_notes, cancel).await
    }

    /// The model answered with `stop`, `tool_calls` tool calls and the text
    /// `last_assistant_message`: runs the `_Stop` round, if the policy calls
    /// one, until it is decided. Cancelling `cancel` ends the round and the
    /// prompt at once \[T5\].
    pub async fn end_turn(
        &mut self,
        stop: StopReason,
        tool_calls: usize,
        last_assistant_message: &str,
        cancel: &CancellationToken,
    ) -> Result<TurnVerdict, AskError> {
        self.pump();
        let now = self.now();
        self.session
            .end_turn(now, stop, tool_calls, last_assistant_message)?;
        self.answer(Session::take_verdict, cancel).await
    }

    /// The history is about to be compacted \[E5\]: runs the `_PreCompact`
    /// round, if any, and returns the pins.
    pub async fn compacting(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        self.pump();
        let now = self.now();
        self.session.compacting(now)?;
        self.answer(Session::take_pins, cancel).await
    }

    /// The history was compacted, removing `removed_messages` messages,
    /// with `summary` after a summary handoff: runs the `_PostCompact`
    /// round, if any, and returns the pairs to append \[P1\]-\[P2\].
    /// Cancelling `cancel` ends the round and the prompt at once \[T5\].
    pub async fn compacted(
        &mut self,
        removed_messages: usize,
        summary: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        self.pump();
        let now = self.now();
        self.session.compacted(now, removed_messages, summary)?;
        self.answer(Session::take_reinjections, cancel).await
    }

    /// The session ends, for `reason` \[E6\]: ends a prompt left running,
    /// then runs the `_SessionEnd` round, if any. Every call's deadline is
    /// at most [`hooks_core::session::SESSION_END_DEADLINE`] and answers are
    /// ignored, so this returns within that bound. `Err` if the session
    /// had ended already.
    pub async fn session_end(&mut self, reason: SessionEndReason) -> Result<(), AskError> {
        self.pump();
        let now = self.now();
        if self.session.in_prompt() {
            self.session.abort(now, AbortReason::Failed)?;
        }
        self.session.session_end(now, reason)?;
        // Nothing cancels it: the core's deadline bounds the round.
        self.answer(Session::take_session_end, &CancellationToken::new())
            .await
    }

    /// Ends the prompt on the loop's behalf \[S5\]; returns why it ended.
    pub fn abort(&mut self, reason: AbortReason) -> Result<EndReason, UsageError> {
        self.pump();
        let now = self.now();
        let end = self.session.abort(now, reason)?;
        self.process(&mut Calls::default());
        Ok(end)
    }

    /// Runs the round the question just asked started, if any, until `take`
    /// has its answer: calls out, replies and deadlines in, restarts beside.
    async fn answer<T>(
        &mut self,
        take: fn(&mut Session) -> Option<T>,
        cancel: &CancellationToken,
    ) -> Result<T, AskError> {
        let mut calls = Calls::default();
        // One timer for the whole round, moved only when the core's next
        // deadline moves: a timer made afresh per answer is registered
        // with the runtime's clock (and may wake its driver) each time.
        let timer = tokio::time::sleep_until(self.epoch);
        tokio::pin!(timer);
        let mut armed = None;
        loop {
            self.process(&mut calls);
            if let Some(answer) = take(&mut self.session) {
                // Calls still in flight belong to a decided round: dropping
                // them cancels them on the wire [T2].
                for handle in calls.aborts.values() {
                    handle.abort();
                }
                return Ok(answer);
            }
            let deadline = self
                .session
                .poll_timeout()
                .map(|t| self.epoch + t.since_epoch());
            if deadline != armed {
                if let Some(deadline) = deadline {
                    timer.as_mut().reset(deadline);
                }
                armed = deadline;
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    let now = self.now();
                    self.session.abort(now, AbortReason::Cancelled)?;
                    // Cancels every call in flight [T5].
                    self.process(&mut calls);
                    return Err(AskError::Cancelled);
                }
                Some(answered) = calls.in_flight.next(), if !calls.in_flight.is_empty() => {
                    if let Ok((call, reply)) = answered {
                        calls.aborts.remove(&call);
                        let now = self.now();
                        self.session.handle(now, Input::HookReplied { call, reply })?;
                    }
                }
                Some(notice) = self.notices_rx.recv() => self.on_notice(notice),
                () = &mut timer, if armed.is_some() => {
                    // Fired: armed afresh for whatever is due next.
                    armed = None;
                    let now = self.now();
                    self.session.handle_timeout(now);
                }
            }
        }
    }

    /// Gets a model tool call ready: resolves the name \[H3\], and restarts a
    /// server that is down and due \[T4\] (waiting for that start, unless
    /// `cancel` fires). `Err` holds the error result to give the model instead.
    pub async fn prepare_tool_call(
        &mut self,
        model_name: &str,
        cancel: &CancellationToken,
    ) -> Result<PreparedCall, ToolOutput> {
        self.pump();
        let unknown = || ToolOutput::error(format!("unknown tool: {model_name}"));
        let (server, bare) = match self.session.resolve(model_name) {
            Some((server, bare)) => (server, bare.to_owned()),
            None => return Err(unknown()),
        };
        let now = self.now();
        self.session
            .handle(now, Input::ServerWanted { server })
            .map_err(|e| ToolOutput::error(e.to_string()))?;
        self.process(&mut Calls::default());
        while self.session.server_state(server) == ServerState::Starting {
            let notice = tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    return Err(ToolOutput::error(
                        "the prompt was cancelled while the tool's server was starting",
                    ));
                }
                notice = self.notices_rx.recv() => notice,
            };
            let Some(notice) = notice else {
                break;
            };
            self.on_notice(notice);
            self.process(&mut Calls::default());
        }
        let name = self.session.server_name(server).clone();
        match (
            self.session.server_state(server),
            &self.slots[server.0].conn,
        ) {
            (ServerState::Up, Some(conn)) if self.session.resolve(model_name).is_some() => {
                Ok(PreparedCall {
                    conn: conn.clone(),
                    server: name,
                    bare,
                    max_bytes: self.options.max_tool_output_bytes,
                })
            }
            (ServerState::Retired, _) => Err(unknown()),
            (state, _) => Err(ToolOutput::error(format!(
                "tool server {name} is not running ({}); try again later",
                describe_state(state, self.now())
            ))),
        }
    }

    /// Closes every connection and waits until every child is gone.
    pub async fn shutdown(mut self) {
        let mut closing: Vec<Arc<Connection>> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.conn.take())
            .collect();
        closing.append(&mut self.killed);
        futures::future::join_all(closing.iter().map(|c| c.close())).await;
    }

    /// Reads every notice that has arrived and acts on the outputs.
    fn pump(&mut self) {
        while let Ok(notice) = self.notices_rx.try_recv() {
            self.on_notice(notice);
        }
        self.process(&mut Calls::default());
    }

    fn any_starting(&self) -> bool {
        (0..self.slots.len())
            .any(|i| self.session.server_state(ServerId(i)) == ServerState::Starting)
    }

    fn feed(&mut self, input: Input) {
        let now = self.now();
        // Notices carry ids of this session's servers: never a usage error.
        if let Err(e) = self.session.handle(now, input) {
            tracing::error!("hooks-mcp fed the core an invalid input: {e}");
        }
    }

    fn on_notice(&mut self, notice: Notice) {
        match notice {
            Notice::Started {
                server,
                generation,
                result,
            } => {
                let slot = &mut self.slots[server.0];
                if generation != slot.generation {
                    if let Ok((conn, _)) = result {
                        tokio::spawn(async move { conn.close().await });
                    }
                    return;
                }
                let result = match (result, slot.ended_early.take()) {
                    (Ok((conn, _)), Some(reason)) => {
                        tokio::spawn(async move { conn.close().await });
                        Err(format!("it exited right after starting: {reason}"))
                    }
                    (result, _) => result.map_err(|e| e.to_string()),
                };
                match result {
                    Ok((conn, tools)) => {
                        // [K1]: hooks' schemas say what input they get.
                        let names = tools
                            .iter()
                            .map(|t| ListedTool::from_schema(t.name.to_string(), &t.input_schema))
                            .collect();
                        slot.tools = tools.into_iter().map(|t| (t.name.to_string(), t)).collect();
                        slot.conn = Some(conn);
                        slot.last_error = None;
                        self.feed(Input::ServerStarted {
                            server,
                            tools: names,
                        });
                    }
                    Err(reason) => {
                        // Said once, by the event the core makes of it.
                        tracing::debug!(server = %slot.spec.name, "MCP server failed to start: {reason}");
                        slot.last_error = Some(reason.clone());
                        self.feed(Input::ServerStartFailed { server, reason });
                    }
                }
            }
            Notice::Ended {
                server,
                generation,
                reason,
            } => {
                let slot = &mut self.slots[server.0];
                if generation != slot.generation {
                    return;
                }
                if slot.conn.take().is_some() {
                    let reason = reason.to_string();
                    tracing::warn!(server = %slot.spec.name, "MCP server exited: {reason}");
                    slot.last_error = Some(reason.clone());
                    self.feed(Input::ServerExited { server, reason });
                } else {
                    // Its start is not reported yet: it will count as failed.
                    slot.ended_early = Some(reason);
                }
            }
        }
    }

    /// Acts on every queued output.
    fn process(&mut self, calls: &mut Calls) {
        while let Some(output) = self.session.poll_output() {
            match output {
                Output::CallHook {
                    call,
                    server,
                    hook,
                    arguments,
                    deadline: _,
                } => {
                    let future: BoxFuture<'static, (CallId, HookReply)> =
                        match self.slots[server.0].conn.clone() {
                            Some(conn) => Box::pin(async move {
                                // [H5]: the input is `{}` unless the hook's schema asked.
                                (
                                    call,
                                    hook_reply(conn.call(hook.tool_name(), arguments).await),
                                )
                            }),
                            None => Box::pin(async move { (call, HookReply::Crashed) }),
                        };
                    let (handle, registration) = AbortHandle::new_pair();
                    calls.aborts.insert(call, handle);
                    calls.in_flight.push(Abortable::new(future, registration));
                }
                Output::CancelCall { call } => {
                    // Dropping the call's future sends notifications/cancelled [T2].
                    if let Some(handle) = calls.aborts.remove(&call) {
                        handle.abort();
                    }
                }
                Output::KillServer { server } => {
                    let slot = &mut self.slots[server.0];
                    slot.generation += 1;
                    if let Some(conn) = slot.conn.take() {
                        conn.kill();
                        self.killed.push(conn);
                    }
                }
                Output::StartServer { server } => self.spawn_start(server),
                Output::Event(event) => {
                    if let Event::Warning(warning) = &event {
                        self.warnings.push(warning.clone());
                    }
                    (self.sink)(event);
                }
            }
        }
    }

    fn spawn_start(&mut self, server: ServerId) {
        let slot = &mut self.slots[server.0];
        slot.generation += 1;
        slot.ended_early = None;
        let generation = slot.generation;
        let spec = slot.spec.clone();
        let tx = self.notices_tx.clone();
        let deadline = self.options.start_timeout;
        let listing = self.options.listing;
        let connector = self.connector.clone();
        tokio::spawn(async move {
            let ended = tx.clone();
            let on_end = move |reason| {
                let _ = ended.send(Notice::Ended {
                    server,
                    generation,
                    reason,
                });
            };
            let result = match connector {
                Connector::Spec => Connection::connect(&spec, deadline, listing, on_end).await,
                #[cfg(test)]
                Connector::InProcess(make) => {
                    Connection::connect_in_process(make(&spec.name), deadline, listing, on_end)
                        .await
                }
            };
            let _ = tx.send(Notice::Started {
                server,
                generation,
                result,
            });
        });
    }
}

fn describe_state(state: ServerState, now: Time) -> String {
    match state {
        ServerState::Starting => "it is starting".into(),
        ServerState::Up => "it is up".into(),
        ServerState::Down { retry_at } => {
            format!(
                "it is down; a restart is tried in {}ms",
                retry_at.saturating_since(now).as_millis()
            )
        }
        ServerState::Retired => "it failed too often and is off for this session".into(),
    }
}

/// A model tool call ready to run; holds no borrow of the [`Host`], so several
/// run at once.
#[derive(Debug)]
pub struct PreparedCall {
    conn: Arc<Connection>,
    server: ServerName,
    bare: String,
    max_bytes: usize,
}

impl PreparedCall {
    /// The server it goes to.
    pub fn server(&self) -> &ServerName {
        &self.server
    }

    /// Runs the call under `timeout`; a call that runs out is cancelled on
    /// the wire and answered with an error result.
    pub async fn run(self, arguments: JsonObject, timeout: Duration) -> ToolOutput {
        match tokio::time::timeout(timeout, self.conn.call(&self.bare, arguments)).await {
            // The call failed because its server was found wedged: say why.
            Ok(Err(_)) if let Some(wedged) = self.conn.wedged() => ToolOutput::error(format!(
                "tool call failed: server {} was stopped as wedged: {wedged}",
                self.server
            )),
            Ok(result) => tool_output(result, self.max_bytes),
            Err(_) => ToolOutput::error(format!(
                "tool {} of server {} did not answer within {}ms and was cancelled",
                self.bare,
                self.server,
                timeout.as_millis()
            )),
        }
    }
}

#[cfg(test)]
mod tests;
