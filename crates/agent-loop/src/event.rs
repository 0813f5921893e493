//! The loop's event stream \[O1\], \[O2\]: one stream, shown to a person by the
//! CLI and written as JSON Lines by `--json`. A line of the stream reads back
//! (`Deserialize`) as the event that wrote it, durations to the microsecond.

use std::time::Duration;

use hooks_core::EndReason;
use serde::{Deserialize, Serialize};

/// Something the agent did or saw.
// `remote = "Self"`: the derives write inherent functions for the loop's own
// events, which the trait impls below call; a core event is written and read
// as the core's own (by its tag, so a bad line's error is the one of its
// kind).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A prompt began.
    PromptStarted {
        /// The prompt text.
        prompt: String,
    },
    /// A request goes to the model.
    ModelRequest {
        /// The loop round, from 1.
        round: u32,
        /// Messages in the request.
        messages: usize,
        /// Tools offered.
        tools: usize,
        /// The estimated input size in tokens.
        estimated_tokens: u64,
    },
    /// The model answered.
    ModelResponse {
        /// The loop round.
        round: u32,
        /// Its stop reason, as mapped.
        stop: String,
        /// Tool calls it made.
        tool_calls: usize,
        /// Input tokens, as the provider reported.
        input_tokens: Option<u64>,
        /// Output tokens, as the provider reported.
        output_tokens: Option<u64>,
        /// How long the request took, retries included.
        #[serde(
            rename = "latency_ms",
            serialize_with = "hooks_core::event::ser_duration_ms",
            deserialize_with = "hooks_core::event::de_duration_ms"
        )]
        latency: Duration,
    },
    /// A piece of the model's text as it arrived, from a model that streams
    /// (`text_delta`). A round's pieces, in order, make its `AssistantText`,
    /// which still follows them once the answer is whole.
    TextDelta {
        /// The piece.
        text: String,
    },
    /// The model's text.
    AssistantText {
        /// The text.
        text: String,
    },
    /// The model called a tool.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments, as written.
        arguments: String,
    },
    /// A tool call finished.
    ToolResult {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// The result text (capped by the host).
        text: String,
        /// How long it took.
        #[serde(
            rename = "latency_ms",
            serialize_with = "hooks_core::event::ser_duration_ms",
            deserialize_with = "hooks_core::event::de_duration_ms"
        )]
        latency: Duration,
    },
    /// Hook text was injected as a synthetic call/result pair \[I1\].
    Injected {
        /// `_Stop` or `_PostCompact`.
        hook: String,
        /// The answering server.
        server: String,
        /// The synthetic call's tool name.
        tool_name: String,
        /// The envelope \[I2\].
        content: String,
    },
    /// The history was compacted.
    Compacted {
        /// A summary or a truncation.
        kind: CompactionKind,
        /// Messages removed.
        removed: usize,
        /// Messages before.
        before: usize,
        /// Messages after (before any re-injection).
        after: usize,
        /// Why a summary was not used, if it was not.
        note: Option<String>,
    },
    /// The prompt ended \[S5\].
    PromptEnded {
        /// Why.
        reason: EndReason,
        /// Detail for `error` and similar ends.
        detail: Option<String>,
        /// Model rounds in this prompt.
        rounds: u32,
    },
    /// A tool call waits for the person's approval \[U4\] \[U7\].
    ApprovalAsked {
        /// The call's id.
        id: String,
        /// The tool, as the model named it.
        name: String,
    },
    /// A tool call's approval was decided \[U7\]: by a rule, an earlier
    /// answer, the person, or nobody.
    ApprovalAnswered {
        /// The call's id.
        id: String,
        /// The tool, as the model named it.
        name: String,
        /// Who decided.
        by: crate::DecidedBy,
        /// Whether the call runs.
        allowed: bool,
        /// For the session (`session`) or for good (`always`), beside once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        /// The reason of a denial, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A hook or policy event from the core \[O1\], serialised as the core's
    /// own event (its names do not clash with the loop's).
    #[serde(skip)]
    Hook(hooks_core::Event),
}

/// The `event` tags of the loop's own events; every other tag is the core's.
const OWN_EVENTS: [&str; 12] = [
    "prompt_started",
    "model_request",
    "model_response",
    "text_delta",
    "assistant_text",
    "tool_call",
    "tool_result",
    "injected",
    "compacted",
    "prompt_ended",
    "approval_asked",
    "approval_answered",
];

impl Serialize for AgentEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AgentEvent::Hook(event) => event.serialize(serializer),
            own => AgentEvent::serialize(own, serializer),
        }
    }
}

/// Reads a line of the stream: an event of the loop by its tag, any other as
/// the core's ([`AgentEvent::Hook`]), with the error of that kind of event.
impl<'de> Deserialize<'de> for AgentEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        let own = value
            .get("event")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|tag| OWN_EVENTS.contains(&tag));
        if own {
            AgentEvent::deserialize(value).map_err(D::Error::custom)
        } else {
            hooks_core::Event::deserialize(value)
                .map(AgentEvent::Hook)
                .map_err(D::Error::custom)
        }
    }
}

/// How the history was compacted (`summary` or `truncation` in the
/// stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionKind {
    /// A summary of the history replaced it.
    Summary,
    /// The oldest messages were dropped.
    Truncation,
}

impl CompactionKind {
    /// The kind as the stream names it.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionKind::Summary => "summary",
            CompactionKind::Truncation => "truncation",
        }
    }
}

