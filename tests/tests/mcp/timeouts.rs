//! Deadlines, cancellation, kills and restarts over real processes.
//!
//! Times are checked with generous margins only: the machines are shared.

use std::time::{Duration, Instant};

use hooks_core::{Decision, DownCause, EndReason, Event, Outcome, ServerState};
use tokio_util::sync::CancellationToken;

use crate::support::{Scratch, all_gone, eventually, fixture, log_events, logged_pids, rig};

// [T1]: a round with three hanging hooks costs one deadline, not three; an
// answer in time still counts.
#[tokio::test]
async fn hanging_hooks_cost_one_deadline_t1() {
    let mut rig = rig(
        vec![
            fixture("h1", &["--stop", "hang"]),
            fixture("h2", &["--stop", "hang"]),
            fixture("h3", &["--stop", "hang"]),
            fixture("ok", &["--stop", "text=fix the build"]),
        ],
        Some("*"),
        800,
        3,
    )
    .await;
    let started = Instant::now();
    let decision = rig.end_turn().await;
    let took = started.elapsed();
    assert!(matches!(decision, Decision::Continue { ref injections } if injections.len() == 1));
    assert!(
        took >= Duration::from_millis(790),
        "decided before the deadline: {took:?}"
    );
    assert!(
        took < Duration::from_millis(2400),
        "three hangs cost more than one deadline: {took:?}"
    );
    let timeouts = rig
        .outcomes()
        .iter()
        .filter(|(_, o)| o == "timeout")
        .count();
    assert_eq!(timeouts, 3);
    rig.host.shutdown().await;
}

// [T2]: a timed-out call is cancelled on the wire (the server sees
// notifications/cancelled) and its late answer is discarded.
#[tokio::test]
async fn timed_out_calls_are_cancelled_and_late_answers_dropped_t2() {
    let scratch = Scratch::new("t2");
    let log = scratch.path("late.log");
    let mut rig = rig(
        vec![fixture(
            "late",
            &["--stop", "delay=1500=too late,empty", "--log", &log],
        )],
        Some("*"),
        300,
        3,
    )
    .await;
    assert_eq!(
        rig.end_turn().await,
        Decision::End {
            reason: EndReason::NoObjection
        }
    );
    assert_eq!(rig.last_outcome("late"), Some(Outcome::Timeout));
    assert!(
        eventually(|| log_events(&log, "cancelled").len() == 1).await,
        "the server never saw the cancellation"
    );
    // The next round answers at once; nothing of the late text ever shows up.
    assert_eq!(
        rig.end_turn().await,
        Decision::End {
            reason: EndReason::NoObjection
        }
    );
    assert_eq!(rig.last_outcome("late"), Some(Outcome::Empty));
    rig.host.shutdown().await;
}

// [T3], [T4]: the second consecutive timeout kills the process group (the
// grandchild too); the server sits out while down, restarts lazily beside a
// round, and answers again afterwards.
#[tokio::test]
async fn second_timeout_kills_then_lazy_restart_t3_t4() {
    let scratch = Scratch::new("t3");
    let log = scratch.path("wedge.log");
    let mut rig = rig(
        vec![
            fixture(
                "wedge",
                &[
                    "--stop",
                    "hang,hang,text=back again",
                    "--log",
                    &log,
                    "--grandchild",
                ],
            ),
            fixture("calm", &["--stop", "empty"]),
        ],
        Some("*"),
        300,
        5,
    )
    .await;
    let first_pids = [logged_pids(&log, "start"), logged_pids(&log, "grandchild")].concat();
    assert_eq!(first_pids.len(), 2);

    assert_eq!(
        rig.end_turn().await,
        Decision::End {
            reason: EndReason::NoObjection
        }
    );
    assert_eq!(rig.last_outcome("wedge"), Some(Outcome::Timeout));
    assert_eq!(
        rig.end_turn().await,
        Decision::End {
            reason: EndReason::NoObjection
        }
    );
    assert_eq!(rig.last_outcome("wedge"), Some(Outcome::Killed));
    assert!(
        all_gone(&first_pids).await,
        "the killed server or its grandchild still runs"
    );
    assert!(rig.has_event(|e| matches!(
        e,
        Event::ServerDown {
            cause: DownCause::Killed,
            failures: 1,
            ..
        }
    )));

    // Down and within its backoff: left out, no restart yet.
    let id = rig.host.session().server_id("wedge").unwrap();
    assert!(matches!(
        rig.host.session().server_state(id),
        ServerState::Down { .. }
    ));
    rig.end_turn().await;
    assert_eq!(logged_pids(&log, "start").len(), 1);

    // After the backoff, a round restarts it beside itself and leaves it out.
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.end_turn().await;
    assert!(rig.has_event(|e| matches!(e, Event::ServerStarting { attempt: 2, .. })));
    assert!(eventually(|| logged_pids(&log, "start").len() == 2).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let Decision::Continue { injections } = rig.end_turn().await else {
        panic!("the restarted server should object")
    };
    assert_eq!(
        injections[0].content,
        r#"{"hook":"_Stop","server":"wedge","text":"back again"}"#
    );
    let all = [logged_pids(&log, "start"), logged_pids(&log, "grandchild")].concat();
    rig.host.shutdown().await;
    assert!(all_gone(&all).await, "processes left behind after shutdown");
}

// [T4]: kills and failed restarts count to three, then the server is retired
// and its tools leave the model's list; the other server is unaffected.
#[tokio::test]
async fn a_server_that_keeps_wedging_is_retired_t4() {
    let mut rig = rig(
        vec![
            fixture("wedge", &["--stop", "hang", "--tools", "work"]),
            fixture("fine", &["--tools", "read"]),
        ],
        Some("*"),
        150,
        100,
    )
    .await;
    for _ in 0..40 {
        rig.end_turn().await;
        let id = rig.host.session().server_id("wedge").unwrap();
        if rig.host.session().server_state(id) == ServerState::Retired {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let id = rig.host.session().server_id("wedge").unwrap();
    assert_eq!(rig.host.session().server_state(id), ServerState::Retired);
    let tools: Vec<String> = rig.host.model_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(tools, ["fine__read"]);
    let kills = rig.outcomes().iter().filter(|(_, o)| o == "killed").count();
    assert_eq!(kills, 3);
    rig.host.shutdown().await;
}

// [T5]: cancelling during a round ends it at once, cancels the calls on the
// wire, and the next prompt works.
#[tokio::test]
async fn cancel_ends_the_round_at_once_t5() {
    let scratch = Scratch::new("t5");
    let log = scratch.path("hang.log");
    let mut rig = rig(
        vec![fixture("hang", &["--stop", "hang,empty", "--log", &log])],
        Some("*"),
        60_000,
        3,
    )
    .await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    assert_eq!(
        rig.end_turn_cancellable(&cancel).await,
        Decision::End {
            reason: EndReason::Cancelled
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cancel did not end the round"
    );
    assert_eq!(rig.last_outcome("hang"), Some(Outcome::Cancelled));
    assert!(eventually(|| log_events(&log, "cancelled").len() == 1).await);
    assert_eq!(
        rig.end_turn().await,
        Decision::End {
            reason: EndReason::NoObjection
        }
    );
    rig.host.shutdown().await;
}
