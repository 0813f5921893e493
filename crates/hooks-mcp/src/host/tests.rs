//! [`Host`] in virtual time: hook rounds on [`ToolServer`]s served in this
//! process over in-memory pipes (through the real `Guarded` transport,
//! handshake and watcher), under tokio's paused clock, so every deadline is
//! asserted to the millisecond \[T1\]-\[T5\].
//!
//! Paused time jumps to the next timer whenever the runtime is idle; that is
//! why these tests use no process and no socket, and why sleeping in them is
//! a way of saying "at this virtual time", not a wait for something.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hooks_core::{
    AskError, DownCause, EndReason, Event, HookConfig, HookPoint, Outcome, ServerId, ServerName,
    ServerState, StopReason, Time, TurnVerdict,
};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Connector, EventSink, Host, HostOptions};
use crate::reply::ToolOutput;
use crate::server::{ToolServer, any_object_schema};
use crate::spec::ServerSpec;

/// The hook deadline of every test: `SPROUT_AGENT_HOOK_TIMEOUT_MS=1000`.
const HOOK_TIMEOUT_MS: u64 = 1000;

/// What a scripted `_Stop` hook does on one call.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Answers this text at once.
    Answer(&'static str),
    /// Never answers; reports when its call is cancelled.
    Hang,
    /// Reports when its call is cancelled, then answers `text` anyway,
    /// `late` after that.
    HangThenAnswer { late: Duration, text: &'static str },
}

/// What a hook handler saw, at what virtual time since the test began.
#[derive(Debug, PartialEq)]
enum Seen {
    Cancelled { server: String, at: Duration },
    AnsweredLate { server: String, at: Duration },
}

/// A host on in-process servers, with what they and the host reported.
struct Fixture {
    host: Host,
    t0: Instant,
    events: Arc<Mutex<Vec<Event>>>,
    seen: mpsc::UnboundedReceiver<Seen>,
    /// Starts per server (calls of the factory).
    starts: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl Fixture {
    /// Servers in configuration order, each with a `ping` model tool and a
    /// `_Stop` hook that follows its script, then hangs; the script is shared
    /// by the server's restarts.
    async fn start(servers: &[(&str, Vec<Act>)]) -> Fixture {
        Fixture::resume(servers, &hooks_core::Carried::default()).await
    }

    /// As [`Fixture::start`], continuing a session that carried `carried`.
    async fn resume(servers: &[(&str, Vec<Act>)], carried: &hooks_core::Carried) -> Fixture {
        let t0 = Instant::now();
        let (tx, seen) = mpsc::unbounded_channel();
        let scripts: BTreeMap<String, Arc<Mutex<VecDeque<Act>>>> = servers
            .iter()
            .map(|(name, acts)| (name.to_string(), Arc::new(Mutex::new(acts.clone().into()))))
            .collect();
        let starts = Arc::new(Mutex::new(BTreeMap::new()));
        let counted = starts.clone();
        let make = move |name: &ServerName| {
            let name = name.to_string();
            *counted.lock().unwrap().entry(name.clone()).or_insert(0) += 1;
            hook_server(name.clone(), scripts[&name].clone(), tx.clone(), t0)
        };
        // The command is never run: the in-process connector builds the
        // server from its name.
        let specs = servers
            .iter()
            .map(|(name, _)| ServerSpec::stdio(ServerName::new(*name).unwrap(), "unused", vec![]))
            .collect();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sunk = events.clone();
        let sink: EventSink = Arc::new(move |event: Event| sunk.lock().unwrap().push(event));
        let timeout = HOOK_TIMEOUT_MS.to_string();
        let config = HookConfig::from_values(Some("*"), Some(&timeout), None).unwrap();
        let connector = Connector::InProcess(Arc::new(make));
        let host = Host::start_with(
            specs,
            config,
            carried,
            HostOptions::default(),
            sink,
            connector,
        )
        .await
        .unwrap();
        Fixture {
            host,
            t0,
            events,
            seen,
            starts,
        }
    }

    /// Runs one prompt whose model ends its turn at once: its `_Stop` round.
    async fn stop_round(&mut self, cancel: &CancellationToken) -> Result<TurnVerdict, AskError> {
        self.host.begin_prompt().unwrap();
        self.host.end_turn(StopReason::EndTurn, 0, "", cancel).await
    }

    /// The next thing a hook handler saw. A report that never comes fails
    /// the test (after an hour of virtual time) instead of hanging it.
    async fn next_seen(&mut self) -> Seen {
        tokio::time::timeout(Duration::from_secs(3600), self.seen.recv())
            .await
            .expect("a hook handler should have reported")
            .expect("the handlers' channel is open")
    }

    /// Sleeps until `ms` of virtual time since the test began.
    async fn until(&self, ms: u64) {
        tokio::time::sleep_until(self.t0 + Duration::from_millis(ms)).await;
    }

    fn starts(&self, server: &str) -> usize {
        self.starts
            .lock()
            .unwrap()
            .get(server)
            .copied()
            .unwrap_or(0)
    }

    fn event_count(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    /// Every `HookCalled` so far: server, outcome, latency.
    fn hook_calls(&self) -> Vec<(String, Outcome, Duration)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|event| match event {
                Event::HookCalled {
                    server,
                    outcome,
                    latency,
                    ..
                } => Some((server.to_string(), outcome.clone(), *latency)),
                _ => None,
            })
            .collect()
    }

    /// Every `ServerDown` so far: cause, failures, retry time.
    fn downs(&self) -> Vec<(DownCause, u32, Option<Time>)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|event| match event {
                Event::ServerDown {
                    cause,
                    failures,
                    retry_at,
                    ..
                } => Some((cause.clone(), *failures, *retry_at)),
                _ => None,
            })
            .collect()
    }
}

