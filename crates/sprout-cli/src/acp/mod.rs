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
//! JSON-RPC error and the connection goes on.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::{ConnectionTo, schema as s};
use agent_client_protocol::{
    self as acp, Agent, Client, on_receive_notification, on_receive_request,
};
use agent_loop::{AgentEvent, AgentSettings, Model};
use hooks_core::{EndReason, Event, HookConfig, ServerName, StopReason};
use hooks_mcp::{Host, HostOptions, ServerSpec, TransportSpec};
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod framing;

/// The largest frame read by default, in bytes.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// What every session is made of.
#[derive(Clone)]
pub struct AcpConfig {
    /// The hook policy.
    pub hooks: HookConfig,
    /// Host settings.
    pub host: HostOptions,
    /// Loop settings.
    pub agent: AgentSettings,
    /// The model, shared by sessions.
    pub model: Arc<dyn Model>,
    /// The frame size cap.
    pub max_frame_bytes: usize,
    /// Servers every session gets before the client's own: those of
    /// `--mcp-config`, or `None` to read `.mcp.json` in each session's `cwd`.
    pub servers: Option<Vec<ServerSpec>>,
}

impl std::fmt::Debug for AcpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpConfig")
            .field("hooks", &self.hooks)
            .field("model", &self.model.describe())
            .finish_non_exhaustive()
    }
}

struct Session {
    /// Locked by the prompt that runs; `None` only once shut down.
    agent: Arc<tokio::sync::Mutex<Option<agent_loop::Agent<Host>>>>,
    cancel: Mutex<Option<CancellationToken>>,
}

struct State {
    config: AcpConfig,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    next_session: AtomicU64,
    /// Session starts and prompts run as tokio tasks (not the SDK's, which
    /// die with the connection), so that at the end they can be cancelled,
    /// awaited, and their servers shut down.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(tokio::spawn(task));
    }
}

