//! The loop with the hook points, against an in-memory gateway that runs the
//! real hooks-core policy.

use std::sync::Arc;

use agent_loop::CompactionSettings;
use agent_loop::{Agent, AgentEvent, AgentSettings, Message, ModelError, ModelResponse, Usage};
use hooks_core::{EndReason, StopReason};
use tokio_util::sync::CancellationToken;

use crate::support::{FakeGateway, FakeServer, Recorder, call, cancel_after, recording_sink, say};

fn todo_server(stop: Vec<Option<&'static str>>) -> FakeServer {
    FakeServer {
        name: "todo",
        tools: vec!["todo"],
        stop: Some(stop),
        post_compact: Some(vec![Some("- [ ] ship it")]),
        hooks: vec![],
    }
}

fn agent(
    model: Arc<Recorder>,
    gateway: FakeGateway,
    settings: AgentSettings,
) -> (Agent<FakeGateway>, Arc<std::sync::Mutex<Vec<AgentEvent>>>) {
    let (sink, events) = recording_sink();
    (Agent::new(model, gateway, settings, sink), events)
}

// [S4], [I1]: an objection is injected as a call/result pair and the model
// is asked again; the next end-of-turn without objection ends the prompt.
#[tokio::test]
async fn objection_continues_then_stops_s4_i1() {
    let model = Recorder::new(vec![
        say("done?"),
        call(&[("c1", "todo__todo", "{}")]),
        say("done."),
    ]);
    let gateway = FakeGateway::new(
        vec![todo_server(vec![Some("1 item open"), Some("")])],
        Some("*"),
        3,
    );
    let (mut agent, events) = agent(model.clone(), gateway, AgentSettings::default());
    let outcome = agent
        .run_prompt("build it", &CancellationToken::new())
        .await;
    assert_eq!(outcome.reason, EndReason::NoObjection);
    assert_eq!(outcome.text, "done.");
    assert_eq!(outcome.rounds, 3);
    let second = &model.requests.lock().unwrap()[1].messages;
    assert_eq!(second.len(), 4);
    let Message::Assistant { tool_calls, .. } = &second[2] else {
        panic!("{second:?}")
    };
    assert_eq!(
        (
            tool_calls[0].name.as_str(),
            tool_calls[0].arguments.as_str()
        ),
        ("todo___Stop", "{}")
    );
    let Message::ToolResult {
        content, call_id, ..
    } = &second[3]
    else {
        panic!()
    };
    assert_eq!(call_id, &tool_calls[0].id);
    assert_eq!(
        content,
        r#"{"hook":"_Stop","server":"todo","text":"1 item open"}"#
    );
    assert!(
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, AgentEvent::Injected { server, .. } if server == "todo"))
    );
}

// A model whose own call id happens to be a synthetic pair's (`sprout-1-0`,
// or twice the same in one turn) gets fresh ids: no request carries two
// calls of one id, and every result answers its own call.
#[tokio::test]
async fn a_models_call_id_never_equals_another_calls() {
    let model = Recorder::new(vec![
        say("done?"),
        call(&[
            ("sprout-1-0", "todo__todo", "{}"),
            ("sprout-1-0", "todo__todo", "{}"),
        ]),
        say("done."),
    ]);
    let gateway = FakeGateway::new(
        vec![todo_server(vec![Some("1 item open"), Some("")])],
        Some("*"),
        3,
    );
    let (mut agent, _) = agent(model.clone(), gateway, AgentSettings::default());
    let outcome = agent
        .run_prompt("build it", &CancellationToken::new())
        .await;
    assert_eq!(outcome.reason, EndReason::NoObjection);
    let last = &model.requests.lock().unwrap()[2].messages;
    let ids: Vec<&str> = last
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().map(|c| c.id.as_str()).collect()
            }
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(
        ids,
        ["sprout-1-0", "sprout-1-0-2", "sprout-1-0-3"],
        "{last:?}"
    );
    agent_loop::check_pairing(last).expect("every call has its own result");
}

// [S2]: the model ends twice in a row after an objection: declined.
#[tokio::test]
async fn model_that_declines_is_let_go_s2() {
    let model = Recorder::new(vec![say("done"), say("really done")]);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("not yet")])], Some("*"), 3);
    let (mut agent, _) = agent(model, gateway, AgentSettings::default());
    let outcome = agent.run_prompt("task", &CancellationToken::new()).await;
    assert_eq!((outcome.reason, outcome.rounds), (EndReason::Declined, 2));
}

