//! Required gates \[F1\]-\[F3\] through the binary: a gate that hangs or
//! crashes objects in the agent's words instead of disappearing, and the
//! person is told when it goes down.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    FakeOpenAi, Scratch, assert_ok, end, env_with, fixture, run_sprout, text, write_mcp_servers,
};

/// A fixture gate whose `_Stop` runs `script`, marked required.
fn required_gate(script: &str) -> Value {
    json!({"command": fixture(), "args": ["--stop", script], "required": true})
}

// [F1]: a required gate that does not answer in time objects, in a
// sentence of the agent's own naming it and the cause; the objection
// spends budget like any other, so the model's next end goes [S3].
#[test]
fn a_required_gate_that_hangs_objects_f1() {
    let scratch = Scratch::new("gate-hangs");
    let config = write_mcp_servers(&scratch, json!({"gate": required_gate("hang")}));
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("done")),
        (Duration::ZERO, end("done, really")),
    ]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "300"),
        ],
    );
    let out = run_sprout(
        &["run", "fix it", "--mcp-config", &config],
        &env,
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    assert!(
        stdout.contains("objection from gate honoured (budget 1/3)"),
        "{stdout}"
    );
    assert!(stdout.contains("stopped: declined"), "{stdout}");
    let requests = fake.requests.lock().unwrap();
    assert_eq!(requests.len(), 2, "the objection sent the model back");
    let last = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let content = last["content"].as_str().unwrap();
    assert!(
        content
            .contains("required hook server gate did not answer _Stop: it timed out after 300 ms"),
        "{content}"
    );
}

// [F1] [F2]: a required gate that crashes during its call objects, and
// the person sees guard_down at once, on the terminal and in --json;
// `sprout hooks list` marks it required [F2].
#[test]
fn a_required_gate_that_crashes_is_said_at_once_f1_f2() {
    let scratch = Scratch::new("gate-crashes");
    let config = write_mcp_servers(&scratch, json!({"gate": required_gate("exit")}));
    for json_out in [false, true] {
        let fake = FakeOpenAi::start(vec![
            (Duration::ZERO, end("done")),
            (Duration::ZERO, end("done, really")),
        ]);
        let fake_env = fake.env();
        let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
        let mut args = vec!["run", "fix it", "--mcp-config", &config];
        if json_out {
            args.push("--json");
        }
        let out = run_sprout(&args, &env, &scratch.0);
        let stdout = assert_ok(&out);
        if json_out {
            let events: Vec<Value> = stdout
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let down = events
                .iter()
                .find(|e| e["event"] == "guard_down")
                .unwrap_or_else(|| panic!("no guard_down: {stdout}"));
            assert_eq!(down["server"], "gate");
            assert_eq!(down["cause"], "crashed");
        } else {
            assert!(
                stdout.contains("⛔ required gate gate is down: it exited"),
                "{stdout}"
            );
            assert!(stdout.contains("objection from gate honoured"), "{stdout}");
        }
        let requests = fake.requests.lock().unwrap();
        let last = requests[1]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert!(
            last["content"]
                .as_str()
                .unwrap()
                .contains("required hook server gate"),
            "{last}"
        );
    }
    let out = run_sprout(
        &["hooks", "list", "--mcp-config", &config],
        &[("MCP_HOOK_SERVERS", "*")],
        &scratch.0,
    );
    let listed = assert_ok(&out);
    assert!(
        listed.contains("required: yes, its hooks fail closed (up: it answers)"),
        "{listed}"
    );
}

// [F3]: `required` on a server the allowlist does not let hook is a
// warning naming it, and has no effect: its hang is not an objection.
#[test]
fn required_without_the_allowlist_is_a_warning_f3() {
    let scratch = Scratch::new("gate-not-allowed");
    let config = write_mcp_servers(
        &scratch,
        json!({"gate": required_gate("hang"), "other": {"command": fixture()}}),
    );
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("done"))]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "other")]);
    let out = run_sprout(
        &["run", "fix it", "--mcp-config", &config],
        &env,
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    let all = format!("{stdout}{}", text(&out.stderr));
    assert!(all.contains("server gate is marked \"required\""), "{all}");
    assert!(!stdout.contains("honoured"), "no objection: {stdout}");
    assert_eq!(fake.requests.lock().unwrap().len(), 1);
}
