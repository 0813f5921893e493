//! What the core reports: the events of \[O1\], and the reasons of \[S5\].
//!
//! Events are data for people and machines: the CLI prints them, `--json`
//! serialises them, and both read the same values \[O2\]. Each reads back from
//! its JSON (`Deserialize`) into the value that wrote it, durations to the
//! microsecond, so a consumer of the stream has the same types. They never
//! steer the loop; the answers to its questions ([`crate::TurnVerdict`], …)
//! do.

use crate::prelude::*;

use core::fmt;
use core::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::answer::Outcome;
use crate::catalog::Warning;
use crate::name::{HookPoint, ServerName};
use crate::time::Time;

/// Why the model says it stopped, mapped by the provider adapter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model finished its turn: the only gated reason \[S1\].
    EndTurn,
    /// The model asked for tools.
    ToolUse,
    /// The output limit was hit.
    MaxTokens,
    /// The model refused.
    Refusal,
    /// A content filter stopped the output.
    ContentFilter,
    /// Anything else the provider said, verbatim.
    Other(String),
}

impl StopReason {
    /// The reason as a snake_case word.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::Refusal => "refusal",
            StopReason::ContentFilter => "content_filter",
            StopReason::Other(other) => other,
        }
    }

    /// The reason a snake_case word names: the inverse of
    /// [`StopReason::as_str`]. Anthropic's `stop_reason` and the script
    /// model's `stop` use these words; any other word is kept as
    /// [`StopReason::Other`].
    pub fn from_word(word: &str) -> StopReason {
        match word {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            "refusal" => StopReason::Refusal,
            "content_filter" => StopReason::ContentFilter,
            other => StopReason::Other(other.to_owned()),
        }
    }
}

/// Why a prompt ended \[S5\]. Every prompt ends with exactly one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// `_Stop` was called and nobody objected.
    NoObjection,
    /// Hooks are off \[A1\]: `_Stop` was not called.
    HooksOff,
    /// The session's `_Stop` budget is spent (or is 0) \[S3\].
    BudgetSpent,
    /// The model ended again right after an objection \[S2\].
    Declined,
    /// Hooks are on, but no allowlisted server that is up lists `_Stop`:
    /// nobody could object \[S5\], \[E7\].
    NoStopHook,
    /// The model stopped for a reason that is never gated \[S1\].
    Model(StopReason),
    /// The person cancelled the prompt \[T5\].
    Cancelled,
    /// The loop's round limit was reached.
    MaxRounds,
    /// The loop failed (the model API, say); the loop reports the detail.
    /// Events and the CLI name it `error`.
    Failed,
}

impl EndReason {
    /// The reason as events and the CLI name it.
    pub fn as_str(&self) -> &str {
        match self {
            EndReason::NoObjection => "no_objection",
            EndReason::HooksOff => "hooks_off",
            EndReason::BudgetSpent => "budget_spent",
            EndReason::Declined => "declined",
            EndReason::NoStopHook => "no_stop_hook",
            EndReason::Model(stop) => stop.as_str(),
            EndReason::Cancelled => "cancelled",
            EndReason::MaxRounds => "max_rounds",
            EndReason::Failed => "error",
        }
    }

    /// The reason a word of [`EndReason::as_str`] names: its inverse, but
    /// for a model's stop word that is one of our own words (a provider that
    /// says `cancelled`), which reads as ours.
    pub fn from_word(word: &str) -> EndReason {
        match word {
            "no_objection" => EndReason::NoObjection,
            "hooks_off" => EndReason::HooksOff,
            "budget_spent" => EndReason::BudgetSpent,
            "declined" => EndReason::Declined,
            "no_stop_hook" => EndReason::NoStopHook,
            "cancelled" => EndReason::Cancelled,
            "max_rounds" => EndReason::MaxRounds,
            "error" => EndReason::Failed,
            stop => EndReason::Model(StopReason::from_word(stop)),
        }
    }

