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
use std::sync::{Arc, Mutex, Weak};

use agent_client_protocol::v1::schema as s;
use agent_client_protocol::{self as acp};
use agent_loop::{AgentEvent, PromptOutcome};
use hooks_core::{EndReason, Event, ServerName, StopReason};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::framing::Out;
use super::lock;

/// How long a hook round may run before the client is shown it in
/// progress, and the shortest gap between two progress updates of a round.
const ROUND_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

/// A hook round as the client sees it: one tool call.
struct RoundView {
    title: String,
    hook: hooks_core::HookPoint,
    /// The servers asked, for the call's `rawInput`.
    servers: Vec<ServerName>,
    /// One line per server's outcome so far.
    lines: Vec<String>,
    /// Every event of the round so far, as JSON, for
    /// `_meta["sprout/events"]`.
    events: Vec<Box<RawValue>>,
    /// Whether the client was sent the tool call yet.
    announced: bool,
    /// Lines the client has not seen yet.
    dirty: bool,
    /// When the client is next shown the round, if it still runs then.
    due: Instant,
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
/// and never one message per server. One task per session shows the slow
/// rounds ([`watch_rounds`]): a round has no task or timer of its own, so a
/// run of fast rounds arms the runtime's clock about once a window, not
/// once a round.
pub(super) struct UpdateSink {
    out: Arc<Out>,
    session: s::SessionId,
    /// Rounds not decided yet. Updates of a round are sent with this lock
    /// held, so the round watcher and the decision cannot reorder them.
    rounds: Mutex<BTreeMap<u64, RoundView>>,
    /// The lines held, `Some` until released.
    held: Mutex<Option<Vec<String>>>,
    /// The current answer's text went out as it streamed, so the whole
    /// text that follows it is not sent again.
    streamed: std::sync::atomic::AtomicBool,
    /// Wakes the round watcher, when it has no round to watch, for a round
    /// that started.
    opened: Arc<Notify>,
    /// The round watcher, started with the session's first round and
    /// stopped with the sink.
    watcher: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for UpdateSink {
    fn drop(&mut self) {
        if let Some(watcher) = lock(&self.watcher).take() {
            watcher.abort();
        }
    }
}

impl UpdateSink {
    pub(super) fn new(out: Arc<Out>, session: s::SessionId) -> Arc<UpdateSink> {
        Arc::new(UpdateSink {
            out,
            session,
            rounds: Mutex::default(),
            held: Mutex::new(Some(Vec::new())),
            streamed: std::sync::atomic::AtomicBool::new(false),
            opened: Arc::new(Notify::new()),
            watcher: Mutex::new(None),
        })
    }

