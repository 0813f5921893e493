//! Reading a hook's answer: \[R1\]-\[R4\].
//!
//! The shell reduces whatever came back from a server to a [`HookReply`]: the
//! result's content parts, an error result, a JSON-RPC error, a transport
//! failure or a crash. Timeouts are not replies: the core decides them itself
//! from the deadlines it set. [`Outcome`] is what the core concluded, one per
//! call, as the events of \[O1\] report it.

use crate::prelude::*;

use core::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};

use crate::name::HookPoint;

/// The most text kept from one server's answer to one call, in bytes \[R4\].
pub const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// One content item of a `tools/call` result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyPart {
    /// A text item.
    Text(String),
    /// An image, audio, resource or anything else: ignored \[R1\].
    Other,
}

/// What came back from one hook call, as the shell saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookReply {
    /// A result without `isError`.
    Result(Vec<ReplyPart>),
    /// A result with `isError: true` \[R3\].
    ErrorResult(Vec<ReplyPart>),
    /// A JSON-RPC error response \[R3\].
    RpcError {
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// The request could not be sent or its answer not read \[R3\].
    TransportFailed(String),
    /// The server process died, or its session closed, during the call \[R3\].
    Crashed,
}

/// How one hook call ended: the outcome field of the \[O1\] event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// `_Stop` answered non-empty text: an objection \[S4\]. So did
    /// `_PreToolUse`: a refusal \[E3\].
    Objection {
        /// The text, capped \[R4\].
        text: String,
    },
    /// `_PreToolUse` answered non-empty text too: the call is refused \[E3\].
    /// Every other hook point but `_SessionEnd`: text to inject \[P2\],
    /// \[E1\], \[E2\], \[E4\], \[E5\].
    Injection {
        /// The text, capped \[R4\].
        text: String,
    },
    /// `_SessionEnd` answered non-empty text, which is ignored \[E6\].
    Ignored {
        /// The text, capped \[R4\].
        text: String,
    },
    /// Empty or whitespace-only text: nothing \[R2\].
    Empty,
    /// The call failed; nothing \[R3\] (from a required gate, an answer
    /// the agent writes \[F1\], as for a timeout, a kill and a crash).
    Error {
        /// Which kind of failure.
        kind: ErrorKind,
        /// What the server or transport said, capped.
        detail: String,
    },
    /// No answer by the deadline; the call was cancelled \[T2\].
    Timeout,
    /// No answer by the deadline, the server's second in a row: it was killed \[T3\].
    Killed,
    /// The server died during the call \[R3\].
    Crashed,
    /// The prompt was cancelled while the call was in flight \[T5\].
    Cancelled,
}

/// The kinds of failed call that \[R3\] keeps apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// A result with `isError: true`.
    ErrorResult,
    /// A JSON-RPC error response.
    Rpc,
    /// The transport failed.
    Transport,
}

impl Outcome {
    /// Reads `reply` to a call of `hook` \[R1\]-\[R4\].
    pub fn read(hook: HookPoint, reply: HookReply) -> Outcome {
        match reply {
            HookReply::Result(parts) => match answer_text(&parts) {
                None => Outcome::Empty,
                Some(text) => match hook {
                    HookPoint::Stop | HookPoint::PreToolUse => Outcome::Objection { text },
                    HookPoint::SessionEnd => Outcome::Ignored { text },
                    HookPoint::SessionStart
                    | HookPoint::UserPromptSubmit
                    | HookPoint::PostToolUse
                    | HookPoint::PreCompact
                    | HookPoint::PostCompact => Outcome::Injection { text },
                },
            },
            HookReply::ErrorResult(parts) => Outcome::Error {
                kind: ErrorKind::ErrorResult,
                detail: answer_text(&parts).unwrap_or_default(),
            },
            HookReply::RpcError { code, message } => Outcome::Error {
                kind: ErrorKind::Rpc,
                detail: cap(format!("{code}: {message}")),
            },
            HookReply::TransportFailed(message) => Outcome::Error {
                kind: ErrorKind::Transport,
                detail: cap(message),
            },
            HookReply::Crashed => Outcome::Crashed,
        }
    }

    /// Whether the call ran to an answer of any kind (text, error result,
    /// JSON-RPC error): such a call resets the timeout counter \[T3\].
    pub fn completed(&self) -> bool {
        match self {
            Outcome::Objection { .. }
            | Outcome::Injection { .. }
            | Outcome::Ignored { .. }
            | Outcome::Empty => true,
            Outcome::Error { kind, .. } => *kind != ErrorKind::Transport,
            Outcome::Timeout | Outcome::Killed | Outcome::Crashed | Outcome::Cancelled => false,
        }
    }

    /// The text to inject (or that refuses a tool call), if this outcome
    /// carries one; never an ignored answer's.
    pub fn text(&self) -> Option<&str> {
        match self {
            Outcome::Objection { text } | Outcome::Injection { text } => Some(text),
            _ => None,
        }
    }

    /// The outcome's name as events carry it.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Objection { .. } => "objection",
            Outcome::Injection { .. } => "injection",
            Outcome::Ignored { .. } => "ignored",
            Outcome::Empty => "empty",
            Outcome::Error { .. } => "error",
            Outcome::Timeout => "timeout",
            Outcome::Killed => "killed",
            Outcome::Crashed => "crashed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::ErrorResult => "error result",
            ErrorKind::Rpc => "JSON-RPC error",
            ErrorKind::Transport => "transport failure",
        })
    }
}