/// How long the end of the connection waits for running prompts to stop.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves ACP on stdin/stdout until the client closes stdin or `stop` is
/// cancelled (a signal), then cancels what runs and stops every session's
/// servers.
pub async fn serve(config: AcpConfig, stop: CancellationToken) -> Result<(), String> {
    let max_frame = config.max_frame_bytes;
    let state = Arc::new(State {
        config,
        sessions: Mutex::new(HashMap::new()),
        next_session: AtomicU64::new(1),
        tasks: Mutex::new(Vec::new()),
    });
    let (outgoing, incoming, writer) = framing::stdio(max_frame);
    let transport = acp::Lines::new(outgoing, incoming);
    let builder = {
        let state = state.clone();
        Agent
            .v1()
            .name("sprout")
            .on_receive_request(
                async move |_request: s::InitializeRequest, responder, _cx| {
                    let sessions =
                        s::SessionCapabilities::new().close(s::SessionCloseCapabilities::new());
                    let capabilities = s::AgentCapabilities::new()
                        .prompt_capabilities(s::PromptCapabilities::new().embedded_context(true))
                        .mcp_capabilities(s::McpCapabilities::new().http(true))
                        .session_capabilities(sessions);
                    responder.respond(
                        s::InitializeResponse::new(ProtocolVersion::V1)
                            .agent_capabilities(capabilities)
                            .agent_info(s::Implementation::new(
                                "sprout",
                                env!("CARGO_PKG_VERSION"),
                            )),
                    )
                },
                on_receive_request!(),
            )
            .on_receive_request(
                {
                    let state = state.clone();
                    async move |request: s::NewSessionRequest,
                                responder,
                                cx: ConnectionTo<Client>| {
                        let task_state = state.clone();
                        state.spawn(async move {
                            match new_session(&task_state, request, cx).await {
                                Ok((response, sink)) => {
                                    let _ = responder.respond(response);
                                    // Start-up events go out once the client knows the id.
                                    sink.release();
                                }
                                Err(e) => {
                                    let _ = responder.respond_with_error(e);
                                }
                            }
                        });
                        Ok(())
                    }
                },
                on_receive_request!(),
            )
            .on_receive_request(
                {
                    let state = state.clone();
                    async move |request: s::PromptRequest, responder, _cx: ConnectionTo<Client>| {
                        let id = request.session_id.0.to_string();
                        let Some(session) = lock(&state.sessions).get(&id).cloned() else {
                            return responder.respond_with_error(
                                acp::Error::invalid_params()
                                    .data(format!("unknown session {id:?}")),
                            );
                        };
                        let text = prompt_text(&request.prompt);
                        if text.trim().is_empty() {
                            return responder.respond_with_error(
                                acp::Error::invalid_params()
                                    .data("the prompt has no text Sprout can read"),
                            );
                        }
                        let Ok(mut guard) = session.agent.clone().try_lock_owned() else {
                            return responder
                                .respond_with_error(acp::Error::invalid_request().data(
                                "a prompt is already running in this session; cancel it or wait",
                            ));
                        };
                        let Some(mut agent) = guard.take() else {
                            return responder.respond_with_error(
                                acp::Error::invalid_request().data("the session is closed"),
                            );
                        };
                        let token = CancellationToken::new();
                        *lock(&session.cancel) = Some(token.clone());
                        // `$/cancel_request` for this prompt cancels it too.
                        let cancellation = responder.cancellation();
                        let linked = token.clone();
                        state.spawn(async move {
                            let link = tokio::spawn(async move {
                                cancellation.cancelled().await;
                                linked.cancel();
                            });
                            let outcome = agent.run_prompt(&text, &token).await;
                            link.abort();
                            *guard = Some(agent);
                            drop(guard);
                            let _ = responder.respond_with_result(prompt_response(&outcome));
                        });
                        Ok(())
                    }
                },
                on_receive_request!(),
            )
            .on_receive_request(
                {
                    let state = state.clone();
                    async move |request: s::CloseSessionRequest,
                                responder,
                                _cx: ConnectionTo<Client>| {
                        let id = request.session_id.0.to_string();
                        let Some(session) = lock(&state.sessions).remove(&id) else {
                            return responder.respond_with_error(
                                acp::Error::invalid_params()
                                    .data(format!("unknown session {id:?}")),
                            );
                        };
                        state.spawn(async move {
                            close_session(&session).await;
                            let _ = responder.respond(s::CloseSessionResponse::new());
                        });
                        Ok(())
                    }
                },
                on_receive_request!(),
            )
            .on_receive_notification(
                {
                    let state = state.clone();
                    async move |notification: s::CancelNotification, _cx: ConnectionTo<Client>| {
                        let id = notification.session_id.0.to_string();
                        if let Some(session) = lock(&state.sessions).get(&id).cloned()
                            && let Some(token) = lock(&session.cancel).as_ref()
                        {
                            token.cancel();
                        }
                        Ok(())
                    }
                },
                on_receive_notification!(),
            )
    };
    let result = tokio::select! {
        result = builder.connect_to(transport) => result.map_err(|e| format!("the ACP connection failed: {e}")),
        () = stop.cancelled() => Ok(()),
    };
    // The client is gone: cancel every prompt, let them end, stop every server.
    let sessions: Vec<Arc<Session>> = lock(&state.sessions).values().cloned().collect();
    for session in &sessions {
        if let Some(token) = lock(&session.cancel).as_ref() {
            token.cancel();
        }
    }
    let tasks: Vec<_> = lock(&state.tasks).drain(..).collect();
    let _ = tokio::time::timeout(DRAIN, futures::future::join_all(tasks)).await;
    let sessions: Vec<Arc<Session>> = lock(&state.sessions).drain().map(|(_, s)| s).collect();
    futures::future::join_all(sessions.iter().map(|s| close_session(s))).await;
    // The transport is gone with the connection: the writer ends once what
    // is queued is written (bounded: a client that stopped reading does not
    // hold the exit).
    let _ = tokio::time::timeout(WRITER_DRAIN, writer).await;
    result
}

