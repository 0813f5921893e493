//! Sessions that survive the process, through the binary: `sprout run`
//! saves its transcript as it goes; `--continue` and `--resume ID` pick it
//! up with its history and its `_Stop` budget; a SIGKILL at any point
//! leaves a transcript that resumes whole; `sprout sessions` lists them.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    FakeOpenAi, Scratch, assert_ok, end, env_with, mcp_config, run_sprout, sprout_command, text,
    tool,
};

/// Where the tests' sprout keeps sessions run in `dir` (support sets
/// XDG_STATE_HOME to `dir/.state`).
fn sessions_dir(dir: &Path) -> PathBuf {
    dir.join(".state/sprout/sessions")
}

/// The transcripts in `dir`'s sessions directory.
fn transcripts(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(sessions_dir(dir))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Every tool call of an assistant message in a Chat Completions request
/// is answered by exactly one tool message before the next assistant one.
fn assert_wire_paired(messages: &[Value]) {
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        match m["role"].as_str().unwrap() {
            "assistant" => {
                assert!(open.is_empty(), "unanswered {open:?} in {messages:#?}");
                open = m["tool_calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| c["id"].as_str().unwrap().to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap();
                let at = open.iter().position(|o| o == id);
                assert!(at.is_some(), "orphan result {id} in {messages:#?}");
                open.remove(at.unwrap());
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "unanswered {open:?} at the end");
}

// [S3], [E1]: a prompt with a tool call and an objection (budget 1); then
// `--continue` in the same directory: the model's next request carries the
// whole earlier history, the budget is still spent (no `_Stop` call, it
// stops with budget_spent), and `_SessionStart` is asked again, with the
// same session id. `sprout sessions` lists the session with its two
// prompts; `--resume ID` picks it up too.
#[test]
fn continue_restores_history_and_budget() {
    let scratch = Scratch::new("sessions-continue");
    let log = scratch.path("gate.log");
    let config = mcp_config(
        &scratch,
        &[(
            "gate",
            vec![
                "--tools",
                "work",
                "--stop",
                "text=run the tests,empty",
                "--hooks",
                "_Stop,_SessionStart",
                "--script",
                "_SessionStart=text=on branch main",
                "--schema",
                "_SessionStart=session_id",
                "--log",
                &log,
            ],
        )],
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("done")),
        (Duration::ZERO, tool("c1", "gate__work")),
        (Duration::ZERO, end("done now")),
        (Duration::ZERO, end("docs done")),
        (Duration::ZERO, end("and again")),
    ]);
    let fake_env = fake.env();
    let env = env_with(
        &fake_env,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_STOP_MAX_REJECTIONS", "1"),
        ],
    );
    let args = |prompt: &'static str, more: &[&'static str]| -> Vec<String> {
        let mut args: Vec<String> = vec!["run".into(), prompt.into()];
        args.extend(more.iter().map(|s| s.to_string()));
        args.extend(["--mcp-config".into(), config.clone()]);
        args
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_sprout(&args, &env, &scratch.0)
    };
    let first = assert_ok(&run(args("fix it", &[])));
    assert!(first.contains("(budget 1/1)"), "{first}");
    assert!(first.contains("stopped: budget_spent"), "{first}");
    let files = transcripts(&scratch.0);
    assert_eq!(files.len(), 1, "{files:?}");
    let id = files[0].file_stem().unwrap().to_str().unwrap().to_owned();

    let continued = run(args("and the docs", &["--continue"]));
    // Which session was picked up is said before anything of it happens.
    let said = text(&continued.stderr);
    assert!(
        said.contains(&format!(
            "sprout: continuing session {id} (1 prompt(s) since "
        )) && said.contains("last: budget_spent): fix it"),
        "{said}"
    );
    let second = assert_ok(&continued);
    assert!(second.contains("stopped: budget_spent"), "{second}");
    assert!(!second.contains("gate._Stop"), "no _Stop call: {second}");
    assert_eq!(
        transcripts(&scratch.0),
        files,
        "the same session, no new one"
    );

    let requests = fake.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 4);
    let before = requests[2]["messages"].as_array().unwrap();
    let after = requests[3]["messages"].as_array().unwrap();
    // The whole earlier history (system prompt, prompt, _SessionStart pair,
    // objection pair, the tool call and its result), the last answer...
    assert_eq!(&after[..before.len()], before.as_slice());
    assert_eq!(after[before.len()]["content"], "done now");
    // ... then the new prompt and what _SessionStart adds again [E1].
    assert_eq!(after[before.len() + 1]["content"], "and the docs");
    assert!(
        after[before.len() + 3]["content"]
            .as_str()
            .unwrap()
            .contains("_SessionStart"),
        "{after:#?}"
    );
    assert_wire_paired(after);
    let starts = sprout_tests::log_events(&log, "call")
        .into_iter()
        .filter(|c| c["tool"] == "_SessionStart")
        .map(|c| c["arguments"]["session_id"].clone())
        .collect::<Vec<_>>();
    assert_eq!(starts, [Value::from(id.clone()), Value::from(id.clone())]);

    // `sprout sessions`, human and --json.
    let listed = run_sprout(&["sessions"], &[], &scratch.0);
    let listed = assert_ok(&listed);
    let row = listed
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{listed}"));
    let cwd = std::fs::canonicalize(&scratch.0).unwrap();
    assert!(row.contains(" 2 ") && row.contains("budget_spent"), "{row}");
    assert!(row.ends_with(&cwd.display().to_string()), "{row}");
    let json = assert_ok(&run_sprout(&["sessions", "--json"], &[], &scratch.0));
    let json: Value = serde_json::from_str(&json).unwrap();
    let session = &json["sessions"][0];
    assert_eq!(session["id"], id.as_str());
    assert_eq!(session["prompts"], 2);
    assert_eq!(session["last_stop"], "budget_spent");
    assert_eq!(session["cwd"], cwd.display().to_string());

    // --resume ID, from anywhere.
    let elsewhere = Scratch::new("sessions-elsewhere");
    let dir = sessions_dir(&scratch.0);
    let dir = dir.to_str().unwrap();
    let mut env = env.clone();
    env.push(("SPROUT_SESSIONS_DIR", dir));
    let out = run_sprout(
        &["run", "once more", "--resume", &id, "--mcp-config", &config],
        &env,
        &elsewhere.0,
    );
    assert!(assert_ok(&out).contains("stopped: budget_spent"));
    let requests = fake.requests.lock().unwrap();
    let last = requests[4]["messages"].as_array().unwrap();
    assert_eq!(&last[..after.len()], after.as_slice());
}

