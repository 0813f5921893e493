//! `sprout hooks list` and `sprout hooks call`.

use crate::support::{
    Scratch, all_gone, gate_server, mcp_config, run_sprout, text, write_mcp_servers,
};

#[test]
fn hooks_list_shows_tools_hooks_allowlist_and_warnings() {
    let scratch = Scratch::new("list");
    let config = mcp_config(
        &scratch,
        &[
            (
                "alpha",
                vec!["--tools", "read,write", "--hooks", "_Stop,_PostCompact"],
            ),
            ("beta", vec!["--hooks", "_stop,_Other"]),
        ],
    );
    let out = run_sprout(
        &["hooks", "list", "--mcp-config", &config],
        &[("MCP_HOOK_SERVERS", "alpha, alhpa")],
        &scratch.0,
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    for expected in [
        "these servers may hook: alpha, alhpa",
        "alpha: up",
        "  may hook: yes",
        "  hooks:    _Stop _PostCompact",
        "  tools:    alpha__read alpha__write",
        "beta: up",
        "  may hook: no",
        "MCP_HOOK_SERVERS names \"alhpa\", but no configured MCP server has that name",
        "server beta lists \"_stop\"",
        "did you mean _Stop?",
        "server beta lists \"_Other\"",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

#[test]
fn hooks_call_runs_one_round_like_the_agent() {
    let scratch = Scratch::new("call");
    let config = mcp_config(
        &scratch,
        &[
            ("alpha", vec!["--stop", "text=two items open"]),
            ("beta", vec!["--stop", "empty"]),
        ],
    );
    let out = run_sprout(
        &["hooks", "call", "_Stop", "--mcp-config", &config],
        &[("MCP_HOOK_SERVERS", "*")],
        &scratch.0,
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("alpha._Stop: objection"), "{stdout}");
    assert!(stdout.contains("two items open"), "{stdout}");
    assert!(stdout.contains("beta._Stop: empty"), "{stdout}");
    assert!(
        stdout.contains("the agent would go on: 1 objection(s)"),
        "{stdout}"
    );

    // One server, whatever the allowlist says.
    let out = run_sprout(
        &[
            "hooks",
            "call",
            "_Stop",
            "--server",
            "beta",
            "--mcp-config",
            &config,
        ],
        &[],
        &scratch.0,
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("beta._Stop: empty") && !stdout.contains("alpha._Stop"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the agent would stop: no_objection"),
        "{stdout}"
    );

    let out = run_sprout(
        &[
            "hooks",
            "call",
            "_PostCompact",
            "--server",
            "alpha",
            "--mcp-config",
            &config,
        ],
        &[],
        &scratch.0,
    );
    assert!(
        text(&out.stdout).contains("the agent would re-inject 0 answer(s)"),
        "{}",
        text(&out.stdout)
    );
}

// The gate server runs its command in its own process group and kills that
// group when the agent cancels the call (the hook deadline passed).
#[test]
fn gate_kills_its_command_when_the_call_is_cancelled() {
    let scratch = Scratch::new("gate");
    let pidfile = scratch.path("command.pid");
    let script = format!("echo $$ > {pidfile}; exec sleep 60");
    let config_path =
        write_mcp_servers(&scratch, serde_json::json!({"gate": gate_server(&script)}));
    let out = run_sprout(
        &[
            "hooks",
            "call",
            "_Stop",
            "--server",
            "gate",
            "--mcp-config",
            &config_path,
            "--hook-timeout-ms",
            "1500",
        ],
        &[],
        &scratch.0,
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("gate._Stop: timeout"),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .expect("the command ran")
        .trim()
        .parse()
        .unwrap();
    assert!(
        all_gone(&[pid]),
        "the gate's command outlived the cancelled call"
    );
}
