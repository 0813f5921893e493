//! The README's hook servers, written with the official MCP Python SDK
//! (`docs/examples/*.py`), driven by the real `sprout` binary. Needs a
//! Python with `mcp` installed, named by `SPROUT_TEST_PYTHON`; `cargo xtask
//! ci` makes that venv from `tests/python/requirements.txt` and builds the
//! tests with the `python-mcp` feature. Without the feature this module is
//! not compiled, so it is never counted as passed when it did not run.

use serde_json::json;

use crate::support::{Scratch, run_sprout, text};

/// The venv's Python, and the example server `name` from docs/examples.
fn python_server(name: &str) -> (String, String) {
    let python = std::env::var("SPROUT_TEST_PYTHON")
        .expect("SPROUT_TEST_PYTHON names a Python with mcp installed (cargo xtask ci sets it)");
    assert!(
        std::path::Path::new(&python).exists(),
        "SPROUT_TEST_PYTHON={python} does not exist"
    );
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let example = root.join("..").join("docs").join("examples").join(name);
    assert!(example.exists(), "no example {}", example.display());
    (python, example.to_string_lossy().into_owned())
}

/// Writes `.mcp.json` with one server `name` running `example`.
fn config(scratch: &Scratch, name: &str, example: &str) -> String {
    let (python, script) = python_server(example);
    let path = scratch.path("mcp.json");
    let config = json!({"mcpServers": {name: {"command": python, "args": [script]}}});
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// `sprout hooks call HOOK` in `scratch`; its stdout, after checking the
/// exit status.
fn call(scratch: &Scratch, config: &str, hook: &str) -> String {
    call_with(scratch, config, hook, &[])
}

/// As [`call`], with more arguments (`--input JSON`).
fn call_with(scratch: &Scratch, config: &str, hook: &str, more: &[&str]) -> String {
    let mut args = vec!["hooks", "call", hook, "--mcp-config", config];
    args.extend(more);
    // A Python server's first call can be slow on a loaded machine; the
    // deadline is generous so that only a wrong answer fails the test.
    let env = [
        ("MCP_HOOK_SERVERS", "*"),
        ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "60000"),
    ];
    let out = run_sprout(&args, &env, &scratch.0);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    stdout
}

// The README's `_Stop` example: no objection while the suite is green, the
// objection's text while RED exists [S4].
#[test]
fn the_readme_stop_server_objects_only_while_red() {
    let scratch = Scratch::new("py-stop");
    let config = config(&scratch, "green", "stop.py");
    let green = call(&scratch, &config, "_Stop");
    assert!(green.contains("the agent would stop"), "{green}");
    // Asked and answered empty: not a timeout or an error, which would stop
    // the agent the same way.
    assert!(green.contains("green._Stop: empty"), "{green}");
    std::fs::write(scratch.0.join("RED"), "").unwrap();
    let red = call(&scratch, &config, "_Stop");
    assert!(red.contains("The test suite is red"), "{red}");
    assert!(
        red.contains("the agent would go on: 1 objection(s)"),
        "{red}"
    );
}

// The README's `_PostCompact` example re-injects PLAN.md [P1]-[P2], and
// nothing without it.
#[test]
fn the_readme_post_compact_server_reinjects_the_plan() {
    let scratch = Scratch::new("py-post-compact");
    let config = config(&scratch, "plan", "post_compact.py");
    let none = call(&scratch, &config, "_PostCompact");
    assert!(none.contains("re-inject 0 answer(s)"), "{none}");
    assert!(none.contains("plan._PostCompact: empty"), "{none}");
    std::fs::write(scratch.0.join("PLAN.md"), "1. validate the email field\n").unwrap();
    let plan = call(&scratch, &config, "_PostCompact");
    assert!(plan.contains("validate the email field"), "{plan}");
    assert!(plan.contains("re-inject 1 answer(s)"), "{plan}");
}

// The README's `_PreToolUse` example reads the fields its signature names
// (the SDK turns them into the tool's inputSchema), so it gets `tool`,
// `server` and `arguments` [K1]: a forbidden command is refused [E3], any
// other call goes through.
#[test]
fn the_readme_pre_tool_use_server_refuses_by_its_input() {
    let scratch = Scratch::new("py-pre-tool-use");
    let config = config(&scratch, "guard", "pre_tool_use.py");
    let forbidden = r#"{"tool":"run","server":"guard","arguments":{"command":"git push --force"}}"#;
    let refused = call_with(&scratch, &config, "_PreToolUse", &["--input", forbidden]);
    assert!(refused.contains("guard__run was not run"), "{refused}");
    assert!(
        refused.contains("the agent would refuse the tool call"),
        "{refused}"
    );
    let fine = r#"{"tool":"run","server":"guard","arguments":{"command":"git status"}}"#;
    let allowed = call_with(&scratch, &config, "_PreToolUse", &["--input", fine]);
    assert!(!allowed.contains("was not run"), "{allowed}");
    assert!(!allowed.contains("refuse"), "{allowed}");
    assert!(allowed.contains("guard._PreToolUse: empty"), "{allowed}");
}