    /// Whether this reason means the prompt ended normally (for exit codes):
    /// the model finished. A cut-off, refused or filtered answer, a
    /// cancellation, the round limit and a failure are not normal ends.
    pub fn is_normal(&self) -> bool {
        match self {
            EndReason::NoObjection
            | EndReason::HooksOff
            | EndReason::BudgetSpent
            | EndReason::Declined
            | EndReason::NoStopHook => true,
            EndReason::Model(stop) => !matches!(
                stop,
                StopReason::MaxTokens | StopReason::Refusal | StopReason::ContentFilter
            ),
            EndReason::Cancelled | EndReason::MaxRounds | EndReason::Failed => false,
        }
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for EndReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Reads the word [`EndReason::as_str`] writes ([`EndReason::from_word`]).
impl<'de> Deserialize<'de> for EndReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(EndReason::from_word(&String::deserialize(deserializer)?))
    }
}

/// Why a session ends, as `_SessionEnd`'s `reason` gives it \[E6\], \[K2\].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionEndReason {
    /// The run is over and the agent exits.
    Exit,
    /// The client closed the session (ACP `session/close`).
    Closed,
    /// The client went away.
    Disconnected,
    /// A signal ends the agent.
    Signal,
}

impl SessionEndReason {
    /// The reason as the hook input names it.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEndReason::Exit => "exit",
            SessionEndReason::Closed => "closed",
            SessionEndReason::Disconnected => "disconnected",
            SessionEndReason::Signal => "signal",
        }
    }
}

impl fmt::Display for SessionEndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A hook round's sequence number in the session, from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RoundId(pub u64);

impl fmt::Display for RoundId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a server went down.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "cause", content = "detail")]
pub enum DownCause {
    /// Killed after its second consecutive hook timeout \[T3\].
    Killed,
    /// Its process or session ended on its own.
    Crashed(String),
    /// It did not start (spawn, initialize or listing failed).
    StartFailed(String),
    /// It reached its failure limit before the session was resumed in this
    /// process, so it is not started again \[T4\] ([`crate::Session::resume`]).
    BeforeResume,
}

/// One policy decision, with its reason \[O1\].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum PolicyDecision {
    /// At least one `_Stop` objection: the loop goes on \[S4\].
    ObjectionHonoured {
        /// The servers that objected, in configuration order.
        servers: Vec<ServerName>,
        /// Objected end-of-turns so far in the session, this one included.
        budget_used: u32,
        /// The session's budget.
        budget: u32,
    },
    /// `_PostCompact` answers to inject (possibly none) \[P2\].
    Reinject {
        /// The servers whose text is injected, in configuration order.
        servers: Vec<ServerName>,
    },
    /// The prompt ends \[S5\].
    PromptEnded {
        /// Why.
        reason: EndReason,
    },
    /// Answers of `_SessionStart`, `_UserPromptSubmit`, `_PreCompact` (pins)
    /// or `_PostToolUse` to add (possibly none) \[E1\], \[E2\], \[E4\], \[E5\].
    Inject {
        /// The hook point.
        hook: HookPoint,
        /// The servers whose text is added, in the order it is added.
        servers: Vec<ServerName>,
    },
    /// `_PreToolUse` decided the tool calls of a turn \[E3\].
    ToolsGated {
        /// How many calls were asked about.
        asked: usize,
        /// The positions (from 0, in the order asked) of the refused ones.
        refused: Vec<usize>,
    },
    /// `_SessionEnd` was told; its answers are ignored \[E6\].
    SessionEnded {
        /// Why the session ends.
        reason: SessionEndReason,
    },
}

