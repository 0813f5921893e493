//! `sprout-bench`: the benchmarks that `cargo xtask bench` runs.
//!
//! Each timed figure is a median over many repetitions, with its spread (10th
//! and 90th percentiles). The physical floor, a JSON-RPC round trip over a
//! pipe to a minimal native process, is measured in the same run, so that the
//! hook figures can be read against what the machine could do at that moment.
//! The ratios are of this run on this machine: how they move on another
//! machine (other core counts, schedulers, load) has not been measured.
//!
//! Figures 1 to 7 drive the libraries in this process (`hooks_mcp::Host`,
//! `agent_loop::Agent`, `hooks_core::Session`) against real server processes.
//! Figure 14 is \[E7\] at the host: tool-call hook points that no server
//! lists. Figures 8 to 13 and 15 measure at the product surface: the real
//! `sprout` binary, as `sprout acp` driven by a Rust ACP client over its
//! stdio ([`acp`]) and as `sprout run --json` ([`run`]), against a fake
//! OpenAI-compatible model on 127.0.0.1 ([`fake_model`]) that answers at
//! once, whole (figure 15: that takes 20 ms to finish its answer, streamed
//! or whole).
//!
//! ```text
//! sprout-bench [--quick] [--out FILE] [--fixture PATH] [--sprout PATH]
//! sprout-bench --profile-acp[-off] SERVERS PROMPTS [--fixture PATH] [--sprout PATH]
//! sprout-bench --profile-host SERVERS ROUNDS [--fixture PATH]
//! ```
//!
//! `--profile-acp` reports no figure: it drives one `sprout acp` (hooks on,
//! or off with `--profile-acp-off`) through PROMPTS one-round prompts and
//! prints its pid first, for a profiler to attach to
//! (`perf record -p PID`). `--profile-host` is figure 2 alone: ROUNDS
//! `_Stop` rounds of a `Host` in this process against SERVERS instant
//! servers, for this process to be run under a profiler (the difference of
//! two ROUNDS counts is what the rounds cost, start-up taken out).
//!
//! Every multi-server figure checks that all its servers came up, and every
//! round that it decided as expected, before its figure is reported: a figure
//! of fewer servers than it says is a failure, not a number.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hooks_core::{
    EndReason, HookConfig, HookReply, Input, Output, ReplyPart, ServerName, Session, StopReason,
    Time, TurnVerdict,
};
use hooks_mcp::{Host, HostOptions, ServerSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod acp;
mod fake_model;
mod http_hook;
mod run;

struct Args {
    quick: bool,
    out: Option<PathBuf>,
    fixture: PathBuf,
    sprout: PathBuf,
    /// Serve figure 2's HTTP hook server instead ([`http_hook::serve`]).
    http_hook_server: bool,
    /// Drive one `sprout acp` for a profiler instead of the figures:
    /// servers, prompts, hooks off ([`acp::Surface::profile`]).
    profile_acp: Option<(usize, usize, bool)>,
    /// Run figure 2's rounds alone, for a profiler: servers, rounds.
    profile_host: Option<(usize, usize)>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        quick: false,
        out: None,
        fixture: sibling("mcp-fixture"),
        sprout: sibling("sprout"),
        http_hook_server: false,
        profile_acp: None,
        profile_host: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--out" => args.out = Some(it.next().ok_or("--out needs a file")?.into()),
            "--fixture" => args.fixture = it.next().ok_or("--fixture needs a path")?.into(),
            "--sprout" => args.sprout = it.next().ok_or("--sprout needs a path")?.into(),
            "--echo" => {
                echo_server();
                std::process::exit(0);
            }
            "--http-hook-server" => args.http_hook_server = true,
            "--profile-acp" | "--profile-acp-off" | "--profile-host" => {
                let mut number = |what: &str| -> Result<usize, String> {
                    it.next()
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| format!("{arg} needs {what}"))
                };
                let servers = number("a server count")?;
                let count = number("a count of prompts or rounds")?;
                if arg == "--profile-host" {
                    args.profile_host = Some((servers, count));
                } else {
                    args.profile_acp = Some((servers, count, arg == "--profile-acp-off"));
                }
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

/// A binary next to this one.
fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The floor's far end: answers each JSON-RPC request line at once.
fn echo_server() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let id = serde_json::from_str::<serde_json::Value>(&line)
            .map(|v| v["id"].clone())
            .unwrap_or_default();
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": ""}]}});
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return;
        }
    }
}

