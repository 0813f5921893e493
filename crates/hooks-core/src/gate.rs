//! Required gates: what the agent writes when one fails \[F1\].
//!
//! A server whose entry says `"required": true`, and that the allowlist lets
//! hook \[F3\], is a required gate. Where a hook call of any other server
//! that fails means nothing \[R3\], a required gate's failed call, or a call
//! that cannot be made because the server is not up \[T4\], counts as a
//! non-empty answer whose text the agent writes itself ([`GateFailure::text`]):
//! an objection at `_Stop`, a refusal at `_PreToolUse`, text to inject at every
//! other hook point but `_SessionEnd`, where it is nothing. An empty answer is
//! still nothing: required means "must answer", not "must object".
//!
//! Which hook points a gate that is not up fails at: those it listed when it
//! was last up (its listing is kept while it is down); a gate that never came
//! up never listed anything, so it fails at `_Stop` and `_PreToolUse`, the two
//! points that gate, and at no other.

use crate::prelude::*;

use core::fmt::Write as _;
use core::time::Duration;

use crate::answer::{ErrorKind, Outcome};
use crate::event::DownCause;
use crate::name::{HookPoint, ServerName};
use crate::session::FAILURE_LIMIT;

/// The most of a server's own words (an error's detail) a gate's text
/// quotes, in bytes.
const MAX_DETAIL_BYTES: usize = 512;

/// Why a required gate gave no answer to one hook call \[F1\].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GateFailure {
    /// The call timed out after this long \[T2\].
    TimedOut(Duration),
    /// The call timed out after this long, the server's second timeout in a
    /// row, and the server was killed \[T3\].
    Killed(Duration),
    /// The call failed: an error result, a JSON-RPC error or a transport
    /// failure \[R3\].
    Error {
        /// Which kind.
        kind: ErrorKind,
        /// What the server or the transport said.
        detail: String,
    },
    /// The server exited during the call.
    Crashed,
    /// Not called: its first start is still under way.
    Starting,
    /// Not called: the server is down after `cause`; `restarting` when a
    /// restart is under way, else one is tried after its backoff \[T4\].
    Down {
        /// What took it down.
        cause: DownCause,
        /// Whether it is restarting now.
        restarting: bool,
    },
    /// Not called: the server is off for the rest of the session after
    /// `cause`, its last failure \[T4\].
    Retired {
        /// Its last failure.
        cause: DownCause,
    },
}

impl GateFailure {
    /// The failure a call's outcome is, if it is one: a timeout, a kill, an
    /// error or a crash. `timeout` is the call's deadline from its start.
    pub(crate) fn of_outcome(outcome: &Outcome, timeout: Duration) -> Option<GateFailure> {
        match outcome {
            Outcome::Timeout => Some(GateFailure::TimedOut(timeout)),
            Outcome::Killed => Some(GateFailure::Killed(timeout)),
            Outcome::Error { kind, detail } => Some(GateFailure::Error {
                kind: *kind,
                detail: detail.clone(),
            }),
            Outcome::Crashed => Some(GateFailure::Crashed),
            Outcome::Objection { .. }
            | Outcome::Injection { .. }
            | Outcome::Ignored { .. }
            | Outcome::Empty
            | Outcome::Cancelled => None,
        }
    }

