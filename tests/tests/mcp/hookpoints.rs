//! The hook points beyond the seed's two on real stdio servers: per-server
//! deadlines from the configuration file [C4], input by schema [K1], a
//! refusal [E3] and the bounded `_SessionEnd` [E6].

use std::time::Duration;

use hooks_core::{Event, HookPoint, Outcome, SessionEndReason, ToolGate, ToolUse};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{Scratch, log_events, rig};

/// Latency of the last call to `server` in `events`.
fn latency(events: &[Event], server: &str) -> Duration {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::HookCalled {
                server: s, latency, ..
            } if s.as_str() == server => Some(*latency),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no call to {server}"))
}

// [C4], [T1]: `hookTimeoutMs` in a server's entry is that server's deadline
// (300 ms), while another keeps the session's (1500 ms); one round, each
// timed out at its own deadline.
#[tokio::test]
async fn hook_timeout_ms_from_the_config_file_c4() {
    let fixture = env!("CARGO_BIN_EXE_mcp-fixture");
    let specs = hooks_mcp::parse_mcp_servers(
        &json!({"mcpServers": {
            "quick": {"command": fixture, "args": ["--stop", "hang"], "hookTimeoutMs": 300},
            "plain": {"command": fixture, "args": ["--stop", "hang"]},
        }})
        .to_string(),
    )
    .unwrap();
    let mut rig = rig(specs, Some("*"), 1500, 3).await;
    rig.end_turn().await;
    let events = rig.events.lock().unwrap().clone();
    let (quick, plain) = (latency(&events, "quick"), latency(&events, "plain"));
    assert!(
        (Duration::from_millis(300)..Duration::from_millis(1200)).contains(&quick),
        "{quick:?}"
    );
    assert!(plain >= Duration::from_millis(1500), "{plain:?}");
    assert_eq!(
        rig.outcomes(),
        [
            ("quick".to_owned(), "timeout".to_owned()),
            ("plain".to_owned(), "timeout".to_owned())
        ]
    );
    rig.host.shutdown().await;
}

// [E3], [K1], [E6]: over a real process, a `_PreToolUse` that names `tool`
// and `arguments` gets exactly those and refuses; `_SessionEnd` that never
// answers, on a server whose own deadline is 10 s, is given up after 1 s.
#[tokio::test]
async fn refusal_input_and_a_bounded_session_end_e3_e6() {
    let scratch = Scratch::new("mcp-hookpoints");
    let log = scratch.path("fx.log");
    let fixture = env!("CARGO_BIN_EXE_mcp-fixture");
    let args = [
        "--tools",
        "push",
        "--hooks",
        "_PreToolUse,_SessionEnd",
        "--script",
        "_PreToolUse=text=no push while red",
        "--script",
        "_SessionEnd=hang",
        "--schema",
        "_PreToolUse=tool,arguments,prompt",
        "--log",
        &log,
    ];
    let specs = hooks_mcp::parse_mcp_servers(
        &json!({"mcpServers": {"fx": {"command": fixture, "args": args, "hookTimeoutMs": 10000}}})
            .to_string(),
    )
    .unwrap();
    let mut rig = rig(specs, Some("*"), 2500, 3).await;
    rig.host.begin_prompt().unwrap();
    let server = rig.host.session().server_id("fx").unwrap();
    let gates = rig
        .host
        .tools_requested(
            vec![ToolUse {
                server,
                tool: "push".into(),
                arguments: json!({"force": true}),
            }],
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let ToolGate::Refused { refusals } = &gates[0] else {
        panic!("{gates:?}")
    };
    assert_eq!(
        refusals[0].content,
        r#"{"hook":"_PreToolUse","server":"fx","text":"no push while red"}"#
    );
    let calls = log_events(&log, "call");
    assert_eq!(calls[0]["tool"], HookPoint::PreToolUse.tool_name());
    assert_eq!(
        calls[0]["arguments"],
        json!({"tool": "push", "arguments": {"force": true}})
    );

    let started = std::time::Instant::now();
    rig.host.session_end(SessionEndReason::Exit).await.unwrap();
    let took = started.elapsed();
    assert!(
        (Duration::from_millis(1000)..Duration::from_millis(3000)).contains(&took),
        "{took:?}"
    );
    assert_eq!(rig.last_outcome("fx"), Some(Outcome::Timeout));
    rig.host.shutdown().await;
}