/// A distribution of samples, in microseconds (signed: a difference of
/// paired samples can come out below zero).
#[derive(Clone, Copy, Debug)]
struct Stats {
    median: f64,
    p10: f64,
    p90: f64,
    n: usize,
}

fn stats(samples: Vec<Duration>) -> Stats {
    stats_us(samples.into_iter().map(us).collect())
}

fn stats_us(mut samples: Vec<f64>) -> Stats {
    assert!(!samples.is_empty(), "a figure without samples");
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Stats {
        median: at(0.5),
        p10: at(0.1),
        p90: at(0.9),
        n: samples.len(),
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// What a figure is set beside: its median divided by `of`'s, printed as
/// "N× `name`".
#[derive(Clone, Copy, Debug)]
struct Versus<'a> {
    name: &'a str,
    of: Stats,
}

fn versus(name: &str, of: Stats) -> Option<Versus<'_>> {
    Some(Versus { name, of })
}

struct Report {
    rows: Vec<serde_json::Value>,
}

impl Report {
    fn row(&mut self, figure: &str, what: &str, s: Stats, vs: Option<Versus<'_>>) {
        let ratio = vs.map(|v| s.median / v.of.median);
        println!(
            "{figure:<4} {what:<52} {:>11.1} µs  [{:>10.1} – {:>10.1}]  n={:<5} {}",
            s.median,
            s.p10,
            s.p90,
            s.n,
            match (ratio, vs) {
                (Some(r), Some(v)) => format!("{r:>7.1}× {}", v.name),
                _ => String::new(),
            }
        );
        self.rows.push(json!({
            "figure": figure, "what": what, "median_us": s.median, "p10_us": s.p10,
            "p90_us": s.p90, "n": s.n, "ratio": ratio, "ratio_to": vs.map(|v| v.name),
        }));
    }

    fn value(&mut self, figure: &str, what: &str, value: f64, unit: &str) {
        println!("{figure:<4} {what:<52} {value:>11.1} {unit}");
        self.rows
            .push(json!({"figure": figure, "what": what, "value": value, "unit": unit}));
    }
}

/// Figure 1: a JSON-RPC round trip over a pipe to a minimal native process.
fn floor(reps: usize) -> Result<Stats, String> {
    let mut child = Command::new(sibling("sprout-bench"))
        .arg("--echo")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the echo process: {e}"))?;
    let mut input = child.stdin.take().ok_or("no stdin")?;
    let mut output = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut samples = Vec::with_capacity(reps);
    let mut line = String::new();
    for id in 0..reps + reps / 10 {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "_Stop", "arguments": {}}});
        let started = Instant::now();
        writeln!(input, "{request}")
            .and_then(|()| input.flush())
            .map_err(|e| e.to_string())?;
        line.clear();
        output.read_line(&mut line).map_err(|e| e.to_string())?;
        if id >= reps / 10 {
            samples.push(started.elapsed());
        }
    }
    drop(input);
    let _ = child.wait();
    Ok(stats(samples))
}

fn config(timeout_ms: u64) -> HookConfig {
    HookConfig::from_values(Some("*"), Some(&timeout_ms.to_string()), Some("1000")).expect("valid")
}

fn fixtures(fixture: &std::path::Path, n: usize, args: &[&str]) -> Vec<ServerSpec> {
    (0..n)
        .map(|i| {
            let name = ServerName::new(format!("s{i}")).expect("valid name");
            ServerSpec::stdio(
                name,
                fixture.to_string_lossy(),
                args.iter().map(|a| a.to_string()).collect(),
            )
        })
        .collect()
}

