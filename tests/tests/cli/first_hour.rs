//! What a newcomer meets in the first hour: the variable names other tools
//! use, a typo of ours, an `.mcp.json` written for another client, a key
//! the API refused, `hooks call --server` with a broken neighbour.

use std::time::Duration;

use serde_json::json;

use crate::support::{
    FakeOpenAi, Scratch, assert_ok, end, fixture, run_sprout, text, write_mcp_servers,
};

// OPENAI_BASE_URL, OPENAI_MODEL and OPENAI_API_KEY, which other tools
// read, are read when ours (OPENAI_COMPAT_…) are not set.
#[test]
fn the_standard_openai_names_are_read() {
    let scratch = Scratch::new("first-standard-names");
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("hello"))]);
    let out = run_sprout(
        &["run", "hi"],
        &[
            ("OPENAI_BASE_URL", fake.url.as_str()),
            ("OPENAI_MODEL", "standard-model"),
            ("OPENAI_API_KEY", "sk-standard"),
        ],
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    assert!(stdout.contains("hello"), "{stdout}");
    let requests = fake.requests.lock().unwrap();
    assert_eq!(requests[0]["model"], "standard-model");
}

// A 401 or 403 says where the key came from, or that none was sent.
#[test]
fn a_refused_key_names_its_variable() {
    let scratch = Scratch::new("first-key-hint");
    for (key, says) in [
        (
            None,
            "no API key was sent: set OPENAI_COMPAT_API_KEY or OPENAI_API_KEY",
        ),
        (
            Some("sk-bad"),
            "the API key from OPENAI_COMPAT_API_KEY was refused: check it",
        ),
    ] {
        let fake = FakeOpenAi::start(vec![(
            Duration::ZERO,
            json!({"http_status": 401, "body": "{\"error\": \"invalid key\"}"}),
        )]);
        let fake_env = fake.env();
        let mut env: Vec<(&str, &str)> = fake_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        if let Some(key) = key {
            env.push(("OPENAI_COMPAT_API_KEY", key));
        }
        let out = run_sprout(&["run", "hi"], &env, &scratch.0);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(all.contains("HTTP 401"), "{all}");
        assert!(all.contains(says), "{all}");
        assert!(
            !all.contains("sk-bad"),
            "the key itself is never shown: {all}"
        );
    }
}

// A variable that looks like ours but is not (a typo) is a warning with
// the name meant.
#[test]
fn a_typo_of_a_variable_is_said() {
    let scratch = Scratch::new("first-typo");
    let out = run_sprout(&["sessions"], &[("MCP_HOOK_SERVER", "*")], &scratch.0);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "MCP_HOOK_SERVER is not a variable sprout reads; did you mean MCP_HOOK_SERVERS?"
        ),
        "{stderr}"
    );
}

// An `.mcp.json` written for another client: VS Code's "servers" key is
// read, a "disabled" server is not started, an unknown key is named.
#[test]
fn a_config_for_another_client_is_read_and_its_leftovers_said() {
    let scratch = Scratch::new("first-lenient");
    let path = scratch.path("vscode.json");
    std::fs::write(
        &path,
        json!({"servers": {
            "on": {"command": fixture(), "description": "a note for people"},
            "off": {"command": fixture(), "disabled": true}
        }})
        .to_string(),
    )
    .unwrap();
    let out = run_sprout(&["hooks", "list", "--mcp-config", &path], &[], &scratch.0);
    let stdout = assert_ok(&out);
    let stderr = text(&out.stderr);
    assert!(stdout.contains("on: up"), "{stdout}");
    assert!(
        !stdout.contains("off:"),
        "a disabled server is not started: {stdout}"
    );
    assert!(stderr.contains("servers.off is disabled"), "{stderr}");
    assert!(
        stderr.contains("servers.on.description is not a key Sprout reads"),
        "{stderr}"
    );
}