// [S3], [S6]: a hook that always objects, and a model that keeps working:
// the budget bounds the continuations across prompts.
#[tokio::test]
async fn budget_bounds_a_nagging_hook_s3_s6() {
    let mut turns = Vec::new();
    for i in 0..10 {
        turns.push(say("finished"));
        turns.push(call(&[(&format!("c{i}"), "todo__todo", "{}")]));
    }
    let model = Recorder::new(turns);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("never done")])], Some("*"), 2);
    let (mut agent, _) = agent(model, gateway, AgentSettings::default());
    let outcome = agent.run_prompt("task", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::BudgetSpent);
    assert_eq!(
        outcome.rounds, 5,
        "two objections, each followed by a tool round, then the stop"
    );
    // The next prompt: a tool round, then an end that is honoured unasked.
    let next = agent.run_prompt("another", &CancellationToken::new()).await;
    assert_eq!((next.reason, next.rounds), (EndReason::BudgetSpent, 2));
}

// [S1]: a max-tokens stop is never gated; [A1]: hooks off.
#[tokio::test]
async fn non_gated_stops_and_hooks_off_s1_a1() {
    let truncated = ModelResponse {
        text: "cut".into(),
        tool_calls: vec![],
        stop: StopReason::MaxTokens,
        usage: None,
    };
    let model = Recorder::new(vec![truncated, say("bye")]);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("objection")])], None, 3);
    let (mut agent, _) = agent(model, gateway, AgentSettings::default());
    assert_eq!(
        agent
            .run_prompt("a", &CancellationToken::new())
            .await
            .reason,
        EndReason::Model(StopReason::MaxTokens)
    );
    assert_eq!(
        agent
            .run_prompt("b", &CancellationToken::new())
            .await
            .reason,
        EndReason::HooksOff
    );
}

