//! The hook points beyond the seed's two through the `sprout` binary, on
//! fixture servers that log every call with its arguments: [E1]-[E7],
//! [K1]-[K2], [C4], [G1]-[G3].

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{
    FakeOpenAi, Scratch, assert_ok, end, env_with, fixture, mcp_config, run_sprout, sprout_command,
    text, tool, write_mcp_servers,
};

/// The arguments of every logged call of `hook`, in order.
fn arguments(log: &str, hook: &str) -> Vec<Value> {
    sprout_tests::log_events(log, "call")
        .into_iter()
        .filter(|c| c["tool"] == hook)
        .map(|c| c["arguments"].clone())
        .collect()
}

/// The `content` of every tool message of a Chat Completions request.
fn tool_contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

// [E1], [E2], [K1], [K2]: `_SessionStart` and `_UserPromptSubmit` answers
// are in the first model request right after the prompt; a hook whose schema
// names fields gets exactly those that apply (`attempt` does not apply at
// `_UserPromptSubmit`), one whose schema names none gets `{}`.
#[test]
fn session_start_and_prompt_submit_through_run_e1_e2() {
    let scratch = Scratch::new("hp-start");
    let log = scratch.path("fx.log");
    let config = mcp_config(
        &scratch,
        &[(
            "fx",
            vec![
                "--tools",
                "work",
                "--hooks",
                "_SessionStart,_UserPromptSubmit",
                "--script",
                "_SessionStart=text=on branch main",
                "--script",
                "_UserPromptSubmit=text=prompt noted",
                "--schema",
                "_UserPromptSubmit=prompt,session_id,cwd,attempt",
                "--log",
                &log,
            ],
        )],
    );
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("done"))]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
    let out = run_sprout(
        &["run", "fix it", "--mcp-config", &config],
        &env,
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    assert!(stdout.contains("stopped: no_stop_hook"), "{stdout}");
    let requests = fake.requests.lock().unwrap();
    let messages = requests[0]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "tool"],
        "{messages:#?}"
    );
    assert_eq!(
        tool_contents(&requests[0]),
        [
            r#"{"hook":"_SessionStart","server":"fx","text":"on branch main"}"#,
            r#"{"hook":"_UserPromptSubmit","server":"fx","text":"prompt noted"}"#,
        ]
    );
    assert_eq!(arguments(&log, "_SessionStart"), [json!({})]);
    let submitted = arguments(&log, "_UserPromptSubmit");
    assert_eq!(submitted.len(), 1);
    let fields = submitted[0].as_object().unwrap();
    let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["cwd", "prompt", "session_id"]);
    assert_eq!(fields["prompt"], "fix it");
    // The id of the session's saved transcript.
    let id = fields["session_id"].as_str().unwrap();
    let transcript = scratch
        .0
        .join(".state/sprout/sessions")
        .join(format!("{id}.jsonl"));
    assert!(transcript.is_file(), "{fields:?}");
    let cwd = std::fs::canonicalize(&scratch.0).unwrap();
    assert_eq!(fields["cwd"], cwd.display().to_string());
}

// [E3], [E4]: a `_PreToolUse` answer refuses the call (it never runs; the
// model reads the envelope as its result); the next call runs and its result
// carries the `_PostToolUse` note after the tool's own output.
#[test]
fn pre_tool_use_refuses_and_post_tool_use_notes_through_run_e3_e4() {
    let scratch = Scratch::new("hp-tools");
    let log = scratch.path("fx.log");
    let config = mcp_config(
        &scratch,
        &[(
            "fx",
            vec![
                "--tools",
                "work",
                "--hooks",
                "_PreToolUse,_PostToolUse",
                "--script",
                "_PreToolUse=text=no work on Fridays,empty",
                "--script",
                "_PostToolUse=text=logged",
                "--schema",
                "_PreToolUse=tool,server,arguments,output",
                "--log",
                &log,
            ],
        )],
    );
    let call = |id: &str, n: u32| json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "fx__work", "arguments": json!({"n": n}).to_string()}}]}, "finish_reason": "tool_calls"}]});
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, call("c1", 1)),
        (Duration::ZERO, call("c2", 2)),
        (Duration::ZERO, end("done")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
    let out = run_sprout(&["run", "work", "--mcp-config", &config], &env, &scratch.0);
    let stdout = assert_ok(&out);
    assert!(stdout.contains("fx._PreToolUse: objection"), "{stdout}");
    let requests = fake.requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        tool_contents(&requests[1]),
        [r#"{"hook":"_PreToolUse","server":"fx","text":"no work on Fridays"}"#]
    );
    assert_eq!(
        tool_contents(&requests[2])[1],
        "{\"n\":2}\n{\"hook\":\"_PostToolUse\",\"server\":\"fx\",\"text\":\"logged\"}"
    );
    assert_eq!(
        arguments(&log, "_PreToolUse"),
        [
            json!({"tool": "work", "server": "fx", "arguments": {"n": 1}}),
            json!({"tool": "work", "server": "fx", "arguments": {"n": 2}}),
        ]
    );
    assert_eq!(
        arguments(&log, "_PostToolUse"),
        [json!({})],
        "only the call that ran"
    );
}