/// How long the end waits for queued frames to reach stdout.
const WRITER_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Cancels the session's prompt, waits for it, and stops its servers.
async fn close_session(session: &Session) {
    if let Some(token) = lock(&session.cancel).as_ref() {
        token.cancel();
    }
    let agent = match tokio::time::timeout(DRAIN, session.agent.lock()).await {
        Ok(mut guard) => guard.take(),
        Err(_) => None,
    };
    if let Some(agent) = agent {
        agent.into_gateway().shutdown().await;
    }
}

/// The text of a prompt: its text blocks and embedded text resources.
fn prompt_text(blocks: &[s::ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            s::ContentBlock::Text(text) => parts.push(text.text.clone()),
            s::ContentBlock::Resource(resource) => {
                if let s::EmbeddedResourceResource::TextResourceContents(contents) =
                    &resource.resource
                {
                    parts.push(format!("[{}]\n{}", contents.uri, contents.text));
                }
            }
            s::ContentBlock::ResourceLink(link) => parts.push(format!("[{}]", link.uri)),
            _ => {}
        }
    }
    parts.join("\n\n")
}

/// Our end reason as ACP's stop reason \[S5\]; a failure is an error response.
fn prompt_response(outcome: &agent_loop::PromptOutcome) -> Result<s::PromptResponse, acp::Error> {
    let stop = match &outcome.reason {
        EndReason::NoObjection
        | EndReason::HooksOff
        | EndReason::BudgetSpent
        | EndReason::Declined
        | EndReason::NoStopHook => s::StopReason::EndTurn,
        EndReason::Model(StopReason::MaxTokens) => s::StopReason::MaxTokens,
        EndReason::Model(StopReason::Refusal | StopReason::ContentFilter) => s::StopReason::Refusal,
        EndReason::Model(_) => s::StopReason::EndTurn,
        EndReason::Cancelled => s::StopReason::Cancelled,
        EndReason::MaxRounds => s::StopReason::MaxTurnRequests,
        EndReason::Failed => {
            let detail = outcome
                .detail
                .clone()
                .unwrap_or_else(|| "the prompt failed".into());
            return Err(acp::Error::internal_error().data(detail));
        }
    };
    let mut meta = serde_json::Map::new();
    meta.insert(
        "sprout/end".into(),
        json!({"reason": outcome.reason.as_str(), "detail": outcome.detail, "rounds": outcome.rounds}),
    );
    Ok(s::PromptResponse::new(stop).meta(meta))
}

async fn new_session(
    state: &Arc<State>,
    request: s::NewSessionRequest,
    cx: ConnectionTo<Client>,
) -> Result<(s::NewSessionResponse, Arc<UpdateSink>), acp::Error> {
    let cwd = &request.cwd;
    if !cwd.is_absolute() || !cwd.is_dir() {
        return Err(acp::Error::invalid_params().data(format!(
            "cwd {:?} is not an absolute path to an existing directory",
            cwd.display().to_string()
        )));
    }
    let mut specs = match &state.config.servers {
        Some(specs) => specs.clone(),
        None => crate::settings::servers_in(cwd)
            .map_err(|e| acp::Error::invalid_params().data(e.to_string()))?,
    };
    for spec in server_specs(&request.mcp_servers, &request.cwd)
        .map_err(|e| acp::Error::invalid_params().data(e))?
    {
        if specs.iter().any(|s| s.name == spec.name) {
            let e = format!("MCP server {} is configured by sprout already", spec.name);
            return Err(acp::Error::invalid_params().data(e));
        }
        specs.push(spec);
    }
    let id = format!(
        "sprout-{}",
        state.next_session.fetch_add(1, Ordering::SeqCst)
    );
    let session_id = s::SessionId::new(id.clone());
    let updates = UpdateSink::new(cx, session_id.clone());
    let sink = updates.clone().into_sink();
    let config = &state.config;
    let host = Host::start(
        specs,
        config.hooks.clone(),
        config.host.clone(),
        agent_loop::hook_sink(sink.clone()),
    )
    .await
    .map_err(|e| acp::Error::invalid_params().data(e.to_string()))?;
    let agent = agent_loop::Agent::new(config.model.clone(), host, config.agent.clone(), sink);
    let session = Arc::new(Session {
        agent: Arc::new(tokio::sync::Mutex::new(Some(agent))),
        cancel: Mutex::new(None),
    });
    lock(&state.sessions).insert(id, session);
    Ok((s::NewSessionResponse::new(session_id), updates))
}

