//! Start-up, the child environment, tool calls, and process cleanup.

use std::time::{Duration, Instant};

use hooks_core::{DownCause, Event, ServerState};
use hooks_mcp::{HostOptions, ServerSpec};
use serde_json::json;

use crate::support::{Scratch, all_gone, fixture, log_events, logged_pids, rig, rig_with};

// Servers start all at once: four that each take 1 s to initialize are up in
// well under the 4 s a sequential start would take.
#[tokio::test]
async fn servers_start_concurrently() {
    let specs = (0..4)
        .map(|i| fixture(&format!("s{i}"), &["--init-delay", "1000"]))
        .collect();
    let started = Instant::now();
    let rig = rig(specs, Some("*"), 2500, 3).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(3500),
        "start-up looks sequential: {took:?}"
    );
    for i in 0..4 {
        assert_eq!(
            rig.host.session().server_state(hooks_core::ServerId(i)),
            ServerState::Up
        );
    }
    rig.host.shutdown().await;
}

// A server that cannot start is reported with its name and the reason; one
// that is too slow to initialize is given up on; the others work.
#[tokio::test]
async fn failed_starts_are_reported_and_others_work() {
    let missing = ServerSpec::stdio(
        hooks_core::ServerName::new("missing").unwrap(),
        "/nonexistent/server",
        vec![],
    );
    let options = HostOptions {
        start_timeout: Duration::from_millis(1500),
        ..HostOptions::default()
    };
    let mut rig = rig_with(
        vec![
            missing,
            fixture("slow", &["--init-delay", "20000"]),
            fixture("fine", &["--tools", "read"]),
        ],
        Some("*"),
        2500,
        3,
        options,
    )
    .await;
    let reports = rig.host.servers();
    assert!(
        reports[0]
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("cannot run \"/nonexistent/server\"")
    );
    assert!(
        reports[1]
            .last_error
            .as_deref()
            .unwrap()
            .contains("no answer to initialize and tools/list within 1500 ms")
    );
    assert!(matches!(reports[0].state, ServerState::Down { .. }));
    assert_eq!(reports[2].state, ServerState::Up);
    assert!(rig.has_event(|e| matches!(e, Event::ServerDown { server, cause: DownCause::StartFailed(_), .. } if server.as_str() == "missing")));
    let call = rig
        .host
        .prepare_tool_call("fine__read", &Default::default())
        .await
        .unwrap();
    let out = call
        .run(
            json!({"x": 1}).as_object().unwrap().clone(),
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(out.text, r#"{"x":1}"#);
    rig.host.shutdown().await;
}

// A child gets PATH, HOME and the locale plus what its spec names; nothing
// else of the agent's environment (here: cargo's variables) reaches it.
#[tokio::test]
async fn children_get_only_the_small_environment() {
    let scratch = Scratch::new("env");
    let out = scratch.path("env.json");
    let mut spec = fixture("env", &["--env-out", &out]);
    if let hooks_mcp::TransportSpec::Stdio { env, .. } = &mut spec.transport {
        env.insert("TODO_FILE".into(), "/tmp/todo".into());
    }
    assert!(
        std::env::var("CARGO_MANIFEST_DIR").is_ok(),
        "the test itself has cargo's variables"
    );
    let rig = rig(vec![spec], None, 2500, 3).await;
    let env: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(env["TODO_FILE"], "/tmp/todo");
    assert!(env.contains_key("PATH"));
    assert!(
        !env.keys().any(|k| k.starts_with("CARGO")),
        "{:?}",
        env.keys().collect::<Vec<_>>()
    );
    rig.host.shutdown().await;
}

// Model tool calls: paginated listing, a call, and [H3]: a hook or an unknown
// name gets the same error and nothing reaches the server.
#[tokio::test]
async fn tool_calls_and_hidden_hooks_h3() {
    let scratch = Scratch::new("tools");
    let log = scratch.path("calls.log");
    let mut rig = rig(
        vec![fixture(
            "s",
            &["--tools", "a,b,c,d,e", "--page-size", "2", "--log", &log],
        )],
        Some("*"),
        2500,
        3,
    )
    .await;
    let tools: Vec<String> = rig.host.model_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(tools, ["s__a", "s__b", "s__c", "s__d", "s__e"]);
    for name in ["s___Stop", "s__nothing", "nobody__a"] {
        let err = rig
            .host
            .prepare_tool_call(name, &Default::default())
            .await
            .unwrap_err();
        assert!(err.is_error);
        assert_eq!(err.text, format!("unknown tool: {name}"));
    }
    assert!(
        log_events(&log, "call").is_empty(),
        "a hook was called by the model"
    );
    let out = rig
        .host
        .prepare_tool_call("s__c", &Default::default())
        .await
        .unwrap()
        .run(Default::default(), Duration::from_secs(10))
        .await;
    assert_eq!((out.text.as_str(), out.is_error), ("{}", false));
    rig.host.shutdown().await;
}

// No process is left behind: after a normal shutdown, and after a crash.
#[tokio::test]
async fn no_process_left_behind() {
    let scratch = Scratch::new("cleanup");
    let (a, b) = (scratch.path("a.log"), scratch.path("b.log"));
    let mut rig = rig(
        vec![
            fixture("a", &["--grandchild", "--log", &a, "--stop", "empty"]),
            fixture("b", &["--grandchild", "--log", &b, "--stop", "exit"]),
        ],
        Some("*"),
        2500,
        3,
    )
    .await;
    rig.end_turn().await;
    let crashed = [logged_pids(&b, "start"), logged_pids(&b, "grandchild")].concat();
    assert_eq!(crashed.len(), 2);
    assert!(
        all_gone(&crashed).await,
        "a crashed server's group was left running"
    );
    let running = [logged_pids(&a, "start"), logged_pids(&a, "grandchild")].concat();
    assert!(running.iter().all(|p| crate::support::alive(*p)));
    rig.host.shutdown().await;
    assert!(all_gone(&running).await, "shutdown left processes behind");
}

// A server that floods stderr without a newline cannot grow the agent's
// memory: what is kept of a line is bounded, and shows in the start error.
#[tokio::test]
async fn stderr_floods_are_bounded() {
    let options = HostOptions {
        start_timeout: Duration::from_millis(3000),
        ..HostOptions::default()
    };
    let rig = rig_with(
        vec![fixture(
            "flood",
            &[
                "--stderr-flood",
                "5000000",
                "--exit-after",
                "300",
                "--init-delay",
                "10000",
            ],
        )],
        Some("*"),
        2500,
        3,
        options,
    )
    .await;
    let error = rig.host.servers()[0].last_error.clone().unwrap();
    assert!(error.contains("its stderr ends with"), "{error}");
    assert!(
        error.len() < 8 * 1024,
        "the stderr tail was not bounded: {} bytes",
        error.len()
    );
    rig.host.shutdown().await;
}

// A server that dies right after starting is never left marked up, whichever
// of its start and its end the host hears first; a tool call gets an error.
#[tokio::test]
async fn a_server_dying_right_after_start_is_down() {
    let mut rig = rig(
        vec![fixture("brief", &["--tools", "t", "--exit-after", "150"])],
        Some("*"),
        2500,
        3,
    )
    .await;
    let id = hooks_core::ServerId(0);
    let mut down = false;
    for _ in 0..100 {
        rig.host.model_tools();
        if !matches!(rig.host.session().server_state(id), ServerState::Up) {
            down = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(down, "a dead server stayed up");
    rig.host.shutdown().await;
}
