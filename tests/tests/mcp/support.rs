//! The rig the end-to-end tests share.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hooks_core::{AskError, Event, HookConfig, Outcome, ServerName, StopReason, TurnVerdict};
use hooks_mcp::{Host, HostOptions, ServerSpec};
use tokio_util::sync::CancellationToken;

/// A stdio spec running the fixture server with `args`.
pub(crate) fn fixture(name: &str, args: &[&str]) -> ServerSpec {
    ServerSpec::stdio(
        ServerName::new(name).unwrap(),
        env!("CARGO_BIN_EXE_mcp-fixture"),
        args.iter().map(|s| s.to_string()).collect(),
    )
}

pub(crate) use sprout_tests::{Scratch, alive, log_events, logged_pids};

/// A host whose events are recorded.
pub(crate) struct Rig {
    pub(crate) host: Host,
    pub(crate) events: Arc<Mutex<Vec<Event>>>,
}

pub(crate) async fn rig(
    specs: Vec<ServerSpec>,
    allow: Option<&str>,
    timeout_ms: u64,
    budget: u32,
) -> Rig {
    rig_with(specs, allow, timeout_ms, budget, HostOptions::default()).await
}

pub(crate) async fn rig_with(
    specs: Vec<ServerSpec>,
    allow: Option<&str>,
    timeout_ms: u64,
    budget: u32,
    options: HostOptions,
) -> Rig {
    let config = HookConfig::from_values(
        allow,
        Some(&timeout_ms.to_string()),
        Some(&budget.to_string()),
    )
    .unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let sink = Arc::new(move |e: Event| sink_events.lock().unwrap().push(e));
    let host = Host::start(specs, config, options, sink).await.unwrap();
    Rig { host, events }
}

impl Rig {
    /// The model ends its turn: runs the `_Stop` round (starting a prompt if
    /// none runs) and returns the verdict.
    pub(crate) async fn end_turn(&mut self) -> TurnVerdict {
        self.end_turn_cancellable(&CancellationToken::new())
            .await
            .unwrap()
    }

    pub(crate) async fn end_turn_cancellable(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<TurnVerdict, AskError> {
        if !self.host.session().in_prompt() {
            self.host.begin_prompt().unwrap();
        }
        self.host.end_turn(StopReason::EndTurn, 0, "", cancel).await
    }

    /// The model calls a tool, which resets the consecutive rule.
    pub(crate) async fn used_tools(&mut self) {
        let verdict = self
            .host
            .end_turn(StopReason::ToolUse, 1, "", &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(verdict, TurnVerdict::RunTools);
    }

    /// `(server, outcome)` of every hook call so far, in event order.
    pub(crate) fn outcomes(&self) -> Vec<(String, String)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Event::HookCalled {
                    server, outcome, ..
                } => Some((server.to_string(), outcome.label().to_owned())),
                _ => None,
            })
            .collect()
    }

    /// The outcome of the last call to `server`.
    pub(crate) fn last_outcome(&self, server: &str) -> Option<Outcome> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find_map(|e| match e {
                Event::HookCalled {
                    server: s, outcome, ..
                } if s.as_str() == server => Some(outcome.clone()),
                _ => None,
            })
    }

    pub(crate) fn has_event(&self, pred: impl Fn(&Event) -> bool) -> bool {
        self.events.lock().unwrap().iter().any(pred)
    }
}

/// Waits (up to 10 s) until none of `pids` runs; true if so.
pub(crate) async fn all_gone(pids: &[u32]) -> bool {
    let pids = pids.to_vec();
    tokio::task::spawn_blocking(move || sprout_tests::all_gone(&pids))
        .await
        .unwrap()
}

/// Waits (up to 10 s) for `cond`.
pub(crate) async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
