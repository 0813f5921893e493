//! Streamed answers through the binary: the text shows as it arrives, once.

use std::time::Duration;

use serde_json::Value;

use crate::support::{
    FakeOpenAi, Scratch, assert_ok, end, run_sprout, streamed_cut, streamed_end, text,
};

/// `sprout run` against a fake that streams `pieces`; stdout and the
/// requests the fake got.
fn run_streamed(args: &[&str], pieces: &[&str], extra: &[(&str, &str)]) -> (String, Vec<Value>) {
    run_with(args, streamed_end(pieces), extra)
}

/// `sprout run` against a fake that gives `answer`.
fn run_with(args: &[&str], answer: Value, extra: &[(&str, &str)]) -> (String, Vec<Value>) {
    let scratch = Scratch::new("streaming");
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, answer)]);
    let fake_env = fake.env();
    let mut env: Vec<(&str, &str)> = fake_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend(extra.iter().copied());
    let mut all = vec!["run", "say hello"];
    all.extend(args);
    let out = run_sprout(&all, &env, &scratch.0);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let requests = fake.requests.lock().unwrap().clone();
    (stdout, requests)
}

// --json carries every piece as a text_delta event, in order, before the
// whole text's assistant_text event; the request asked for a stream.
#[test]
fn json_shows_each_piece_then_the_whole_text() {
    let pieces = ["Hel", "lo, w", "orld — ünïcode"];
    let (stdout, requests) = run_streamed(&["--json"], &pieces, &[]);
    assert_eq!(requests[0]["stream"], true, "{}", requests[0]);
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, pieces);
    let whole = events
        .iter()
        .position(|e| e["event"] == "assistant_text")
        .expect("the whole text follows");
    let last_delta = events
        .iter()
        .rposition(|e| e["event"] == "text_delta")
        .unwrap();
    assert!(last_delta < whole);
    assert_eq!(events[whole]["text"], pieces.concat());
}

// The person sees the answer once, on one `assistant:` line built from the
// pieces, and the model line after it.
#[test]
fn people_see_the_streamed_text_once() {
    let (stdout, _) = run_streamed(&[], &["Hel", "lo, ", "world"], &[]);
    assert_eq!(stdout.matches("Hello, world").count(), 1, "{stdout}");
    assert!(stdout.contains("assistant: Hello, world\n"), "{stdout}");
    let text_at = stdout.find("assistant: Hello").unwrap();
    let model_at = stdout.find("model: end_turn").expect("the model line");
    assert!(text_at < model_at, "{stdout}");
}

// SPROUT_AGENT_STREAM=off asks for a whole answer, and shows it whole.
#[test]
fn streaming_can_be_turned_off() {
    let (stdout, requests) = run_with(&[], end("whole"), &[("SPROUT_AGENT_STREAM", "off")]);
    assert_ne!(requests[0]["stream"], true, "{}", requests[0]);
    assert!(stdout.contains("assistant: whole\n"), "{stdout}");
}

// A stream cut after its text was shown: the person sees the text and why
// the prompt failed, and the text stays in the session's history, marked
// as cut, so `--continue` sends it to the model as what it had said.
#[test]
fn a_cut_answer_stays_in_the_history_marked() {
    let scratch = Scratch::new("streaming-cut");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, streamed_cut(&["Half an ", "answer"])),
        (Duration::ZERO, end("the rest")),
    ]);
    let fake_env = fake.env();
    let env: Vec<(&str, &str)> = fake_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run_sprout(&["run", "say a lot"], &env, &scratch.0);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("assistant: Half an answer"), "{stdout}");
    assert!(
        stdout.contains("the stream ended before the answer was complete"),
        "{stdout}"
    );
    assert_ok(&run_sprout(
        &["run", "go on", "--continue"],
        &env,
        &scratch.0,
    ));
    let requests = fake.requests.lock().unwrap();
    let messages = requests[1]["messages"].as_array().unwrap();
    let kept = &messages[messages.len() - 2];
    assert_eq!(kept["role"], "assistant", "{messages:#?}");
    let kept = kept["content"].as_str().unwrap();
    assert!(
        kept.starts_with(&format!(
            "Half an answer\n\n[{}: the model's answer failed: ",
            agent_loop::CUT_MARK
        )),
        "{kept}"
    );
    assert_eq!(messages.last().unwrap()["content"], "go on");
}