/// Everything the core reports \[O1\].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A hook round began.
    RoundStarted {
        /// Its number.
        round: RoundId,
        /// Its hook point.
        hook: HookPoint,
        /// The servers called, in configuration order. Empty only when every
        /// server asked is a required gate left out, whose answer the agent
        /// writes \[F1\]: such a round is decided at once.
        servers: Vec<ServerName>,
        /// Allowlisted servers listing the hook that were left out because they
        /// are down \[T4\] (or never came up). A required gate among them
        /// fails closed \[F1\].
        left_out: Vec<ServerName>,
        /// When every call's deadline falls \[T1\].
        #[serde(serialize_with = "ser_time_ms", deserialize_with = "de_time_ms")]
        deadline: Time,
    },
    /// One hook call ended \[O1\].
    HookCalled {
        /// Its round.
        round: RoundId,
        /// Its hook point.
        hook: HookPoint,
        /// Its server.
        server: ServerName,
        /// How it ended.
        #[serde(flatten)]
        outcome: Outcome,
        /// From the call to its outcome.
        #[serde(
            rename = "latency_ms",
            serialize_with = "ser_duration_ms",
            deserialize_with = "de_duration_ms"
        )]
        latency: Duration,
    },
    /// A policy decision \[O1\].
    Decided {
        /// The round it ended, if a round was run.
        round: Option<RoundId>,
        /// What was decided.
        #[serde(flatten)]
        decision: PolicyDecision,
    },
    /// A server went down.
    ServerDown {
        /// The server.
        server: ServerName,
        /// Why.
        #[serde(flatten)]
        cause: DownCause,
        /// Kills, crashes and failed starts so far in the session \[T4\].
        failures: u32,
        /// When a restart may be tried, or `None` when it is retired for the
        /// session.
        #[serde(
            serialize_with = "ser_opt_time_ms",
            deserialize_with = "de_opt_time_ms"
        )]
        retry_at: Option<Time>,
    },
    /// A server is being (re)started.
    ServerStarting {
        /// The server.
        server: ServerName,
        /// 1 for the first start, 2 for the first restart, and so on.
        attempt: u32,
    },
    /// A server is up and its tools are listed.
    ServerUp {
        /// The server.
        server: ServerName,
        /// How many tools the model is offered from it.
        model_tools: usize,
        /// The hook points it lists.
        hooks: Vec<HookPoint>,
    },
    /// A configuration or listing warning.
    Warning(Warning),
    /// A required gate went down \[F2\]: killed, crashed, failed to start
    /// (or restart), or retired. Right after its [`Event::ServerDown`], for
    /// every such failure, so the person hears at once that a gate they
    /// require is not guarding (the shells show it, and send it to an ACP
    /// client as a visible message). While it is down its hook calls fail
    /// closed \[F1\].
    GuardDown {
        /// The server.
        server: ServerName,
        /// Why.
        #[serde(flatten)]
        cause: DownCause,
        /// Whether it is off for the rest of the session \[T4\]; else it is
        /// restarted on its next use.
        retired: bool,
    },
    /// A required gate that was reported down ([`Event::GuardDown`]) is up
    /// again, right after its [`Event::ServerUp`] \[F2\].
    GuardUp {
        /// The server.
        server: ServerName,
    },
}

/// How every duration in the event stream is written, the core's and the
/// loop's (`#[serde(serialize_with = "…")]`): milliseconds as a number with
/// microsecond resolution, since a local hook answers in well under a
/// millisecond.
pub fn ser_duration_ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_micros() as f64 / 1000.0)
}

fn ser_time_ms<S: Serializer>(t: &Time, s: S) -> Result<S::Ok, S::Error> {
    ser_duration_ms(&t.since_epoch(), s)
}

fn ser_opt_time_ms<S: Serializer>(t: &Option<Time>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_time_ms(t, s),
        None => s.serialize_none(),
    }
}

/// Reads what [`ser_duration_ms`] writes (`#[serde(deserialize_with =
/// "…")]`), to the microsecond: the same duration, but for nanoseconds below
/// a microsecond, which the stream does not carry. A negative or non-finite
/// number is an error.
pub fn de_duration_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let ms = f64::deserialize(d)?;
    if !(ms.is_finite() && ms >= 0.0) {
        return Err(serde::de::Error::custom(format!(
            "{ms} is not a duration in milliseconds"
        )));
    }
    // Rounded to the nearest microsecond (`as` saturates; `f64::round` is
    // not in `core`).
    Ok(Duration::from_micros((ms * 1000.0 + 0.5) as u64))
}

fn de_time_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
    de_duration_ms(d).map(Time::from_epoch)
}

fn de_opt_time_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    #[derive(Deserialize)]
    struct Ms(#[serde(deserialize_with = "de_time_ms")] Time);
    Ok(Option::<Ms>::deserialize(d)?.map(|Ms(t)| t))
}

#[cfg(test)]
mod tests {
    use super::*;