// [K1], [K2], [H5]: `_Stop` gets the attempt, the budget left and the model's
// last text when its schema names them; a strict server (schema with
// `additionalProperties: false` and no properties) gets `{}` and answers.
#[test]
fn stop_input_by_schema_and_a_strict_server_k1() {
    let scratch = Scratch::new("hp-stop");
    let (log, strict_log) = (scratch.path("fx.log"), scratch.path("strict.log"));
    let config = mcp_config(
        &scratch,
        &[
            (
                "fx",
                vec![
                    "--tools",
                    "work",
                    "--stop",
                    "text=not yet,empty",
                    "--schema",
                    "_Stop=attempt,budget_left,last_assistant_message,prompt",
                    "--log",
                    &log,
                ],
            ),
            (
                "strict",
                vec!["--stop", "empty", "--strict-schema", "--log", &strict_log],
            ),
        ],
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("first try")),
        (Duration::ZERO, tool("c1", "fx__work")),
        (Duration::ZERO, end("second try")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    let stdout = assert_ok(&out);
    assert!(stdout.contains("stopped: no_objection"), "{stdout}");
    assert!(!stdout.contains("strict._Stop: error"), "{stdout}");
    assert_eq!(
        arguments(&log, "_Stop"),
        [
            json!({"attempt": 1, "budget_left": 3, "last_assistant_message": "first try"}),
            json!({"attempt": 2, "budget_left": 2, "last_assistant_message": "second try"}),
        ]
    );
    assert_eq!(arguments(&strict_log, "_Stop"), [json!({}), json!({})]);
}

// [E5], [K2]: before a compaction `_PreCompact` pins a fact: the summary
// request carries it, the fresh history keeps it as a pair before
// `_PostCompact`'s, and `_PostCompact` is given the summary and the pins.
#[test]
fn pre_compact_pins_through_run_e5() {
    let scratch = Scratch::new("hp-compact");
    let log = scratch.path("fx.log");
    let config = mcp_config(
        &scratch,
        &[(
            "fx",
            vec![
                "--tools",
                "work",
                "--hooks",
                "_PreCompact,_PostCompact",
                "--script",
                "_PreCompact=text=keep: 2 items open",
                "--post-compact",
                "text=list re-read",
                "--schema",
                "_PreCompact=reason",
                "--schema",
                "_PostCompact=summary,pins",
                "--log",
                &log,
            ],
        )],
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, tool("c1", "fx__work")),
        (Duration::ZERO, end("summary of the work")),
        (Duration::ZERO, end("done")),
    ]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_CONTEXT_WINDOW", "1000"),
            ("SPROUT_AGENT_COMPACT_THRESHOLD", "0.1"),
        ],
    );
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    assert_ok(&out);
    let pin = r#"{"hook":"_PreCompact","server":"fx","text":"keep: 2 items open"}"#;
    let requests = fake.requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    let summary_ask = requests[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(summary_ask.contains(pin), "{summary_ask}");
    assert_eq!(
        tool_contents(&requests[2]),
        [
            pin,
            r#"{"hook":"_PostCompact","server":"fx","text":"list re-read"}"#
        ]
    );
    assert_eq!(
        arguments(&log, "_PreCompact"),
        [json!({"reason": "threshold"})]
    );
    assert_eq!(
        arguments(&log, "_PostCompact"),
        [
            json!({"summary": "summary of the work", "pins": [{"server": "fx", "text": "keep: 2 items open"}]})
        ]
    );
}

