//! Update mapping: what the client is told of a session, in ACP's terms.
//!
//! Our events become `session/update` notifications ([`UpdateSink`]): the
//! model's text as `agent_message_chunk`, tool calls as `tool_call` /
//! `tool_call_update`, each hook round as one tool call of its own (sent
//! once when it decides within [`ROUND_WINDOW`], else announced and updated
//! at most once a window), server failures, warnings and compactions as
//! thought chunks with the event in `_meta["sprout/event"]`. Our end reasons
//! become ACP stop reasons ([`prompt_response`]).
//!
//! Not here: which session is which or when a prompt runs (`session`), the
//! SDK's handlers (`serve`), the wire (`framing`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema as s;
use agent_client_protocol::{self as acp};
use agent_loop::{AgentEvent, PromptOutcome};
use hooks_core::{EndReason, Event, ServerName, StopReason};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::framing::Out;
use super::lock;

/// How long a hook round may run before the client is shown it in
/// progress, and the shortest gap between two progress updates of a round.
const ROUND_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

/// A hook round as the client sees it: one tool call.
struct RoundView {
    title: String,
    raw_input: Value,
    /// One line per server's outcome so far.
    lines: Vec<String>,
    /// Every event of the round so far, as JSON, for
    /// `_meta["sprout/events"]`.
    events: Vec<Box<RawValue>>,
    /// Whether the client was sent the tool call yet.
    announced: bool,
    /// Lines the client has not seen yet.
    dirty: bool,
    /// The task that shows the round in progress after a window, stopped
    /// when it decides (so a fast round leaves no timer behind to fire).
    watch: Option<tokio::task::AbortHandle>,
}

impl RoundView {
    fn content(&self) -> Vec<s::ToolCallContent> {
        self.lines.iter().map(|l| l.clone().into()).collect()
    }
}

/// Sends a session's events as `session/update` notifications, each
/// turned into its line here and queued on stdout directly ([`Out`]); holds
/// them back until [`UpdateSink::release`], so that start-up events (a
/// server that failed to start) follow the `session/new` response that
/// names the session.
///
/// A hook round is one tool call. A round that decides within
/// [`ROUND_WINDOW`] is sent once, created already completed with every
/// server's outcome; a slower one is announced after the window and then
/// updated at most once a window, so a round costs O(1) messages when fast
/// and never one message per server.
pub(super) struct UpdateSink {
    out: Arc<Out>,
    session: s::SessionId,
    /// Rounds not decided yet. Updates of a round are sent with this lock
    /// held, so the progress task and the decision cannot reorder them.
    rounds: Mutex<BTreeMap<u64, RoundView>>,
    /// The lines held, `Some` until released.
    held: Mutex<Option<Vec<String>>>,
    /// The current answer's text went out as it streamed, so the whole
    /// text that follows it is not sent again.
    streamed: std::sync::atomic::AtomicBool,
}

