//! Required gates \[F1\]-\[F3\] through the binary: a gate that hangs or
//! crashes objects in the agent's words instead of disappearing, and the
//! person is told when it goes down.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    FakeOpenAi, Scratch, assert_ok, end, env_with, fixture, run_sprout, text, write_mcp_servers,
};

/// The events of a `--json` stdout, one a line.
fn json_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

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
            let events = json_events(&stdout);
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

/// A fixture server with tool `work` (it echoes its arguments), and
/// `extra` fields in its entry.
fn worker(extra: Value) -> Value {
    let mut entry = json!({"command": fixture(), "args": ["--tools", "work"]});
    if let Value::Object(extra) = extra {
        entry.as_object_mut().unwrap().extend(extra);
    }
    entry
}

/// The content of the last message of request `n` to the fake model.
fn last_message(fake: &FakeOpenAi, n: usize) -> String {
    let requests = fake.requests.lock().unwrap();
    let last = requests[n]["messages"].as_array().unwrap().last().unwrap();
    last["content"].as_str().unwrap_or_default().to_owned()
}

// [U4] [U6] [U7]: in `ask` mode with nobody to ask, the call is not run;
// its result tells the model how the person can allow it, and the events
// say who decided. A rule of the entry (`autoApprove`) lets it run
// unasked.
#[test]
fn without_a_terminal_a_call_is_denied_unless_a_rule_allows_it_u4_u6() {
    let scratch = Scratch::new("approval-nobody");
    for (rules, runs) in [(json!({}), false), (json!({"autoApprove": ["wo*"]}), true)] {
        let config = write_mcp_servers(&scratch, json!({"w": worker(rules)}));
        let fake = FakeOpenAi::start(vec![
            (Duration::ZERO, crate::support::tool("c1", "w__work")),
            (Duration::ZERO, end("done")),
        ]);
        let fake_env = fake.env();
        let env = env_with(&fake_env, &[("SPROUT_AGENT_APPROVAL", "ask")]);
        let out = run_sprout(
            &["run", "go", "--json", "--mcp-config", &config],
            &env,
            &scratch.0,
        );
        let stdout = assert_ok(&out);
        let events = json_events(&stdout);
        let answered = events
            .iter()
            .find(|e| e["event"] == "approval_answered")
            .unwrap_or_else(|| panic!("no approval_answered: {stdout}"));
        let result = last_message(&fake, 1);
        if runs {
            assert_eq!(answered["by"], "rule", "{answered}");
            assert_eq!(answered["allowed"], true);
            assert!(
                !events.iter().any(|e| e["event"] == "approval_asked"),
                "a rule asks nobody: {stdout}"
            );
            assert_eq!(result, "{}", "the tool ran and echoed its arguments");
        } else {
            assert_eq!(answered["by"], "nobody", "{answered}");
            assert_eq!(answered["allowed"], false);
            assert!(events.iter().any(|e| e["event"] == "approval_asked"));
            assert!(
                result.contains("w__work was not run: tool calls need the person's approval"),
                "{result}"
            );
            assert!(result.contains("--approval auto"), "{result}");
            assert!(
                result.contains("add \"work\" to \"autoApprove\" in the entry of server w"),
                "{result}"
            );
        }
    }
}

/// Runs `sprout run go` in a pseudo-terminal against `answers` of the fake
/// model, in `ask` mode, with `each` driving the session; returns the fake
/// and the exit status.
fn on_a_terminal(
    scratch: &Scratch,
    config: &str,
    json: bool,
    answers: Vec<Value>,
    each: impl FnOnce(&mut rexpect::session::PtySession),
) -> (FakeOpenAi, rexpect::process::WaitStatus, String) {
    let fake = FakeOpenAi::start(answers.into_iter().map(|a| (Duration::ZERO, a)).collect());
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("SPROUT_AGENT_APPROVAL", "ask")]);
    let mut args = vec!["run", "go", "--mcp-config", config];
    if json {
        args.push("--json");
    }
    let mut command = crate::support::sprout_command(&args, &env, &scratch.0);
    command.stdin(std::process::Stdio::inherit());
    let mut session =
        rexpect::session::spawn_command(command, Some(60_000)).expect("sprout runs in a pty");
    each(&mut session);
    let rest = session.exp_eof().expect("sprout ends");
    let status = session.process().wait().expect("sprout exits");
    (fake, status, rest)
}

const QUESTION: &str = "allow w__work? [y/s/a/n]";

