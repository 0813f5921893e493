//! Servers that misbehave on purpose (`mcp-fixture --hostile MODE`): none of
//! them may make the host hold unbounded memory, wait without bound, or leave
//! a process behind.

use std::time::Duration;

use hooks_core::{DownCause, Event, ServerState};
use hooks_mcp::HostOptions;
use rmcp::model::JsonObject;
use tokio_util::sync::CancellationToken;

use crate::support::{
    Scratch, all_gone, eventually, fixture, log_events, logged_pids, rig, rig_with,
};

/// Every pid the fixture logged: its own and its grandchild's.
fn pids(log: &str) -> Vec<u32> {
    let mut pids = logged_pids(log, "start");
    pids.extend(logged_pids(log, "grandchild"));
    pids
}

// A server that floods pings (and stops reading) is stopped as wedged: its
// process group dies, and the end counts as a crash toward [T4].
#[tokio::test]
async fn a_ping_flood_is_stopped_as_wedged() {
    let scratch = Scratch::new("ping-flood");
    let log = scratch.path("log");
    let spec = fixture(
        "flood",
        &["--hostile", "ping-flood", "--log", &log, "--grandchild"],
    );
    let mut rig = rig(vec![spec], Some("*"), 2500, 3).await;
    let down = eventually(|| {
        let _ = rig.host.model_tools();
        rig.has_event(|e| matches!(e, Event::ServerDown { cause: DownCause::Crashed(why), .. } if why.contains("wedged")))
    })
    .await;
    assert!(down, "the flooding server is stopped as wedged");
    let error = rig.host.servers()[0].last_error.clone().unwrap();
    assert!(
        error.contains("messages within one second")
            || error.contains("not reading what the agent sends"),
        "{error}"
    );
    assert!(matches!(
        rig.host.servers()[0].state,
        ServerState::Down { .. }
    ));
    assert!(all_gone(&pids(&log)).await, "no process of it survives");
    rig.host.shutdown().await;
}

// A server that stops reading its stdin cannot hold a tool call with large
// arguments past the call's deadline, nor the shutdown after it, even when
// it ignores SIGTERM.
#[tokio::test]
async fn a_deaf_server_holds_neither_the_call_nor_the_shutdown() {
    let scratch = Scratch::new("deaf-call");
    let log = scratch.path("log");
    let spec = fixture(
        "deaf",
        &[
            "--hostile",
            "deaf",
            "--tools",
            "echo",
            "--ignore-sigterm",
            "--log",
            &log,
            "--grandchild",
        ],
    );
    let mut rig = rig(vec![spec], Some("*"), 2500, 3).await;
    assert_eq!(rig.host.servers()[0].state, ServerState::Up);
    let call = rig
        .host
        .prepare_tool_call("deaf__echo", &CancellationToken::new())
        .await
        .unwrap();
    let mut arguments = JsonObject::new();
    arguments.insert("text".into(), "a".repeat(512 * 1024).into());
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        call.run(arguments, Duration::from_millis(500)),
    )
    .await
    .expect("the call ends by its own deadline");
    assert!(output.is_error, "{}", output.text);
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(10), rig.host.shutdown())
        .await
        .expect("shutdown returns although the server never reads");
    // Bound from the module docs of `connection`: grace, kill grace, reap.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(all_gone(&pids(&log)).await, "no process of it survives");
}

// A write that cannot finish (the pipe is full, the server never reads) is
// a wedged server, found by the write-stall bound and killed.
#[tokio::test]
async fn a_stalled_write_is_a_wedged_server() {
    let scratch = Scratch::new("deaf-stall");
    let log = scratch.path("log");
    let spec = fixture(
        "deaf",
        &["--hostile", "deaf", "--tools", "echo", "--log", &log],
    );
    let mut rig = rig(vec![spec], Some("*"), 2500, 3).await;
    let call = rig
        .host
        .prepare_tool_call("deaf__echo", &CancellationToken::new())
        .await
        .unwrap();
    let mut arguments = JsonObject::new();
    arguments.insert("text".into(), "a".repeat(512 * 1024).into());
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        call.run(arguments, Duration::from_secs(60)),
    )
    .await
    .expect("the stall bound ends the call well before its 60 s deadline");
    assert!(output.is_error);
    assert!(
        output.text.contains("not reading what the agent sends"),
        "{}",
        output.text
    );
    let down = eventually(|| {
        let _ = rig.host.model_tools();
        matches!(rig.host.servers()[0].state, ServerState::Down { .. })
    })
    .await;
    assert!(down);
    assert!(all_gone(&pids(&log)).await);
    rig.host.shutdown().await;
}

// A listing that never ends, or one far too large, fails the start with a
// message that names the limit; the host does not grow with it.
#[tokio::test]
async fn listings_are_bounded() {
    let options = HostOptions {
        start_timeout: Duration::from_secs(20),
        ..HostOptions::default()
    };
    let rig = rig_with(
        vec![
            fixture("pages", &["--hostile", "endless-pages"]),
            fixture("huge", &["--hostile", "huge-listing"]),
        ],
        Some("*"),
        2500,
        3,
        options,
    )
    .await;
    let reports = rig.host.servers();
    let pages = reports[0].last_error.clone().unwrap_or_default();
    assert!(
        pages.contains("its tool listing is too large: more than 100 pages"),
        "{pages}"
    );
    let huge = reports[1].last_error.clone().unwrap_or_default();
    assert!(
        huge.contains("its tool listing is too large: more than"),
        "{huge}"
    );
    assert!(reports.iter().all(|r| r.state != ServerState::Up));
    rig.host.shutdown().await;
}

// What a server asks of the client and Sprout does not offer (sampling,
// roots, elicitation, anything unknown) gets a JSON-RPC error at once.
#[tokio::test]
async fn unserved_requests_get_errors() {
    let scratch = Scratch::new("asks");
    let log = scratch.path("log");
    let spec = fixture("asks", &["--hostile", "asks", "--log", &log]);
    let rig = rig(vec![spec], Some("*"), 2500, 3).await;
    let answered = eventually(|| log_events(&log, "answer").len() == 4).await;
    let answers = log_events(&log, "answer");
    assert!(answered, "{answers:?}");
    for answer in &answers {
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
    }
    rig.host.shutdown().await;
}
