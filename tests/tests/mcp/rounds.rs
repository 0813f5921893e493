//! Hook rounds over real stdio servers: what answers mean, who is asked.

use hooks_core::{EndReason, ErrorKind, Event, Outcome, TurnVerdict, Warning};

use crate::support::{Scratch, fixture, log_events, rig};

// [S4], [I1]-[I3]: objections from two servers, injected in configuration
// order whatever order they arrive in; a second round without objection ends.
#[tokio::test]
async fn objections_are_injected_in_configuration_order() {
    let mut rig = rig(
        vec![
            fixture("slow", &["--stop", "delay=300=slow objects,empty"]),
            fixture("quick", &["--stop", "text=quick objects,empty"]),
        ],
        Some("*"),
        5000,
        3,
    )
    .await;
    let TurnVerdict::Continue { injections } = rig.end_turn().await else {
        panic!("expected an objection")
    };
    let names: Vec<&str> = injections.iter().map(|i| i.tool_name.as_str()).collect();
    assert_eq!(names, ["slow___Stop", "quick___Stop"]);
    assert_eq!(
        injections[0].content,
        r#"{"hook":"_Stop","server":"slow","text":"slow objects"}"#
    );
    rig.used_tools().await;
    assert_eq!(
        rig.end_turn().await,
        TurnVerdict::End {
            reason: EndReason::NoObjection
        }
    );
    rig.host.shutdown().await;
}

// [R1]-[R4] over the wire: each kind of answer and failure, read by the core.
#[tokio::test]
async fn every_kind_of_answer_is_read_r1_r4() {
    let scratch = Scratch::new("answers");
    let log = scratch.path("exit.log");
    let mut rig = rig(
        vec![
            fixture("blank", &["--stop", "blank"]),
            fixture("image", &["--stop", "image"]),
            fixture("iserror", &["--stop", "error=tests are red"]),
            fixture("rpc", &["--stop", "rpc"]),
            fixture("crash", &["--stop", "exit", "--log", &log]),
            fixture("big", &["--stop", "big"]),
        ],
        Some("*"),
        10_000,
        3,
    )
    .await;
    let TurnVerdict::Continue { injections } = rig.end_turn().await else {
        panic!("big objects")
    };
    assert_eq!(injections.len(), 1, "only the big answer is an objection");
    assert_eq!(injections[0].server.as_str(), "big");
    let text: serde_json::Value = serde_json::from_str(&injections[0].content).unwrap();
    let text = text["text"].as_str().unwrap();
    assert!(text.len() < 16 * 1024 + 100, "capped [R4]: {}", text.len());
    assert!(text.ends_with("[sprout: hook answer cut here, 1032192 more bytes not shown]"));

    assert_eq!(rig.last_outcome("blank"), Some(Outcome::Empty));
    assert_eq!(rig.last_outcome("image"), Some(Outcome::Empty));
    assert_eq!(
        rig.last_outcome("iserror"),
        Some(Outcome::Error {
            kind: ErrorKind::ErrorResult,
            detail: "tests are red".into()
        })
    );
    assert!(matches!(
        rig.last_outcome("rpc"),
        Some(Outcome::Error {
            kind: ErrorKind::Rpc,
            ..
        })
    ));
    assert_eq!(rig.last_outcome("crash"), Some(Outcome::Crashed));
    assert_eq!(log_events(&log, "call").len(), 1);
    rig.host.shutdown().await;
}

// [A1]: with hooks off nothing is called, and the prompt ends as hooks_off.
#[tokio::test]
async fn hooks_off_calls_nothing_a1() {
    let scratch = Scratch::new("off");
    let log = scratch.path("calls.log");
    let mut rig = rig(
        vec![fixture("todo", &["--stop", "text=no", "--log", &log])],
        None,
        2500,
        3,
    )
    .await;
    assert_eq!(
        rig.end_turn().await,
        TurnVerdict::End {
            reason: EndReason::HooksOff
        }
    );
    assert!(log_events(&log, "call").is_empty());
    rig.host.shutdown().await;
}

// [A2], [A3]: only listed servers are called; an unknown entry is a warning.
#[tokio::test]
async fn only_allowlisted_servers_hook_a2_a3() {
    let scratch = Scratch::new("allow");
    let (listed, unlisted) = (scratch.path("listed.log"), scratch.path("unlisted.log"));
    let mut rig = rig(
        vec![
            fixture("listed", &["--stop", "empty", "--log", &listed]),
            fixture("unlisted", &["--stop", "text=no", "--log", &unlisted]),
        ],
        Some("listed, lisetd"),
        2500,
        3,
    )
    .await;
    assert_eq!(
        rig.end_turn().await,
        TurnVerdict::End {
            reason: EndReason::NoObjection
        }
    );
    assert_eq!(log_events(&listed, "call").len(), 1);
    assert!(log_events(&unlisted, "call").is_empty());
    assert!(
        rig.host
            .warnings()
            .contains(&Warning::UnknownAllowlistEntry {
                name: "lisetd".into()
            })
    );
    rig.host.shutdown().await;
}

// [H4], [N4]: listing warnings reach the caller; unknown `_` names are never
// called and never offered.
#[tokio::test]
async fn listing_warnings_reach_the_caller_h4() {
    let mut rig = rig(
        vec![fixture(
            "s",
            &[
                "--hooks",
                "_Stop,_stop,_SubagentStart",
                "--tools",
                "read",
                "--stop",
                "empty",
            ],
        )],
        Some("*"),
        2500,
        3,
    )
    .await;
    let warnings: Vec<String> = rig
        .host
        .warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].ends_with("did you mean _Stop?"),
        "{}",
        warnings[0]
    );
    let tools: Vec<String> = rig.host.model_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(tools, ["s__read"]);
    assert_eq!(
        rig.end_turn().await,
        TurnVerdict::End {
            reason: EndReason::NoObjection
        }
    );
    assert_eq!(rig.outcomes(), [("s".to_string(), "empty".to_string())]);
    assert!(rig.has_event(|e| matches!(e, Event::ServerUp { model_tools: 1, .. })));
    rig.host.shutdown().await;
}

// [S2], [S3] end to end: the consecutive rule and the budget across prompts.
#[tokio::test]
async fn consecutive_rule_and_budget_hold_end_to_end() {
    let mut rig = rig(
        vec![fixture("nag", &["--stop", "text=not done"])],
        Some("*"),
        2500,
        2,
    )
    .await;
    assert!(matches!(rig.end_turn().await, TurnVerdict::Continue { .. }));
    assert_eq!(
        rig.end_turn().await,
        TurnVerdict::End {
            reason: EndReason::Declined
        }
    );
    assert!(matches!(rig.end_turn().await, TurnVerdict::Continue { .. }));
    rig.used_tools().await;
    assert_eq!(
        rig.end_turn().await,
        TurnVerdict::End {
            reason: EndReason::BudgetSpent
        }
    );
    assert_eq!(rig.host.session().budget_used(), 2);
    rig.host.shutdown().await;
}