/// The answer text of a result: its text items concatenated in order \[R1\],
/// `None` when that is empty or only whitespace \[R2\], else capped \[R4\].
pub fn answer_text(parts: &[ReplyPart]) -> Option<String> {
    let mut text = String::new();
    for part in parts {
        if let ReplyPart::Text(t) = part {
            text.push_str(t);
        }
    }
    if text.trim().is_empty() {
        None
    } else {
        Some(cap(text))
    }
}

/// Cuts `text` to at most [`MAX_ANSWER_BYTES`] on a UTF-8 boundary and, if it
/// cut anything, appends a marker saying how many bytes went \[R4\].
pub fn cap(text: String) -> String {
    cut(text, MAX_ANSWER_BYTES, "hook answer")
}

/// Cuts `text` to at most `max_bytes` on a UTF-8 boundary and, if it cut
/// anything, appends a marker naming `what` and how many bytes went.
pub fn cut(mut text: String, max_bytes: usize, what: &str) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    text.truncate(end);
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "\n[sprout: {what} cut here, {cut} more bytes not shown]"
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> ReplyPart {
        ReplyPart::Text(s.to_owned())
    }

    // The label people read is the tag events carry, for every outcome.
    #[test]
    fn labels_are_the_event_tags() {
        for outcome in [
            Outcome::Objection { text: "a".into() },
            Outcome::Injection { text: "a".into() },
            Outcome::Ignored { text: "a".into() },
            Outcome::Empty,
            Outcome::Error {
                kind: ErrorKind::Transport,
                detail: "a".into(),
            },
            Outcome::Timeout,
            Outcome::Killed,
            Outcome::Crashed,
            Outcome::Cancelled,
        ] {
            let json = serde_json::to_value(&outcome).unwrap();
            assert_eq!(json["outcome"], outcome.label(), "{outcome:?}");
        }
    }

    // [R1]: text items concatenated in order, other content ignored.
    #[test]
    fn text_items_concatenate_r1() {
        let reply = HookReply::Result(vec![text("two "), ReplyPart::Other, text("open items")]);
        assert_eq!(
            Outcome::read(HookPoint::Stop, reply),
            Outcome::Objection {
                text: "two open items".into()
            }
        );
        let image_only = HookReply::Result(vec![ReplyPart::Other]);
        assert_eq!(Outcome::read(HookPoint::Stop, image_only), Outcome::Empty);
    }

    // [R2]
    #[test]
    fn empty_and_whitespace_mean_nothing_r2() {
        for parts in [
            vec![],
            vec![text("")],
            vec![text(" \n\t"), text("\u{3000}")],
        ] {
            assert_eq!(
                Outcome::read(HookPoint::PostCompact, HookReply::Result(parts)),
                Outcome::Empty
            );
        }
        assert_eq!(
            Outcome::read(HookPoint::PostCompact, HookReply::Result(vec![text(" x ")])),
            Outcome::Injection { text: " x ".into() }
        );
    }

    // [R3]: every failure means nothing, each with its own outcome.
    #[test]
    fn failures_are_distinct_and_carry_no_text_r3() {
        let outcomes = [
            Outcome::read(HookPoint::Stop, HookReply::ErrorResult(vec![text("boom")])),
            Outcome::read(
                HookPoint::Stop,
                HookReply::RpcError {
                    code: -32601,
                    message: "nope".into(),
                },
            ),
            Outcome::read(
                HookPoint::Stop,
                HookReply::TransportFailed("broken pipe".into()),
            ),
            Outcome::read(HookPoint::Stop, HookReply::Crashed),
        ];
        assert_eq!(
            outcomes,
            [
                Outcome::Error {
                    kind: ErrorKind::ErrorResult,
                    detail: "boom".into()
                },
                Outcome::Error {
                    kind: ErrorKind::Rpc,
                    detail: "-32601: nope".into()
                },
                Outcome::Error {
                    kind: ErrorKind::Transport,
                    detail: "broken pipe".into()
                },
                Outcome::Crashed,
            ]
        );
        assert!(outcomes.iter().all(|o| o.text().is_none()));
        // [T3]: error results and JSON-RPC errors are completed calls; the rest are not.
        let completed: Vec<bool> = outcomes.iter().map(Outcome::completed).collect();
        assert_eq!(completed, [true, true, false, false]);
    }

    // [R4]: capped at 16 KiB on a UTF-8 boundary, with a marker.
    #[test]
    fn long_answers_are_cut_on_a_char_boundary_r4() {
        let exact = "a".repeat(MAX_ANSWER_BYTES);
        assert_eq!(cap(exact.clone()), exact);
        // 'é' is two bytes: 16383 'a's then 'é' straddles the limit.
        let straddle = format!("{}é{}", "a".repeat(MAX_ANSWER_BYTES - 1), "b".repeat(10));
        let cut = cap(straddle);
        let (kept, marker) = cut.split_once('\n').unwrap();
        assert_eq!(kept, "a".repeat(MAX_ANSWER_BYTES - 1));
        assert_eq!(
            marker,
            "[sprout: hook answer cut here, 12 more bytes not shown]"
        );
        let huge = HookReply::Result(vec![text(&"x".repeat(1 << 20))]);
        let Outcome::Objection { text } = Outcome::read(HookPoint::Stop, huge) else {
            panic!()
        };
        assert!(text.len() < MAX_ANSWER_BYTES + 100);
        assert!(text.ends_with("1032192 more bytes not shown]"));
    }
}
