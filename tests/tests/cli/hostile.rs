//! The `sprout` binary against peers that misbehave on purpose: a server
//! that floods or stops reading, signals mid-prompt, text full of terminal
//! escapes. Each test states its bound: peak memory, time to exit, no
//! process left, no raw control byte on the terminal.

use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::support::{
    FakeOpenAi, Scratch, all_gone, end, env_with, gate_server, logged_pids, mcp_config, run_sprout,
    sprout_command, text, write_mcp_servers,
};

/// A process's peak resident memory (VmHWM) in KiB, from /proc.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Waits up to `bound` for `child` to exit, sampling its peak memory on the
/// way; `None` if it did not exit in time (it is then killed).
fn wait_bounded(child: &mut Child, bound: Duration) -> Option<(ExitStatus, Duration, u64)> {
    let started = Instant::now();
    let mut peak = 0;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some((status, started.elapsed(), peak));
        }
        if let Some(kib) = peak_kib(child.id()) {
            peak = peak.max(kib);
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What one bounded run of sprout showed.
struct Run {
    status: ExitStatus,
    took: Duration,
    /// Peak resident memory, KiB.
    peak: u64,
    /// Stdout then stderr.
    shown: String,
}

/// Runs sprout with `args` and `env` in `dir` to its end, within `bound`,
/// sampling its peak memory; panics if it does not exit in time.
fn run_bounded(args: &[&str], env: &[(&str, &str)], dir: &std::path::Path, bound: Duration) -> Run {
    let mut child = sprout_command(args, env, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, took, peak) = wait_bounded(&mut child, bound)
        .unwrap_or_else(|| panic!("sprout {args:?} did not exit within {bound:?}"));
    let out = child.wait_with_output().unwrap();
    let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
    Run {
        status,
        took,
        peak,
        shown,
    }
}

/// Polls (up to 30 s) until `file` holds `needle`.
fn wait_for_text(file: &str, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(file)
        .unwrap_or_default()
        .contains(needle)
    {
        assert!(Instant::now() < deadline, "{file} never held {needle:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pids_of(log: &str) -> Vec<u32> {
    [logged_pids(log, "start"), logged_pids(log, "grandchild")].concat()
}

// A server that floods pings and stops reading costs bounded memory: it is
// found wedged within a second and killed, and the prompt goes on. Without
// the bound, the agent grew by 100+ MB per second here.
#[test]
fn a_ping_flood_neither_bloats_nor_holds_sprout_run() {
    let scratch = Scratch::new("cli-flood");
    let log = scratch.path("flood.log");
    let config = mcp_config(
        &scratch,
        &[(
            "flood",
            vec!["--hostile", "ping-flood", "--log", &log, "--grandchild"],
        )],
    );
    // The model answers after 3 s: the flood has that long to do harm.
    let fake = FakeOpenAi::start(vec![(Duration::from_secs(3), end("done"))]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
    let run = run_bounded(
        &["run", "x", "--mcp-config", &config],
        &env,
        &scratch.0,
        Duration::from_secs(60),
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.shown);
    assert!(run.shown.contains("wedged"), "{}", run.shown);
    // About 20 MB is normal; the bound leaves room for a noisy allocator.
    assert!(run.peak < 150 * 1024, "peak memory {} KiB", run.peak);
    assert!(all_gone(&pids_of(&log)), "a flood process survived");
}

// A server that stays alive but never reads its stdin, given a tool call
// with 512 KiB of arguments: the call ends by its deadline, the prompt ends,
// and `sprout run` exits within a fixed bound, leaving nothing behind (the
// server even ignores SIGTERM).
#[test]
fn a_deaf_server_does_not_hold_the_exit() {
    let scratch = Scratch::new("cli-deaf");
    let log = scratch.path("deaf.log");
    let config = mcp_config(
        &scratch,
        &[(
            "deaf",
            vec![
                "--hostile",
                "deaf",
                "--tools",
                "echo",
                "--ignore-sigterm",
                "--log",
                &log,
                "--grandchild",
            ],
        )],
    );
    let big = json!({"text": "a".repeat(512 * 1024)}).to_string();
    let call = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "deaf__echo", "arguments": big}}
    ]}, "finish_reason": "tool_calls"}]});
    // The big call makes the history large enough to be compacted: the
    // summary takes one answer.
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, call),
        (Duration::ZERO, end("summary")),
        (Duration::ZERO, end("done")),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("SPROUT_AGENT_TOOL_TIMEOUT_MS", "1000")]);
    let run = run_bounded(
        &["run", "x", "--mcp-config", &config],
        &env,
        &scratch.0,
        Duration::from_secs(30),
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.shown);
    // 1 s tool deadline, then at most about 2 s to close the deaf server.
    assert!(run.took < Duration::from_secs(15), "took {:?}", run.took);
    assert!(all_gone(&pids_of(&log)), "a deaf server's process survived");
}