// [H2], [H3]: hooks are not offered; a model call to a hook or to nothing
// gets the same error and reaches no server; results come back in call order.
#[tokio::test]
async fn hooks_are_hidden_and_refused_h2_h3() {
    let model = Recorder::new(vec![
        call(&[
            ("a", "todo___Stop", "{}"),
            ("b", "todo__todo", r#"{"x":1}"#),
            ("c", "nope__x", "{}"),
            ("d", "todo__todo", "[1]"),
        ]),
        say("ok"),
    ]);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    let executed = gateway.executed.clone();
    let (mut agent, _) = agent(model.clone(), gateway, AgentSettings::default());
    agent.run_prompt("go", &CancellationToken::new()).await;
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests[0].tools, ["todo__todo"]);
    let results: Vec<(String, String)> = requests[1]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult {
                call_id, content, ..
            } => Some((call_id.clone(), content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("a".to_string(), "unknown tool: todo___Stop".to_string()),
            ("b".to_string(), r#"ok todo {"x":1}"#.to_string()),
            ("c".to_string(), "unknown tool: nope__x".to_string()),
            (
                "d".to_string(),
                "the arguments of todo__todo must be a JSON object, not [1]".to_string()
            ),
        ]
    );
    assert_eq!(*executed.lock().unwrap(), ["todo__todo"]);
}

// The round limit ends a model that never stops calling tools.
#[tokio::test]
async fn max_rounds_ends_the_prompt() {
    let turns = (0..10)
        .map(|i| call(&[(&format!("c{i}"), "todo__todo", "{}")]))
        .collect();
    let model = Recorder::new(turns);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    let settings = AgentSettings {
        max_rounds: 4,
        ..AgentSettings::default()
    };
    let (mut agent, _) = agent(model, gateway, settings);
    let outcome = agent.run_prompt("loop", &CancellationToken::new()).await;
    assert_eq!((outcome.reason, outcome.rounds), (EndReason::MaxRounds, 4));
}

// A model error ends the prompt with `error` and says what went wrong.
#[tokio::test]
async fn model_errors_end_the_prompt_with_detail() {
    let model = Recorder::with(
        vec![Err(ModelError::Malformed("choices[0] is missing".into()))],
        None,
    );
    let gateway = FakeGateway::new(vec![], Some("*"), 3);
    let (mut agent, _) = agent(model, gateway, AgentSettings::default());
    let outcome = agent.run_prompt("x", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::Failed);
    assert_eq!(
        outcome.detail.as_deref(),
        Some("the model API's answer was malformed: choices[0] is missing")
    );
}

// Cancellation during the model call and during a tool call ends the prompt,
// leaves every call with its result, and the next prompt works. In paused
// time the cancel's 50 ms pass only once the loop is parked where it hangs,
// so the cancel lands there however slow the machine (checked below).
#[tokio::test(start_paused = true)]
async fn cancellation_at_each_await_point() {
    for hang_at in [1, 2] {
        // 1: the model call hangs; 2: the tool call hangs.
        let model = if hang_at == 1 {
            Recorder::with(vec![Ok(say("x"))], Some(1))
        } else {
            Recorder::with(
                vec![Ok(call(&[("s1", "todo__slow", "{}")])), Ok(say("x"))],
                None,
            )
        };
        let server = FakeServer {
            name: "todo",
            tools: vec!["todo", "slow"],
            stop: Some(vec![Some("")]),
            post_compact: None,
            hooks: vec![],
        };
        let gateway = FakeGateway::new(vec![server], Some("*"), 3);
        let executed = gateway.executed.clone();
        let (mut agent, _) = agent(model.clone(), gateway, AgentSettings::default());
        let cancel = cancel_after(50);
        let outcome = agent.run_prompt("work", &cancel).await;
        assert_eq!(outcome.reason, EndReason::Cancelled, "hang at {hang_at}");
        // The cancel met the stage that hangs: the model's first request, or
        // the slow tool the first answer called.
        assert_eq!(model.requests.lock().unwrap().len(), 1, "hang at {hang_at}");
        let ran: &[&str] = if hang_at == 1 { &[] } else { &["todo__slow"] };
        assert_eq!(*executed.lock().unwrap(), ran, "hang at {hang_at}");
        agent_loop::check_pairing(agent.history()).unwrap();
        let next = agent.run_prompt("again", &CancellationToken::new()).await;
        assert!(next.reason.is_normal(), "{:?}", next.reason);
    }
}

// [P1], [P2]: a compaction by summary, then _PostCompact re-injected in the
// fresh history before the next request; no budget charged [P3].
#[tokio::test]
async fn compaction_summary_then_reinjection_p1_p2() {
    let big = Usage {
        input_tokens: 900,
        output_tokens: 50,
    };
    let mut first = call(&[("c1", "todo__todo", "{}")]);
    first.usage = Some(big);
    let model = Recorder::new(vec![first, say("summary: did c1"), say("done")]);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    let settings = AgentSettings {
        compaction: CompactionSettings {
            context_window: 1000,
            threshold: 0.8,
            max_summaries: 3,
        },
        ..AgentSettings::default()
    };
    let (mut agent, events) = agent(model.clone(), gateway, settings);
    let outcome = agent
        .run_prompt("build the thing", &CancellationToken::new())
        .await;
    assert_eq!(outcome.reason, EndReason::NoObjection);
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[1].tools.is_empty(),
        "the summary request offers no tools"
    );
    let fresh = &requests[2].messages;
    assert_eq!(fresh.len(), 4, "{fresh:#?}");
    assert!(
        matches!(&fresh[0], Message::User { text } if text.contains("summary: did c1") && text.ends_with("build the thing"))
    );
    assert!(
        matches!(&fresh[1], Message::Assistant { tool_calls, .. } if tool_calls[0].name == "todo___PostCompact")
    );
    assert!(
        matches!(&fresh[2], Message::ToolResult { content, .. } if content == r#"{"hook":"_PostCompact","server":"todo","text":"- [ ] ship it"}"#)
    );
    assert_eq!(fresh[3], Message::user("build the thing"));
    // The event reports the fresh history's size before re-injection.
    assert!(events.lock().unwrap().iter().any(|e| matches!(
        e,
        AgentEvent::Compacted {
            kind: agent_loop::CompactionKind::Summary,
            after: 2,
            ..
        }
    )));
}

// [P1]: when the summary fails, truncation keeps every call with its result,
// and _PostCompact still runs.
#[tokio::test]
async fn truncation_fallback_still_runs_post_compact_p1() {
    let mut turns: Vec<Result<ModelResponse, ModelError>> = Vec::new();
    for i in 0..6 {
        let mut turn = call(&[(
            &format!("c{i}"),
            "todo__todo",
            &format!("{{\"pad\":\"{}\"}}", "p".repeat(200)),
        )]);
        turn.usage = Some(Usage {
            input_tokens: 100 + 150 * i,
            output_tokens: 10,
        });
        turns.push(Ok(turn));
    }
    turns.push(Err(ModelError::Status {
        status: 500,
        body: "summary failed".into(),
    }));
    turns.push(Ok(say("done")));
    let model = Recorder::with(turns, None);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    let settings = AgentSettings {
        compaction: CompactionSettings {
            context_window: 1000,
            threshold: 0.8,
            max_summaries: 3,
        },
        ..AgentSettings::default()
    };
    let (mut agent, events) = agent(model.clone(), gateway, settings);
    let outcome = agent.run_prompt("task", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::NoObjection);
    let events = events.lock().unwrap();
    let compacted = events.iter().find_map(|e| match e {
        AgentEvent::Compacted {
            kind,
            note,
            removed,
            after,
            ..
        } => Some((*kind, note.clone(), *removed, *after)),
        _ => None,
    });
    let (kind, note, removed, after) = compacted.expect("a compaction");
    assert_eq!(kind, agent_loop::CompactionKind::Truncation);
    assert!(note.unwrap().contains("summary request failed"));
    assert!(removed > 0);
    let last = model
        .requests
        .lock()
        .unwrap()
        .last()
        .unwrap()
        .messages
        .clone();
    assert!(
        matches!(&last[0], Message::User { text } if text.starts_with("[Earlier messages were dropped"))
    );
    assert!(last.iter().any(|m| matches!(m, Message::Assistant { tool_calls, .. } if tool_calls.iter().any(|c| c.name == "todo___PostCompact"))));
    // The event reports the fresh history's size before the one re-injected pair.
    assert_eq!(after + 2, last.len());
}

// When the provider's count passes the threshold but the history holds
// nothing that could go (a large system prompt, say), the history is left
// as it is rather than rewritten every round.
#[tokio::test]
async fn no_rewrite_when_nothing_can_be_dropped() {
    let mut first = say("short");
    first.usage = Some(Usage {
        input_tokens: 5000,
        output_tokens: 10,
    });
    let model = Recorder::with(
        vec![
            Ok(call(&[("c1", "todo__todo", "{}")])),
            Ok(first),
            Ok(say("done")),
        ],
        None,
    );
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    let settings = AgentSettings {
        system_prompt: "s".repeat(16_000),
        compaction: CompactionSettings {
            context_window: 4000,
            threshold: 0.8,
            max_summaries: 0,
        },
        ..AgentSettings::default()
    };
    let (mut agent, events) = agent(model.clone(), gateway, settings);
    let outcome = agent.run_prompt("tiny", &CancellationToken::new()).await;
    assert!(outcome.reason.is_normal(), "{outcome:?}");
    assert!(
        !events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, AgentEvent::Compacted { .. }))
    );
    assert_eq!(
        model.requests.lock().unwrap()[1].messages[0],
        Message::user("tiny")
    );
}