/// A host on `specs`, every one of them up (see [`all_up`]).
async fn start(specs: Vec<ServerSpec>, timeout_ms: u64) -> Host {
    let n = specs.len();
    let host = start_unchecked(specs, timeout_ms).await;
    all_up(&host, n);
    host
}

async fn start_unchecked(specs: Vec<ServerSpec>, timeout_ms: u64) -> Host {
    Host::start(
        specs,
        config(timeout_ms),
        HostOptions::default(),
        Arc::new(|_: hooks_core::Event| {}),
    )
    .await
    .expect("the host starts")
}

/// Fails the run unless all `n` servers of `host` are up: a server that did
/// not start would make a figure of N servers one of fewer.
fn all_up(host: &Host, n: usize) {
    let servers = host.servers();
    let down: Vec<String> = servers
        .iter()
        .filter(|s| s.state != hooks_core::ServerState::Up)
        .map(|s| format!("{} ({:?}: {:?})", s.name, s.state, s.last_error))
        .collect();
    assert!(
        servers.len() == n && down.is_empty(),
        "{} of {n} servers configured, not up: {down:?}; the figure would measure fewer servers than it says",
        servers.len()
    );
}

/// One `_Stop` round that nobody objects to; returns its duration.
async fn stop_round(host: &mut Host) -> Duration {
    let started = Instant::now();
    host.begin_prompt().expect("no prompt runs");
    let decision = host
        .end_turn(StopReason::EndTurn, 0, "", &CancellationToken::new())
        .await
        .expect("valid input");
    let took = started.elapsed();
    assert_eq!(
        decision,
        TurnVerdict::End {
            reason: EndReason::NoObjection
        }
    );
    took
}

/// Figure 14 \[E7\]: what the `_PreToolUse` and `_PostToolUse` questions of
/// one tool call cost the host, with 8 instant servers that do not list
/// those hook points (nothing to ask: answered at once, no round) or that
/// all list them (two rounds, every server answering empty at once).
async fn tool_hooks(fixture: &std::path::Path, listed: bool, reps: usize) -> Stats {
    let hooks = if listed {
        "_Stop,_PreToolUse,_PostToolUse"
    } else {
        "_Stop"
    };
    let mut host = start(
        fixtures(fixture, 8, &["--tools", "t", "--hooks", hooks]),
        10_000,
    )
    .await;
    let cancel = CancellationToken::new();
    let server = host.session().server_id("s0").expect("s0 is configured");
    let call = hooks_core::ToolUse {
        server,
        tool: "t".into(),
        arguments: json!({}),
    };
    host.begin_prompt().expect("no prompt runs");
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..reps + reps / 10 {
        let started = Instant::now();
        let gates = host
            .tools_requested(vec![call.clone()], &cancel)
            .await
            .expect("valid input");
        assert_eq!(gates, [hooks_core::ToolGate::Run]);
        let run = hooks_core::ToolRun {
            call: call.clone(),
            output: "ok".into(),
            is_error: false,
        };
        let notes = host
            .tools_ran(vec![run], &cancel)
            .await
            .expect("valid input");
        assert_eq!(notes, [Vec::<hooks_core::HookText>::new()]);
        // The first tenth warms up and is not counted.
        if rep >= reps / 10 {
            samples.push(started.elapsed());
        }
    }
    host.shutdown().await;
    stats(samples)
}

/// Figure 2's host: `n` instant servers whose `_Stop` answers empty, all up.
async fn stop_host(fixture: &std::path::Path, n: usize) -> Host {
    start(
        fixtures(fixture, n, &["--hooks", "_Stop", "--stop", "empty"]),
        10_000,
    )
    .await
}