// Runs `sprout run` against a slow model and a slow tool, SIGKILLs it once
// its transcript holds `messages` message records, and returns the
// transcript.
fn killed_at(scratch: &Scratch, config: &str, messages: usize) -> PathBuf {
    let fake = FakeOpenAi::start(vec![
        (Duration::from_millis(300), {
            let mut two = tool("c1", "slow__work");
            let calls = two["choices"][0]["message"]["tool_calls"]
                .as_array_mut()
                .unwrap();
            let mut second = calls[0].clone();
            second["id"] = "c2".into();
            calls.push(second);
            two
        }),
        (Duration::from_millis(300), end("done")),
        (Duration::from_millis(300), end("done now")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
    let mut child = sprout_command(&["run", "fix it", "--mcp-config", config], &env, &scratch.0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let path = loop {
        assert!(
            Instant::now() < deadline,
            "no transcript with {messages} message(s)"
        );
        if let Some(path) = transcripts(&scratch.0).pop() {
            let written = std::fs::read_to_string(&path).unwrap_or_default();
            if written.matches("{\"record\":\"message\"").count() >= messages {
                break path;
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "sprout ended before the kill"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    path
}

// A crash loses at most the record in flight: killed (SIGKILL) while the
// model works, while two tool calls run, after their results, and during a
// `_Stop` round, the transcript reads back paired (a call whose result was
// never written gets an error result, with a warning), and `--resume`
// sends the model the whole saved history, paired; after it the file
// reads back with no warning at all.
#[test]
fn killed_at_any_point_resumes_whole() {
    for messages in [1, 2, 4, 5] {
        let scratch = Scratch::new(&format!("sessions-kill-{messages}"));
        let config = mcp_config(
            &scratch,
            &[(
                "slow",
                vec![
                    "--tools",
                    "work",
                    "--tool-delay",
                    "600",
                    "--stop",
                    "delay=600=check it",
                ],
            )],
        );
        let path = killed_at(&scratch, &config, messages);
        let saved = agent_loop::transcript::read(&path).unwrap();
        agent_loop::check_pairing(&saved.history).unwrap();
        assert!(saved.history.len() >= messages, "{saved:#?}");
        assert_eq!(saved.original_task.as_deref(), Some("fix it"));
        assert_eq!(saved.last_end, None, "the prompt never ended");
        if messages == 2 {
            // Killed while the tools ran: no result had been written.
            assert_eq!(saved.repaired.len(), 2, "{saved:#?}");
        }

        let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("resumed"))]);
        let fake_env = fake.env();
        let env = env_with(&fake_env, &[("SPROUT_SESSIONS", "on")]);
        let id = saved.header.session_id.clone();
        let out = run_sprout(&["run", "go on", "--resume", &id], &env, &scratch.0);
        let stdout = assert_ok(&out);
        assert!(stdout.contains("resumed"), "{stdout}");
        let stderr = text(&out.stderr);
        if !saved.repaired.is_empty() {
            assert!(
                stderr.contains("no result was saved for tool call(s)"),
                "{stderr}"
            );
            assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        }
        let requests = fake.requests.lock().unwrap();
        let sent = requests[0]["messages"].as_array().unwrap();
        // The system prompt, the saved history, the new prompt.
        assert_eq!(sent.len(), saved.history.len() + 2, "{sent:#?}");
        assert_eq!(sent[1]["content"], "fix it");
        assert_eq!(sent.last().unwrap()["content"], "go on");
        assert_wire_paired(sent);
        let again = agent_loop::transcript::read(&path).unwrap();
        assert_eq!(again.warnings, [], "whole again after the resume");
        assert_eq!(again.prompts, 2);
        assert_eq!(again.last_end.as_deref(), Some("hooks_off"));
    }
}

// A corrupt transcript is read up to its last good record, with a warning
// naming the file and line, by `sprout sessions` and by `--continue`; a
// file that is no transcript is named and skipped.
#[test]
fn a_corrupt_transcript_is_read_up_to_its_last_good_record() {
    let scratch = Scratch::new("sessions-corrupt");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("one")),
        (Duration::ZERO, end("two")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[]);
    assert_ok(&run_sprout(&["run", "first"], &env, &scratch.0));
    let path = transcripts(&scratch.0).pop().unwrap();
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        format!("{good}{{\"record\":\"message\",\"mess\n{{}}\n"),
    )
    .unwrap();
    std::fs::write(sessions_dir(&scratch.0).join("junk.jsonl"), "hello\n").unwrap();
    let lines = good.lines().count();

    let out = run_sprout(&["sessions"], &[], &scratch.0);
    let stdout = assert_ok(&out);
    let stderr = text(&out.stderr);
    let warning = format!("{}: line {}: not a valid record", path.display(), lines + 1);
    assert!(stderr.contains(&warning), "{stderr}");
    assert!(
        stderr.contains("junk.jsonl is not a session transcript"),
        "{stderr}"
    );
    assert!(
        stdout.contains("no_stop_hook") || stdout.contains("hooks_off"),
        "{stdout}"
    );

    let out = run_sprout(&["run", "second", "--continue"], &env, &scratch.0);
    assert!(assert_ok(&out).contains("two"));
    assert!(
        text(&out.stderr).contains(&warning),
        "{}",
        text(&out.stderr)
    );
    let requests = fake.requests.lock().unwrap();
    let sent = requests[1]["messages"].as_array().unwrap();
    assert_eq!(sent.len(), 4, "system, first, one, second: {sent:#?}");
    // The unreadable tail was moved aside, and the file is whole again.
    let again = agent_loop::transcript::read(&path).unwrap();
    assert_eq!(again.warnings, []);
    let aside = std::fs::read_dir(sessions_dir(&scratch.0))
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().contains(".jsonl.unread-"));
    assert!(aside, "the unread tail is kept aside");
}

// --no-save and SPROUT_SESSIONS=off write nothing; a bad SPROUT_SESSIONS, or
// --continue with nothing to continue, is exit 2 naming it.
#[test]
fn no_save_and_bad_values() {
    let scratch = Scratch::new("sessions-off");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("one")),
        (Duration::ZERO, end("two")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[]);
    assert_ok(&run_sprout(&["run", "x", "--no-save"], &env, &scratch.0));
    let off = env_with(&fake_env, &[("SPROUT_SESSIONS", "off")]);
    assert_ok(&run_sprout(&["run", "x"], &off, &scratch.0));
    assert_eq!(transcripts(&scratch.0), Vec::<PathBuf>::new());

    let bad = env_with(&fake_env, &[("SPROUT_SESSIONS", "maybe")]);
    let out = run_sprout(&["run", "x"], &bad, &scratch.0);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("SPROUT_SESSIONS=\"maybe\""),
        "{}",
        text(&out.stderr)
    );

    let out = run_sprout(&["run", "x", "--continue"], &env, &scratch.0);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--continue: no saved session"),
        "{}",
        text(&out.stderr)
    );
    let out = run_sprout(&["run", "x", "--resume", "../etc"], &env, &scratch.0);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--resume \"../etc\""),
        "{}",
        text(&out.stderr)
    );
    let out = run_sprout(
        &["run", "x", "--resume", "a", "--continue"],
        &env,
        &scratch.0,
    );
    assert_eq!(out.status.code(), Some(2), "they conflict");
    let listed = assert_ok(&run_sprout(&["sessions"], &[], &scratch.0));
    assert!(listed.starts_with("no saved sessions in "), "{listed}");
}

