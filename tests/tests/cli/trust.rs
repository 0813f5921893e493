//! Project trust \[U1\]-\[U3\]: a repository's `.mcp.json` starts nothing
//! until the person trusted it. Each project server here is a real child
//! whose start leaves a file behind, so "nothing started" is seen on disk.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use rexpect::session::spawn_command;
use serde_json::{Value, json};

use crate::support::{Scratch, assert_ok, fixture, run_sprout, sprout_command, text};

/// A project server entry that leaves `marker` behind when it starts, then
/// serves as the fixture (a `_Stop` hook and a tool).
fn leaves_marker(marker: &str) -> Value {
    json!({"command": "sh", "args": ["-c", format!("touch '{marker}'; exec '{}'", fixture())]})
}

/// Writes the project's `.mcp.json` in `dir`.
fn project(dir: &Path, servers: Value) {
    std::fs::write(
        dir.join(".mcp.json"),
        json!({"mcpServers": servers}).to_string(),
    )
    .unwrap();
}

/// The script model, ending the turn at once.
fn script(scratch: &Scratch) -> String {
    let path = scratch.path("script.jsonl");
    std::fs::write(&path, "{\"text\": \"done\"}\n").unwrap();
    path
}

const SCRIPTED: [(&str, &str); 1] = [("SPROUT_AGENT_PROVIDER", "script")];

// [U2] [U3]: without a terminal, `run` and `hooks list/call` exit 2 before
// any server starts, naming the file, each entry and the ways on; `sprout
// trust --yes` trusts them; a changed entry is untrusted again; --revoke
// forgets; --mcp-config names the person's own file, trusted as it is.
#[test]
fn a_project_file_starts_nothing_until_trusted_u2_u3() {
    let scratch = Scratch::new("trust-project");
    let marker = scratch.path("started");
    project(&scratch.0, json!({"proj": leaves_marker(&marker)}));
    let script = script(&scratch);
    let file = std::fs::canonicalize(scratch.0.join(".mcp.json")).unwrap();

    for args in [
        vec!["run", "hello", "--script", &script],
        vec!["hooks", "list"],
        vec!["hooks", "call", "_Stop", "--server", "proj"],
    ] {
        let out = run_sprout(&args, &SCRIPTED, &scratch.0);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "{} names MCP servers you have not trusted",
                file.display()
            )),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("proj: sh -c"),
            "the full command line: {stderr}"
        );
        assert!(stderr.contains("sprout trust"), "{stderr}");
        assert!(stderr.contains("--mcp-config FILE"), "{stderr}");
        assert!(
            !Path::new(&marker).exists(),
            "{args:?} started an untrusted server"
        );
    }

    // Nobody to ask and no --yes: nothing is trusted.
    let out = run_sprout(&["trust"], &[], &scratch.0);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("pass --yes"),
        "{}",
        text(&out.stderr)
    );

    let out = run_sprout(&["trust", "--yes"], &[], &scratch.0);
    let said = assert_ok(&out);
    assert!(said.contains("proj: sh -c"), "shown before trusted: {said}");
    assert!(said.contains("trusted: proj"), "{said}");
    assert!(!Path::new(&marker).exists(), "trusting starts nothing");

    // The ledger is the person's alone [U2].
    let dir = scratch.0.join(".config").join("sprout");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("trust.json")), 0o600);

    let out = run_sprout(&["hooks", "list"], &SCRIPTED, &scratch.0);
    let listed = assert_ok(&out);
    assert!(listed.contains("proj: up"), "{listed}");
    assert!(Path::new(&marker).exists(), "a trusted server starts");

    let out = run_sprout(&["trust", "--list"], &[], &scratch.0);
    let list = assert_ok(&out);
    assert!(
        list.contains(&format!("{}: proj (sha256 ", file.display())),
        "{list}"
    );

    // An edit of the entry (one more argument) is untrusted again.
    std::fs::remove_file(&marker).unwrap();
    let mut changed = leaves_marker(&marker);
    changed["args"][1] = json!(format!(
        "touch '{marker}'; exec '{}' --stop text=",
        fixture()
    ));
    project(
        &scratch.0,
        json!({"proj": changed, "other": leaves_marker(&marker)}),
    );
    let out = run_sprout(
        &["run", "hello", "--script", &script],
        &SCRIPTED,
        &scratch.0,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("(changed since you trusted it)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("other: sh -c"),
        "an added entry asks too: {stderr}"
    );
    assert!(!Path::new(&marker).exists(), "a changed entry started");

    // The person's own file is trusted as it is [U1].
    let out = run_sprout(
        &["hooks", "list", "--mcp-config", ".mcp.json"],
        &SCRIPTED,
        &scratch.0,
    );
    assert_ok(&out);
    assert!(
        Path::new(&marker).exists(),
        "--mcp-config starts its servers"
    );

    // A file that is no object (serde would read an array as the struct)
    // starts nothing either.
    std::fs::write(
        scratch.0.join(".mcp.json"),
        json!([{"x": leaves_marker(&marker)}]).to_string(),
    )
    .unwrap();
    std::fs::remove_file(&marker).unwrap();
    let out = run_sprout(&["hooks", "list"], &SCRIPTED, &scratch.0);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("expected a JSON object"),
        "{}",
        text(&out.stderr)
    );
    assert!(!Path::new(&marker).exists(), "an array started a server");

    let out = run_sprout(&["trust", "--revoke"], &[], &scratch.0);
    assert!(
        assert_ok(&out).contains("no longer trusted in"),
        "{}",
        text(&out.stdout)
    );
    let out = run_sprout(&["trust", "--list"], &[], &scratch.0);
    assert_eq!(assert_ok(&out), "no MCP server entries are trusted\n");
}