/// The client's `mcpServers` as our specs, run in the session's `cwd`.
fn server_specs(
    servers: &[s::McpServer],
    cwd: &std::path::Path,
) -> Result<Vec<ServerSpec>, String> {
    let mut specs = Vec::new();
    for server in servers {
        let spec = match server {
            s::McpServer::Stdio(stdio) => {
                let name = ServerName::new(stdio.name.clone()).map_err(|e| e.to_string())?;
                let env: BTreeMap<String, String> = stdio
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect();
                ServerSpec {
                    name,
                    transport: TransportSpec::Stdio {
                        command: stdio.command.to_string_lossy().into_owned(),
                        args: stdio.args.clone(),
                        env,
                        cwd: Some(cwd.to_path_buf()),
                    },
                }
            }
            s::McpServer::Http(http) => {
                hooks_mcp::check_http_url(&http.url).map_err(|why| {
                    let shown = hooks_mcp::redact_url(&http.url);
                    format!("MCP server {}: url {shown:?} {why}", http.name)
                })?;
                ServerSpec {
                    name: ServerName::new(http.name.clone()).map_err(|e| e.to_string())?,
                    transport: TransportSpec::Http {
                        url: http.url.clone(),
                        headers: http
                            .headers
                            .iter()
                            .map(|h| (h.name.clone(), h.value.clone()))
                            .collect(),
                    },
                }
            }
            s::McpServer::Sse(sse) => {
                return Err(format!(
                    "MCP server {}: the SSE transport is not supported; use Streamable HTTP",
                    sse.name
                ));
            }
            _ => return Err("an MCP server entry of an unknown kind".into()),
        };
        if specs
            .iter()
            .any(|existing: &ServerSpec| existing.name == spec.name)
        {
            return Err(format!("MCP server {} is listed twice", spec.name));
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// How long a hook round may run before the client is shown it in
/// progress, and the shortest gap between two progress updates of a round.
const ROUND_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

/// A hook round as the client sees it: one tool call.
struct RoundView {
    title: String,
    raw_input: Value,
    /// One line per server's outcome so far.
    lines: Vec<String>,
    /// Every event of the round so far, for `_meta["sprout/events"]`.
    events: Vec<Value>,
    /// Whether the client was sent the tool call yet.
    announced: bool,
    /// Lines the client has not seen yet.
    dirty: bool,
}

impl RoundView {
    fn content(&self) -> Vec<s::ToolCallContent> {
        self.lines.iter().map(|l| l.clone().into()).collect()
    }
}

/// Sends a session's events as `session/update` notifications; holds them
/// back until [`UpdateSink::release`], so that start-up events (a server
/// that failed to start) follow the `session/new` response that names the
/// session.
///
/// A hook round is one tool call. A round that decides within
/// [`ROUND_WINDOW`] is sent once, created already completed with every
/// server's outcome; a slower one is announced after the window and then
/// updated at most once a window, so a round costs O(1) messages when fast
/// and never one message per server.
struct UpdateSink {
    cx: ConnectionTo<Client>,
    session: s::SessionId,
    /// Rounds not decided yet. Updates of a round are sent with this lock
    /// held, so the progress task and the decision cannot reorder them.
    rounds: Mutex<BTreeMap<u64, RoundView>>,
    /// `Some` until released.
    held: Mutex<Option<Vec<s::SessionUpdate>>>,
}

impl UpdateSink {
    fn new(cx: ConnectionTo<Client>, session: s::SessionId) -> Arc<UpdateSink> {
        Arc::new(UpdateSink {
            cx,
            session,
            rounds: Mutex::default(),
            held: Mutex::new(Some(Vec::new())),
        })
    }

    fn send(&self, update: s::SessionUpdate) {
        let _ = self
            .cx
            .send_notification(s::SessionNotification::new(self.session.clone(), update));
    }

    /// Sends now, or holds until released.
    fn emit(&self, update: s::SessionUpdate) {
        let mut held = lock(&self.held);
        match held.as_mut() {
            Some(queue) => queue.push(update),
            None => {
                drop(held);
                self.send(update);
            }
        }
    }

    fn release(&self) {
        let held = lock(&self.held).take().unwrap_or_default();
        for update in held {
            self.send(update);
        }
    }

    fn into_sink(self: Arc<Self>) -> agent_loop::Sink {
        Arc::new(move |event: &AgentEvent| match event {
            AgentEvent::Hook(hook) if self.round_event(hook) => {}
            _ => {
                for update in updates(event) {
                    self.emit(update);
                }
            }
        })
    }

    /// Folds a hook round's event into its view; false for other events.
    fn round_event(self: &Arc<Self>, event: &Event) -> bool {
        let detail = serde_json::to_value(event).unwrap_or(Value::Null);
        match event {
            Event::RoundStarted {
                round,
                hook,
                servers,
                left_out,
                ..
            } => {
                // A round with nobody to ask is not shown at all.
                if servers.is_empty() && left_out.is_empty() {
                    return true;
                }
                let names: Vec<&str> = servers.iter().map(ServerName::as_str).collect();
                let view = RoundView {
                    title: format!("{hook} hook: asking {}", names.join(", ")),
                    raw_input: json!({"hook": hook.tool_name(), "servers": names}),
                    lines: Vec::new(),
                    events: vec![detail],
                    announced: false,
                    dirty: false,
                };
                lock(&self.rounds).insert(round.0, view);
                self.clone().watch_round(round.0);
                true
            }
            Event::HookCalled {
                round,
                server,
                outcome,
                latency,
                ..
            } => {
                let mut line =
                    format!("{server}: {} ({} ms)", outcome.label(), latency.as_millis());
                if let Some(text) = outcome.text() {
                    line.push_str(&format!("\n{text}"));
                }
                if let Some(view) = lock(&self.rounds).get_mut(&round.0) {
                    view.lines.push(line);
                    view.events.push(detail);
                    view.dirty = true;
                }
                true
            }
            Event::Decided {
                round: Some(round),
                decision,
            } => {
                let mut rounds = lock(&self.rounds);
                // A round with nobody to ask was never shown: nothing to close.
                let Some(mut view) = rounds.remove(&round.0) else {
                    return true;
                };
                view.lines.push(decision_summary(decision));
                view.events.push(detail.clone());
                let mut meta = serde_json::Map::new();
                meta.insert("sprout/event".into(), detail);
                meta.insert("sprout/events".into(), Value::Array(view.events.clone()));
                let raw_output = serde_json::to_value(decision).unwrap_or(Value::Null);
                let update = if view.announced {
                    let fields = s::ToolCallUpdateFields::new()
                        .status(s::ToolCallStatus::Completed)
                        .content(view.content())
                        .raw_output(raw_output);
                    s::SessionUpdate::ToolCallUpdate(
                        s::ToolCallUpdate::new(round_id(round.0), fields).meta(meta),
                    )
                } else {
                    s::SessionUpdate::ToolCall(
                        s::ToolCall::new(round_id(round.0), view.title.clone())
                            .kind(s::ToolKind::Think)
                            .status(s::ToolCallStatus::Completed)
                            .raw_input(view.raw_input.clone())
                            .content(view.content())
                            .raw_output(raw_output)
                            .meta(meta),
                    )
                };
                self.emit(update);
                true
            }
            _ => false,
        }
    }

    /// Shows a round still running after a window, then its new lines at
    /// most once a window, until it is decided.
    fn watch_round(self: Arc<Self>, round: u64) {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(ROUND_WINDOW).await;
                let mut rounds = lock(&self.rounds);
                let Some(view) = rounds.get_mut(&round) else {
                    return;
                };
                let mut meta = serde_json::Map::new();
                meta.insert("sprout/events".into(), Value::Array(view.events.clone()));
                if !view.announced {
                    view.announced = true;
                    view.dirty = false;
                    let call = s::ToolCall::new(round_id(round), view.title.clone())
                        .kind(s::ToolKind::Think)
                        .status(s::ToolCallStatus::InProgress)
                        .raw_input(view.raw_input.clone())
                        .content(view.content())
                        .meta(meta);
                    self.emit(s::SessionUpdate::ToolCall(call));
                } else if view.dirty {
                    view.dirty = false;
                    let fields = s::ToolCallUpdateFields::new().content(view.content());
                    self.emit(s::SessionUpdate::ToolCallUpdate(
                        s::ToolCallUpdate::new(round_id(round), fields).meta(meta),
                    ));
                }
            }
        });
    }
}

