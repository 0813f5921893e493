//! Sessions that survive the process: the loop's observer records every
//! change of the history, and a second agent resumed from those records
//! carries on where the first left off.

use agent_loop::{Agent, AgentSettings, Message};
use hooks_core::{EndReason, HookContext, HookPoint};
use tokio_util::sync::CancellationToken;

use crate::support::{FakeGateway, FakeServer, Recorder, Records, call, recording_sink, say};

fn gate(stop: Vec<Option<&'static str>>) -> FakeServer {
    FakeServer {
        name: "gate",
        tools: vec!["work"],
        stop: Some(stop),
        post_compact: None,
        hooks: vec![(HookPoint::SessionStart, vec![Some("on branch main")])],
    }
}

// [S3], [E1], [I1]: a prompt with a tool call and an objection (budget 1),
// saved; a new agent on a new policy resumes it: its first request carries
// the whole earlier history, then the pairs `_SessionStart` adds again; the
// budget is still spent, so the next end of turn ends at once; its pairs'
// ids do not repeat the earlier ones.
#[tokio::test]
async fn a_resumed_session_has_its_history_budget_and_a_new_session_start_s3_e1() {
    let model = Recorder::new(vec![
        say("done"),
        call(&[("c1", "gate__work", "{}")]),
        say("done now"),
    ]);
    let records = Records::default();
    let (sink, _) = recording_sink();
    let mut first = Agent::new(
        model.clone(),
        FakeGateway::new(
            vec![gate(vec![Some("run the tests"), Some("")])],
            Some("*"),
            1,
        ),
        AgentSettings::default(),
        sink.clone(),
    )
    .with_observer(records.clone());
    let outcome = first.run_prompt("fix it", &CancellationToken::new()).await;
    assert_eq!(outcome.reason, EndReason::BudgetSpent);
    let earlier = first.history().to_vec();

    let saved = records.saved();
    assert_eq!(saved.history, earlier);
    assert_eq!(saved.carried.budget_used, 1);
    let model = Recorder::new(vec![say("all done")]);
    let gateway = FakeGateway::new(vec![gate(vec![Some("still no")])], Some("*"), 1);
    let hook_calls = gateway.hook_calls.clone();
    let mut second = Agent::new(model.clone(), gateway, AgentSettings::default(), sink)
        .with_hook_context(HookContext {
            session_id: "s-1".into(),
            cwd: "/work".into(),
        })
        .with_observer(records.clone());
    second.resume(&saved).unwrap();
    let outcome = second
        .run_prompt("and the docs", &CancellationToken::new())
        .await;
    assert_eq!(
        outcome.reason,
        EndReason::BudgetSpent,
        "the budget stays spent"
    );

    let requests = model.requests.lock().unwrap();
    let sent = &requests[0].messages;
    assert_eq!(&sent[..earlier.len()], earlier.as_slice());
    assert_eq!(sent[earlier.len()], Message::user("and the docs"));
    let Message::ToolResult {
        content, call_id, ..
    } = &sent[earlier.len() + 2]
    else {
        panic!("{sent:#?}")
    };
    assert!(content.contains("_SessionStart"), "{content}");
    let earlier_ids: Vec<&str> = earlier
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert!(!earlier_ids.contains(&call_id.as_str()), "{call_id} is new");
    let calls = hook_calls.lock().unwrap();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.hook == HookPoint::SessionStart)
            .count(),
        1
    );
    assert_eq!(
        calls.iter().filter(|c| c.hook == HookPoint::Stop).count(),
        0
    );
    // The records of both processes read back as the second's history.
    let again = records.saved();
    assert_eq!(again.history, second.history());
    assert_eq!(
        (again.prompts, again.last_end.as_deref()),
        (2, Some("budget_spent"))
    );
}

// A resumed history whose last turn lost its results: the reader gave each
// call an error result, and the resumed agent sends a paired history.
#[tokio::test]
async fn a_resumed_turn_without_results_is_sent_paired() {
    let records = Records::default();
    {
        use agent_loop::transcript::SessionObserver as _;
        let mut r = records.clone();
        r.appended(&Message::user("fix it"));
        r.appended(&Message::Assistant {
            text: String::new(),
            tool_calls: vec![agent_loop::ToolCall {
                id: "c1".into(),
                name: "gate__work".into(),
                arguments: "{}".into(),
            }],
        });
    }
    let saved = records.saved();
    assert_eq!(saved.repaired.len(), 1);
    let model = Recorder::new(vec![say("ok")]);
    let (sink, _) = recording_sink();
    let mut agent = Agent::new(
        model.clone(),
        FakeGateway::new(vec![gate(vec![Some("")])], Some("*"), 1),
        AgentSettings::default(),
        sink,
    );
    agent.resume(&saved).unwrap();
    agent.run_prompt("go on", &CancellationToken::new()).await;
    // The recorder checks the pairing of every request it gets.
    assert_eq!(
        model.requests.lock().unwrap()[0].messages[2],
        saved.repaired[0]
    );
}