impl std::fmt::Display for CompactionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the loop sends its events.
pub type Sink = std::sync::Arc<dyn Fn(&Emitted<'_>) + Send + Sync>;

/// An event on its way through the sinks, with its JSON made at most once
/// for all of them: the transcript, `--json` and the `_meta` of a hook
/// round's ACP update each write the same text, and a sink that passes the event on (as
/// [`Transcript::tee`](crate::transcript::Transcript::tee) does) passes the JSON with it.
/// Reads as the event itself ([`Deref`](std::ops::Deref)).
pub struct Emitted<'a> {
    event: &'a AgentEvent,
    json: std::cell::OnceCell<Result<Box<serde_json::value::RawValue>, String>>,
}

impl<'a> Emitted<'a> {
    /// `event`, its JSON not made yet.
    pub fn new(event: &'a AgentEvent) -> Emitted<'a> {
        Emitted {
            event,
            json: std::cell::OnceCell::new(),
        }
    }

    /// The event.
    pub fn event(&self) -> &'a AgentEvent {
        self.event
    }

    /// The event as one line of JSON (no newline), as `--json` writes it and
    /// a transcript's event record holds it: made on the first call, the
    /// same text after. An error names why it could not be made.
    pub fn json(&self) -> Result<&serde_json::value::RawValue, &str> {
        self.json
            .get_or_init(|| {
                #[cfg(test)]
                MADE.with(|made| made.set(made.get() + 1));
                serde_json::value::to_raw_value(self.event).map_err(|e| e.to_string())
            })
            .as_deref()
            .map_err(String::as_str)
    }
}

#[cfg(test)]
thread_local! {
    /// How many events' JSON this thread made, for the tests of sharing.
    pub(crate) static MADE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl std::ops::Deref for Emitted<'_> {
    type Target = AgentEvent;

    fn deref(&self) -> &AgentEvent {
        self.event
    }
}

impl std::fmt::Debug for Emitted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.event.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // [O2]: each of the loop's own events, and a core event inside the
    // stream, reads back from its line as the event that wrote it.
    #[test]
    fn events_read_back_from_their_json() {
        let us = Duration::from_micros;
        let events = [
            AgentEvent::PromptStarted {
                prompt: "go \u{1b}".into(),
            },
            AgentEvent::ModelRequest {
                round: 1,
                messages: 2,
                tools: 3,
                estimated_tokens: 4,
            },
            AgentEvent::ModelResponse {
                round: 1,
                stop: "end_turn".into(),
                tool_calls: 0,
                input_tokens: Some(5),
                output_tokens: None,
                latency: us(12_345_678),
            },
            AgentEvent::TextDelta { text: "pi".into() },
            AgentEvent::AssistantText { text: "pie".into() },
            AgentEvent::ToolCall {
                id: "1".into(),
                name: "t__a".into(),
                arguments: "{}".into(),
            },
            AgentEvent::ToolResult {
                id: "1".into(),
                name: "t__a".into(),
                is_error: true,
                text: "no".into(),
                latency: us(999),
            },
            AgentEvent::Injected {
                hook: "_Stop".into(),
                server: "todo".into(),
                tool_name: "todo___Stop".into(),
                content: "{}".into(),
            },
            AgentEvent::Compacted {
                kind: CompactionKind::Truncation,
                removed: 3,
                before: 5,
                after: 2,
                note: Some("no summary".into()),
            },
            AgentEvent::PromptEnded {
                reason: EndReason::Cancelled,
                detail: None,
                rounds: 2,
            },
            AgentEvent::ApprovalAsked {
                id: "1".into(),
                name: "t__a".into(),
            },
            AgentEvent::ApprovalAnswered {
                id: "1".into(),
                name: "t__a".into(),
                by: crate::DecidedBy::Person,
                allowed: false,
                scope: Some("session".into()),
                reason: Some("not now".into()),
            },
            AgentEvent::ApprovalAnswered {
                id: "2".into(),
                name: "t__a".into(),
                by: crate::DecidedBy::Rule,
                allowed: true,
                scope: None,
                reason: None,
            },
            AgentEvent::Hook(hooks_core::Event::ServerStarting {
                server: hooks_core::ServerName::new("todo").unwrap(),
                attempt: 1,
            }),
        ];
        for event in events {
            let line = serde_json::to_string(&event).unwrap();
            let back: AgentEvent =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert_eq!(back, event, "{line}");
        }
        // A core event is written flat, as the core writes it.
        let core = hooks_core::Event::ServerStarting {
            server: hooks_core::ServerName::new("todo").unwrap(),
            attempt: 2,
        };
        assert_eq!(
            serde_json::to_string(&AgentEvent::Hook(core.clone())).unwrap(),
            serde_json::to_string(&core).unwrap()
        );
    }

    // A bad line's error is the one of its kind of event, not "matched no
    // variant".
    #[test]
    fn a_bad_line_says_what_is_wrong() {
        let bad = |line: &str| {
            serde_json::from_str::<AgentEvent>(line)
                .unwrap_err()
                .to_string()
        };
        let e = bad(
            r#"{"event":"compacted","kind":"magic","removed":0,"before":0,"after":0,"note":null}"#,
        );
        assert!(e.contains("unknown variant `magic`"), "{e}");
        let e = bad(r#"{"event":"tool_call","id":1,"name":"t","arguments":"{}"}"#);
        assert!(e.contains("invalid type: integer `1`"), "{e}");
        let e = bad(r#"{"event":"server_starting","server":"a__b","attempt":1}"#);
        assert!(e.contains("invalid MCP server name"), "{e}");
        let e = bad(r#"{"event":"no_such_event"}"#);
        assert!(e.contains("unknown variant `no_such_event`"), "{e}");
        let e = bad(r#"[1]"#);
        assert!(e.contains("invalid type"), "{e}");
    }
}