/// The names of the tools a Chat Completions request offered.
fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

// [T4]: a server's failures survive the resume. `crashy` exits during its
// `_SessionStart` call, once in every process: a new session and two
// `--continue`s use its three failures (counted 1, 2, 3 of 3, so the count
// goes on from the transcript), and the fourth process does not start it,
// does not offer its tool and says why once, while `steady` works
// throughout and `fresh`, configured only for the fourth, starts with no
// failures.
#[test]
fn server_failures_survive_a_resume() {
    let scratch = Scratch::new("sessions-failures");
    let crashy_log = scratch.path("crashy.log");
    let fresh_log = scratch.path("fresh.log");
    let crashy = vec![
        "--tools",
        "work",
        "--hooks",
        "_SessionStart",
        "--script",
        "_SessionStart=exit",
        "--log",
        &crashy_log,
    ];
    let steady = vec!["--tools", "work", "--hooks", "_Stop", "--stop", "empty"];
    let config = mcp_config(
        &scratch,
        &[("crashy", crashy.clone()), ("steady", steady.clone())],
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("one")),
        (Duration::ZERO, end("two")),
        (Duration::ZERO, end("three")),
        (Duration::ZERO, end("four")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
    for (run, more) in [(1, None), (2, Some("--continue")), (3, Some("--continue"))] {
        let mut args = vec!["run", "go", "--mcp-config", &config];
        args.extend(more);
        let out = run_sprout(&args, &env, &scratch.0);
        let stdout = assert_ok(&out);
        let next = if run < 3 {
            "it will be restarted when next needed"
        } else {
            "it stays off for this session"
        };
        let down = "server crashy exited (";
        let count = format!("failure {run} of 3, {next}");
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(down) && l.contains(&count)),
            "run {run}: {stdout}"
        );
        assert_eq!(
            sprout_tests::log_events(&crashy_log, "start").len(),
            run,
            "one start in each run"
        );
    }
    let files = transcripts(&scratch.0);
    assert_eq!(files.len(), 1, "{files:?}");
    let saved = agent_loop::transcript::read(&files[0]).unwrap();
    let failures: Vec<(String, u32)> = saved
        .carried
        .failures
        .iter()
        .map(|(name, n)| (name.to_string(), *n))
        .collect();
    assert_eq!(failures, [("crashy".to_owned(), 3)]);

    let config = mcp_config(
        &scratch,
        &[
            ("crashy", crashy),
            ("steady", steady),
            ("fresh", vec!["--tools", "work", "--log", &fresh_log]),
        ],
    );
    let out = run_sprout(
        &["run", "go", "--continue", "--mcp-config", &config],
        &env,
        &scratch.0,
    );
    let stdout = assert_ok(&out);
    let stderr = text(&out.stderr);
    let said = "server crashy is not started: it failed too often before this session was resumed; failure 3 of 3, it stays off for this session";
    assert_eq!(stdout.matches(said).count(), 1, "{stdout}");
    assert_eq!(stdout.matches("crashy").count(), 1, "told once: {stdout}");
    assert!(!stderr.contains("crashy"), "{stderr}");
    assert_eq!(
        sprout_tests::log_events(&crashy_log, "start").len(),
        3,
        "not started again"
    );
    assert_eq!(sprout_tests::log_events(&fresh_log, "start").len(), 1);
    assert!(stdout.contains("four"), "{stdout}");
    let requests = fake.requests.lock().unwrap();
    assert_eq!(requests.len(), 4);
    assert_eq!(
        offered_tools(&requests[2]),
        ["steady__work"],
        "crashy was down"
    );
    let mut offered = offered_tools(&requests[3]);
    offered.sort();
    assert_eq!(offered, ["fresh__work", "steady__work"]);
}