// SIGTERM and SIGHUP mid-prompt stop `sprout run` in order: exit 143 and
// 129, and the command the gate was running (in a process group of its
// own) is gone too.
#[test]
fn sigterm_and_sighup_stop_run_in_order() {
    for (signal, code) in [(Signal::SIGTERM, 143), (Signal::SIGHUP, 129)] {
        let scratch = Scratch::new(&format!("cli-{signal}"));
        let pids = scratch.path("commands.pid");
        let script = format!("echo $$ >> {pids}; exec sleep 60");
        let config = write_mcp_servers(&scratch, json!({"gate": gate_server(&script)}));
        let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("done"))]);
        let fake_env = fake.env();
        let env = env_with(
            &fake_env,
            &[
                ("MCP_HOOK_SERVERS", "*"),
                ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "60000"),
            ],
        );
        let mut child = sprout_command(&["run", "x", "--mcp-config", &config], &env, &scratch.0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_text(&pids, "\n");
        kill(Pid::from_raw(child.id() as i32), signal).unwrap();
        let (status, took, _) =
            wait_bounded(&mut child, Duration::from_secs(20)).expect("sprout run exits");
        assert_eq!(status.code(), Some(code), "{signal}");
        assert!(took < Duration::from_secs(10), "{signal}: took {took:?}");
        let started: Vec<u32> = std::fs::read_to_string(&pids)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        assert!(all_gone(&started), "{signal}: the gate's command survived");
    }
}

// A second Ctrl-C does not wait for the orderly stop, and still leaves no
// process of any server behind (one that ignores SIGTERM included). The
// second signal is sent once the first has ended the prompt, while the
// orderly stop waits on a server that never reads its stdin (half a second
// of grace, then SIGTERM, which it ignores, then SIGKILL): sprout says it
// exits at once.
#[test]
fn a_second_ctrl_c_exits_at_once_and_cleans_up() {
    use std::io::BufRead as _;
    let scratch = Scratch::new("cli-double-int");
    let log = scratch.path("deaf.log");
    let config = mcp_config(
        &scratch,
        &[(
            "deaf",
            vec![
                "--hostile",
                "deaf",
                "--ignore-sigterm",
                "--log",
                &log,
                "--grandchild",
            ],
        )],
    );
    let fake = FakeOpenAi::start(vec![(Duration::from_secs(60), end("late"))]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[]);
    let mut child = sprout_command(&["run", "x", "--mcp-config", &config], &env, &scratch.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    // The model request is in flight once the server is up; wait for it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.requests.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no model request");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGINT).unwrap();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the first Ctrl-C ends the prompt");
        if line.contains("stopped: cancelled") {
            break;
        }
    }
    kill(pid, Signal::SIGINT).unwrap();
    let (status, _, _) =
        wait_bounded(&mut child, Duration::from_secs(20)).expect("sprout run exits");
    let stderr = text(&child.wait_with_output().unwrap().stderr);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("a second signal"), "{stderr}");
    assert!(all_gone(&pids_of(&log)), "a server process survived");
}

// Text from the model, a hook and a server, full of terminal escapes,
// reaches the terminal (or pipe) escaped: no raw control byte but newline
// and tab.
#[test]
fn escapes_never_reach_the_terminal_raw() {
    let scratch = Scratch::new("cli-escapes");
    let config = mcp_config(
        &scratch,
        &[("esc", vec!["--tools", "echo", "--stop", "escape,empty"])],
    );
    let nasty = "\u{1b}[2J\u{1b}]0;pwned\u{7}\rdone\u{9b}1m";
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end(nasty)),
        (Duration::ZERO, end(nasty)),
    ]);
    let fake_env = fake.env();
    let env = env_with(&fake_env, &[("MCP_HOOK_SERVERS", "*")]);
    let out = run_sprout(&["run", "x", "--mcp-config", &config], &env, &scratch.0);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for (name, stream) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let raw = String::from_utf8_lossy(stream);
        let bad: Vec<char> = raw
            .chars()
            .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
            .collect();
        assert!(bad.is_empty(), "{name} carries raw {bad:?}:\n{raw}");
    }
    // The model's text and the hook's objection are there, escaped.
    assert!(stdout.contains("\\u{1b}[2J"), "{stdout}");
    assert!(stdout.contains("STOPPED: all done"), "{stdout}");
}