fn meta_of(event: &(impl Serialize + ?Sized)) -> serde_json::Map<String, Value> {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "sprout/event".into(),
        serde_json::to_value(event).unwrap_or(Value::Null),
    );
    meta
}

/// A round's decision in words, the last line of its tool call.
fn decision_summary(decision: &hooks_core::PolicyDecision) -> String {
    match decision {
        hooks_core::PolicyDecision::ObjectionHonoured {
            budget_used,
            budget,
            ..
        } => format!("objection honoured (budget {budget_used}/{budget}): the agent goes on"),
        hooks_core::PolicyDecision::Reinject { servers } => {
            format!("re-injecting {} answer(s)", servers.len())
        }
        hooks_core::PolicyDecision::PromptEnded { reason } => format!("the agent stops: {reason}"),
        hooks_core::PolicyDecision::Inject { hook, servers } => {
            format!("{hook}: adding {} answer(s)", servers.len())
        }
        hooks_core::PolicyDecision::ToolsGated { asked, refused } => {
            format!("{} of {asked} tool call(s) refused", refused.len())
        }
        hooks_core::PolicyDecision::SessionEnded { reason } => format!("session ended: {reason}"),
    }
}

fn round_id(round: u64) -> s::ToolCallId {
    s::ToolCallId::new(format!("sprout-hook-round-{round}"))
}