// `hooks call --server NAME` starts that server only: a broken neighbour is
// neither started nor waited for.
#[test]
fn hooks_call_with_server_starts_that_server_only() {
    let scratch = Scratch::new("first-call-one");
    let config = write_mcp_servers(
        &scratch,
        json!({
            "good": {"command": fixture(), "args": ["--stop", "text=not yet"]},
            "broken": {"command": "/nonexistent/server"}
        }),
    );
    let out = run_sprout(
        &[
            "hooks",
            "call",
            "_Stop",
            "--server",
            "good",
            "--mcp-config",
            &config,
        ],
        &[],
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    let all = format!("{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("not yet"), "{stdout}");
    assert!(
        !all.contains("broken"),
        "the other server was started: {all}"
    );
}

// A 404 names the URL asked and, when the base URL lacks it, the /v1 that
// OpenAI-compatible servers serve under.
#[test]
fn a_404_names_the_url_and_the_missing_v1() {
    let scratch = Scratch::new("first-404");
    let fake = FakeOpenAi::start(vec![(
        Duration::ZERO,
        json!({"http_status": 404, "body": "Not Found"}),
    )]);
    let base = fake.url.trim_end_matches("/v1").to_owned();
    let out = run_sprout(
        &["run", "hi"],
        &[
            ("OPENAI_COMPAT_BASE_URL", base.as_str()),
            ("OPENAI_COMPAT_MODEL", "m"),
        ],
        &scratch.0,
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!("no such path: {base}/chat/completions")),
        "{all}"
    );
    assert!(all.contains("the base URL may need to end in /v1"), "{all}");
}

// A server that fails to start is said once: by its event, not again as a
// log line and a warning.
#[test]
fn a_server_that_does_not_start_is_said_once() {
    let scratch = Scratch::new("first-said-once");
    let config = write_mcp_servers(&scratch, json!({"broken": {"command": "/nonexistent/x"}}));
    let script = scratch.path("script.jsonl");
    std::fs::write(&script, "{\"text\": \"done\"}\n").unwrap();
    let out = run_sprout(
        &["run", "hi", "--mcp-config", &config, "--script", &script],
        &[("SPROUT_AGENT_PROVIDER", "script")],
        &scratch.0,
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(all.matches("/nonexistent/x").count(), 1, "{all}");
    assert!(all.contains("✗ server broken failed to start"), "{all}");
}

// A retried request is one short log line, not the whole body of the
// error answer; the answer after it is shown as usual.
#[test]
fn a_retry_is_one_short_line() {
    let scratch = Scratch::new("first-retry");
    let fake = FakeOpenAi::start(vec![
        (
            Duration::ZERO,
            json!({"http_status": 503, "body": format!("overloaded {}", "x".repeat(3000))}),
        ),
        (Duration::ZERO, end("hello after all")),
    ]);
    let fake_env = fake.env();
    let env: Vec<(&str, &str)> = fake_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run_sprout(&["run", "hi"], &env, &scratch.0);
    let stdout = assert_ok(&out);
    assert!(stdout.contains("hello after all"), "{stdout}");
    let stderr = text(&out.stderr);
    let retry = stderr
        .lines()
        .find(|l| l.contains("retrying in"))
        .unwrap_or_else(|| panic!("no retry line: {stderr}"));
    assert!(retry.contains("HTTP 503: overloaded"), "{retry}");
    assert!(
        retry.chars().count() < 320,
        "{} characters: {retry}",
        retry.chars().count()
    );
}

// One failed request does not poison the session: the prompt after it, in
// the same saved session, is asked with a history the API takes (each
// message as sent before) and succeeds.
#[test]
fn one_failure_does_not_poison_the_session() {
    let scratch = Scratch::new("first-poison");
    let fake = FakeOpenAi::start(vec![
        (
            Duration::ZERO,
            json!({"http_status": 400, "body": "{\"error\": \"bad request\"}"}),
        ),
        (Duration::ZERO, end("fine now")),
    ]);
    let fake_env = fake.env();
    let env: Vec<(&str, &str)> = fake_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let failed = run_sprout(&["run", "first"], &env, &scratch.0);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stderr));
    let out = run_sprout(&["run", "second", "--continue"], &env, &scratch.0);
    let stdout = assert_ok(&out);
    assert!(stdout.contains("fine now"), "{stdout}");
    let requests = fake.requests.lock().unwrap();
    let messages = requests[1]["messages"].as_array().unwrap();
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(users, ["first", "second"], "{messages:?}");
    for message in messages {
        assert!(
            !message["content"].is_null(),
            "no null content [V2]: {message}"
        );
    }
}
