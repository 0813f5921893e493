//! `sprout-bench`: the benchmarks that `cargo xtask bench` runs.
//!
//! Each figure is a median over many repetitions, with its spread (10th and
//! 90th percentiles). The physical floor, a JSON-RPC round trip over a pipe to
//! a minimal native process, is measured in the same run so that the hook
//! figures can be read as ratios that carry across machines.
//!
//! ```text
//! sprout-bench [--quick] [--out FILE] [--fixture PATH]
//! ```

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
use hooks_mcp::server::ToolServer;
use hooks_mcp::{Host, HostOptions, ServerSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Args {
    quick: bool,
    out: Option<PathBuf>,
    fixture: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        quick: false,
        out: None,
        fixture: sibling("mcp-fixture"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--out" => args.out = Some(it.next().ok_or("--out needs a file")?.into()),
            "--fixture" => args.fixture = it.next().ok_or("--fixture needs a path")?.into(),
            "--echo" => {
                echo_server();
                std::process::exit(0);
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

#[derive(Clone, Copy, Debug)]
struct Stats {
    median: Duration,
    p10: Duration,
    p90: Duration,
    n: usize,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
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

struct Report {
    rows: Vec<serde_json::Value>,
}

impl Report {
    fn row(&mut self, figure: &str, what: &str, s: Stats, floor: Option<Stats>) {
        let ratio = floor.map(|f| us(s.median) / us(f.median));
        println!(
            "{figure:<4} {what:<44} {:>11.1} µs  [{:>10.1} – {:>10.1}]  n={:<5} {}",
            us(s.median),
            us(s.p10),
            us(s.p90),
            s.n,
            ratio.map_or(String::new(), |r| format!("{r:>7.1}× floor"))
        );
        self.rows.push(json!({
            "figure": figure, "what": what, "median_us": us(s.median), "p10_us": us(s.p10),
            "p90_us": us(s.p90), "n": s.n, "ratio_to_floor": ratio,
        }));
    }

    fn value(&mut self, figure: &str, what: &str, value: f64, unit: &str) {
        println!("{figure:<4} {what:<44} {value:>11.0} {unit}");
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

async fn start(specs: Vec<ServerSpec>, timeout_ms: u64) -> Host {
    Host::start(
        specs,
        config(timeout_ms),
        HostOptions::default(),
        Arc::new(|_: &hooks_core::Event| {}),
    )
    .await
    .expect("the host starts")
}

/// One `_Stop` round that nobody objects to; returns its duration.
async fn stop_round(host: &mut Host) -> Duration {
    let started = Instant::now();
    host.begin_prompt().expect("no prompt runs");
    let decision = host
        .end_turn(StopReason::EndTurn, 0, &CancellationToken::new())
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

/// Figure 2: `_Stop` rounds against `host`'s instant servers.
async fn rounds(mut host: Host, reps: usize) -> Stats {
    for _ in 0..reps / 10 + 1 {
        stop_round(&mut host).await;
    }
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        samples.push(stop_round(&mut host).await);
    }
    host.shutdown().await;
    stats(samples)
}

async fn http_host() -> (Host, CancellationToken) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let handler = ToolServer::new("bench")
        .hook(hooks_core::HookPoint::Stop, "never objects", |_| async {
            String::new()
        })
        .into_handler();
    let config = StreamableHttpServerConfig::default();
    let stop = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
            .await;
    });
    let spec = ServerSpec::http(ServerName::new("http").expect("valid"), url);
    (start(vec![spec], 10_000).await, stop)
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
        let host = start(fixtures(fixture, n, &["--hooks", "_Stop"]), 2500).await;
        samples.push(started.elapsed());
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
/// minus the model's own time, divided by the rounds.
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
        let mut agent = agent_loop::Agent::new(
            model.clone(),
            host,
            settings,
            Arc::new(|_: &agent_loop::AgentEvent| {}),
        );
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
    let config = json!({"mcpServers": {"fx": {"command": fixture, "args": ["--tools", "t", "--tool-bytes", bytes.to_string()]}}});
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
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
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
            .end_turn(now, stop, tool_calls)
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
            decide(&mut session, now, tools(), false);
            decide(&mut session, now, end(), true);
            decide(&mut session, now, tools(), false);
            let last = decide(&mut session, now, end(), false);
            debug_assert_eq!(
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

#[tokio::main]
async fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("sprout-bench: {e}");
            std::process::exit(2);
        }
    };
    if !args.fixture.exists() {
        eprintln!(
            "sprout-bench: no fixture server at {}; build it with cargo build -p sprout-tests --bins",
            args.fixture.display()
        );
        std::process::exit(2);
    }
    let (reps, slow_reps, start_reps) = if args.quick {
        (20, 2, 2)
    } else {
        (400, 15, 10)
    };
    let mut report = Report { rows: Vec::new() };
    println!("fig  what                                              median          [p10 – p90]");
    let floor = match floor(reps * 5) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sprout-bench: {e}");
            std::process::exit(1);
        }
    };
    report.row("1", "JSON-RPC round trip over a pipe (floor)", floor, None);
    for n in [1, 4, 8, 16] {
        let host = start(
            fixtures(&args.fixture, n, &["--hooks", "_Stop", "--stop", "empty"]),
            10_000,
        )
        .await;
        let s = rounds(host, reps).await;
        report.row(
            "2",
            &format!("_Stop round, {n} instant stdio server(s)"),
            s,
            Some(floor),
        );
    }
    let (host, stop) = http_host().await;
    let s = rounds(host, reps).await;
    stop.cancel();
    report.row("2", "_Stop round, 1 Streamable HTTP server", s, Some(floor));
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
    let s = agent_overhead(&args.fixture, 50, if args.quick { 1 } else { 10 }).await;
    report.row(
        "4",
        "agent overhead per tool round (50 rounds)",
        s,
        Some(floor),
    );
    match peak_memory(&sibling("sprout"), &args.fixture, 50, 20 * 1024) {
        Ok(bytes) => report.value(
            "6",
            "peak RSS of sprout run, 50 rounds x 20 KB",
            bytes as f64 / (1024.0 * 1024.0),
            "MiB",
        ),
        Err(e) => eprintln!(
            "sprout-bench: figure 6 skipped: {e} (build sprout: cargo build -p sprout-cli)"
        ),
    }
    let rate = core_rate(if args.quick {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(2)
    });
    report.value("7", "hooks-core decisions per second", rate, "decisions/s");
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