/// Figure 2: `_Stop` rounds against `host`'s instant servers, the CPU this
/// process spent per round (all its threads, from `/proc`), and the CPU its
/// server processes spent per round, all of them together.
async fn rounds(mut host: Host, reps: usize) -> (Stats, f64, f64) {
    for _ in 0..reps / 10 + 1 {
        stop_round(&mut host).await;
    }
    let mut samples = Vec::with_capacity(reps);
    let me = std::process::id();
    let servers = children(me);
    let servers_cpu = |servers: &[u32]| servers.iter().map(|&p| cpu_ns(p)).sum::<u64>();
    let (cpu, cpu_servers) = (cpu_ns(me), servers_cpu(&servers));
    for _ in 0..reps {
        samples.push(stop_round(&mut host).await);
    }
    let cpu = cpu_ns(me).saturating_sub(cpu);
    let cpu_servers = servers_cpu(&servers).saturating_sub(cpu_servers);
    host.shutdown().await;
    let per_round = |ns: u64| ns as f64 / 1000.0 / reps as f64;
    (stats(samples), per_round(cpu), per_round(cpu_servers))
}

/// The processes whose parent is `pid` (field 4 of `/proc/PID/stat`).
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    // The name in parentheses may hold spaces: count after it.
                    let after = stat.rsplit_once(") ")?.1;
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// The CPU time, in nanoseconds, that every thread of process `pid` has run
/// so far (the first field of each `/proc/PID/task/TID/schedstat`). Threads
/// that exit between two reads take their time with them, which is why the
/// figures read it around work done by long-lived threads only. Zero where
/// `/proc` is not there.
pub(crate) fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Figure 2's Streamable HTTP server, in a process of its own
/// ([`http_hook::serve`]), so the round crosses a process boundary as the
/// stdio rounds do.
async fn http_rounds(reps: usize) -> Stats {
    let server = http_hook::Child::start(&sibling("sprout-bench"))
        .await
        .unwrap_or_else(|e| panic!("the Streamable HTTP hook server: {e}"));
    let spec = ServerSpec::http(ServerName::new("http").expect("valid"), server.url.clone());
    let (s, ..) = rounds(start(vec![spec], 10_000).await, reps).await;
    server.stop().await;
    s
}

/// Figure 3: rounds with `k` hanging hooks, as time beyond the deadline.
/// The fixtures alternate hang and answer so no server is ever killed.
async fn hanging(fixture: &std::path::Path, k: usize, reps: usize, timeout_ms: u64) -> Stats {
    let mut host = start(
        fixtures(
            fixture,
            k,
            &["--hooks", "_Stop", "--stop", "hang,empty", "--cycle"],
        ),
        timeout_ms,
    )
    .await;
    let deadline = Duration::from_millis(timeout_ms);
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        samples.push(stop_round(&mut host).await.saturating_sub(deadline));
        stop_round(&mut host).await;
    }
    host.shutdown().await;
    stats(samples)
}

/// Figure 5: `Host::start` with `n` stdio servers.
async fn startup(fixture: &std::path::Path, n: usize, reps: usize) -> Stats {
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        let started = Instant::now();
        let host = start_unchecked(fixtures(fixture, n, &["--hooks", "_Stop"]), 2500).await;
        samples.push(started.elapsed());
        all_up(&host, n);
        host.shutdown().await;
    }
    stats(samples)
}

/// A model that answers at once: `rounds - 1` turns calling `fx__t`, then an
/// end of turn. It keeps the time spent inside it.
struct InstantModel {
    turns: std::sync::atomic::AtomicUsize,
    rounds: usize,
    own_time: std::sync::Mutex<Duration>,
}

#[async_trait::async_trait]
impl agent_loop::Model for InstantModel {
    async fn complete(
        &self,
        _request: agent_loop::ModelRequest<'_>,
    ) -> Result<agent_loop::ModelResponse, agent_loop::ModelError> {
        let started = Instant::now();
        let n = self.turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let response = if n + 1 < self.rounds {
            agent_loop::ModelResponse {
                text: String::new(),
                tool_calls: vec![agent_loop::ToolCall {
                    id: format!("c{n}"),
                    name: "fx__t".into(),
                    arguments: "{}".into(),
                }],
                stop: StopReason::ToolUse,
                usage: None,
            }
        } else {
            agent_loop::ModelResponse {
                text: "done".into(),
                tool_calls: vec![],
                stop: StopReason::EndTurn,
                usage: None,
            }
        };
        *self.own_time.lock().unwrap_or_else(|e| e.into_inner()) += started.elapsed();
        Ok(response)
    }