fn updates(event: &AgentEvent) -> Vec<s::SessionUpdate> {
    match event {
        AgentEvent::AssistantText { text } => vec![s::SessionUpdate::AgentMessageChunk(
            s::ContentChunk::new(text.clone().into()),
        )],
        AgentEvent::ToolCall {
            id,
            name,
            arguments,
        } => {
            let input = serde_json::from_str::<Value>(arguments)
                .unwrap_or(Value::String(arguments.clone()));
            vec![s::SessionUpdate::ToolCall(
                s::ToolCall::new(id.clone(), name.clone())
                    .status(s::ToolCallStatus::InProgress)
                    .raw_input(input),
            )]
        }
        AgentEvent::ToolResult {
            id, is_error, text, ..
        } => {
            let status = if *is_error {
                s::ToolCallStatus::Failed
            } else {
                s::ToolCallStatus::Completed
            };
            let fields = s::ToolCallUpdateFields::new()
                .status(status)
                .content(vec![text.clone().into()]);
            vec![s::SessionUpdate::ToolCallUpdate(s::ToolCallUpdate::new(
                id.clone(),
                fields,
            ))]
        }
        AgentEvent::Hook(hook) => hook_updates(hook),
        AgentEvent::Compacted { kind, removed, .. } => {
            let text = format!(
                "[sprout] the context was compacted by {kind} ({removed} messages removed)"
            );
            vec![s::SessionUpdate::AgentThoughtChunk(
                s::ContentChunk::new(text.into()).meta(meta_of(event)),
            )]
        }
        _ => Vec::new(),
    }
}

/// Hook events other than a round's: server failures and warnings, as
/// readable thoughts with the event in `_meta`.
fn hook_updates(event: &Event) -> Vec<s::SessionUpdate> {
    let meta = meta_of(event);
    match event {
        Event::ServerDown { .. } | Event::Warning(_) => {
            // Readable text for the person; the event itself is in `_meta`.
            let text = match event {
                Event::Warning(w) => format!("[sprout] warning: {w}"),
                _ => format!("[sprout] {}", crate::render::server_down_text(event)),
            };
            vec![s::SessionUpdate::AgentThoughtChunk(
                s::ContentChunk::new(text.into()).meta(meta),
            )]
        }
        _ => Vec::new(),
    }
}