// A prompt left open by a caller that dropped run_prompt midway does not
// block the next one.
#[tokio::test]
async fn a_prompt_left_open_does_not_block_the_next() {
    let model = Recorder::new(vec![say("hello")]);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    let (mut agent, _) = agent(model, gateway, AgentSettings::default());
    use agent_loop::Gateway as _;
    agent.gateway_mut().begin_prompt().unwrap();
    let outcome = agent.run_prompt("next", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::NoObjection);
}

// Cancellation during a compaction's summary request ends the prompt at
// once; the history stays usable and the next prompt works. In paused time
// the cancel lands only once the summary request hangs.
#[tokio::test(start_paused = true)]
async fn cancellation_during_the_summary_request() {
    let mut first = call(&[("c1", "todo__todo", "{}")]);
    first.usage = Some(Usage {
        input_tokens: 900,
        output_tokens: 50,
    });
    // Request 2 is the summary request: it hangs until cancelled.
    let model = Recorder::with(
        vec![Ok(first), Ok(say("a summary")), Ok(say("done"))],
        Some(2),
    );
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    let settings = AgentSettings {
        compaction: CompactionSettings {
            context_window: 1000,
            threshold: 0.8,
            max_summaries: 3,
        },
        ..AgentSettings::default()
    };
    let (mut agent, _) = agent(model.clone(), gateway, settings);
    let cancel = cancel_after(50);
    let outcome = agent.run_prompt("big task", &cancel).await;
    assert_eq!(outcome.reason, EndReason::Cancelled);
    let requests = model.requests.lock().unwrap().len();
    assert_eq!(requests, 2, "the cancel came before the summary request");
    assert!(
        model.requests.lock().unwrap()[1].tools.is_empty(),
        "request 2 was the summary request"
    );
    agent_loop::check_pairing(agent.history()).unwrap();
    let next = agent.run_prompt("go on", &CancellationToken::new()).await;
    assert!(next.reason.is_normal(), "{next:?}");
}