    // from_word is as_str's inverse, and keeps unknown words.
    #[test]
    fn stop_words_round_trip() {
        for reason in [
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxTokens,
            StopReason::Refusal,
            StopReason::ContentFilter,
            StopReason::Other("pause_turn".into()),
        ] {
            assert_eq!(StopReason::from_word(reason.as_str()), reason);
        }
    }

    fn json(event: &Event) -> String {
        serde_json::to_string(event).unwrap()
    }

    // [O1]: a hook call event carries hook, server, outcome, latency and round.
    #[test]
    fn hook_call_events_serialise_flat_o1() {
        let event = Event::HookCalled {
            round: RoundId(3),
            hook: HookPoint::Stop,
            server: ServerName::new("todo").unwrap(),
            outcome: Outcome::Objection {
                text: "1 open".into(),
            },
            latency: Duration::from_micros(1234),
        };
        assert_eq!(
            json(&event),
            r#"{"event":"hook_called","round":3,"hook":"_Stop","server":"todo","outcome":"objection","text":"1 open","latency_ms":1.234}"#
        );
    }

    // [S5], [O1]: every decision carries its reason.
    #[test]
    fn decisions_serialise_with_reasons_s5() {
        let ended = Event::Decided {
            round: None,
            decision: PolicyDecision::PromptEnded {
                reason: EndReason::Declined,
            },
        };
        assert_eq!(
            json(&ended),
            r#"{"event":"decided","round":null,"decision":"prompt_ended","reason":"declined"}"#
        );
        let model = EndReason::Model(StopReason::Other("pause_turn".into()));
        assert_eq!(model.as_str(), "pause_turn");
        assert!(model.is_normal());
        assert!(!EndReason::Model(StopReason::MaxTokens).is_normal());
        assert!(!EndReason::Cancelled.is_normal());
    }

    // [O2]: every kind of event reads back from its JSON as the value that
    // wrote it, so the stream carries all an event holds.
    #[test]
    fn events_read_back_from_their_json() {
        use crate::answer::ErrorKind;
        use crate::name::ModelNameProblem;
        let s = ServerName::new("todo").unwrap();
        let us = Duration::from_micros;
        let mut events = vec![
            Event::RoundStarted {
                round: RoundId(1),
                hook: HookPoint::PostCompact,
                servers: vec![s.clone()],
                left_out: vec![ServerName::new("gate").unwrap()],
                deadline: Time::from_epoch(us(2_500_001)),
            },
            Event::ServerDown {
                server: s.clone(),
                cause: DownCause::Crashed("exit 1".into()),
                failures: 2,
                retry_at: Some(Time::from_millis(450)),
            },
            Event::ServerDown {
                server: s.clone(),
                cause: DownCause::Killed,
                failures: 3,
                retry_at: None,
            },
            Event::ServerStarting {
                server: s.clone(),
                attempt: 2,
            },
            Event::ServerUp {
                server: s.clone(),
                model_tools: 1,
                hooks: HookPoint::ALL.to_vec(),
            },
            Event::Warning(Warning::ToolNotOffered {
                server: s.clone(),
                tool: "a b".into(),
                problem: ModelNameProblem::BadCharacter { character: ' ' },
            }),
            Event::Warning(Warning::UnknownHook {
                server: s.clone(),
                tool: "_stop".into(),
                did_you_mean: Some(HookPoint::Stop),
            }),
            Event::Warning(Warning::RequiredNotAllowlisted { server: s.clone() }),
            Event::GuardDown {
                server: s.clone(),
                cause: DownCause::StartFailed("spawn: no such file".into()),
                retired: false,
            },
            Event::GuardDown {
                server: s.clone(),
                cause: DownCause::BeforeResume,
                retired: true,
            },
            Event::GuardUp { server: s.clone() },
        ];
        let outcomes = [
            Outcome::Objection { text: "1".into() },
            Outcome::Injection { text: "2".into() },
            Outcome::Ignored { text: "3".into() },
            Outcome::Empty,
            Outcome::Error {
                kind: ErrorKind::Rpc,
                detail: "-32601: no".into(),
            },
            Outcome::Timeout,
            Outcome::Killed,
            Outcome::Crashed,
            Outcome::Cancelled,
        ];
        for (i, outcome) in outcomes.into_iter().enumerate() {
            events.push(Event::HookCalled {
                round: RoundId(7),
                hook: HookPoint::Stop,
                server: s.clone(),
                outcome,
                latency: us(1_234_567 * i as u64),
            });
        }
        let decisions = [
            PolicyDecision::ObjectionHonoured {
                servers: vec![s.clone()],
                budget_used: 1,
                budget: 3,
            },
            PolicyDecision::Reinject { servers: vec![] },
            PolicyDecision::PromptEnded {
                reason: EndReason::Model(StopReason::Other("pause_turn".into())),
            },
            PolicyDecision::PromptEnded {
                reason: EndReason::Failed,
            },
            PolicyDecision::Inject {
                hook: HookPoint::SessionStart,
                servers: vec![s.clone()],
            },
            PolicyDecision::ToolsGated {
                asked: 2,
                refused: vec![1],
            },
            PolicyDecision::SessionEnded {
                reason: SessionEndReason::Signal,
            },
        ];
        for decision in decisions {
            events.push(Event::Decided {
                round: Some(RoundId(2)),
                decision,
            });
        }
        for event in events {
            let line = json(&event);
            let back: Event = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert_eq!(back, event, "{line}");
        }
    }