impl UpdateSink {
    pub(super) fn new(out: Arc<Out>, session: s::SessionId) -> Arc<UpdateSink> {
        Arc::new(UpdateSink {
            out,
            session,
            rounds: Mutex::default(),
            held: Mutex::new(Some(Vec::new())),
            streamed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `update` as a `session/update` notification's line, newline
    /// included, with `meta` as the update's `_meta` (a round's events, put
    /// in as the JSON they already are).
    fn line(&self, update: &s::SessionUpdate, meta: Option<&RoundMeta<'_>>) -> Option<String> {
        let notification = Notification {
            jsonrpc: "2.0",
            method: "session/update",
            params: Params {
                session_id: &self.session,
                update: Update { update, meta },
            },
        };
        match serde_json::to_string(&notification) {
            Ok(mut line) => {
                line.push('\n');
                Some(line)
            }
            Err(e) => {
                tracing::warn!("cannot send an update of session {}: {e}", self.session);
                None
            }
        }
    }

    /// Sends a replayed history's update, never dropped.
    fn send_replayed(&self, update: s::SessionUpdate) {
        if let Some(line) = self.line(&update, None) {
            self.out.notify_always(&line);
        }
    }

    /// Sends now, or holds until released.
    fn emit(&self, update: s::SessionUpdate) {
        self.emit_with(&update, None);
    }

    /// As [`UpdateSink::emit`], with a round's `_meta`.
    fn emit_with(&self, update: &s::SessionUpdate, meta: Option<&RoundMeta<'_>>) {
        let Some(line) = self.line(update, meta) else {
            return;
        };
        let mut held = lock(&self.held);
        match held.as_mut() {
            Some(queue) => queue.push(line),
            None => {
                drop(held);
                self.out.notify(line);
            }
        }
    }

    /// Sends what was held, and from now on sends at once. The lock is held
    /// throughout, so that nothing sent meanwhile overtakes what was held.
    pub(super) fn release(&self) {
        let mut held = lock(&self.held);
        for line in held.take().unwrap_or_default() {
            self.out.notify(line);
        }
    }

    /// Sends a loaded session's history (`session/load`), now and before
    /// anything held: what the person said, what the model said, each tool
    /// call and its result, as they were shown when they happened.
    pub(super) fn replay(&self, history: &[agent_loop::Message]) {
        use agent_loop::Message;
        for message in history {
            match message {
                Message::User { text } => self.send_replayed(s::SessionUpdate::UserMessageChunk(
                    s::ContentChunk::new(text.clone().into()),
                )),
                Message::Assistant { text, tool_calls } => {
                    if !text.is_empty() {
                        self.send_replayed(s::SessionUpdate::AgentMessageChunk(
                            s::ContentChunk::new(text.clone().into()),
                        ));
                    }
                    for call in tool_calls {
                        let event = AgentEvent::ToolCall {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        };
                        for update in updates(&event) {
                            self.send_replayed(update);
                        }
                    }
                }
                Message::ToolResult {
                    call_id,
                    name,
                    content,
                    is_error,
                } => {
                    let event = AgentEvent::ToolResult {
                        id: call_id.clone(),
                        name: name.clone(),
                        is_error: *is_error,
                        text: content.clone(),
                        latency: std::time::Duration::ZERO,
                    };
                    for update in updates(&event) {
                        self.send_replayed(update);
                    }
                }
            }
        }
    }

    pub(super) fn into_sink(self: Arc<Self>) -> agent_loop::Sink {
        use std::sync::atomic::Ordering;
        Arc::new(move |event: &AgentEvent| match event {
            AgentEvent::Hook(hook) if self.round_event(hook) => {}
            // Each piece of a streamed answer is one chunk as it arrives.
            AgentEvent::TextDelta { text } => {
                self.streamed.store(true, Ordering::Relaxed);
                self.emit(s::SessionUpdate::AgentMessageChunk(s::ContentChunk::new(
                    text.clone().into(),
                )));
            }
            AgentEvent::ModelRequest { .. } => self.streamed.store(false, Ordering::Relaxed),
            // Already sent piece by piece.
            AgentEvent::AssistantText { .. } if self.streamed.load(Ordering::Relaxed) => {}
            _ => {
                for update in updates(event) {
                    self.emit(update);
                }
            }
        })
    }

    /// Folds a hook round's event into its view; false for other events.
    fn round_event(self: &Arc<Self>, event: &Event) -> bool {
        // Each event is turned into JSON once, and only if it is a round's.
        let detail =
            || serde_json::value::to_raw_value(event).unwrap_or_else(|_| RawValue::NULL.to_owned());
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
                    events: vec![detail()],
                    announced: false,
                    dirty: false,
                    // It first sleeps a window: the view is in by then.
                    watch: Some(self.clone().watch_round(round.0)),
                };
                lock(&self.rounds).insert(round.0, view);
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
                    view.events.push(detail());
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
                if let Some(watch) = view.watch.take() {
                    watch.abort();
                }
                view.lines.push(decision_summary(decision));
                let detail = detail();
                let raw_output = serde_json::to_value(decision).unwrap_or(Value::Null);
                let update = if view.announced {
                    let fields = s::ToolCallUpdateFields::new()
                        .status(s::ToolCallStatus::Completed)
                        .content(view.content())
                        .raw_output(raw_output);
                    s::SessionUpdate::ToolCallUpdate(s::ToolCallUpdate::new(
                        round_id(round.0),
                        fields,
                    ))
                } else {
                    s::SessionUpdate::ToolCall(
                        s::ToolCall::new(round_id(round.0), view.title.clone())
                            .kind(s::ToolKind::Think)
                            .status(s::ToolCallStatus::Completed)
                            .raw_input(view.raw_input.clone())
                            .content(view.content())
                            .raw_output(raw_output),
                    )
                };
                view.events.push(detail);
                let meta = RoundMeta {
                    event: view.events.last().map(|e| &**e),
                    events: &view.events,
                };
                self.emit_with(&update, Some(&meta));
                true
            }
            _ => false,
        }
    }