fn hook_server(
    name: String,
    script: Arc<Mutex<VecDeque<Act>>>,
    seen: mpsc::UnboundedSender<Seen>,
    t0: Instant,
) -> ToolServer {
    let ping = Tool::new("ping", "Answers pong.", any_object_schema());
    ToolServer::new(name.clone())
        .tool(ping, |_args, _cancel| async {
            Ok(CallToolResult::success(vec![ContentBlock::text("pong")]))
        })
        .hook(HookPoint::Stop, "Follows its script.", move |cancel| {
            let act = script.lock().unwrap().pop_front().unwrap_or(Act::Hang);
            let (server, seen) = (name.clone(), seen.clone());
            async move {
                let late = match act {
                    Act::Answer(text) => return text.to_owned(),
                    Act::Hang => None,
                    Act::HangThenAnswer { late, text } => Some((late, text)),
                };
                cancel.cancelled().await;
                let at = t0.elapsed();
                let _ = seen.send(Seen::Cancelled {
                    server: server.clone(),
                    at,
                });
                let Some((late, text)) = late else {
                    return String::new();
                };
                tokio::time::sleep(late).await;
                let at = t0.elapsed();
                let _ = seen.send(Seen::AnsweredLate { server, at });
                text.to_owned()
            }
        })
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

const NO_OBJECTION: Result<TurnVerdict, AskError> = Ok(TurnVerdict::End {
    reason: EndReason::NoObjection,
});

// [T1]: three hooks that never answer cost one deadline, not three: the
// round is decided at exactly 1000 ms of virtual time, every call timed out
// with a latency of exactly 1000 ms, and every handler saw its call
// cancelled then [T2].
#[tokio::test(start_paused = true)]
async fn t1_a_round_of_hanging_hooks_costs_one_deadline() {
    let mut f = Fixture::start(&[("a", vec![]), ("b", vec![]), ("c", vec![])]).await;
    // Starting in process takes no virtual time.
    assert_eq!(f.host.now(), Time::ZERO);

    let decision = f.stop_round(&CancellationToken::new()).await;

    assert_eq!(decision, NO_OBJECTION);
    assert_eq!(f.host.now(), Time::from_millis(HOOK_TIMEOUT_MS));
    assert_eq!(f.t0.elapsed(), ms(HOOK_TIMEOUT_MS));
    assert_eq!(
        f.hook_calls(),
        ["a", "b", "c"].map(|s| (s.to_owned(), Outcome::Timeout, ms(HOOK_TIMEOUT_MS)))
    );
    let mut cancelled = Vec::new();
    for _ in 0..3 {
        cancelled.push(f.next_seen().await);
    }
    cancelled.sort_by_key(|seen| format!("{seen:?}"));
    assert_eq!(
        cancelled,
        ["a", "b", "c"].map(|s| Seen::Cancelled {
            server: s.to_owned(),
            at: ms(HOOK_TIMEOUT_MS),
        })
    );
    f.host.shutdown().await;
}

// [T2]: a timed-out call is cancelled on the wire (its handler sees its token
// fire at exactly the deadline), and the answer it gives 200 ms later is
// dropped: the decision was made at the deadline, no event follows, no
// budget is charged, and the next round does not see it.
#[tokio::test(start_paused = true)]
async fn t2_a_timed_out_call_is_cancelled_and_its_late_answer_dropped() {
    let script = vec![
        Act::HangThenAnswer {
            late: ms(200),
            text: "too late: an objection",
        },
        Act::Answer(""),
    ];
    let mut f = Fixture::start(&[("late", script)]).await;

    let decision = f.stop_round(&CancellationToken::new()).await;
    assert_eq!(decision, NO_OBJECTION);
    assert_eq!(f.host.now(), Time::from_millis(HOOK_TIMEOUT_MS));
    let events_at_decision = f.event_count();
    assert_eq!(
        f.next_seen().await,
        Seen::Cancelled {
            server: "late".into(),
            at: ms(HOOK_TIMEOUT_MS),
        }
    );
    assert_eq!(
        f.next_seen().await,
        Seen::AnsweredLate {
            server: "late".into(),
            at: ms(HOOK_TIMEOUT_MS + 200),
        }
    );
    // Nothing changed after the decision.
    assert_eq!(f.event_count(), events_at_decision);
    assert_eq!(f.host.session().budget_used(), 0);

    // The next round gets only its own answer, at once: the late objection
    // was not kept for it.
    let decision = f.stop_round(&CancellationToken::new()).await;
    assert_eq!(decision, NO_OBJECTION);
    assert_eq!(f.host.now(), Time::from_millis(HOOK_TIMEOUT_MS + 200));
    assert_eq!(
        f.hook_calls(),
        [
            ("late".to_owned(), Outcome::Timeout, ms(HOOK_TIMEOUT_MS)),
            ("late".to_owned(), Outcome::Empty, Duration::ZERO),
        ]
    );
    assert_eq!(f.host.session().budget_used(), 0);
    f.host.shutdown().await;
}

// [T3], [T4]: a server whose hook hangs is killed at its second consecutive
// timeout; it is restarted lazily (only when wanted, and not before its
// backoff of 250 ms, then 500 ms, has passed) and retired at its third
// failure, after which it is never started again.
#[tokio::test(start_paused = true)]
async fn t3_t4_second_timeout_kills_restarts_back_off_and_retire() {
    let mut f = Fixture::start(&[("slow", vec![])]).await;
    let slow = ServerId(0);
    let cancel = CancellationToken::new();

    // [T3]: the first timeout cancels the call; the server stays up.
    assert_eq!(f.stop_round(&cancel).await, NO_OBJECTION);
    assert_eq!(f.host.now(), Time::from_millis(1000));
    assert_eq!(f.host.session().server_state(slow), ServerState::Up);
    // The second in a row kills it.
    assert_eq!(f.stop_round(&cancel).await, NO_OBJECTION);
    assert_eq!(f.host.now(), Time::from_millis(2000));
    let retry_at = Time::from_millis(2250);
    assert_eq!(
        f.host.session().server_state(slow),
        ServerState::Down { retry_at }
    );
    for at in [1000, 2000] {
        assert_eq!(
            f.next_seen().await,
            Seen::Cancelled {
                server: "slow".into(),
                at: ms(at),
            }
        );
    }
    assert_eq!(
        f.hook_calls().into_iter().map(|c| c.1).collect::<Vec<_>>(),
        [Outcome::Timeout, Outcome::Killed]
    );

    // [T4]: not restarted before its backoff; a tool call is told when.
    f.until(2249).await;
    let refused = f.host.prepare_tool_call("slow__ping", &cancel).await;
    assert_eq!(
        refused.unwrap_err(),
        ToolOutput::error(
            "tool server slow is not running (it is down; a restart is tried in 1ms); try again later"
        )
    );
    // Nor when the backoff ends with nothing wanting it: restarts are lazy.
    f.until(2250).await;
    let offered: Vec<String> = f.host.model_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(offered, ["slow__ping"]);
    assert_eq!(f.starts("slow"), 1);
    // Wanted at 2250 ms: restarted then, and up at once.
    let call = f
        .host
        .prepare_tool_call("slow__ping", &cancel)
        .await
        .unwrap();
    assert_eq!(f.starts("slow"), 2);
    assert_eq!(f.host.now(), Time::from_millis(2250));
    assert_eq!(
        call.run(JsonObject::new(), ms(1000)).await.text,
        "pong".to_owned()
    );

    // Killed again: the backoff doubles to 500 ms.
    assert_eq!(f.stop_round(&cancel).await, NO_OBJECTION);
    assert_eq!(f.stop_round(&cancel).await, NO_OBJECTION);
    assert_eq!(f.host.now(), Time::from_millis(4250));
    assert_eq!(
        f.host.session().server_state(slow),
        ServerState::Down {
            retry_at: Time::from_millis(4750)
        }
    );
    f.until(4749).await;
    let refused = f.host.prepare_tool_call("slow__ping", &cancel).await;
    assert_eq!(
        refused.unwrap_err(),
        ToolOutput::error(
            "tool server slow is not running (it is down; a restart is tried in 1ms); try again later"
        )
    );
    f.until(4750).await;
    f.host
        .prepare_tool_call("slow__ping", &cancel)
        .await
        .unwrap();
    assert_eq!(f.starts("slow"), 3);

    // Killed a third time: retired, its tools gone.
    assert_eq!(f.stop_round(&cancel).await, NO_OBJECTION);
    assert_eq!(f.stop_round(&cancel).await, NO_OBJECTION);
    assert_eq!(f.host.now(), Time::from_millis(6750));
    assert_eq!(f.host.session().server_state(slow), ServerState::Retired);
    assert_eq!(
        f.downs(),
        [
            (DownCause::Killed, 1, Some(Time::from_millis(2250))),
            (DownCause::Killed, 2, Some(Time::from_millis(4750))),
            (DownCause::Killed, 3, None),
        ]
    );
    for at in [3250, 4250, 5750, 6750] {
        assert_eq!(
            f.next_seen().await,
            Seen::Cancelled {
                server: "slow".into(),
                at: ms(at),
            }
        );
    }
    f.until(60_000).await;
    let refused = f.host.prepare_tool_call("slow__ping", &cancel).await;
    assert_eq!(
        refused.unwrap_err(),
        ToolOutput::error("unknown tool: slow__ping")
    );
    assert!(f.host.model_tools().is_empty());
    // Nobody is left to ask: no round, the end says so [S5]; it is not
    // started again.
    assert_eq!(
        f.stop_round(&cancel).await,
        Ok(TurnVerdict::End {
            reason: EndReason::NoStopHook
        })
    );
    assert_eq!(f.host.now(), Time::from_millis(60_000));
    assert_eq!(f.starts("slow"), 3);
    f.host.shutdown().await;
}

// [T5]: cancelling the prompt 300 ms into a round ends it at once: the
// decision comes at exactly 300 ms of virtual time (0 ms after the
// cancellation, well within 100 ms), the call is reported cancelled with
// that latency, and the server's handler sees its call cancelled then too.
// [T4]: a host that continues a saved session gets the failure counts
// before anything starts: `spent`, at the limit, is never started (one
// event says why) and its tools are not offered; `worn`, with 2 of 3, has
// one more try: killed once, it stays down; `fresh`, not carried, starts
// with none.
#[tokio::test(start_paused = true)]
async fn t4_a_resumed_host_starts_no_server_that_used_its_failures() {
    let name = |n: &str| ServerName::new(n).unwrap();
    let carried = hooks_core::Carried {
        budget_used: 0,
        rounds: 0,
        failures: vec![(name("spent"), 3), (name("worn"), 2)],
    };
    let mut f = Fixture::resume(
        &[
            ("spent", vec![]),
            ("worn", vec![Act::Hang]),
            ("fresh", vec![Act::Answer("")]),
        ],
        &carried,
    )
    .await;
    assert_eq!(
        (f.starts("spent"), f.starts("worn"), f.starts("fresh")),
        (0, 1, 1)
    );
    let spent = f.host.session().server_id("spent").unwrap();
    let worn = f.host.session().server_id("worn").unwrap();
    assert_eq!(f.host.session().server_state(spent), ServerState::Retired);
    assert_eq!(f.downs(), [(DownCause::BeforeResume, 3, None)]);
    let tools: Vec<String> = f.host.model_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(tools, ["worn__ping", "fresh__ping"]);
    let cancel = CancellationToken::new();
    assert_eq!(f.stop_round(&cancel).await, NO_OBJECTION);
    assert_eq!(f.stop_round(&cancel).await, NO_OBJECTION);
    assert_eq!(f.host.session().server_state(worn), ServerState::Retired);
    assert_eq!(
        f.downs(),
        [
            (DownCause::BeforeResume, 3, None),
            (DownCause::Killed, 3, None)
        ]
    );
    f.until(60_000).await;
    for tool in ["spent__ping", "worn__ping"] {
        let refused = f.host.prepare_tool_call(tool, &cancel).await;
        assert_eq!(
            refused.unwrap_err(),
            ToolOutput::error(format!("unknown tool: {tool}"))
        );
    }
    assert_eq!((f.starts("spent"), f.starts("worn")), (0, 1));
    let carried = f.host.session().carried();
    assert_eq!(carried.failures, [(name("spent"), 3), (name("worn"), 3)]);
    f.host.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn t5_cancelling_the_prompt_ends_a_round_at_once() {
    let mut f = Fixture::start(&[("hang", vec![])]).await;
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let t0 = f.t0;
    tokio::spawn(async move {
        tokio::time::sleep_until(t0 + ms(300)).await;
        canceller.cancel();
    });

    let decision = f.stop_round(&cancel).await;

    assert_eq!(decision, Err(AskError::Cancelled));
    assert_eq!(f.host.now(), Time::from_millis(300));
    assert_eq!(
        f.hook_calls(),
        [("hang".to_owned(), Outcome::Cancelled, ms(300))]
    );
    assert_eq!(
        f.next_seen().await,
        Seen::Cancelled {
            server: "hang".into(),
            at: ms(300),
        }
    );
    f.host.shutdown().await;
}

/// A host on the given in-process servers (each built afresh on every start),
/// with `SPROUT_AGENT_HOOK_TIMEOUT_MS=1000`, and the events it reported.
async fn host_on(servers: Vec<(ServerSpec, ToolServer)>) -> (Host, Arc<Mutex<Vec<Event>>>) {
    let specs = servers.iter().map(|(spec, _)| spec.clone()).collect();
    let made: BTreeMap<String, ToolServer> = servers
        .into_iter()
        .map(|(spec, server)| (spec.name.to_string(), server))
        .collect();
    let make = move |name: &ServerName| made[name.as_str()].clone();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sunk = events.clone();
    let sink: EventSink = Arc::new(move |event: Event| sunk.lock().unwrap().push(event));
    let timeout = HOOK_TIMEOUT_MS.to_string();
    let config = HookConfig::from_values(Some("*"), Some(&timeout), None).unwrap();
    let connector = Connector::InProcess(Arc::new(make));
    let fresh = hooks_core::Carried::default();
    let host = Host::start_with(
        specs,
        config,
        &fresh,
        HostOptions::default(),
        sink,
        connector,
    )
    .await
    .unwrap();
    (host, events)
}

/// A spec for an in-process server, with its own hook timeout if any [C4].
fn spec(name: &str, hook_timeout_ms: Option<u64>) -> ServerSpec {
    let mut spec = ServerSpec::stdio(ServerName::new(name).unwrap(), "unused", vec![]);
    spec.hook_timeout = hook_timeout_ms.map(|ms| hooks_core::HookTimeout::from_millis(ms).unwrap());
    spec
}

/// A server whose `hook` never answers (until its call is cancelled).
fn hanging(name: &str, hook: HookPoint) -> ToolServer {
    ToolServer::new(name).hook(hook, "Never answers.", |cancel| async move {
        cancel.cancelled().await;
        String::new()
    })
}

/// `(server, outcome, latency)` of every hook call in `events`.
fn calls_in(events: &Mutex<Vec<Event>>) -> Vec<(String, Outcome, Duration)> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|event| match event {
            Event::HookCalled {
                server,
                outcome,
                latency,
                ..
            } => Some((server.to_string(), outcome.clone(), *latency)),
            _ => None,
        })
        .collect()
}