    fn describe(&self) -> String {
        "instant".into()
    }
}

/// Figure 4: the agent's own time per tool round in a `rounds`-round prompt
/// (a real stdio tool server with a trivial tool and a `_Stop` hook), total
/// minus the model's own time, divided by the rounds. Tool calls wait for
/// approval, and a rule of the server's (`autoApprove: ["*"]`) allows each
/// \[U4\], as `sprout run` has it by default.
async fn agent_overhead(fixture: &std::path::Path, rounds: usize, reps: usize) -> Stats {
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        let host = start(
            fixtures_named(
                fixture,
                "fx",
                &["--tools", "t", "--hooks", "_Stop", "--stop", "empty"],
            ),
            10_000,
        )
        .await;
        let model = Arc::new(InstantModel {
            turns: Default::default(),
            rounds,
            own_time: Default::default(),
        });
        let settings = agent_loop::AgentSettings {
            max_rounds: rounds as u32 + 1,
            ..agent_loop::AgentSettings::default()
        };
        let approval = agent_loop::Approval::ask(Arc::new(agent_loop::Nobody::new("")))
            .with_rules(ServerName::new("fx").unwrap(), vec!["*".to_owned()]);
        let mut agent = agent_loop::Agent::new(
            model.clone(),
            host,
            settings,
            Arc::new(|_: &agent_loop::Emitted<'_>| {}),
        )
        .with_approval(approval);
        let started = Instant::now();
        let outcome = agent.run_prompt("bench", &CancellationToken::new()).await;
        let total = started.elapsed();
        assert_eq!(outcome.rounds as usize, rounds);
        agent.into_gateway().shutdown().await;
        let own = *model.own_time.lock().unwrap_or_else(|e| e.into_inner());
        samples.push(total.saturating_sub(own) / rounds as u32);
    }
    stats(samples)
}

fn fixtures_named(fixture: &std::path::Path, name: &str, args: &[&str]) -> Vec<ServerSpec> {
    let name = ServerName::new(name).expect("valid name");
    vec![ServerSpec::stdio(
        name,
        fixture.to_string_lossy(),
        args.iter().map(|a| a.to_string()).collect(),
    )]
}

