//! `sprout run` and `sprout acp` against a real model server:
//! llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct,
//! which `cargo xtask ci` builds, starts and names by
//! `SPROUT_TEST_MODEL_URL` (its context window by
//! `SPROUT_TEST_MODEL_CONTEXT`). Compiled with the `real-model` feature only.
//!
//! What the small model says is not asserted; what Sprout does with whatever
//! it says is: every request it sends is accepted [V2] (no prompt ends in
//! an error), the request after an injected hook pair and after a tool call
//! gets an answer, and a window the size of the server's is compacted for,
//! or recovered from when it overflows [V3].

use std::time::Duration;

use serde_json::{Value, json};

use crate::acp::{AcpClient, fixture_server};
use crate::support::{Scratch, fixture, run_sprout, sprout, text, write_mcp_servers};

/// The model server's base URL.
fn url() -> String {
    std::env::var("SPROUT_TEST_MODEL_URL")
        .expect("SPROUT_TEST_MODEL_URL names the model server (cargo xtask ci starts one)")
}

/// The model server's context window, in tokens.
fn server_window() -> String {
    std::env::var("SPROUT_TEST_MODEL_CONTEXT").unwrap_or_else(|_| "2048".into())
}

/// The environment that points sprout at the server: temperature 0, short
/// answers, a bound on rounds, and `extra`.
fn model_env(extra: &[(&str, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("SPROUT_AGENT_PROVIDER", "openai".to_owned()),
        ("OPENAI_COMPAT_BASE_URL", url()),
        ("OPENAI_COMPAT_MODEL", "smollm2".to_owned()),
        ("SPROUT_AGENT_TEMPERATURE", "0".to_owned()),
        ("SPROUT_AGENT_MAX_OUTPUT_TOKENS", "48".to_owned()),
        ("SPROUT_AGENT_MAX_ROUNDS", "4".to_owned()),
        // The server answers one request at a time, and tests run in
        // parallel: a request may wait for others.
        ("SPROUT_AGENT_MODEL_TIMEOUT_MS", "600000".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for (k, v) in extra {
        env.retain(|(key, _)| key != k);
        env.push(((*k).to_owned(), v.clone()));
    }
    env
}

/// Runs `sprout run --json ARGS` in `scratch`; the events.
fn run_json(scratch: &Scratch, args: &[&str], env: &[(String, String)]) -> Vec<Value> {
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = run_sprout(&all, &env, &scratch.0);
    let stdout = text(&out.stdout);
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let end = events
        .iter()
        .rev()
        .find(|e| e["event"] == "prompt_ended")
        .unwrap_or_else(|| panic!("no prompt_ended:\n{stdout}\n{}", text(&out.stderr)));
    // [V2]: whatever the model said, every request was accepted.
    assert_ne!(
        end["reason"],
        "error",
        "{end}\n{stdout}\n{}",
        text(&out.stderr)
    );
    events
}

fn named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

/// Asserts that every `model_request` got its `model_response`, or was
/// answered "too long" and compacted for [V3]: what comes next of those,
/// another request or the prompt's end is a response or a compaction.
fn every_request_answered(events: &[Value]) {
    let marks = [
        "model_request",
        "model_response",
        "compacted",
        "prompt_ended",
    ];
    let seen: Vec<&str> = events
        .iter()
        .filter_map(|e| e["event"].as_str())
        .filter(|name| marks.contains(name))
        .collect();
    for (i, name) in seen.iter().enumerate() {
        if *name == "model_request" {
            let next = seen.get(i + 1).copied();
            assert!(
                matches!(next, Some("model_response" | "compacted")),
                "request {i} unanswered (then {next:?}): {events:#?}"
            );
        }
    }
    assert!(seen.contains(&"model_response"), "{events:#?}");
}

/// The todo server's entry: a tool whose results are plain text.
fn todo_server() -> Value {
    json!({"command": sprout(), "args": ["hook-server", "todo"]})
}

// A plain answer, streamed and whole: answered, and the streamed one's text
// arrives as pieces that make the whole text.
#[test]
fn a_plain_answer_streamed_and_whole() {
    for stream in ["on", "off"] {
        let scratch = Scratch::new(&format!("real-plain-{stream}"));
        let env = model_env(&[("SPROUT_AGENT_STREAM", stream.to_owned())]);
        let events = run_json(&scratch, &["Say hello in three words."], &env);
        every_request_answered(&events);
        assert_eq!(named(&events, "model_response").len(), 1, "{events:#?}");
        let deltas: String = named(&events, "text_delta")
            .iter()
            .map(|e| e["text"].as_str().unwrap().to_owned())
            .collect();
        let text: String = named(&events, "assistant_text")
            .iter()
            .map(|e| e["text"].as_str().unwrap().to_owned())
            .collect();
        if stream == "on" {
            // Streamed pieces make the whole text; a server that answers a
            // streaming request whole (llama-cpp-python does, at times,
            // when busy) shows none, and its text once.
            assert!(deltas.is_empty() || deltas == text, "{events:#?}");
        } else {
            assert!(deltas.is_empty(), "{events:#?}");
        }
    }
}

// [V2]: a `_Stop` objection is injected as a tool-call pair while tools are
// offered; the request after it (an assistant message of calls only, then
// its tool result) is accepted and answered.
#[test]
fn the_request_after_a_stop_objection_is_answered() {
    let scratch = Scratch::new("real-stop");
    let config = write_mcp_servers(
        &scratch,
        json!({
            "todo": todo_server(),
            "gate": {"command": fixture(), "args": ["--stop", "text=Check your answer once more before you stop.,empty"]},
        }),
    );
    let env = model_env(&[("MCP_HOOK_SERVERS", "gate".to_owned())]);
    let events = run_json(&scratch, &["--mcp-config", &config, "Say hi."], &env);
    every_request_answered(&events);
    let honoured = events
        .iter()
        .position(|e| e["event"] == "decided" && e["decision"] == "objection_honoured");
    let Some(at) = honoured else {
        // The model may call a tool at once and never end its turn within
        // the rounds: then there was no end of turn to object to, and the
        // prompt must have run out of rounds.
        let end = named(&events, "prompt_ended")[0];
        assert_eq!(end["reason"], "max_rounds", "{events:#?}");
        return;
    };
    let after = &events[at..];
    assert!(
        after.iter().any(|e| e["event"] == "model_response"),
        "no answer after the objection: {events:#?}"
    );
}

// [V2]: a tool call, and the request after it with the call and its
// result, with llama-cpp-python's `chatml-function-calling` format, which
// sees the tools only with `tool_choice: "auto"`.
#[test]
fn a_tool_call_and_the_request_after_it() {
    let scratch = Scratch::new("real-tool");
    let config = write_mcp_servers(&scratch, json!({"todo": todo_server()}));
    let env = model_env(&[("SPROUT_AGENT_MAX_ROUNDS", "3".to_owned())]);
    let events = run_json(
        &scratch,
        &[
            "--mcp-config",
            &config,
            "Add the item 'write tests' to the todo list with the todo tool.",
        ],
        &env,
    );
    every_request_answered(&events);
    let results = named(&events, "tool_result");
    assert!(!results.is_empty(), "the model called no tool: {events:#?}");
    let first = events
        .iter()
        .position(|e| e["event"] == "tool_result")
        .unwrap();
    assert!(
        events[first..]
            .iter()
            .any(|e| e["event"] == "model_response"),
        "no answer after the tool result: {events:#?}"
    );
}

// [V3]: a session saved by one process goes on in another (`--continue`)
// with a window the size of the server's: the first request of the new
// process counts the tool definitions and the last usage report, so it is
// compacted for in time, or recovered when the server says it is too long.
#[test]
fn continue_into_a_window_the_size_of_the_servers() {
    let scratch = Scratch::new("real-continue");
    let config = write_mcp_servers(&scratch, json!({"todo": todo_server()}));
    let env = model_env(&[("SPROUT_AGENT_CONTEXT_WINDOW", server_window())]);
    let long = "Here is some context for the task. ".repeat(30);
    let prompts = [
        format!("{long} Add the item 'write tests' to the todo list."),
        format!("{long} Now add 'write docs' too."),
        format!("{long} Say what the list holds."),
    ];
    let mut events = run_json(&scratch, &["--mcp-config", &config, &prompts[0]], &env);
    every_request_answered(&events);
    for prompt in &prompts[1..] {
        let reported = last_usage(&events);
        events = run_json(
            &scratch,
            &["--mcp-config", &config, "--continue", prompt],
            &env,
        );
        every_request_answered(&events);
        // The new process's first estimate starts from the last report of
        // the one before (unless it compacted first, which starts afresh).
        let first = events
            .iter()
            .find(|e| e["event"] == "model_request" || e["event"] == "compacted");
        if let (Some(reported), Some(first)) = (reported, first)
            && first["event"] == "model_request"
        {
            let estimated = first["estimated_tokens"].as_u64().unwrap();
            assert!(
                estimated >= reported,
                "{estimated} < {reported}: {events:#?}"
            );
        }
    }
}

/// The last usage the server reported (input plus output tokens), unless
/// a compaction came after it (a compaction drops the report).
fn last_usage(events: &[Value]) -> Option<u64> {
    let last = events.iter().rev().find(|e| {
        e["event"] == "compacted" || (e["event"] == "model_response" && e["input_tokens"].is_u64())
    })?;
    Some(last["input_tokens"].as_u64()? + last["output_tokens"].as_u64()?)
}

// [V3] and [P1]: a compaction through the real model (its summary, or the
// truncation it falls back to), with `_PostCompact` asked after it, and a
// request too long for the server recovered by compacting and asking again.
#[test]
fn compaction_and_overflow_through_the_real_model() {
    let scratch = Scratch::new("real-compact");
    let config = write_mcp_servers(&scratch, json!({"todo": todo_server()}));
    // A window far larger than the server's: only the server's own "too
    // long" can make sprout compact.
    let env = model_env(&[
        ("SPROUT_AGENT_CONTEXT_WINDOW", "100000".to_owned()),
        ("MCP_HOOK_SERVERS", "*".to_owned()),
        ("SPROUT_AGENT_MAX_ROUNDS", "2".to_owned()),
    ]);
    // A short first prompt (the original task, which every compaction
    // keeps), then long ones until together they do not fit the server.
    run_json(
        &scratch,
        &["--mcp-config", &config, "Keep these notes."],
        &env,
    );
    let chunk = "The project keeps its notes here so that nothing is lost. ".repeat(30);
    let mut events = Vec::new();
    for n in 1..=6 {
        let prompt = format!("Note {n}: {chunk} Reply with one word.");
        events = run_json(
            &scratch,
            &["--mcp-config", &config, "--continue", &prompt],
            &env,
        );
        if !named(&events, "compacted").is_empty() {
            break;
        }
    }
    every_request_answered(&events);
    let compacted = named(&events, "compacted");
    assert!(!compacted.is_empty(), "no compaction: {events:#?}");
    assert!(
        compacted[0]["note"]
            .as_str()
            .unwrap_or_default()
            .contains("too long for the model's context window"),
        "{:#?}",
        compacted[0]
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "round_started" && e["hook"] == "_PostCompact"),
        "{events:#?}"
    );
}

// `sprout acp` against the real model: a prompt with a tool server and a
// `_Stop` objection ends with a stop reason, not an error.
#[test]
fn acp_prompts_against_the_real_model() {
    let scratch = Scratch::new("real-acp");
    let env = model_env(&[("MCP_HOOK_SERVERS", "*".to_owned())]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut client = AcpClient::start(&scratch, &env);
    client.initialize();
    let session = client.new_session(
        &scratch.0,
        json!([fixture_server(
            "gate",
            &["--tools", "note", "--stop", "text=Check once more.,empty"]
        )]),
    );
    for prompt in ["Say hi.", "Say bye."] {
        let id = client.prompt(&session, prompt);
        let response = client.response(json!(id), Duration::from_secs(600));
        let reason = &response["result"]["stopReason"];
        assert!(
            reason == "end_turn" || reason == "max_turn_requests",
            "{response}"
        );
    }
    assert!(client.finish().success());
}
