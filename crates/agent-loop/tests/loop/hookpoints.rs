//! The hook points beyond the seed's two in the loop [E1]-[E6], against the
//! in-memory gateway on the real hooks-core policy.

use agent_loop::{Agent, AgentSettings, CompactionSettings, Message, Usage};
use hooks_core::{EndReason, HookContext, HookPoint, SessionEndReason};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{FakeGateway, FakeServer, HookCall, Recorder, call, recording_sink, say};

fn server(hooks: Vec<(HookPoint, Vec<Option<&'static str>>)>) -> FakeServer {
    FakeServer {
        name: "fx",
        tools: vec!["work", "push"],
        hooks,
        ..FakeServer::default()
    }
}

fn context() -> HookContext {
    HookContext {
        session_id: "s-1".into(),
        cwd: "/work".into(),
    }
}

/// The content of the tool result at `index` of `messages`.
fn result(messages: &[Message], index: usize) -> (&str, bool) {
    match &messages[index] {
        Message::ToolResult {
            content, is_error, ..
        } => (content.as_str(), *is_error),
        other => panic!("no tool result at {index}: {other:?}"),
    }
}

fn calls_of(calls: &[HookCall], hook: HookPoint) -> Vec<serde_json::Value> {
    calls
        .iter()
        .filter(|c| c.hook == hook)
        .map(|c| serde_json::Value::Object(c.arguments.clone()))
        .collect()
}

// [E1], [E2], [K2]: `_SessionStart` (first prompt only) and
// `_UserPromptSubmit` (every prompt) add their pairs right after the prompt,
// before the first model request; their input has the session's id and cwd.
#[tokio::test]
async fn session_start_and_prompt_submit_add_pairs_after_the_prompt_e1_e2() {
    let model = Recorder::new(vec![say("one"), say("two")]);
    let gateway = FakeGateway::new(
        vec![server(vec![
            (HookPoint::SessionStart, vec![Some("branch main")]),
            (HookPoint::UserPromptSubmit, vec![Some("prompt noted")]),
        ])],
        Some("*"),
        3,
    );
    let hook_calls = gateway.hook_calls.clone();
    let (sink, _) = recording_sink();
    let mut agent = Agent::new(model.clone(), gateway, AgentSettings::default(), sink)
        .with_hook_context(context());
    let cancel = CancellationToken::new();
    assert_eq!(
        agent.run_prompt("first", &cancel).await.reason,
        EndReason::NoStopHook
    );
    assert_eq!(
        agent.run_prompt("second", &cancel).await.reason,
        EndReason::NoStopHook
    );

    let requests = model.requests.lock().unwrap();
    let first = &requests[0].messages;
    assert_eq!(first.len(), 5, "{first:#?}");
    assert_eq!(first[0], Message::user("first"));
    assert_eq!(
        result(first, 2),
        (
            r#"{"hook":"_SessionStart","server":"fx","text":"branch main"}"#,
            false
        )
    );
    assert_eq!(
        result(first, 4),
        (
            r#"{"hook":"_UserPromptSubmit","server":"fx","text":"prompt noted"}"#,
            false
        )
    );
    // The second prompt: no _SessionStart again, its own _UserPromptSubmit.
    let second = &requests[1].messages;
    assert_eq!(second.len(), 9, "{second:#?}");
    assert_eq!(second[6], Message::user("second"));
    assert!(result(second, 8).0.contains("_UserPromptSubmit"));
    let calls = hook_calls.lock().unwrap();
    assert_eq!(
        calls_of(&calls, HookPoint::SessionStart),
        [json!({"session_id": "s-1", "cwd": "/work"})]
    );
    assert_eq!(
        calls_of(&calls, HookPoint::UserPromptSubmit),
        [
            json!({"session_id": "s-1", "cwd": "/work", "prompt": "first"}),
            json!({"session_id": "s-1", "cwd": "/work", "prompt": "second"}),
        ]
    );
}

// [E3], [E4], [H3]: of one turn's three calls, `_PreToolUse` refuses the
// second (it is not run; its result is the refusal as an error), the call
// to a hook is never asked about; `_PostToolUse` notes follow the output of
// the call that ran. Every call keeps exactly one result, in order.
#[tokio::test]
async fn refused_calls_do_not_run_and_notes_follow_outputs_e3_e4() {
    let model = Recorder::new(vec![
        call(&[
            ("c1", "fx__work", r#"{"n":1}"#),
            ("c2", "fx__push", "{}"),
            ("c3", "fx___Stop", "{}"),
        ]),
        say("done"),
    ]);
    let gateway = FakeGateway::new(
        vec![server(vec![
            (
                HookPoint::PreToolUse,
                vec![Some(""), Some("no push while red")],
            ),
            (HookPoint::PostToolUse, vec![Some("work logged")]),
        ])],
        Some("*"),
        3,
    );
    let (executed, hook_calls) = (gateway.executed.clone(), gateway.hook_calls.clone());
    let (sink, _) = recording_sink();
    let mut agent = Agent::new(model.clone(), gateway, AgentSettings::default(), sink)
        .with_hook_context(context());
    let outcome = agent.run_prompt("go", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::NoStopHook);

    assert_eq!(
        *executed.lock().unwrap(),
        ["fx__work"],
        "the refused call never ran"
    );
    let second = &model.requests.lock().unwrap()[1].messages;
    assert_eq!(second.len(), 5, "{second:#?}");
    assert_eq!(
        result(second, 2),
        (
            "ok work {\"n\":1}\n{\"hook\":\"_PostToolUse\",\"server\":\"fx\",\"text\":\"work logged\"}",
            false
        )
    );
    assert_eq!(
        result(second, 3),
        (
            r#"{"hook":"_PreToolUse","server":"fx","text":"no push while red"}"#,
            true
        )
    );
    assert_eq!(result(second, 4), ("unknown tool: fx___Stop", true));
    let calls = hook_calls.lock().unwrap();
    assert_eq!(
        calls_of(&calls, HookPoint::PreToolUse),
        [
            json!({"session_id": "s-1", "cwd": "/work", "tool": "work", "server": "fx", "arguments": {"n": 1}}),
            json!({"session_id": "s-1", "cwd": "/work", "tool": "push", "server": "fx", "arguments": {}}),
        ]
    );
    assert_eq!(
        calls_of(&calls, HookPoint::PostToolUse),
        [
            json!({"session_id": "s-1", "cwd": "/work", "tool": "work", "server": "fx", "arguments": {"n": 1}, "output": "ok work {\"n\":1}", "is_error": false})
        ]
    );
}

// [E5], [K2]: `_PreCompact` pins go to the summariser and stay verbatim in
// the fresh history, before `_PostCompact`'s pairs; `_PostCompact` is given
// the summary and the pins; `_Stop` gets the model's last text.
#[tokio::test]
async fn pins_reach_the_summary_and_the_fresh_history_e5() {
    let mut first = call(&[("c1", "fx__work", "{}")]);
    first.usage = Some(Usage {
        input_tokens: 900,
        output_tokens: 50,
    });
    let model = Recorder::new(vec![first, say("summary: worked"), say("all done")]);
    let mut fx = server(vec![(
        HookPoint::PreCompact,
        vec![Some("keep: 2 items open")],
    )]);
    fx.post_compact = Some(vec![Some("list re-read")]);
    fx.stop = Some(vec![Some("")]);
    let gateway = FakeGateway::new(vec![fx], Some("*"), 3);
    let hook_calls = gateway.hook_calls.clone();
    let settings = AgentSettings {
        compaction: CompactionSettings {
            context_window: 1000,
            threshold: 0.8,
            max_summaries: 3,
        },
        ..AgentSettings::default()
    };
    let (sink, _) = recording_sink();
    let mut agent = Agent::new(model.clone(), gateway, settings, sink);
    let outcome = agent.run_prompt("build", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::NoObjection);

    let requests = model.requests.lock().unwrap();
    let pin = r#"{"hook":"_PreCompact","server":"fx","text":"keep: 2 items open"}"#;
    let Some(Message::User { text: ask }) = requests[1].messages.last() else {
        panic!("the summary request ends with its question")
    };
    assert!(ask.contains(pin), "{ask}");
    let fresh = &requests[2].messages;
    assert_eq!(fresh.len(), 6, "{fresh:#?}");
    assert_eq!(result(fresh, 2), (pin, false));
    assert!(result(fresh, 4).0.contains("list re-read"));
    assert_eq!(fresh[5], Message::user("build"));
    let calls = hook_calls.lock().unwrap();
    assert_eq!(
        calls_of(&calls, HookPoint::PreCompact),
        [json!({"session_id": "", "cwd": "", "reason": "threshold"})]
    );
    let post: Vec<_> = calls
        .iter()
        .filter(|c| c.hook == HookPoint::PostCompact)
        .collect();
    assert_eq!(post.len(), 1);
    assert_eq!(
        post[0].arguments.len(),
        0,
        "the seed-style hook asked for nothing"
    );
    let stop: Vec<_> = calls.iter().filter(|c| c.hook == HookPoint::Stop).collect();
    assert_eq!(stop.len(), 1);
}

// [E6]: `end_session` tells `_SessionEnd` once, with its reason; a second
// call does nothing.
#[tokio::test]
async fn end_session_tells_session_end_once_e6() {
    let model = Recorder::new(vec![say("done")]);
    let gateway = FakeGateway::new(
        vec![server(vec![(HookPoint::SessionEnd, vec![Some("ignored")])])],
        Some("*"),
        3,
    );
    let hook_calls = gateway.hook_calls.clone();
    let (sink, _) = recording_sink();
    let mut agent =
        Agent::new(model, gateway, AgentSettings::default(), sink).with_hook_context(context());
    agent.run_prompt("x", &CancellationToken::new()).await;
    agent.end_session(SessionEndReason::Closed).await;
    agent.end_session(SessionEndReason::Exit).await;
    assert_eq!(
        calls_of(&hook_calls.lock().unwrap(), HookPoint::SessionEnd),
        [json!({"session_id": "s-1", "cwd": "/work", "reason": "closed"})]
    );
}