/// `sprout sessions --json` in `dir`, parsed.
fn listed(dir: &Path) -> Value {
    let out = run_sprout(&["sessions", "--json"], &[], dir);
    serde_json::from_str(&assert_ok(&out)).unwrap()
}

/// Polls `sprout sessions --json` until session `id` is in use as `want`
/// (within 30 s), and returns its entry.
fn wait_in_use(dir: &Path, id: &str, want: bool, child: &mut std::process::Child) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let json = listed(dir);
        let entry = json["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["id"] == id)
            .cloned();
        if let Some(entry) = entry
            && entry["in_use"] == want
        {
            return entry;
        }
        assert!(
            Instant::now() < deadline,
            "session {id} never in use {want}: {json}"
        );
        assert!(child.try_wait().unwrap().is_none(), "sprout ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The id of the newest transcript in `dir`, polled for (within 30 s).
fn wait_for_session(dir: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(path) = transcripts(dir).pop() {
            return path.file_stem().unwrap().to_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "no transcript was written");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// A session is open in one process at a time: while `sprout run` writes a
// session (a new one, then one it resumed), `--resume` and `--continue`
// of it in another process exit 2 naming the session and what to do, and
// append nothing; `sprout sessions` lists it as in use, its prompt as
// running. A SIGKILL leaves no stale lock: the session is free again.
#[test]
fn a_session_is_open_in_one_process_at_a_time() {
    let scratch = Scratch::new("sessions-lock");
    let slow = Duration::from_secs(120);
    let fake = FakeOpenAi::start(vec![
        (slow, end("never seen")),
        (slow, end("never seen either")),
        (Duration::ZERO, end("resumed")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[]);
    let spawn = |args: &[&str]| {
        sprout_command(args, &env, &scratch.0)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut writer = spawn(&["run", "a long one"]);
    let id = wait_for_session(&scratch.0);
    for (requests, round) in [(1, "new"), (2, "resumed")] {
        let entry = wait_in_use(&scratch.0, &id, true, &mut writer);
        // The writer waits on the model from its request on: it writes
        // nothing more while the others try.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(&transcripts(&scratch.0)[0])
            .unwrap()
            .matches("\"event\":\"model_request\"")
            .count()
            < requests
        {
            assert!(Instant::now() < deadline, "{round}: no model request");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(entry["last_stop"], Value::Null, "{round}: {entry}");
        let table = assert_ok(&run_sprout(&["sessions"], &[], &scratch.0));
        let row = table.lines().find(|l| l.starts_with(&id)).unwrap();
        assert!(
            row.contains("running") && row.contains(" yes "),
            "{round}: {row}"
        );
        let before = std::fs::read(&transcripts(&scratch.0)[0]).unwrap();
        for flag in ["--resume", "--continue"] {
            let mut args = vec!["run", "me too", flag];
            if flag == "--resume" {
                args.push(&id);
            }
            let out = run_sprout(&args, &env, &scratch.0);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{round} {flag}: {stderr}");
            assert!(
                stderr.contains(&format!("{flag}: session {id} is in use"))
                    && stderr.contains("without"),
                "{round} {flag}: {stderr}"
            );
        }
        let after = std::fs::read(&transcripts(&scratch.0)[0]).unwrap();
        assert!(
            after == before,
            "{round}: the refused ones wrote nothing, cut nothing"
        );
        writer.kill().unwrap();
        writer.wait().unwrap();
        if round == "new" {
            writer = spawn(&["run", "another long one", "--resume", &id]);
        }
    }
    let entry = listed(&scratch.0)["sessions"][0].clone();
    assert_eq!(entry["in_use"], false, "{entry}");
    assert_eq!(entry["last_stop"], Value::Null, "interrupted: {entry}");
    let out = run_sprout(&["run", "go on", "--resume", &id], &env, &scratch.0);
    assert!(assert_ok(&out).contains("resumed"));
    let saved = agent_loop::transcript::read(&transcripts(&scratch.0)[0]).unwrap();
    assert_eq!(saved.prompts, 3);
}

// `sprout sessions` reads a large transcript's first line and its end
// only (agent-loop's unit test counts the bytes), and lists it as reading
// it whole would: prompts, messages and last stop, after a run with large
// tool results and a `--continue`; with its last line torn, the same, and
// a warning naming the file and line.
#[test]
fn a_large_transcript_is_listed_right() {
    let scratch = Scratch::new("sessions-large");
    let config = mcp_config(
        &scratch,
        &[("big", vec!["--tools", "work", "--tool-bytes", "60000"])],
    );
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, tool("c1", "big__work")),
        (Duration::ZERO, tool("c2", "big__work")),
        (Duration::ZERO, tool("c3", "big__work")),
        (Duration::ZERO, end("done")),
        (Duration::ZERO, end("again")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[]);
    assert_ok(&run_sprout(
        &["run", "work", "--mcp-config", &config],
        &env,
        &scratch.0,
    ));
    assert_ok(&run_sprout(
        &["run", "more", "--continue", "--mcp-config", &config],
        &env,
        &scratch.0,
    ));
    let path = transcripts(&scratch.0).pop().unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    let ends =
        agent_loop::transcript::SUMMARY_HEAD_BYTES + agent_loop::transcript::SUMMARY_TAIL_BYTES;
    assert!(len > 2 * ends, "{len} bytes: not large");
    let whole = agent_loop::transcript::read(&path).unwrap();
    assert_eq!(whole.prompts, 2);
    let check = |what: &str| {
        let out = run_sprout(&["sessions", "--json"], &[], &scratch.0);
        let json: Value = serde_json::from_str(&assert_ok(&out)).unwrap();
        let entry = &json["sessions"][0];
        assert_eq!(entry["prompts"], 2, "{what}: {entry}");
        assert_eq!(entry["messages"], whole.history.len(), "{what}: {entry}");
        assert_eq!(entry["last_stop"], "hooks_off", "{what}: {entry}");
        assert_eq!(entry["last_active"], whole.last_active.as_str(), "{what}");
        text(&out.stderr)
    };
    assert_eq!(check("whole"), "");
    let lines = std::fs::read_to_string(&path).unwrap().lines().count();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"record\":\"message\",\"mess")
        .unwrap();
    let stderr = check("torn");
    let warning = format!(
        "{}: line {}: the last line is cut short",
        path.display(),
        lines + 1
    );
    assert!(stderr.contains(&warning), "{stderr}");
}
