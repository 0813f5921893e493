//! `sprout demo`: offline, with its objection and re-injection.

use std::collections::BTreeSet;

use crate::support::{Scratch, run_sprout, text};

#[test]
fn demo_shows_objection_compaction_and_reinjection() {
    let scratch = Scratch::new("demo");
    let out = run_sprout(&["demo"], &[], &scratch.0);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    for expected in [
        "todo._Stop: objection",
        "- [ ] Write tests for both checks",
        "objection from todo honoured (budget 1/3)",
        "compacted by summary",
        "todo._PostCompact: injection",
        "injected as a todo___PostCompact tool result",
        "stopped: no_objection",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

// [O2]: --json is the same stream as JSON Lines, every line an event, every
// kind of event there.
#[test]
fn demo_json_carries_every_event_kind() {
    let scratch = Scratch::new("demo-json");
    let out = run_sprout(&["demo", "--json"], &[], &scratch.0);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let kinds: BTreeSet<String> = text(&out.stdout)
        .lines()
        .map(|line| {
            let value: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            value["event"]
                .as_str()
                .unwrap_or_else(|| panic!("no event field: {line}"))
                .to_owned()
        })
        .collect();
    let expected = [
        "assistant_text",
        "compacted",
        "decided",
        "hook_called",
        "injected",
        "model_request",
        "model_response",
        "prompt_ended",
        "prompt_started",
        "round_started",
        "server_starting",
        "server_up",
        "tool_call",
        "tool_result",
    ];
    for kind in expected {
        assert!(kinds.contains(kind), "no {kind} event in {kinds:?}");
    }
}