/// Figure 6: peak resident memory of `sprout run` over a `rounds`-round
/// prompt whose tool returns `bytes` bytes each time, read from /proc.
fn peak_memory(
    sprout: &std::path::Path,
    fixture: &std::path::Path,
    rounds: usize,
    bytes: usize,
) -> Result<u64, String> {
    let dir = std::env::temp_dir().join(format!("sprout-bench-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut script = String::new();
    for n in 0..rounds - 1 {
        script.push_str(
            &json!({"tool_calls": [{"name": "fx__t", "id": format!("c{n}")}]}).to_string(),
        );
        script.push('\n');
    }
    script.push_str(&json!({"text": "done"}).to_string());
    let script_path = dir.join("script.jsonl");
    let config_path = dir.join("mcp.json");
    std::fs::write(&script_path, script).map_err(|e| e.to_string())?;
    // A rule lets the tool run, in the default `ask` mode [U4].
    let config = json!({"mcpServers": {"fx": {"command": fixture, "autoApprove": ["t"], "args": ["--tools", "t", "--tool-bytes", bytes.to_string()]}}});
    std::fs::write(&config_path, config.to_string()).map_err(|e| e.to_string())?;
    let mut child = Command::new(sprout)
        .args([
            "run",
            "bench",
            "--provider",
            "script",
            "--context-window",
            "10000000",
            "--max-rounds",
            &(rounds + 1).to_string(),
        ])
        .arg("--script")
        .arg(&script_path)
        .arg("--mcp-config")
        .arg(&config_path)
        // Saved as every session is, but in the scratch directory.
        .env("XDG_STATE_HOME", dir.join(".state"))
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", sprout.display()))?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_path)
            && let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            if !status.success() {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("sprout run exited {status}"));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(peak_kb * 1024)
}

/// Figure 7: hooks-core decisions per second on a realistic mix: per prompt,
/// a tool round, an objected end-of-turn, a tool round, a clean end-of-turn,
/// against four servers.
fn core_rate(run_for: Duration) -> f64 {
    let names: Vec<ServerName> = (0..4)
        .map(|i| ServerName::new(format!("s{i}")).expect("valid"))
        .collect();
    // A session whose servers are all up. The budget (1000) runs out in a
    // long run, so a fresh session replaces a spent one.
    let fresh = || {
        let mut session = Session::new(config(2500), names.clone()).expect("unique names");
        while let Some(output) = session.poll_output() {
            if let Output::StartServer { server } = output {
                let tools = vec!["_Stop".into(), "work".into()];
                session
                    .handle(Time::ZERO, Input::ServerStarted { server, tools })
                    .expect("valid input");
            }
        }
        session
    };
    let mut session = fresh();
    let mut now = Time::ZERO;
    // Answers every call of the round in flight (the first server objects
    // when `objection`) until the decision comes out.
    let decide = |session: &mut Session, now: Time, input: (StopReason, usize), objection: bool| {
        let (stop, tool_calls) = input;
        session
            .end_turn(now, stop, tool_calls, "")
            .expect("valid input");
        let mut calls = Vec::new();
        loop {
            while let Some(output) = session.poll_output() {
                if let Output::CallHook { call, .. } = output {
                    calls.push(call);
                }
            }
            if let Some(verdict) = session.take_verdict() {
                return verdict;
            }
            assert!(
                !calls.is_empty(),
                "a round with nothing in flight and no decision"
            );
            for (i, call) in calls.drain(..).enumerate() {
                let text = if objection && i == 0 {
                    "2 open items"
                } else {
                    ""
                };
                let reply = HookReply::Result(vec![ReplyPart::Text(text.into())]);
                session
                    .handle(now, Input::HookReplied { call, reply })
                    .expect("valid input");
            }
        }
    };
    let tools = || (StopReason::ToolUse, 1);
    let end = || (StopReason::EndTurn, 0);
    let started = Instant::now();
    let mut decisions = 0u64;
    while started.elapsed() < run_for {
        if session.budget_used() > 900 {
            session = fresh();
            now = Time::ZERO;
        }
        for _ in 0..50 {
            now = now + Duration::from_micros(50);
            session.begin_prompt(now).expect("idle");
            assert_eq!(
                decide(&mut session, now, tools(), false),
                TurnVerdict::RunTools
            );
            let objected = decide(&mut session, now, end(), true);
            assert!(
                matches!(objected, TurnVerdict::Continue { .. }),
                "{objected:?}"
            );
            assert_eq!(
                decide(&mut session, now, tools(), false),
                TurnVerdict::RunTools
            );
            let last = decide(&mut session, now, end(), false);
            assert_eq!(
                last,
                TurnVerdict::End {
                    reason: EndReason::NoObjection
                }
            );
            decisions += 4;
        }
    }
    decisions as f64 / started.elapsed().as_secs_f64()
}

/// Figure 15's model: how long it takes to finish an answer after its
/// first piece.
const FIRST_BYTE_GAP: Duration = Duration::from_millis(20);

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("sprout-bench: {e}");
            std::process::exit(2);
        }
    };
    if args.http_hook_server {
        http_hook::serve().await;
        return;
    }
    // Absolute, since servers run in the sessions' own directories.
    for (what, path, build) in [
        (
            "fixture server",
            &mut args.fixture,
            "cargo build -p sprout-tests --bins",
        ),
        (
            "sprout binary",
            &mut args.sprout,
            "cargo build -p sprout-cli",
        ),
    ] {
        match std::fs::canonicalize(&*path) {
            Ok(absolute) => *path = absolute,
            Err(e) => {
                eprintln!(
                    "sprout-bench: no {what} at {} ({e}); build it with {build}",
                    path.display()
                );
                std::process::exit(2);
            }
        }
    }
    if let Some((servers, prompts, hooks_off)) = args.profile_acp {
        let model = fake_model::FakeModel::start().await;
        let surface = acp::Surface {
            sprout: args.sprout.clone(),
            fixture: args.fixture.clone(),
            model,
        };
        let done = tokio::task::spawn_blocking(move || {
            surface.profile(servers, prompts, hooks_off, |pid| {
                eprintln!("sprout acp pid {pid}");
                if let Ok(path) = std::env::var("SPROUT_BENCH_PID_FILE") {
                    let _ = std::fs::write(path, pid.to_string());
                }
            })
        })
        .await
        .unwrap_or_else(|e| panic!("the profile run panicked: {e}"));
        if let Err(e) = done {
            eprintln!("sprout-bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Some((servers, rounds)) = args.profile_host {
        let mut host = stop_host(&args.fixture, servers).await;
        for _ in 0..rounds {
            stop_round(&mut host).await;
        }
        host.shutdown().await;
        println!("{rounds} _Stop rounds against {servers} server(s)");
        return;
    }
    let (reps, slow_reps, start_reps) = if args.quick {
        (20, 2, 2)
    } else {
        (400, 15, 10)
    };
    let mut report = Report { rows: Vec::new() };
    println!(
        "fig  what                                                         median          [p10 – p90]"
    );
    let floor = match floor(reps * 5) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sprout-bench: {e}");
            std::process::exit(1);
        }
    };
    report.row("1", "JSON-RPC round trip over a pipe (floor)", floor, None);
    let mut host_rounds = Vec::new();
    for n in [1, 4, 8, 16] {
        let host = stop_host(&args.fixture, n).await;
        let (s, cpu, cpu_servers) = rounds(host, reps).await;
        report.row(
            "2",
            &format!("_Stop round, {n} instant stdio server(s)"),
            s,
            versus("floor", floor),
        );
        host_rounds.push((n, s, cpu, cpu_servers));
    }
    let s = http_rounds(reps).await;
    report.row(
        "2",
        "_Stop round, 1 Streamable HTTP server (own process)",
        s,
        versus("floor", floor),
    );
    for k in [1, 4] {
        let s = hanging(&args.fixture, k, slow_reps, 200).await;
        report.row(
            "3",
            &format!("round with {k} hanging hook(s): beyond deadline"),
            s,
            None,
        );
    }
    for n in [1, 8, 16] {
        let s = startup(&args.fixture, n, start_reps).await;
        report.row(
            "5",
            &format!("session start-up, {n} stdio server(s)"),
            s,
            None,
        );
    }
    for listed in [false, true] {
        let s = tool_hooks(&args.fixture, listed, reps).await;
        let what = if listed {
            "tool-call hooks of 1 call, 8 servers listing them"
        } else {
            "tool-call hooks of 1 call, no server listing them [E7]"
        };
        report.row("14", what, s, None);
    }
    let loop_reps = if args.quick { 1 } else { 10 };
    let tool_round = agent_overhead(&args.fixture, 50, loop_reps).await;
    report.row(
        "4",
        "agent overhead per tool round (50 rounds)",
        tool_round,
        versus("floor", floor),
    );
    match peak_memory(&args.sprout, &args.fixture, 50, 20 * 1024) {
        Ok(bytes) => report.value(
            "6",
            "peak RSS of sprout run, 50 rounds x 20 KB",
            bytes as f64 / (1024.0 * 1024.0),
            "MiB",
        ),
        Err(e) => {
            eprintln!("sprout-bench: figure 6: {e}");
            std::process::exit(1);
        }
    }
    let rate = core_rate(if args.quick {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(2)
    });
    report.value("7", "hooks-core decisions per second", rate, "decisions/s");

    // The product surface: the real binary, over HTTP to a fake model.
    let model = fake_model::FakeModel::start().await;
    let surface = acp::Surface {
        sprout: args.sprout.clone(),
        fixture: args.fixture.clone(),
        model: model.clone(),
    };
    let pairs = if args.quick { 10 } else { reps };
    let product = tokio::task::spawn_blocking(move || -> Result<_, String> {
        let mut stop = Vec::new();
        for n in [1, 8] {
            stop.push((n, surface.stop_rounds(n, pairs)?));
        }
        let tools = surface.tool_loop(50, loop_reps)?;
        let firsts = surface.first_bytes(FIRST_BYTE_GAP, if pairs > 20 { 100 } else { 3 })?;
        let runs = [0, 8]
            .into_iter()
            .map(|n| {
                Ok((
                    n,
                    run::start_to_exit(&surface, n, if pairs > 20 { 30 } else { 2 })?,
                ))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok((stop, tools, firsts, runs))
    })
    .await
    .unwrap_or_else(|e| panic!("the product-surface figures panicked: {e}"));
    let (stop, tools, (streamed, whole), runs) = match product {
        Ok(figures) => figures,
        Err(e) => {
            eprintln!("sprout-bench: {e}");
            std::process::exit(1);
        }
    };
    for (n, f) in &stop {
        report.row(
            "8",
            &format!("ACP prompt, {n} server(s), hooks off"),
            f.off,
            None,
        );
        report.row(
            "8",
            &format!("ACP prompt, {n} server(s), hooks on"),
            f.on,
            None,
        );
    }
    for (n, f) in &stop {
        let host = host_rounds
            .iter()
            .find(|(m, ..)| m == n)
            .map(|(_, s, ..)| *s)
            .expect("figure 2 ran for this n");
        let name = format!("fig 2 (n={n})");
        report.row(
            "9",
            &format!("ACP _Stop round (on − off, paired), {n} server(s)"),
            f.round,
            versus(&name, host),
        );
    }
    for (n, f) in &stop {
        report.value(
            "10",
            &format!("agent CPU per ACP prompt, {n} server(s), hooks off"),
            f.cpu_off_us,
            "µs",
        );
        report.value(
            "10",
            &format!("agent CPU per _Stop round (on − off), {n} server(s)"),
            f.cpu_round_us,
            "µs",
        );
        if let Some((_, _, cpu, cpu_servers)) = host_rounds.iter().find(|(m, ..)| m == n) {
            report.value(
                "10",
                &format!("Host CPU per _Stop round (fig 2), {n} server(s)"),
                *cpu,
                "µs",
            );
            report.value(
                "10",
                &format!("servers' CPU per _Stop round (fig 2), {n} server(s)"),
                *cpu_servers,
                "µs",
            );
        }
    }
    for (n, f) in &stop {
        report.row(
            "11",
            &format!("ACP prompt → first agent_message_chunk, {n} srv, on"),
            f.first_chunk,
            None,
        );
    }
    report.row(
        "12",
        "ACP tool round, 50-round loop ((loop − plain) / 50)",
        tools,
        versus("fig 4", tool_round),
    );
    report.row(
        "15",
        "ACP prompt → first chunk, model takes 20 ms, streamed",
        streamed,
        None,
    );
    report.row(
        "15",
        "ACP prompt → first chunk, model takes 20 ms, not streamed",
        whole,
        None,
    );
    for (n, s) in &runs {
        report.row(
            "13",
            &format!("sprout run --json, start to exit, {n} server(s)"),
            *s,
            None,
        );
    }
    if let Some(out) = args.out {
        let document = json!({"quick": args.quick, "figures": report.rows});
        if let Err(e) = std::fs::write(
            &out,
            serde_json::to_string_pretty(&document).unwrap_or_default(),
        ) {
            eprintln!("sprout-bench: cannot write {}: {e}", out.display());
            std::process::exit(1);
        }
    }
}