    /// `update` as a `session/update` notification's line, newline
    /// included.
    fn line(&self, update: &impl Serialize) -> Option<String> {
        let notification = Notification {
            jsonrpc: "2.0",
            method: "session/update",
            params: Params {
                session_id: &self.session,
                update,
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
        if let Some(line) = self.line(&update) {
            self.out.notify_always(&line);
        }
    }

    /// Sends now, or holds until released.
    fn emit(&self, update: &impl Serialize) {
        let Some(line) = self.line(update) else {
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

    /// Tells the person `text`, as a message of the agent's (held, as
    /// every update, until the session is released).
    pub(super) fn say(&self, text: &str) {
        self.emit(&s::SessionUpdate::AgentMessageChunk(s::ContentChunk::new(
            format!("[sprout] {text}\n").into(),
        )));
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
        Arc::new(
            move |emitted: &agent_loop::Emitted<'_>| match emitted.event() {
                AgentEvent::Hook(hook) if self.round_event(hook, emitted) => {}
                // Each piece of a streamed answer is one chunk as it arrives.
                AgentEvent::TextDelta { text } => {
                    self.streamed.store(true, Ordering::Relaxed);
                    self.emit(&s::SessionUpdate::AgentMessageChunk(s::ContentChunk::new(
                        text.clone().into(),
                    )));
                }
                AgentEvent::ModelRequest { .. } => self.streamed.store(false, Ordering::Relaxed),
                // Already sent piece by piece.
                AgentEvent::AssistantText { .. } if self.streamed.load(Ordering::Relaxed) => {}
                event => {
                    for update in updates(event) {
                        self.emit(&update);
                    }
                }
            },
        )
    }

    /// Folds a hook round's event into its view; false for other events.
    /// `emitted` is the event as the loop sent it, with its JSON.
    fn round_event(self: &Arc<Self>, event: &Event, emitted: &agent_loop::Emitted<'_>) -> bool {
        // The event's JSON as the transcript writes it too: made once.
        let detail = || {
            emitted
                .json()
                .map_or_else(|_| RawValue::NULL.to_owned(), ToOwned::to_owned)
        };
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
                let mut title = format!("{hook} hook: asking ");
                for (i, server) in servers.iter().enumerate() {
                    if i > 0 {
                        title.push_str(", ");
                    }
                    title.push_str(server.as_str());
                }
                let view = RoundView {
                    title,
                    hook: *hook,
                    servers: servers.clone(),
                    lines: Vec::with_capacity(servers.len() + 1),
                    events: {
                        let mut events = Vec::with_capacity(servers.len() + 2);
                        events.push(detail());
                        events
                    },
                    announced: false,
                    dirty: false,
                    due: Instant::now() + ROUND_WINDOW,
                };
                lock(&self.rounds).insert(round.0, view);
                let mut watcher = lock(&self.watcher);
                match *watcher {
                    // A permit, if it is busy: it looks again before it waits.
                    Some(_) => self.opened.notify_one(),
                    None => {
                        let watch = watch_rounds(Arc::downgrade(self), self.opened.clone());
                        *watcher = Some(tokio::spawn(watch).abort_handle());
                    }
                }
                true
            }
            Event::HookCalled {
                round,
                server,
                outcome,
                latency,
                ..
            } => {
                use std::fmt::Write as _;
                let mut line = String::new();
                let _ = write!(
                    line,
                    "{server}: {} ({} ms)",
                    outcome.label(),
                    latency.as_millis()
                );
                if let Some(text) = outcome.text() {
                    line.push('\n');
                    line.push_str(text);
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
                view.lines.push(decision_summary(decision));
                view.events.push(detail());
                let call = RoundCall {
                    // Announced already: only what changed.
                    announce: !view.announced,
                    decision: Some(decision),
                    ..RoundCall::of(round.0, &view)
                };
                self.emit(&call);
                true
            }
            _ => false,
        }
    }

    /// Shows the rounds that are due (announced, or their new lines), and
    /// makes each due again a window later; when the next round is due, if
    /// any runs.
    fn show_due_rounds(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut rounds = lock(&self.rounds);
        let mut next: Option<Instant> = None;
        for (&round, view) in rounds.iter_mut() {
            if view.due <= now {
                if !view.announced || view.dirty {
                    let call = RoundCall {
                        announce: !view.announced,
                        ..RoundCall::of(round, view)
                    };
                    self.emit(&call);
                    view.announced = true;
                    view.dirty = false;
                }
                view.due = now + ROUND_WINDOW;
            }
            next = Some(next.map_or(view.due, |next| next.min(view.due)));
        }
        next
    }
}

/// A session's round watcher: shows a round still running after a window,
/// then its new lines at most once a window, until it is decided. It sleeps
/// until the next round is due, or, with none running, until one starts;
/// it holds the sink only while it shows, so it ends with it.
async fn watch_rounds(sink: Weak<UpdateSink>, opened: Arc<Notify>) {
    loop {
        let next = match sink.upgrade() {
            Some(sink) => sink.show_due_rounds(),
            None => return,
        };
        match next {
            Some(due) => tokio::time::sleep_until(due).await,
            None => opened.notified().await,
        }
    }
}

/// A `session/update` notification as it is written: the SDK's
/// `SessionNotification`, field for field, with the update either one of
/// the SDK's or a hook round's ([`RoundCall`]).
#[derive(Serialize)]
struct Notification<'a, U> {
    jsonrpc: &'static str,
    method: &'static str,
    params: Params<'a, U>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Params<'a, U> {
    session_id: &'a s::SessionId,
    update: &'a U,
}

/// A hook round's tool call as ACP's `tool_call` (when `announce`) or
/// `tool_call_update` writes it, borrowed from its view: what the SDK's
/// types would write, without building them (a `rawInput` map, the lines
/// as content blocks, the decision as a `Value`) once per update. Its
/// `_meta` holds every event of the round so far, and the decision, once
/// there is one, as `sprout/event` too.
struct RoundCall<'a> {
    /// A `tool_call` (with title, kind and input), else an update.
    announce: bool,
    round: u64,
    view: &'a RoundView,
    /// The round's decision, once it has one: then it is completed.
    decision: Option<&'a hooks_core::PolicyDecision>,
}

impl<'a> RoundCall<'a> {
    /// The round `round` as `view` has it, in progress, announced.
    fn of(round: u64, view: &'a RoundView) -> RoundCall<'a> {
        RoundCall {
            announce: true,
            round,
            view,
            decision: None,
        }
    }
}

impl Serialize for RoundCall<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        #[derive(Serialize)]
        struct RawInput<'a> {
            hook: hooks_core::HookPoint,
            servers: &'a [ServerName],
        }
        #[derive(Serialize)]
        struct Meta<'a> {
            #[serde(rename = "sprout/event", skip_serializing_if = "Option::is_none")]
            event: Option<&'a RawValue>,
            #[serde(rename = "sprout/events")]
            events: &'a [Box<RawValue>],
        }
        let view = self.view;
        let mut map = s.serialize_map(None)?;
        if self.announce {
            map.serialize_entry("sessionUpdate", "tool_call")?;
        } else {
            map.serialize_entry("sessionUpdate", "tool_call_update")?;
        }
        map.serialize_entry(
            "toolCallId",
            &format_args!("{ROUND_ID_PREFIX}{}", self.round),
        )?;
        if self.announce {
            map.serialize_entry("title", &view.title)?;
            map.serialize_entry("kind", "think")?;
        }
        // An update in progress says only what is new: its lines.
        if self.announce || self.decision.is_some() {
            let status = if self.decision.is_some() {
                "completed"
            } else {
                "in_progress"
            };
            map.serialize_entry("status", status)?;
        }
        // The SDK leaves out a tool call's empty content (a round announced
        // before any server answered); an update's is always written.
        if !(self.announce && view.lines.is_empty()) {
            map.serialize_entry("content", &Content(&view.lines))?;
        }
        if self.announce {
            let input = RawInput {
                hook: view.hook,
                servers: &view.servers,
            };
            map.serialize_entry("rawInput", &input)?;
        }
        if let Some(decision) = self.decision {
            map.serialize_entry("rawOutput", decision)?;
        }
        let meta = Meta {
            event: self.decision.and(view.events.last().map(|e| &**e)),
            events: &view.events,
        };
        map.serialize_entry("_meta", &meta)?;
        map.end()
    }
}