// [E6]: `sprout run` tells `_SessionEnd` at exit (`exit`), and after Ctrl-C
// (`signal`); a `_SessionEnd` that never answers, with a 60 s hook timeout,
// holds the exit about 1 s, not 60.
#[test]
fn session_end_at_exit_and_on_a_signal_e6() {
    let scratch = Scratch::new("hp-end");
    let log = scratch.path("fx.log");
    let config = mcp_config(
        &scratch,
        &[(
            "fx",
            vec![
                "--hooks",
                "_SessionEnd",
                "--script",
                "_SessionEnd=hang",
                "--schema",
                "_SessionEnd=reason",
                "--log",
                &log,
            ],
        )],
    );
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("done"))]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "60000"),
        ],
    );
    let started = Instant::now();
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    let took = started.elapsed();
    let stdout = assert_ok(&out);
    assert!(stdout.contains("fx._SessionEnd: timeout"), "{stdout}");
    assert!(took < Duration::from_secs(20), "the exit took {took:?}");
    assert_eq!(arguments(&log, "_SessionEnd"), [json!({"reason": "exit"})]);

    // Ctrl-C during the model call.
    let slow = FakeOpenAi::start(vec![(Duration::from_secs(60), end("never"))]);
    let slow_env = slow.env();
    let env = env_with(&slow_env, &[("MCP_HOOK_SERVERS", "*")]);
    let child = sprout_command(&["run", "x", "--mcp-config", &config], &env, &scratch.0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while slow.requests.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the model was never asked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert_eq!(
        arguments(&log, "_SessionEnd"),
        [json!({"reason": "exit"}), json!({"reason": "signal"})]
    );
}