// [E3], [K1]: a non-empty `_PreToolUse` answer refuses that one call, with the
// envelope the model will read; an empty answer (here, another server's)
// lets a call run. The hook asked for `tool` and `arguments` in its schema
// and got exactly those, no more.
#[tokio::test(start_paused = true)]
async fn e3_a_non_empty_pre_tool_use_answer_refuses_that_call() {
    let seen: Arc<Mutex<Vec<JsonObject>>> = Arc::default();
    let kept = seen.clone();
    let mut schema = any_object_schema();
    schema.insert(
        "properties".into(),
        serde_json::json!({"tool": {"type": "string"}, "arguments": {"type": "object"}, "x": {}}),
    );
    let guard = ToolServer::new("guard")
        .tool(
            Tool::new("push", "Pushes.", any_object_schema()),
            |_args, _cancel| async { Ok(CallToolResult::success(vec![ContentBlock::text("ok")])) },
        )
        .tool(
            Tool::new("_PreToolUse", "No pushes.", schema),
            move |args, _cancel| {
                let refuse = args.get("tool") == Some(&"push".into());
                kept.lock().unwrap().push(args);
                async move {
                    let text = if refuse {
                        "no git push while the suite is red"
                    } else {
                        ""
                    };
                    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
                }
            },
        );
    let quiet = ToolServer::new("quiet").hook(HookPoint::PreToolUse, "Says nothing.", |_| async {
        String::new()
    });
    let (mut host, events) = host_on(vec![
        (spec("guard", None), guard),
        (spec("quiet", None), quiet),
    ])
    .await;
    host.begin_prompt().unwrap();
    let guard_id = ServerId(0);
    let calls = vec![
        hooks_core::ToolUse {
            server: guard_id,
            tool: "ping".into(),
            arguments: serde_json::json!({}),
        },
        hooks_core::ToolUse {
            server: guard_id,
            tool: "push".into(),
            arguments: serde_json::json!({"force": true}),
        },
    ];
    let gates = host
        .tools_requested(calls, &CancellationToken::new())
        .await
        .unwrap();

    let refusal = hooks_core::HookText::new(
        HookPoint::PreToolUse,
        &ServerName::new("guard").unwrap(),
        "no git push while the suite is red",
    );
    assert_eq!(
        gates,
        [
            hooks_core::ToolGate::Run,
            hooks_core::ToolGate::Refused {
                refusals: vec![refusal]
            }
        ]
    );
    assert_eq!(host.now(), Time::ZERO);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by_key(|args| args["tool"].to_string());
    assert_eq!(
        seen,
        [
            serde_json::json!({"tool": "ping", "arguments": {}}),
            serde_json::json!({"tool": "push", "arguments": {"force": true}}),
        ]
        .map(|v| v.as_object().unwrap().clone())
    );
    assert_eq!(calls_in(&events).len(), 4, "two servers, two calls each");
    host.shutdown().await;
}