    /// Shows a round still running after a window, then its new lines at
    /// most once a window, until it is decided.
    fn watch_round(self: Arc<Self>, round: u64) -> tokio::task::AbortHandle {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(ROUND_WINDOW).await;
                let mut rounds = lock(&self.rounds);
                let Some(view) = rounds.get_mut(&round) else {
                    return;
                };
                let meta = RoundMeta {
                    event: None,
                    events: &view.events,
                };
                if !view.announced {
                    view.announced = true;
                    view.dirty = false;
                    let call = s::ToolCall::new(round_id(round), view.title.clone())
                        .kind(s::ToolKind::Think)
                        .status(s::ToolCallStatus::InProgress)
                        .raw_input(view.raw_input.clone())
                        .content(view.content());
                    self.emit_with(&s::SessionUpdate::ToolCall(call), Some(&meta));
                } else if view.dirty {
                    view.dirty = false;
                    let fields = s::ToolCallUpdateFields::new().content(view.content());
                    let update = s::ToolCallUpdate::new(round_id(round), fields);
                    self.emit_with(&s::SessionUpdate::ToolCallUpdate(update), Some(&meta));
                }
            }
        })
        .abort_handle()
    }
}

/// A `session/update` notification as it is written: the SDK's
/// `SessionNotification`, field for field, but for the update's `_meta`.
#[derive(Serialize)]
struct Notification<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: Params<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Params<'a> {
    session_id: &'a s::SessionId,
    update: Update<'a>,
}

/// An update and, for a hook round's, its `_meta` (the typed update has
/// none then).
#[derive(Serialize)]
struct Update<'a> {
    #[serde(flatten)]
    update: &'a s::SessionUpdate,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a RoundMeta<'a>>,
}

/// A hook round's `_meta`: the event just folded in (its decision) and
/// every event of the round so far.
#[derive(Serialize)]
struct RoundMeta<'a> {
    #[serde(rename = "sprout/event", skip_serializing_if = "Option::is_none")]
    event: Option<&'a RawValue>,
    #[serde(rename = "sprout/events")]
    events: &'a [Box<RawValue>],
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

/// Our end reason as ACP's stop reason \[S5\]; a failure is an error response.
pub(super) fn prompt_response(outcome: &PromptOutcome) -> Result<s::PromptResponse, acp::Error> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `update` with `meta` as we write it, and as the SDK's own types
    /// write it (the meta rebuilt as `Value`s), as text.
    fn both(update: s::SessionUpdate, meta: Option<&RoundMeta<'_>>) -> (String, String) {
        let session = s::SessionId::new("s-1");
        let ours = serde_json::to_string(&Notification {
            jsonrpc: "2.0",
            method: "session/update",
            params: Params {
                session_id: &session,
                update: Update {
                    update: &update,
                    meta,
                },
            },
        })
        .unwrap();
        let typed = match (update, meta) {
            (s::SessionUpdate::ToolCall(call), Some(meta)) => {
                let serde_json::Value::Object(map) = serde_json::to_value(meta).unwrap() else {
                    panic!("meta is an object");
                };
                s::SessionUpdate::ToolCall(call.meta(map))
            }
            (update, _) => update,
        };
        let sdk = json!({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": s::SessionNotification::new(session, typed),
        });
        (ours, sdk.to_string())
    }

    // Our lines are what the SDK's types would write: the same JSON, with
    // a round's events in `_meta` once (not a second `_meta` key beside a
    // null one), and other updates' own `_meta` untouched.
    #[test]
    fn our_lines_are_the_sdks_notifications() {
        let events: Vec<Box<RawValue>> = [
            r#"{"event":"round_started","round":1}"#,
            r#"{"event":"decided","round":1}"#,
        ]
        .iter()
        .map(|e| RawValue::from_string((*e).to_owned()).unwrap())
        .collect();
        let meta = RoundMeta {
            event: events.last().map(|e| &**e),
            events: &events,
        };
        let call = s::ToolCall::new(round_id(1), "_Stop hook: asking a")
            .kind(s::ToolKind::Think)
            .status(s::ToolCallStatus::Completed)
            .content(vec!["a: empty (0 ms)".to_owned().into()]);
        let (ours, sdk) = both(s::SessionUpdate::ToolCall(call), Some(&meta));
        assert_eq!(ours.matches("\"_meta\"").count(), 1, "{ours}");
        let parsed = |t: &str| serde_json::from_str::<Value>(t).unwrap();
        assert_eq!(parsed(&ours), parsed(&sdk), "{ours}\n{sdk}");
        assert_eq!(
            parsed(&ours)["params"]["update"]["_meta"]["sprout/events"][1]["event"],
            "decided"
        );
        let thought = s::SessionUpdate::AgentThoughtChunk(
            s::ContentChunk::new("[sprout] warning".to_owned().into())
                .meta(meta_of(&json!({"event": "warning"}))),
        );
        let (ours, sdk) = both(thought, None);
        assert_eq!(parsed(&ours), parsed(&sdk), "{ours}\n{sdk}");
    }
}