// `sprout hooks call HOOK` for every hook point, with `--input` supplying
// the fields the agent would know; each hook gets what its schema names.
#[test]
fn hooks_call_every_hook_point_with_input() {
    let scratch = Scratch::new("hp-call");
    let log = scratch.path("fx.log");
    let config = mcp_config(
        &scratch,
        &[(
            "fx",
            vec![
                "--tools",
                "push",
                "--hooks",
                "_SessionStart,_UserPromptSubmit,_PreToolUse,_PostToolUse,_Stop,_PreCompact,_PostCompact,_SessionEnd",
                "--script",
                "_PreToolUse=text=no push while red",
                "--script",
                "_PostToolUse=text=noted",
                "--stop",
                "text=not yet",
                "--schema",
                "_SessionStart=session_id,cwd",
                "--schema",
                "_UserPromptSubmit=prompt",
                "--schema",
                "_PreToolUse=tool,arguments",
                "--schema",
                "_PostToolUse=output,is_error",
                "--schema",
                "_Stop=last_assistant_message,attempt",
                "--schema",
                "_PostCompact=summary",
                "--schema",
                "_SessionEnd=reason",
                "--log",
                &log,
            ],
        )],
    );
    let cases = [
        (
            "_SessionStart",
            r#"{"session_id":"s-9","cwd":"/x"}"#,
            "the agent would add 0 answer(s) after the first prompt",
        ),
        (
            "_UserPromptSubmit",
            r#"{"prompt":"ship it"}"#,
            "the agent would add 0 answer(s) after the prompt",
        ),
        (
            "_PreToolUse",
            r#"{"tool":"push","arguments":{"force":true}}"#,
            "the agent would refuse the tool call: 1 refusal(s)",
        ),
        (
            "_PostToolUse",
            r#"{"tool":"push","output":"pushed","is_error":false}"#,
            "the agent would append 1 note(s) to the tool's result",
        ),
        (
            "_Stop",
            r#"{"last_assistant_message":"done"}"#,
            "the agent would go on: 1 objection(s)",
        ),
        (
            "_PreCompact",
            "{}",
            "the agent would pin 0 answer(s) through the compaction",
        ),
        (
            "_PostCompact",
            r#"{"summary":"did it"}"#,
            "the agent would re-inject 0 answer(s)",
        ),
        (
            "_SessionEnd",
            r#"{"reason":"closed"}"#,
            "the agent would end the session (closed); answers are ignored",
        ),
    ];
    for (hook, input, summary) in cases {
        let out = run_sprout(
            &[
                "hooks",
                "call",
                hook,
                "--server",
                "fx",
                "--input",
                input,
                "--mcp-config",
                &config,
            ],
            &[],
            &scratch.0,
        );
        let stdout = assert_ok(&out);
        assert!(stdout.contains(summary), "{hook}: {stdout}");
        assert!(stdout.contains(&format!("fx.{hook}:")), "{hook}: {stdout}");
    }
    let session_starts = arguments(&log, "_SessionStart");
    assert_eq!(session_starts.len(), 8, "every call starts a session first");
    assert_eq!(session_starts[0], json!({"session_id": "s-9", "cwd": "/x"}));
    assert_eq!(
        arguments(&log, "_UserPromptSubmit"),
        [json!({"prompt": "ship it"})]
    );
    assert_eq!(
        arguments(&log, "_PreToolUse"),
        [json!({"tool": "push", "arguments": {"force": true}})]
    );
    assert_eq!(
        arguments(&log, "_PostToolUse"),
        [json!({"output": "pushed", "is_error": false})]
    );
    assert_eq!(
        arguments(&log, "_Stop"),
        [json!({"last_assistant_message": "done", "attempt": 1})]
    );
    assert_eq!(
        arguments(&log, "_PostCompact"),
        [json!({"summary": "did it"})]
    );
    assert_eq!(
        arguments(&log, "_SessionEnd"),
        [json!({"reason": "closed"})]
    );

    // A field the policy computes, or none of the table, exits 2.
    for (input, expected) in [
        (r#"{"attempt":2}"#, "\"attempt\" is computed by the agent"),
        (
            r#"{"colour":"red"}"#,
            "\"colour\" is not a hook input field",
        ),
        (r#"{"reason":"bored"}"#, "\"reason\" must be"),
        ("[1]", "expected a JSON object"),
    ] {
        let out = run_sprout(
            &[
                "hooks",
                "call",
                "_Stop",
                "--server",
                "fx",
                "--input",
                input,
                "--mcp-config",
                &config,
            ],
            &[],
            &scratch.0,
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{input}: {stderr}");
        assert!(
            stderr.contains("--input") && stderr.contains(expected),
            "{stderr}"
        );
    }
}

// `sprout hooks list` shows the input fields each hook asked for, for
// people and in --json.
#[test]
fn hooks_list_shows_each_hooks_input_fields() {
    let scratch = Scratch::new("hp-list");
    let config = mcp_config(
        &scratch,
        &[("fx", vec!["--schema", "_Stop=attempt,budget_left,colour"])],
    );
    let out = run_sprout(
        &["hooks", "list", "--mcp-config", &config],
        &[("MCP_HOOK_SERVERS", "*")],
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    assert!(
        stdout.contains("  input:    _Stop {attempt, budget_left}; _PostCompact {}"),
        "{stdout}"
    );
    let out = run_sprout(
        &["hooks", "list", "--json", "--mcp-config", &config],
        &[("MCP_HOOK_SERVERS", "*")],
        &scratch.0,
    );
    let listed: Value = serde_json::from_str(assert_ok(&out).trim()).unwrap();
    assert_eq!(
        listed["servers"][0]["hook_inputs"],
        json!({"_Stop": ["attempt", "budget_left"], "_PostCompact": []})
    );
}

// [G1]-[G3]: the decline rule off asks `_Stop` again at once (the budget
// ends it, not the rule); bad governance values and a bad `hookTimeoutMs`
// [C4] exit 2 naming where they came from.
#[test]
fn stop_governance_and_per_server_timeouts_g1_g3_c4() {
    let scratch = Scratch::new("hp-governance");
    let config = mcp_config(&scratch, &[("nag", vec!["--stop", "text=not yet"])]);
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("a")), (Duration::ZERO, end("b"))]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_STOP_MAX_REJECTIONS", "1"),
            ("SPROUT_AGENT_STOP_DECLINE_RULE", "off"),
        ],
    );
    let out = run_sprout(
        &[
            "run",
            "x",
            "--mcp-config",
            &config,
            "--stop-budget-scope",
            "prompt",
        ],
        &env,
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    assert!(stdout.contains("stopped: budget_spent"), "{stdout}");

    let bad_timeout = write_mcp_servers(
        &scratch,
        json!({"gate": {"command": fixture(), "hookTimeoutMs": 0}}),
    );
    for (args, env, expected) in [
        (
            vec!["hooks", "list", "--stop-budget-scope", "weekly"],
            vec![],
            "--stop-budget-scope=\"weekly\"",
        ),
        (
            vec!["hooks", "list"],
            vec![("SPROUT_AGENT_STOP_DECLINE_RULE", "maybe")],
            "SPROUT_AGENT_STOP_DECLINE_RULE=\"maybe\"",
        ),
        (
            vec!["hooks", "list", "--mcp-config", &bad_timeout],
            vec![],
            "mcpServers.gate.hookTimeoutMs: expected a whole number of milliseconds from 1 to 600000, found 0",
        ),
    ] {
        let out = run_sprout(&args, &env, &scratch.0);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