// [E6]: `_SessionEnd` never waits past 1 s, whatever the server's own
// deadline (5 s here), and a server with a shorter one (300 ms) keeps it;
// after it, the session takes no more prompts.
#[tokio::test(start_paused = true)]
async fn e6_session_end_never_waits_past_one_second() {
    let (mut host, events) = host_on(vec![
        (
            spec("patient", Some(5000)),
            hanging("patient", HookPoint::SessionEnd),
        ),
        (
            spec("brisk", Some(300)),
            hanging("brisk", HookPoint::SessionEnd),
        ),
    ])
    .await;
    host.begin_prompt().unwrap();
    // A prompt left running is ended first.
    host.session_end(hooks_core::SessionEndReason::Exit)
        .await
        .unwrap();
    assert_eq!(host.now(), Time::from_millis(1000));
    let mut calls = calls_in(&events);
    calls.sort_by_key(|c| c.2);
    assert_eq!(
        calls,
        [
            ("brisk".to_owned(), Outcome::Timeout, ms(300)),
            ("patient".to_owned(), Outcome::Timeout, ms(1000)),
        ]
    );
    assert_eq!(
        host.begin_prompt(),
        Err(hooks_core::UsageError::SessionEnded)
    );
    host.shutdown().await;
}

// [C4], [T1]: each server's calls have its own deadline: 200 ms for one,
// 3000 ms for the other (the session's is 1000 ms); the round ends at the
// later one.
#[tokio::test(start_paused = true)]
async fn c4_each_server_has_its_own_hook_deadline() {
    let (mut host, events) = host_on(vec![
        (spec("quick", Some(200)), hanging("quick", HookPoint::Stop)),
        (spec("slow", Some(3000)), hanging("slow", HookPoint::Stop)),
        (spec("plain", None), hanging("plain", HookPoint::Stop)),
    ])
    .await;
    assert_eq!(host.session().hook_timeout(ServerId(0)).duration(), ms(200));
    host.begin_prompt().unwrap();
    let verdict = host
        .end_turn(StopReason::EndTurn, 0, "done", &CancellationToken::new())
        .await;
    assert_eq!(verdict, NO_OBJECTION);
    assert_eq!(host.now(), Time::from_millis(3000));
    let mut calls = calls_in(&events);
    calls.sort_by_key(|c| c.2);
    assert_eq!(
        calls,
        [
            ("quick".to_owned(), Outcome::Timeout, ms(200)),
            ("plain".to_owned(), Outcome::Timeout, ms(1000)),
            ("slow".to_owned(), Outcome::Timeout, ms(3000)),
        ]
    );
    host.shutdown().await;
}