// [U3] [U6] [U7] on a real terminal: each answer (deny with a reason, allow
// once, allow for the session, always) does what it says, and always is
// remembered by the next session; Ctrl-C during the question withdraws it
// and ends the prompt as a cancel does [U5].
#[test]
fn a_person_at_the_terminal_answers_each_way_u6() {
    use crate::support::tool;
    use rexpect::process::WaitStatus;
    let scratch = Scratch::new("approval-terminal");
    let config = write_mcp_servers(&scratch, json!({"w": worker(json!({}))}));

    let (fake, status, _) = on_a_terminal(
        &scratch,
        &config,
        false,
        vec![tool("c1", "w__work"), end("done")],
        |s| {
            s.exp_string("the model wants to run w__work {}")
                .expect("the call is shown");
            s.exp_string(QUESTION).expect("the question");
            s.send_line("n use the other one").unwrap();
            s.exp_string("w__work denied by you: use the other one")
                .expect("said");
        },
    );
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
    assert_eq!(
        last_message(&fake, 1),
        "the person denied this call of w__work: use the other one"
    );

    let (fake, _, _) = on_a_terminal(
        &scratch,
        &config,
        false,
        vec![tool("c1", "w__work"), end("done")],
        |s| {
            s.exp_string(QUESTION).expect("the question");
            s.send_line("maybe").unwrap();
            s.exp_string("please answer y, s, a or n")
                .expect("asked again");
            s.send_line("y").unwrap();
            s.exp_string("w__work allowed by you").expect("said");
        },
    );
    assert_eq!(last_message(&fake, 1), "{}", "allowed once, it ran");

    let (fake, _, _) = on_a_terminal(
        &scratch,
        &config,
        false,
        vec![tool("c1", "w__work"), tool("c2", "w__work"), end("done")],
        |s| {
            s.exp_string(QUESTION).expect("the question");
            s.send_line("s").unwrap();
            s.exp_string("w__work allowed by you, for this session")
                .expect("said");
            s.exp_string("w__work allowed by an earlier answer for this session")
                .expect("the second call is not asked about");
        },
    );
    assert_eq!(last_message(&fake, 2), "{}");

    let (_, status, _) = on_a_terminal(
        &scratch,
        &config,
        false,
        vec![tool("c1", "w__work"), end("done")],
        |s| {
            s.exp_string(QUESTION).expect("the question");
            s.send_line("a").unwrap();
            s.exp_string("w__work allowed by you, for good")
                .expect("said");
        },
    );
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
    // Always is the person's for good: a session with nobody to ask runs it.
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, tool("c1", "w__work")),
        (Duration::ZERO, end("done")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("SPROUT_AGENT_APPROVAL", "ask")]);
    let out = run_sprout(&["run", "go", "--mcp-config", &config], &env, &scratch.0);
    let stdout = assert_ok(&out);
    assert!(
        stdout.contains("w__work allowed by an earlier answer for good"),
        "{stdout}"
    );
    assert_eq!(last_message(&fake, 1), "{}");

    // Ctrl-C while the question is open: withdrawn, the prompt cancelled.
    let other = write_mcp_servers(&scratch, json!({"w2": worker(json!({}))}));
    let (fake, status, rest) = on_a_terminal(
        &scratch,
        &other,
        true,
        vec![tool("c1", "w2__work"), end("never asked for")],
        |s| {
            s.exp_string("allow w2__work? [y/s/a/n]")
                .expect("the question");
            s.send_control('c').unwrap();
        },
    );
    // The prompt ended cancelled, in the loop's words and the policy's: no
    // stray failure of the policy's prompt after.
    let ends: Vec<Value> = rest
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|e| e["event"] == "prompt_ended" || e["decision"] == "prompt_ended")
        .collect();
    assert!(ends.len() >= 2, "{rest}");
    for end in &ends {
        assert_eq!(end["reason"], "cancelled", "{rest}");
    }
    assert!(matches!(status, WaitStatus::Exited(_, 130)), "{status:?}");
    assert_eq!(
        fake.requests.lock().unwrap().len(),
        1,
        "nothing more was asked of the model"
    );
}

// [U5]: [H3] first, then `_PreToolUse`, then approval: a call a hook
// refused, or one that reaches no tool, asks nobody.
#[test]
fn a_refused_or_unknown_call_asks_nobody_u5() {
    let scratch = Scratch::new("approval-order");
    let config = write_mcp_servers(
        &scratch,
        json!({"w": {"command": fixture(), "args": ["--tools", "work", "--script", "_PreToolUse=text=not this one"]}}),
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, crate::support::tool("c1", "w__work")),
        (Duration::ZERO, crate::support::tool("c2", "w__nothing")),
        (Duration::ZERO, end("done")),
    ]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[("SPROUT_AGENT_APPROVAL", "ask"), ("MCP_HOOK_SERVERS", "*")],
    );
    let out = run_sprout(
        &["run", "go", "--json", "--mcp-config", &config],
        &env,
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    assert!(!stdout.contains("approval_"), "nobody was asked: {stdout}");
    assert!(
        last_message(&fake, 1).contains("not this one"),
        "refused by the hook"
    );
    assert!(
        last_message(&fake, 2).contains("unknown tool"),
        "{}",
        last_message(&fake, 2)
    );
}