/// The error a model API gives for a request too long for its window.
fn too_long() -> ModelError {
    ModelError::ContextOverflow {
        status: 400,
        body: "This model's maximum context length is 2048 tokens.".into(),
    }
}

// [V3]: the API's "too long" is not the prompt's failure: the history is
// compacted at once (whatever the configured window says), _PostCompact
// runs, and the same request is asked again, once; the window learnt
// stays, so the next request is compacted for before it overflows.
#[tokio::test]
async fn a_context_overflow_compacts_and_asks_again_v3() {
    let pad = "p".repeat(400);
    let mut turns: Vec<Result<ModelResponse, ModelError>> = Vec::new();
    for i in 0..4 {
        let arguments = format!("{{\"pad\":\"{pad}\"}}");
        turns.push(Ok(call(&[(&format!("c{i}"), "todo__todo", &arguments)])));
    }
    turns.push(Err(too_long()));
    turns.push(Ok(say("the summary")));
    turns.push(Ok(say("done")));
    let model = Recorder::with(turns, None);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    // The default window (128 000 tokens) is far from full.
    let (mut agent, events) = agent(model.clone(), gateway, AgentSettings::default());
    let outcome = agent.run_prompt("task", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::NoObjection, "{outcome:?}");
    assert_eq!(outcome.text, "done");
    let events = events.lock().unwrap();
    let notes: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Compacted { kind, note, .. } => {
                assert_eq!(*kind, agent_loop::CompactionKind::Summary);
                note.clone()
            }
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("too long for the model's context window"),
        "{notes:?}"
    );
    let requests = model.requests.lock().unwrap();
    // Four calls, the one too long, the summary, the same request again.
    assert_eq!(requests.len(), 7);
    let retried = &requests[6].messages;
    assert!(
        matches!(&retried[0], Message::User { text } if text.contains("the summary")),
        "{retried:?}"
    );
    assert!(retried.len() < requests[4].messages.len());
}

// [V3]: once per request: a request still too long after its compaction
// ends the prompt with the API's error, not a loop of compactions.
#[tokio::test]
async fn a_second_overflow_of_the_same_request_fails_it_v3() {
    let arguments = format!("{{\"pad\":\"{}\"}}", "p".repeat(4000));
    let turns = vec![
        Ok(call(&[("c1", "todo__todo", &arguments)])),
        Ok(call(&[("c2", "todo__todo", &arguments)])),
        Err(too_long()),
        // The calls are too large to summarise in the window learnt, so
        // the compaction truncates, and the same request is asked again.
        Err(too_long()),
        Ok(say("never asked")),
    ];
    let model = Recorder::with(turns, None);
    let gateway = FakeGateway::new(vec![todo_server(vec![Some("")])], Some("*"), 3);
    let (mut agent, _events) = agent(model.clone(), gateway, AgentSettings::default());
    let outcome = agent.run_prompt("task", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::Failed);
    assert!(
        outcome
            .detail
            .as_deref()
            .unwrap()
            .contains("context window"),
        "{outcome:?}"
    );
    // Two calls, the one too long, the same request again.
    assert_eq!(model.requests.lock().unwrap().len(), 4);
}
