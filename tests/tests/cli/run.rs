//! `sprout run` against the fake model and real hook servers.

use std::time::{Duration, Instant};

use crate::support::{
    FakeOpenAi, Scratch, alive, all_gone, end, env_with, fixture, gate_server, logged_pids,
    mcp_config, run_sprout, sprout_command, text, tool, write_mcp_servers,
};

// An objection, then a stop; the hook's text reached the model as a tool
// result holding the JSON envelope [I1], [I2].
#[test]
fn objection_then_stop() {
    let scratch = Scratch::new("objection");
    let config = mcp_config(
        &scratch,
        &[(
            "gate",
            vec!["--tools", "work", "--stop", "text=run the tests,empty"],
        )],
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("done")),
        (Duration::ZERO, tool("c1", "gate__work")),
        (Duration::ZERO, end("done now")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
    let out = run_sprout(
        &["run", "fix it", "--mcp-config", &config],
        &env,
        &scratch.0,
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("gate._Stop: objection"), "{stdout}");
    assert!(stdout.contains("stopped: no_objection"), "{stdout}");
    let requests = fake.requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    let messages = requests[1]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "tool");
    assert_eq!(
        last["content"],
        r#"{"hook":"_Stop","server":"gate","text":"run the tests"}"#
    );
    let tools = requests[0]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "hooks are never offered [H2]");
    assert_eq!(tools[0]["function"]["name"], "gate__work");
}

// [S2] and [S3] through the binary: the model that ends twice is let go; the
// budget set by the environment is honoured.
#[test]
fn consecutive_rule_and_budget() {
    let scratch = Scratch::new("rules");
    let config = mcp_config(
        &scratch,
        &[("nag", vec!["--tools", "work", "--stop", "text=not yet"])],
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("done")),
        (Duration::ZERO, end("done, really")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "nag")]);
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    assert!(
        text(&out.stdout).contains("stopped: declined"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(out.status.code(), Some(0));

    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("a")),
        (Duration::ZERO, tool("c1", "nag__work")),
        (Duration::ZERO, end("b")),
    ]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_STOP_MAX_REJECTIONS", "1"),
        ],
    );
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("(budget 1/1)") && stdout.contains("stopped: budget_spent"),
        "{stdout}"
    );
}

// A hanging hook costs one deadline and is treated as no objection [T1].
#[test]
fn hanging_hook_times_out() {
    let scratch = Scratch::new("hang");
    let config = mcp_config(&scratch, &[("slow", vec!["--stop", "hang"])]);
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("done"))]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "400"),
        ],
    );
    let started = Instant::now();
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("slow._Stop: timeout"), "{stdout}");
    assert!(stdout.contains("stopped: no_objection"), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

// [T3], [T4] through the binary: a wedged server is killed on its second
// timeout, restarted lazily beside a round, and heard again.
#[test]
fn killed_and_restarted_server() {
    let scratch = Scratch::new("restart");
    let log = scratch.path("wedge.log");
    let config = mcp_config(
        &scratch,
        &[
            (
                "wedge",
                vec![
                    "--tools",
                    "work",
                    "--stop",
                    "hang,hang,text=back again,empty",
                    "--log",
                    &log,
                ],
            ),
            ("nag", vec!["--tools", "work", "--stop", "text=keep going"]),
        ],
    );
    // Round 2 kills wedge. The model's next answer comes 400 ms after sprout
    // asked for it, so round 3 runs more than 400 ms after the kill: past the
    // 250 ms backoff however slow the machine (a lower bound, not a race).
    // Round 3 starts the restart beside itself and leaves wedge out. The
    // model then calls wedge's own tool, which waits for that start to end,
    // so round 4 hears wedge however long its handshake takes.
    let after_backoff = Duration::from_millis(400);
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("1")),
        (Duration::ZERO, tool("c1", "nag__work")),
        (Duration::ZERO, end("2")),
        (after_backoff, tool("c2", "nag__work")),
        (Duration::ZERO, end("3")),
        (Duration::ZERO, tool("c3", "wedge__work")),
        (Duration::ZERO, end("4")),
        (Duration::ZERO, tool("c4", "nag__work")),
        (Duration::ZERO, end("5")),
    ]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "300"),
            ("SPROUT_AGENT_STOP_MAX_REJECTIONS", "4"),
        ],
    );
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    for expected in [
        "wedge._Stop: timeout",
        "wedge._Stop: killed",
        "server wedge killed after two hook timeouts in a row",
        "restarting server wedge (attempt 2)",
        "wedge._Stop: objection",
        "back again",
        "stopped: budget_spent",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    // The restart came from round 3, not from the tool call: that call ran
    // on the restarted server.
    let restart = stdout.find("restarting server wedge (attempt 2)").unwrap();
    let round_3 = stdout.find("_Stop round 3").expect("a third round");
    assert!(
        restart < round_3,
        "the restart was not beside round 3:\n{stdout}"
    );
    let requests = fake.requests.lock().unwrap();
    let after_c3 = requests[6]["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(after_c3["tool_call_id"], "c3");
    assert_eq!(after_c3["content"], "{}", "wedge__work did not run");
    let pids = logged_pids(&log, "start");
    assert_eq!(pids.len(), 2);
    assert!(
        pids.iter().all(|p| !alive(*p)),
        "a wedge process outlived sprout"
    );
}

// Ctrl-C during a hook round: exit 130, the reason printed, no process left.
#[test]
fn ctrl_c_mid_hook_exits_130_and_cleans_up() {
    let scratch = Scratch::new("sigint");
    let log = scratch.path("hang.log");
    let config = mcp_config(
        &scratch,
        &[(
            "slow",
            vec!["--stop", "hang", "--log", &log, "--grandchild"],
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
    let child = sprout_command(&["run", "x", "--mcp-config", &config], &env, &scratch.0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("\"call\"")
    {
        assert!(Instant::now() < deadline, "the hook was never called");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("stopped: cancelled"), "{stdout}");
    let pids = [logged_pids(&log, "start"), logged_pids(&log, "grandchild")].concat();
    assert_eq!(pids.len(), 2);
    assert!(all_gone(&pids), "processes left behind: {pids:?}");
}

// A gate server killed after its second timeout [T3] takes its command with
// it: the kill is a SIGTERM first, which the gate answers by stopping the
// command's process group, then a SIGKILL to the server's group.
#[test]
fn a_killed_gate_takes_its_command_with_it() {
    let scratch = Scratch::new("gate-kill");
    let pids = scratch.path("commands.pid");
    let script = format!("echo $$ >> {pids}; exec sleep 60");
    let nag = serde_json::json!({"command": fixture(), "args": ["--tools", "work", "--stop", "text=keep going"]});
    let config = write_mcp_servers(
        &scratch,
        serde_json::json!({"gate": gate_server(&script), "nag": nag}),
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("1")),
        (Duration::ZERO, tool("c1", "nag__work")),
        (Duration::ZERO, end("2")),
        (Duration::ZERO, tool("c2", "nag__work")),
        (Duration::ZERO, end("3")),
    ]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "700"),
            ("SPROUT_AGENT_STOP_MAX_REJECTIONS", "2"),
        ],
    );
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("gate._Stop: killed"),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let started: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(started.len(), 2, "one command per round the gate was in");
    assert!(
        all_gone(&started),
        "a gate command outlived its killed server: {started:?}"
    );
}
