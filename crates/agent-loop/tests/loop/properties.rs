//! Properties of the loop over random scripts.

use std::sync::Arc;

use agent_loop::CompactionSettings;
use agent_loop::{Agent, AgentSettings, ModelError, ModelResponse, Usage};
use hooks_core::{HookPoint, StopReason};
use proptest::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::support::{FakeGateway, FakeServer, Recorder, Records, recording_sink};

#[derive(Clone, Debug)]
enum Turn {
    End,
    Tools(Vec<u8>),
    MaxTokens,
    Fail,
    Big,
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        4 => Just(Turn::End),
        5 => proptest::collection::vec(0u8..5, 1..4).prop_map(Turn::Tools),
        1 => Just(Turn::MaxTokens),
        1 => Just(Turn::Fail),
        2 => Just(Turn::Big),
    ]
}

fn hook_answer() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        Just(None),
        Just(Some("")),
        Just(Some("  ")),
        Just(Some("objection")),
        Just(Some("more work"))
    ]
}

fn to_response(turn: &Turn, n: usize) -> Result<ModelResponse, ModelError> {
    let names = ["s__a", "s__b", "s___Stop", "x__y", "t__c"];
    Ok(match turn {
        Turn::End => ModelResponse {
            text: format!("end {n}"),
            tool_calls: vec![],
            stop: StopReason::EndTurn,
            usage: None,
        },
        Turn::Tools(ts) => ModelResponse {
            text: String::new(),
            tool_calls: ts
                .iter()
                .enumerate()
                .map(|(i, t)| agent_loop::ToolCall {
                    id: format!("c{n}-{i}"),
                    name: names[usize::from(*t)].into(),
                    arguments: "{}".into(),
                })
                .collect(),
            stop: StopReason::ToolUse,
            usage: None,
        },
        Turn::MaxTokens => ModelResponse {
            text: "cut".into(),
            tool_calls: vec![],
            stop: StopReason::MaxTokens,
            usage: None,
        },
        Turn::Fail => return Err(ModelError::Transport("connection reset".into())),
        Turn::Big => ModelResponse {
            text: "x".repeat(300),
            tool_calls: vec![agent_loop::ToolCall {
                id: format!("c{n}-big"),
                name: "s__a".into(),
                arguments: "{}".into(),
            }],
            stop: StopReason::ToolUse,
            usage: Some(Usage {
                input_tokens: 700,
                output_tokens: 100,
            }),
        },
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Whatever the model says, the hooks answer, and whenever compaction or
    /// cancellation happens (a cancel drawn at a moment of virtual time, so
    /// it lands before, during or between model requests, tool calls, hook
    /// rounds and summaries): every request the model gets has exactly one
    /// result for every tool call (the recording model checks each), the
    /// history after each prompt is paired too, every prompt ends, and the
    /// rounds it reports are exactly the model requests it made (summaries
    /// apart). Every hook point is active: `_PreToolUse` refuses some calls
    /// of a turn, and a refused call is never run, yet keeps its one result
    /// (an error holding the refusal) [E3]. The observer is told every
    /// change: its records read back as the history the agent holds, with
    /// the policy state the gateway holds.
    #[test]
    fn every_call_has_its_result_and_the_loop_ends(
        turns in proptest::collection::vec(turn(), 1..40),
        stop in proptest::collection::vec(hook_answer(), 1..6),
        post in proptest::collection::vec(hook_answer(), 1..4),
        pre_tool in proptest::collection::vec(hook_answer(), 1..6),
        others in proptest::collection::vec(hook_answer(), 1..4),
        budget in 0u32..4,
        prompts in 1usize..4,
        cancel in proptest::option::of((0usize..4, 0u64..120)),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let responses = turns.iter().enumerate().map(|(n, t)| to_response(t, n)).collect();
            // 10 ms a request in virtual time, so a cancel at 0..120 ms can
            // land anywhere in a prompt.
            let model = Recorder::slow(responses, std::time::Duration::from_millis(10));
            let servers = vec![
                FakeServer { name: "s", tools: vec!["a", "b"], stop: Some(stop.clone()), post_compact: Some(post.clone()), hooks: vec![
                    (HookPoint::PreToolUse, pre_tool.clone()),
                    (HookPoint::SessionStart, others.clone()),
                    (HookPoint::UserPromptSubmit, others.clone()),
                    (HookPoint::PostToolUse, others.clone()),
                    (HookPoint::PreCompact, others.clone()),
                    (HookPoint::SessionEnd, others.clone()),
                ] },
                FakeServer { name: "t", tools: vec!["c"], stop: Some(vec![Some("t objects"), Some("")]), post_compact: None, hooks: vec![] },
            ];
            let gateway = FakeGateway::new(servers, Some("*"), budget);
            let executed = gateway.executed.clone();
            let settings = AgentSettings {
                max_rounds: 12,
                compaction: CompactionSettings { context_window: 1000, threshold: 0.8, max_summaries: 1 },
                ..AgentSettings::default()
            };
            let (sink, _) = recording_sink();
            let records = Records::default();
            let mut agent = Agent::new(Arc::clone(&model) as Arc<dyn agent_loop::Model>, gateway, settings, sink)
                .with_observer(records.clone());
            for p in 0..prompts {
                let token = CancellationToken::new();
                if let Some((prompt, after_ms)) = cancel && prompt == p {
                    let token = token.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(std::time::Duration::from_millis(after_ms)).await;
                        token.cancel();
                    });
                }
                let before = model.requests.lock().unwrap().len();
                let outcome = agent.run_prompt(&format!("prompt {p}"), &token).await;
                let asked = model.requests.lock().unwrap()[before..]
                    .iter()
                    .filter(|r| !r.tools.is_empty())
                    .count();
                assert_eq!(outcome.rounds as usize, asked, "{outcome:?}");
                agent_loop::check_pairing(agent.history()).unwrap();
                let saved = records.saved();
                assert_eq!(&saved.warnings, &[]);
                assert_eq!(saved.history.as_slice(), agent.history());
                assert_eq!(Some(saved.carried), agent_loop::Gateway::carried(agent.gateway_mut()));
                assert_eq!(saved.prompts as usize, p + 1);
                assert_eq!(saved.last_end.as_deref(), Some(outcome.reason.as_str()));
            }
            // Every result a refusal made is an error, and its call never
            // reached a server: calls that ran are those with other results.
            let requests = model.requests.lock().unwrap().clone();
            let mut refused = std::collections::BTreeSet::new();
            let mut results = std::collections::BTreeSet::new();
            for request in requests.iter() {
                for message in &request.messages {
                    if let agent_loop::Message::ToolResult { call_id, content, is_error, .. } = message {
                        if content.starts_with(r#"{"hook":"_PreToolUse""#) {
                            assert!(is_error, "{content}");
                            refused.insert(call_id.clone());
                        } else {
                            results.insert(call_id.clone());
                        }
                    }
                }
            }
            assert!(refused.is_disjoint(&results));
            let ran = executed.lock().unwrap().len();
            let refused_real = refused.len();
            let made: usize = turns.iter().map(|t| match t { Turn::Tools(ts) => ts.len(), Turn::Big => 1, _ => 0 }).sum();
            assert!(ran + refused_real <= made, "{ran} ran, {refused_real} refused, {made} made");
            agent.end_session(hooks_core::SessionEndReason::Exit).await;
        });
    }
}
