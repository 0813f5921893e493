//! `sprout demo`: offline, with its objection and re-injection.

use std::collections::BTreeSet;

use agent_loop::AgentEvent;
use serde_json::Value;

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
    assert!(
        text(&out.stderr).contains("the model is a script (no key, no network)"),
        "the demo says its model is scripted: {}",
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

// [O2]: the human output is the `--json` stream rendered, nothing more and
// nothing less. Every line of `sprout demo --json` reads back as an event
// that holds all the line says; those events, through the renderer the
// binary uses, give the human output of `sprout demo` line for line. A fact
// shown to people that the stream lacks (a field the JSON skips, an event
// only the human path emits, a line written beside the renderer), or an
// event only `--json` gets, makes the two differ. The demo is the same every
// run but for how long things took, which both sides have scrubbed.
#[test]
fn demo_human_output_is_its_json_stream_rendered_o2() {
    let scratch = Scratch::new("demo-o2");
    let human = run_sprout(&["demo"], &[], &scratch.0);
    assert_eq!(human.status.code(), Some(0), "{}", text(&human.stderr));
    let json = run_sprout(&["demo", "--json"], &[], &scratch.0);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let events: Vec<AgentEvent> = text(&json.stdout)
        .lines()
        .map(|line| {
            let event: AgentEvent =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not an event ({e}): {line}"));
            let written: Value = serde_json::from_str(line).unwrap();
            assert_eq!(
                serde_json::to_value(&event).unwrap(),
                written,
                "the event read back does not hold all its line says"
            );
            event
        })
        .collect();
    // The comparison covers every kind of event the demo has.
    let kinds: BTreeSet<String> = events
        .iter()
        .filter_map(|event| {
            let value = serde_json::to_value(event).unwrap();
            value["event"].as_str().map(str::to_owned)
        })
        .collect();
    for kind in [
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
    ] {
        assert!(kinds.contains(kind), "no {kind} event in {kinds:?}");
    }
    let rendered = scrub_durations(&sprout_cli::testing::human_output(&events));
    let shown = scrub_durations(&text(&human.stdout));
    assert!(rendered.lines().count() > 20, "{rendered}");
    if shown != rendered {
        let (human, json): (Vec<&str>, Vec<&str>) =
            (shown.lines().collect(), rendered.lines().collect());
        let at = human
            .iter()
            .zip(&json)
            .position(|(a, b)| a != b)
            .unwrap_or(human.len().min(json.len()));
        panic!(
            "the human output is not the --json stream rendered; from line {}:\n  human:    {:?}\n  rendered: {:?}\nthe human output:\n{shown}",
            at + 1,
            human.get(at),
            json.get(at)
        );
    }
}

/// `text` with every duration the renderer writes (`830 µs`, `1.2 ms`,
/// `12.0 s`) as `<time>`.
fn scrub_durations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(|c: char| c.is_ascii_digit()) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let starts_word = !before
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '.');
        let len = from
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(from.len());
        let (number, after) = from.split_at(len);
        let unit = ["µs", "ms", "s"].into_iter().find(|unit| {
            after
                .strip_prefix(' ')
                .and_then(|a| a.strip_prefix(unit))
                .is_some_and(|a| !a.starts_with(char::is_alphanumeric))
        });
        match unit {
            Some(unit) if starts_word => {
                out.push_str("<time>");
                rest = &after[1 + unit.len()..];
            }
            _ => {
                out.push_str(number);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn durations_are_scrubbed_and_nothing_else() {
    assert_eq!(
        scrub_durations("  model: end_turn, 1 tool call(s), 1.2 ms"),
        "  model: end_turn, 1 tool call(s), <time>"
    );
    assert_eq!(
        scrub_durations("← todo__todo (830 µs): 3 items; 12.0 s"),
        "← todo__todo (<time>): 3 items; <time>"
    );
    assert_eq!(
        scrub_durations("budget 1/3, 2 messages → 1 (1 removed) v2 s"),
        "budget 1/3, 2 messages → 1 (1 removed) v2 s"
    );
}