    /// The answer the agent writes for `server` at `hook` \[F1\]: which server,
    /// what went wrong, and what the agent makes of it, in one sentence in
    /// brackets (like the marker of a cut answer \[R4\]), so that nobody takes
    /// it for the server's own words.
    pub(crate) fn text(&self, server: &ServerName, hook: HookPoint) -> String {
        let called = matches!(
            self,
            GateFailure::TimedOut(_)
                | GateFailure::Killed(_)
                | GateFailure::Error { .. }
                | GateFailure::Crashed
        );
        let mut text = if called {
            format!("[sprout: required hook server {server} did not answer {hook}: ")
        } else {
            format!("[sprout: required hook server {server} could not be called for {hook}: ")
        };
        // Writing to a String cannot fail.
        let _ = match self {
            GateFailure::TimedOut(after) => {
                write!(text, "it timed out after {} ms", after.as_millis())
            }
            GateFailure::Killed(after) => write!(
                text,
                "it timed out after {} ms, its second timeout in a row, and was killed",
                after.as_millis()
            ),
            GateFailure::Error { kind, detail } => {
                let said = match kind {
                    ErrorKind::ErrorResult => "it returned an error result",
                    ErrorKind::Rpc => "it answered with a JSON-RPC error",
                    ErrorKind::Transport => "its connection failed",
                };
                text.push_str(said);
                if detail.trim().is_empty() {
                    Ok(())
                } else {
                    write!(text, ": {:?}", quoted(detail))
                }
            }
            GateFailure::Crashed => write!(text, "it exited during the call"),
            GateFailure::Starting => write!(text, "it has not started yet"),
            GateFailure::Down { cause, restarting } => {
                write_cause(&mut text, cause);
                if *restarting {
                    write!(text, " and is restarting")
                } else {
                    write!(text, " and will be restarted after its backoff")
                }
            }
            GateFailure::Retired {
                cause: DownCause::BeforeResume,
            } => write!(
                text,
                "it failed {FAILURE_LIMIT} times before the session was resumed and is off \
                 for the rest of the session"
            ),
            GateFailure::Retired { cause } => {
                write_cause(&mut text, cause);
                write!(
                    text,
                    " and, after {FAILURE_LIMIT} failures, is off for the rest of the session"
                )
            }
        };
        text.push_str(match hook {
            HookPoint::Stop => "; the agent treats that as an objection]",
            HookPoint::PreToolUse => "; the agent refuses this tool call]",
            HookPoint::SessionStart
            | HookPoint::UserPromptSubmit
            | HookPoint::PostToolUse
            | HookPoint::PreCompact
            | HookPoint::PostCompact
            | HookPoint::SessionEnd => "; this note stands in for its answer]",
        });
        text
    }
}

/// What took a server down, as the end of "it …".
fn write_cause(text: &mut String, cause: &DownCause) {
    // Writing to a String cannot fail.
    let _ = match cause {
        DownCause::Killed => write!(text, "it was killed after two hook timeouts in a row"),
        DownCause::Crashed(why) if why.trim().is_empty() => write!(text, "it exited"),
        DownCause::Crashed(why) => write!(text, "it exited ({})", quoted(why)),
        DownCause::StartFailed(why) if why.trim().is_empty() => {
            write!(text, "it failed to start")
        }
        DownCause::StartFailed(why) => write!(text, "it failed to start ({})", quoted(why)),
        DownCause::BeforeResume => write!(
            text,
            "it failed {FAILURE_LIMIT} times before the session was resumed"
        ),
    };
}