// `sprout hooks list` and `sprout hooks call` tell the truth in their exit
// status: non-zero when a configured server is down, or when nobody who
// could answer the hook is up.
#[test]
fn hooks_commands_fail_when_a_server_is_down() {
    let scratch = Scratch::new("cli-hooks-down");
    let config = mcp_config(
        &scratch,
        &[
            ("fine", vec!["--tools", "read"]),
            ("broken", vec!["--exit-after", "0", "--init-delay", "5000"]),
        ],
    );
    let env = [("MCP_HOOK_SERVERS", "*")];
    let list = run_sprout(
        &["hooks", "list", "--mcp-config", &config],
        &env,
        &scratch.0,
    );
    assert_eq!(list.status.code(), Some(1), "{}", text(&list.stdout));
    assert!(
        text(&list.stderr).contains("broken"),
        "{}",
        text(&list.stderr)
    );
    let call = run_sprout(
        &[
            "hooks",
            "call",
            "_Stop",
            "--server",
            "broken",
            "--mcp-config",
            &config,
        ],
        &env,
        &scratch.0,
    );
    assert_eq!(call.status.code(), Some(1), "{}", text(&call.stdout));
    let said = text(&call.stderr);
    assert!(said.contains("MCP server broken did not start"), "{said}");
    let fine = run_sprout(
        &[
            "hooks",
            "call",
            "_Stop",
            "--server",
            "fine",
            "--mcp-config",
            &config,
        ],
        &env,
        &scratch.0,
    );
    assert_eq!(fine.status.code(), Some(0), "{}", text(&fine.stderr));
}

/// A Streamable HTTP MCP endpoint on 127.0.0.1 that answers `initialize`
/// and then answers `tools/list` with an SSE stream of `pings` ping requests
/// before the listing.
fn flooding_http_server(pings: usize) -> (tokio::runtime::Runtime, String) {
    use axum::http::{HeaderValue, StatusCode, header};
    use axum::response::{IntoResponse, Response};
    async fn handle(body: String) -> Response {
        let message: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let Some(id) = message
            .get("id")
            .cloned()
            .filter(|_| message.get("method").is_some())
        else {
            // Notifications and our answers to its pings.
            return StatusCode::ACCEPTED.into_response();
        };
        let answer = |result: serde_json::Value| {
            json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
        };
        match message["method"].as_str() {
            Some("initialize") => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                answer(json!({
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "flood", "version": "0"}
                })),
            )
                .into_response(),
            Some("tools/list") => {
                let mut stream = String::new();
                for n in 0..PINGS.load(std::sync::atomic::Ordering::SeqCst) {
                    stream.push_str(&format!(
                        "data: {{\"jsonrpc\":\"2.0\",\"id\":\"p{n}\",\"method\":\"ping\"}}\n\n"
                    ));
                }
                stream.push_str(&format!("data: {}\n\n", answer(json!({"tools": []}))));
                (
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("text/event-stream"),
                    )],
                    stream,
                )
                    .into_response()
            }
            _ => StatusCode::NOT_FOUND.into_response(),
        }
    }
    static PINGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    PINGS.store(pings, std::sync::atomic::Ordering::SeqCst);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(handle).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    runtime.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (runtime, url)
}

// The same flood over Streamable HTTP: 200000 pings in one SSE answer. The
// server is stopped as wedged during its start; `sprout hooks list` says so,
// exits 1, and its memory stays bounded (it reached 667 MB before).
#[test]
fn an_http_ping_flood_is_bounded_too() {
    let scratch = Scratch::new("cli-http-flood");
    let (_server, url) = flooding_http_server(200_000);
    let config = write_mcp_servers(&scratch, json!({"flood": {"type": "http", "url": url}}));
    let run = run_bounded(
        &["hooks", "list", "--mcp-config", &config],
        &[],
        &scratch.0,
        Duration::from_secs(60),
    );
    let (shown, took) = (&run.shown, run.took);
    assert_eq!(run.status.code(), Some(1), "{shown}");
    assert!(shown.contains("wedged"), "{shown}");
    assert!(run.peak < 150 * 1024, "peak memory {} KiB", run.peak);
    // One sentence says what happened, not a line per dropped message.
    assert!(shown.matches("not reading").count() <= 3, "{shown}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

// A reader that never reads sprout's stdout cannot hold the exit: the
// output is written by a thread of its own behind a bounded queue, and the
// exit waits at most a fixed bound for it. Before, `sprout run` blocked in
// `write` on the full pipe for ever. The model's answer here (4 MB of text)
// is far more than a pipe holds.
#[test]
fn a_stdout_nobody_reads_does_not_hold_the_exit() {
    let scratch = Scratch::new("cli-unread-stdout");
    let script = scratch.path("script.jsonl");
    let turn = json!({"text": "x".repeat(4 << 20), "stop": "end_turn"});
    std::fs::write(&script, format!("{turn}\n")).unwrap();
    for json_output in [false, true] {
        let mut args = vec!["run", "hello", "--script", script.as_str()];
        if json_output {
            args.push("--json");
        }
        let mut child = sprout_command(&args, &[("SPROUT_AGENT_PROVIDER", "script")], &scratch.0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Hold the read end open and never read it.
        let unread = child.stdout.take();
        let bound = Duration::from_secs(30);
        let (status, took, _) = wait_bounded(&mut child, bound).unwrap_or_else(|| {
            panic!("sprout {args:?} did not exit within {bound:?} with an unread stdout")
        });
        assert_eq!(status.code(), Some(0), "json={json_output} took {took:?}");
        drop(unread);
    }
}