// [U3]: on a terminal the person is asked once, shown each entry; no starts
// none of them and the session goes on without them; yes trusts them
// (recorded: the next run asks nothing).
#[test]
fn a_terminal_asks_once_and_no_starts_none_u3() {
    let scratch = Scratch::new("trust-terminal");
    let marker = scratch.path("started");
    project(&scratch.0, json!({"proj": leaves_marker(&marker)}));
    let script = script(&scratch);
    let ask = |answer: &str| {
        let mut command = sprout_command(
            &["run", "hello", "--script", &script],
            &SCRIPTED,
            &scratch.0,
        );
        // The pty is its stdin and stderr.
        command.stdin(std::process::Stdio::inherit());
        let mut session = spawn_command(command, Some(60_000)).expect("sprout runs in a pty");
        session
            .exp_string("names MCP servers you have not trusted")
            .expect("the question");
        session
            .exp_string("proj: sh -c")
            .expect("the entry is shown");
        session
            .exp_string("Start them, and trust them from now on? [y/N]")
            .expect("asked once");
        session.send_line(answer).unwrap();
        let rest = session.exp_eof().expect("sprout ends");
        let status = session.process().wait().expect("sprout exits");
        (rest, status)
    };

    let (rest, status) = ask("n");
    assert!(rest.contains("not starting proj"), "{rest}");
    assert!(rest.contains("done"), "the session goes on: {rest}");
    assert!(
        matches!(status, rexpect::process::WaitStatus::Exited(_, 0)),
        "{status:?}"
    );
    assert!(!Path::new(&marker).exists(), "no starts none");

    let (rest, _) = ask("y");
    assert!(rest.contains("done"), "{rest}");
    assert!(Path::new(&marker).exists(), "yes starts them");

    // Recorded: no question now.
    std::fs::remove_file(&marker).unwrap();
    let out = run_sprout(
        &["run", "hello", "--script", &script],
        &SCRIPTED,
        &scratch.0,
    );
    assert_ok(&out);
    assert!(Path::new(&marker).exists());
    // A run that asked nothing waited for nobody.
    assert!(
        !text(&out.stderr).contains("[y/N]"),
        "{}",
        text(&out.stderr)
    );
}