/// At most [`MAX_DETAIL_BYTES`] of `detail`, cut on a UTF-8 boundary, with
/// `…` where it was cut.
fn quoted(detail: &str) -> String {
    if detail.len() <= MAX_DETAIL_BYTES {
        return detail.to_owned();
    }
    let mut end = MAX_DETAIL_BYTES;
    while !detail.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &detail[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(failure: GateFailure, hook: HookPoint) -> String {
        failure.text(&ServerName::new("gate").unwrap(), hook)
    }

    // [F1]: each cause in its own words, naming the server and the hook, and
    // what the agent makes of it at each kind of hook point.
    #[test]
    fn each_failure_says_what_went_wrong_f1() {
        let ms = Duration::from_millis;
        let cases = [
            (
                GateFailure::TimedOut(ms(5000)),
                HookPoint::Stop,
                "[sprout: required hook server gate did not answer _Stop: it timed out after 5000 ms; the agent treats that as an objection]",
            ),
            (
                GateFailure::Killed(ms(300)),
                HookPoint::PreToolUse,
                "[sprout: required hook server gate did not answer _PreToolUse: it timed out after 300 ms, its second timeout in a row, and was killed; the agent refuses this tool call]",
            ),
            (
                GateFailure::Error {
                    kind: ErrorKind::ErrorResult,
                    detail: "no \"tests\"".into(),
                },
                HookPoint::PostCompact,
                r#"[sprout: required hook server gate did not answer _PostCompact: it returned an error result: "no \"tests\""; this note stands in for its answer]"#,
            ),
            (
                GateFailure::Error {
                    kind: ErrorKind::Rpc,
                    detail: "-32601: no such tool".into(),
                },
                HookPoint::Stop,
                r#"[sprout: required hook server gate did not answer _Stop: it answered with a JSON-RPC error: "-32601: no such tool"; the agent treats that as an objection]"#,
            ),
            (
                GateFailure::Error {
                    kind: ErrorKind::ErrorResult,
                    detail: String::new(),
                },
                HookPoint::Stop,
                "[sprout: required hook server gate did not answer _Stop: it returned an error result; the agent treats that as an objection]",
            ),
            (
                GateFailure::Error {
                    kind: ErrorKind::Transport,
                    detail: "broken pipe".into(),
                },
                HookPoint::Stop,
                r#"[sprout: required hook server gate did not answer _Stop: its connection failed: "broken pipe"; the agent treats that as an objection]"#,
            ),
            (
                GateFailure::Crashed,
                HookPoint::UserPromptSubmit,
                "[sprout: required hook server gate did not answer _UserPromptSubmit: it exited during the call; this note stands in for its answer]",
            ),
            (
                GateFailure::Starting,
                HookPoint::Stop,
                "[sprout: required hook server gate could not be called for _Stop: it has not started yet; the agent treats that as an objection]",
            ),
            (
                GateFailure::Down {
                    cause: DownCause::Crashed("exit status 1".into()),
                    restarting: false,
                },
                HookPoint::Stop,
                "[sprout: required hook server gate could not be called for _Stop: it exited (exit status 1) and will be restarted after its backoff; the agent treats that as an objection]",
            ),
            (
                GateFailure::Down {
                    cause: DownCause::StartFailed("spawn: no such file".into()),
                    restarting: true,
                },
                HookPoint::PreToolUse,
                "[sprout: required hook server gate could not be called for _PreToolUse: it failed to start (spawn: no such file) and is restarting; the agent refuses this tool call]",
            ),
            (
                GateFailure::Retired {
                    cause: DownCause::Killed,
                },
                HookPoint::Stop,
                "[sprout: required hook server gate could not be called for _Stop: it was killed after two hook timeouts in a row and, after 3 failures, is off for the rest of the session; the agent treats that as an objection]",
            ),
            (
                GateFailure::Retired {
                    cause: DownCause::BeforeResume,
                },
                HookPoint::Stop,
                "[sprout: required hook server gate could not be called for _Stop: it failed 3 times before the session was resumed and is off for the rest of the session; the agent treats that as an objection]",
            ),
        ];
        for (failure, hook, expected) in cases {
            assert_eq!(text(failure, hook), expected);
        }
    }

    // [F1]: a server's long error is quoted in part, cut on a char boundary.
    #[test]
    fn long_details_are_cut() {
        let detail = format!("{}é{}", "a".repeat(MAX_DETAIL_BYTES - 1), "b".repeat(100));
        let said = text(
            GateFailure::Error {
                kind: ErrorKind::ErrorResult,
                detail,
            },
            HookPoint::Stop,
        );
        assert!(
            said.contains(&format!("\"{}…\"", "a".repeat(MAX_DETAIL_BYTES - 1))),
            "{said}"
        );
        assert!(said.len() < MAX_DETAIL_BYTES + 200);
    }

    // [F1]: only failures are gate failures; answers and cancellations are not.
    #[test]
    fn only_failures_count_f1() {
        let t = Duration::from_millis(7);
        assert_eq!(
            GateFailure::of_outcome(&Outcome::Timeout, t),
            Some(GateFailure::TimedOut(t))
        );
        assert_eq!(
            GateFailure::of_outcome(&Outcome::Crashed, t),
            Some(GateFailure::Crashed)
        );
        for outcome in [
            Outcome::Empty,
            Outcome::Cancelled,
            Outcome::Objection { text: "x".into() },
            Outcome::Injection { text: "x".into() },
            Outcome::Ignored { text: "x".into() },
        ] {
            assert_eq!(GateFailure::of_outcome(&outcome, t), None, "{outcome:?}");
        }
    }
}