    // Bad values in the stream are errors that say what is wrong.
    #[test]
    fn bad_event_json_is_refused_with_a_reason() {
        let bad = |line: &str| serde_json::from_str::<Event>(line).unwrap_err().to_string();
        let e = bad(r#"{"event":"server_starting","server":"a__b","attempt":1}"#);
        assert!(e.contains("invalid MCP server name \"a__b\""), "{e}");
        let e = bad(
            r#"{"event":"hook_called","round":1,"hook":"_Nope","server":"s","outcome":"empty","latency_ms":1}"#,
        );
        assert!(e.contains("\"_Nope\" is not a hook point"), "{e}");
        let e = bad(
            r#"{"event":"hook_called","round":1,"hook":"_Stop","server":"s","outcome":"empty","latency_ms":-1}"#,
        );
        assert!(e.contains("-1 is not a duration in milliseconds"), "{e}");
    }

    #[test]
    fn end_reasons_read_back_from_their_words() {
        for reason in [
            EndReason::NoObjection,
            EndReason::HooksOff,
            EndReason::BudgetSpent,
            EndReason::Declined,
            EndReason::NoStopHook,
            EndReason::Model(StopReason::EndTurn),
            EndReason::Model(StopReason::MaxTokens),
            EndReason::Model(StopReason::Other("pause_turn".into())),
            EndReason::Cancelled,
            EndReason::MaxRounds,
            EndReason::Failed,
        ] {
            assert_eq!(EndReason::from_word(reason.as_str()), reason);
        }
    }

    // [F2]: guard events name the server and, going down, why and whether
    // it is off for good, in the shape of `server_down`.
    #[test]
    fn guard_events_serialise_f2() {
        let s = ServerName::new("gate").unwrap();
        let down = Event::GuardDown {
            server: s.clone(),
            cause: DownCause::Crashed("exit status 1".into()),
            retired: false,
        };
        assert_eq!(
            json(&down),
            r#"{"event":"guard_down","server":"gate","cause":"crashed","detail":"exit status 1","retired":false}"#
        );
        let killed = Event::GuardDown {
            server: s.clone(),
            cause: DownCause::Killed,
            retired: true,
        };
        assert_eq!(
            json(&killed),
            r#"{"event":"guard_down","server":"gate","cause":"killed","retired":true}"#
        );
        assert_eq!(
            json(&Event::GuardUp { server: s }),
            r#"{"event":"guard_up","server":"gate"}"#
        );
    }

    #[test]
    fn server_down_serialises_cause_and_retry() {
        let event = Event::ServerDown {
            server: ServerName::new("s").unwrap(),
            cause: DownCause::Killed,
            failures: 3,
            retry_at: None,
        };
        assert_eq!(
            json(&event),
            r#"{"event":"server_down","server":"s","cause":"killed","failures":3,"retry_at":null}"#
        );
    }
}