/// Each line as a text content block, as `ToolCallContent` writes one.
struct Content<'a>(&'a [String]);

impl Serialize for Content<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Block<'a> {
            r#type: &'static str,
            content: Text<'a>,
        }
        #[derive(Serialize)]
        struct Text<'a> {
            r#type: &'static str,
            text: &'a str,
        }
        s.collect_seq(self.0.iter().map(|text| Block {
            r#type: "content",
            content: Text {
                r#type: "text",
                text,
            },
        }))
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

/// A hook round's tool call id is this and the round's number.
const ROUND_ID_PREFIX: &str = "sprout-hook-round-";

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
    match event {
        Event::ServerDown { .. } | Event::Warning(_) => {
            let meta = meta_of(event);
            // Readable text for the person; the event itself is in `_meta`.
            let text = match event {
                // Each its own line: two in a row do not run together.
                Event::Warning(w) => format!("[sprout] warning: {w}\n"),
                _ => format!("[sprout] {}\n", crate::render::server_down_text(event)),
            };
            vec![s::SessionUpdate::AgentThoughtChunk(
                s::ContentChunk::new(text.into()).meta(meta),
            )]
        }
        // [F2]: a gate that fails closed is news the person must see, so
        // a visible message, not a thought.
        Event::GuardDown { .. } | Event::GuardUp { .. } => {
            let text = format!("[sprout] {}\n", crate::render::guard_text(event));
            vec![s::SessionUpdate::AgentMessageChunk(
                s::ContentChunk::new(text.into()).meta(meta_of(event)),
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
            return Err(super::session::explained(
                acp::Error::internal_error(),
                detail,
            ));
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

    // Two start-up warnings in a row are two lines, not one run together.
    #[test]
    fn each_warning_is_a_line_of_its_own() {
        let warning = Event::Warning(hooks_core::Warning::UnknownAllowlistEntry {
            name: "nope".into(),
        });
        let updates = hook_updates(&warning);
        let [s::SessionUpdate::AgentThoughtChunk(chunk)] = updates.as_slice() else {
            panic!("one thought");
        };
        let s::ContentBlock::Text(text) = &chunk.content else {
            panic!("text");
        };
        assert!(text.text.starts_with("[sprout] warning: "), "{}", text.text);
        assert!(text.text.ends_with('\n'), "{:?}", text.text);
    }

    /// `update` as a whole notification line, parsed.
    fn ours(update: &impl Serialize) -> Value {
        let session = s::SessionId::new("s-1");
        let line = serde_json::to_string(&Notification {
            jsonrpc: "2.0",
            method: "session/update",
            params: Params {
                session_id: &session,
                update,
            },
        })
        .unwrap();
        assert_eq!(line.matches("\"_meta\"").count(), 1, "{line}");
        serde_json::from_str(&line).unwrap()
    }

    /// `update` as the SDK's own types write the notification.
    fn sdks(update: s::SessionUpdate) -> Value {
        let notification = s::SessionNotification::new(s::SessionId::new("s-1"), update);
        json!({"jsonrpc": "2.0", "method": "session/update", "params": notification})
    }

    /// A round's `_meta` as the SDK's types take it.
    fn meta(event: Option<&RawValue>, events: &[Box<RawValue>]) -> serde_json::Map<String, Value> {
        let mut meta = serde_json::Map::new();
        if let Some(event) = event {
            meta.insert(
                "sprout/event".into(),
                serde_json::from_str(event.get()).unwrap(),
            );
        }
        let events: Vec<Value> = events
            .iter()
            .map(|e| serde_json::from_str(e.get()).unwrap())
            .collect();
        meta.insert("sprout/events".into(), events.into());
        meta
    }

    // Our lines are what the SDK's types would write, for each of the four
    // shapes a hook round's tool call takes (created completed, announced in
    // progress, updated in progress, completed after it was announced),
    // with the round's events in `_meta` once; other updates' own `_meta`
    // is left as it is.
    #[test]
    fn our_lines_are_the_sdks_notifications() {
        let events: Vec<Box<RawValue>> = [
            r#"{"event":"round_started","round":1}"#,
            r#"{"event":"hook_called","round":1}"#,
            r#"{"event":"decided","round":1}"#,
        ]
        .iter()
        .map(|e| RawValue::from_string((*e).to_owned()).unwrap())
        .collect();
        let server = |n: &str| ServerName::new(n).unwrap();
        let view = RoundView {
            title: "_Stop hook: asking a, b".into(),
            hook: hooks_core::HookPoint::Stop,
            servers: vec![server("a"), server("b")],
            lines: vec![
                "a: empty (0 ms)".into(),
                "b: text (1 ms)\nwait \"x\"".into(),
            ],
            events,
            announced: false,
            dirty: false,
            due: Instant::now(),
        };
        let decision = hooks_core::PolicyDecision::PromptEnded {
            reason: EndReason::NoObjection,
        };
        let id = || s::ToolCallId::new("sprout-hook-round-7");
        let content =
            || -> Vec<s::ToolCallContent> { view.lines.iter().map(|l| l.clone().into()).collect() };
        let input = json!({"hook": "_Stop", "servers": ["a", "b"]});
        let decided = view.events.last().map(|e| &**e);
        let call = |status| {
            s::ToolCall::new(id(), view.title.clone())
                .kind(s::ToolKind::Think)
                .status(status)
                .raw_input(input.clone())
                .content(content())
        };
        // Created completed: a fast round.
        let fast = RoundCall {
            decision: Some(&decision),
            ..RoundCall::of(7, &view)
        };
        let sdk = call(s::ToolCallStatus::Completed)
            .raw_output(serde_json::to_value(&decision).unwrap())
            .meta(meta(decided, &view.events));
        assert_eq!(ours(&fast), sdks(s::SessionUpdate::ToolCall(sdk)));
        assert_eq!(
            ours(&fast)["params"]["update"]["_meta"]["sprout/events"][2]["event"],
            "decided"
        );
        // Announced in progress, after a window.
        let sdk = call(s::ToolCallStatus::InProgress).meta(meta(None, &view.events));
        assert_eq!(
            ours(&RoundCall::of(7, &view)),
            sdks(s::SessionUpdate::ToolCall(sdk))
        );
        // New lines of a round in progress; then its end.
        let update = |fields: s::ToolCallUpdateFields, event| {
            sdks(s::SessionUpdate::ToolCallUpdate(
                s::ToolCallUpdate::new(id(), fields).meta(meta(event, &view.events)),
            ))
        };
        let progress = RoundCall {
            announce: false,
            ..RoundCall::of(7, &view)
        };
        let fields = s::ToolCallUpdateFields::new().content(content());
        assert_eq!(ours(&progress), update(fields, None));
        let end = RoundCall {
            announce: false,
            decision: Some(&decision),
            ..RoundCall::of(7, &view)
        };
        let fields = s::ToolCallUpdateFields::new()
            .status(s::ToolCallStatus::Completed)
            .content(content())
            .raw_output(serde_json::to_value(&decision).unwrap());
        assert_eq!(ours(&end), update(fields, decided));
        // Announced before any server answered: no lines yet.
        let empty = RoundView {
            lines: Vec::new(),
            events: view.events[..1].to_vec(),
            ..view
        };
        let sdk = s::ToolCall::new(id(), empty.title.clone())
            .kind(s::ToolKind::Think)
            .status(s::ToolCallStatus::InProgress)
            .raw_input(input.clone())
            .meta(meta(None, &empty.events));
        assert_eq!(
            ours(&RoundCall::of(7, &empty)),
            sdks(s::SessionUpdate::ToolCall(sdk))
        );
        // Another update, with its own `_meta`, as the SDK writes it.
        let thought = s::SessionUpdate::AgentThoughtChunk(
            s::ContentChunk::new("[sprout] warning".to_owned().into())
                .meta(meta_of(&json!({"event": "warning"}))),
        );
        assert_eq!(ours(&thought), sdks(thought));
    }

    /// Feeds `event` to `sink` as the loop would.
    fn feed(sink: &agent_loop::Sink, event: Event) {
        let event = AgentEvent::Hook(event);
        sink(&agent_loop::Emitted::new(&event));
    }

    /// Lets `time` pass, then every task that can run, run.
    async fn pass(time: std::time::Duration) {
        tokio::time::advance(time).await;
        settle().await;
    }

    /// Lets every task that can run, run.
    async fn settle() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    // Two rounds of one session, in virtual time: a fast one (decided in
    // 50 ms) is one message, created completed; a slow one that starts just
    // after it is shown a window after its own start, not at the window of
    // the round before it (one watcher serves both), then updated once a
    // window while it has new lines, then completed. The watcher ends with
    // the sink.
    #[tokio::test(start_paused = true)]
    async fn one_watcher_shows_each_slow_round_a_window_after_it_starts() {
        use hooks_core::{HookPoint, Outcome, PolicyDecision, RoundId, Time};
        let (stdout, reader) = tokio::io::duplex(1 << 20);
        let out = Out::start(stdout, super::super::framing::Bounds::default());
        let updates = UpdateSink::new(out.clone(), s::SessionId::new("s-1"));
        updates.release();
        let sink = updates.clone().into_sink();
        let lines = Arc::new(Mutex::new(Vec::<Value>::new()));
        let reading = {
            let lines = lines.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncBufReadExt;
                let mut reader = tokio::io::BufReader::new(reader).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    lines
                        .lock()
                        .unwrap()
                        .push(serde_json::from_str(&line).unwrap());
                }
            })
        };
        let of_round = |round: u64| -> Vec<Value> {
            let id = format!("sprout-hook-round-{round}");
            lines
                .lock()
                .unwrap()
                .iter()
                .map(|l| l["params"]["update"].clone())
                .filter(|u| u["toolCallId"] == id.as_str())
                .collect()
        };
        let server = ServerName::new("gate").unwrap();
        let start = |round: u64| Event::RoundStarted {
            round: RoundId(round),
            hook: HookPoint::Stop,
            servers: vec![server.clone()],
            left_out: vec![],
            deadline: Time::from_millis(60_000),
        };
        let decided = |round: u64| Event::Decided {
            round: Some(RoundId(round)),
            decision: PolicyDecision::PromptEnded {
                reason: EndReason::Declined,
            },
        };
        let ms = |n: u64| std::time::Duration::from_millis(n);

        feed(&sink, start(1));
        tokio::time::advance(ms(50)).await;
        feed(&sink, decided(1));
        tokio::time::advance(ms(10)).await;
        feed(&sink, start(2));
        // 150 ms: the first round's window is past, the second's is not.
        pass(ms(90)).await;
        let first = of_round(1);
        assert_eq!(first.len(), 1, "{first:#?}");
        assert_eq!(first[0]["sessionUpdate"], "tool_call");
        assert_eq!(first[0]["status"], "completed");
        assert_eq!(of_round(2).len(), 0, "shown before its own window");
        // 170 ms: shown, in progress.
        pass(ms(20)).await;
        let second = of_round(2);
        assert_eq!(second.len(), 1, "{second:#?}");
        assert_eq!(second[0]["sessionUpdate"], "tool_call");
        assert_eq!(second[0]["status"], "in_progress");
        // A server answers at 180 ms: its line waits until a window has
        // passed since the last message (the watcher showed the round when
        // it woke, at 170 ms at the latest), and a window with nothing new
        // sends nothing.
        feed(
            &sink,
            Event::HookCalled {
                round: RoundId(2),
                hook: HookPoint::Stop,
                server: server.clone(),
                outcome: Outcome::Empty,
                latency: ms(120),
            },
        );
        pass(ms(80)).await;
        assert_eq!(of_round(2).len(), 1, "updated before a window passed");
        pass(ms(30)).await;
        let second = of_round(2);
        assert_eq!(second.len(), 2, "{second:#?}");
        assert_eq!(second[1]["sessionUpdate"], "tool_call_update");
        assert!(second[1]["content"].to_string().contains("gate: "));
        pass(ms(300)).await;
        assert_eq!(of_round(2).len(), 2, "nothing new, nothing sent");
        feed(&sink, decided(2));
        settle().await;
        let second = of_round(2);
        assert_eq!(second.len(), 3, "{second:#?}");
        assert_eq!(second[2]["status"], "completed");
        // The watcher goes with the sink.
        let watcher = lock(&updates.watcher).clone().unwrap();
        drop((sink, updates));
        settle().await;
        assert!(watcher.is_finished());
        assert!(out.finish(std::time::Duration::from_secs(1)).await);
        drop(out);
        reading.await.unwrap();
    }
}
