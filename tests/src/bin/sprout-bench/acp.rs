//! Figures 8 to 12: `sprout acp` as an editor runs it, a child process
//! spoken to in ACP (JSON-RPC, one message a line) over its stdin and stdout
//! by the small client here, with the model behind HTTP ([`FakeModel`]) and
//! the hook servers real `mcp-fixture` processes started by `sprout` itself
//! from the `mcpServers` of `session/new`.
//!
//! A `_Stop` round's cost at this surface is the difference between two
//! agents that differ only in the allowlist: one with `MCP_HOOK_SERVERS=*`,
//! one without it (hooks off), each with the same N servers in one session.
//! Their prompts alternate (on, off, off, on, …), so that a change in the
//! machine's load between them falls on both.
//!
//! The client reads stdout on a thread of its own, which stamps each line
//! with the time it was read before parsing it; a prompt's latency is from
//! just before its request is written to the stamp of its response.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sprout_tests::Scratch;

use crate::fake_model::FakeModel;
use crate::{Stats, stats, stats_us, us};

/// How long any one answer from `sprout acp` may take before the run fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// Prompts per session in a profile run ([`Surface::profile`]), about
/// as many as a session of figure 8 is given.
const PROFILE_SESSION: usize = 400;

/// What the product-surface figures run.
pub(crate) struct Surface {
    /// The `sprout` binary.
    pub(crate) sprout: PathBuf,
    /// The `mcp-fixture` binary.
    pub(crate) fixture: PathBuf,
    /// The model behind HTTP.
    pub(crate) model: FakeModel,
}

/// Figures 8 to 11 for one N.
pub(crate) struct StopFigures {
    /// Prompt latency with hooks on.
    pub(crate) on: Stats,
    /// Prompt latency with hooks off.
    pub(crate) off: Stats,
    /// On minus off, pair by pair.
    pub(crate) round: Stats,
    /// Prompt to first `agent_message_chunk`, hooks on.
    pub(crate) first_chunk: Stats,
    /// The hooks-off agent's CPU per prompt, µs.
    pub(crate) cpu_off_us: f64,
    /// The on agent's CPU per prompt minus the off agent's, µs.
    pub(crate) cpu_round_us: f64,
}

/// One prompt as the client saw it.
struct Prompted {
    total: Duration,
    first_chunk: Option<Duration>,
    /// The `result` of the response.
    result: Value,
    /// The `update` of every `session/update` that came before it.
    updates: Vec<Value>,
}

impl Surface {
    /// `sprout ARGS` in `dir` with a clean environment: `PATH`, `HOME`,
    /// `TMPDIR`, the fake model's variables and `env`.
    pub(crate) fn command(&self, args: &[&str], env: &[(&str, String)], dir: &Path) -> Command {
        let mut cmd = Command::new(&self.sprout);
        cmd.args(args).env_clear().current_dir(dir);
        for key in ["PATH", "HOME", "TMPDIR"] {
            if let Some(value) = std::env::var_os(key) {
                cmd.env(key, value);
            }
        }
        // Sessions are saved, as by default, but in the scratch directory:
        // a benchmark run leaves nothing in the person's state directory,
        // nor trust in its configuration directory.
        cmd.env("XDG_STATE_HOME", dir.join(".state"));
        cmd.env("XDG_CONFIG_HOME", dir.join(".config"));
        cmd.envs(self.model.env());
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    fn acp(&self, scratch: &Scratch, name: &str, env: &[(&str, String)]) -> Result<Acp, String> {
        let stderr = scratch.0.join(format!("{name}.stderr"));
        let mut acp = Acp::start(self.command(&["acp"], env, &scratch.0), stderr)?;
        acp.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )?;
        Ok(acp)
    }

    /// Figures 8 to 11 with `n` instant `_Stop` servers: `pairs` prompts
    /// with hooks on and as many with hooks off, alternating, in one session
    /// each.
    pub(crate) fn stop_rounds(&self, n: usize, pairs: usize) -> Result<StopFigures, String> {
        let scratch = Scratch::new(&format!("bench-acp-stop-{n}"));
        // Each server also lists a tool `t`, only so that the model's
        // request shows that every server came up, hooks on or off.
        let servers: Vec<Value> = (0..n)
            .map(|i| {
                json!({"name": format!("s{i}"), "command": self.fixture, "env": [],
                       "args": ["--tools", "t", "--hooks", "_Stop", "--stop", "empty"]})
            })
            .collect();
        let expected: Vec<String> = (0..n).map(|i| format!("s{i}__t")).collect();
        let hooks = [("MCP_HOOK_SERVERS", "*".to_owned())];
        let mut on = self.acp(&scratch, "on", &hooks)?;
        let mut off = self.acp(&scratch, "off", &[])?;
        let on_session = on.new_session(&scratch.0, &servers)?;
        let off_session = off.new_session(&scratch.0, &servers)?;
        self.model.call_tools("", 0);
        for (acp, session, hooks_on) in [
            (&mut on, &on_session, true),
            (&mut off, &off_session, false),
        ] {
            self.model.arm();
            let prompted = acp.prompt(session)?;
            check_stop(&prompted, n, hooks_on)?;
            let offered = self.model.seen_tools().ok_or("the model saw no request")?;
            if offered != expected {
                return Err(format!(
                    "hooks {}: the model was offered {offered:?}, not the tools of all {n} servers {expected:?}",
                    if hooks_on { "on" } else { "off" }
                ));
            }
        }
        for _ in 0..pairs / 10 {
            check_stop(&on.prompt(&on_session)?, n, true)?;
            check_stop(&off.prompt(&off_session)?, n, false)?;
        }
        let (cpu_on, cpu_off) = (on.cpu()?, off.cpu()?);
        let mut on_samples = Vec::with_capacity(pairs);
        let mut off_samples = Vec::with_capacity(pairs);
        let mut differences = Vec::with_capacity(pairs);
        let mut first_chunks = Vec::with_capacity(pairs);
        for i in 0..pairs {
            let (hooked, plain) = if i % 2 == 0 {
                let hooked = on.prompt(&on_session)?;
                (hooked, off.prompt(&off_session)?)
            } else {
                let plain = off.prompt(&off_session)?;
                (on.prompt(&on_session)?, plain)
            };
            check_stop(&hooked, n, true)?;
            check_stop(&plain, n, false)?;
            differences.push(us(hooked.total) - us(plain.total));
            on_samples.push(hooked.total);
            off_samples.push(plain.total);
            first_chunks.push(hooked.first_chunk.ok_or("no agent_message_chunk")?);
        }
        let cpu_on = on.cpu()? - cpu_on;
        let cpu_off = off.cpu()? - cpu_off;
        on.finish();
        off.finish();
        Ok(StopFigures {
            on: stats(on_samples),
            off: stats(off_samples),
            round: stats_us(differences),
            first_chunk: stats(first_chunks),
            cpu_off_us: cpu_off / pairs as f64,
            cpu_round_us: (cpu_on - cpu_off) / pairs as f64,
        })
    }

    /// Figure 12: the cost of a tool round in a prompt where the model
    /// calls a fixture tool `rounds` times before it ends, as the prompt's
    /// latency minus that of a prompt without tools (run just before it in
    /// a fresh session), divided by `rounds`. One server, hooks on, as in
    /// figure 4. The server is `--mcp-config`'s, whose rule
    /// (`autoApprove`) approves each call \[U4\], in the default `ask` mode.
    pub(crate) fn tool_loop(&self, rounds: usize, reps: usize) -> Result<Stats, String> {
        let scratch = Scratch::new("bench-acp-tools");
        let env = [
            ("MCP_HOOK_SERVERS", "*".to_owned()),
            ("SPROUT_AGENT_MAX_ROUNDS", (rounds + 10).to_string()),
        ];
        let config = scratch.0.join("tools.json");
        let entry = json!({"command": self.fixture, "autoApprove": ["t"],
                           "args": ["--tools", "t", "--hooks", "_Stop", "--stop", "empty"]});
        std::fs::write(&config, json!({"mcpServers": {"fx": entry}}).to_string())
            .map_err(|e| e.to_string())?;
        let stderr = scratch.0.join("tools.stderr");
        let config = config.to_string_lossy().into_owned();
        let mut acp = Acp::start(
            self.command(&["acp", "--mcp-config", &config], &env, &scratch.0),
            stderr,
        )?;
        acp.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )?;
        let server: [Value; 0] = [];
        let mut samples = Vec::with_capacity(reps);
        // The first repetition warms up and is not counted.
        for rep in 0..=reps {
            let session = acp.new_session(&scratch.0, &server)?;
            self.model.call_tools("fx__t", 0);
            let plain = acp.prompt(&session)?;
            check_stop(&plain, 1, true)?;
            self.model.call_tools("fx__t", rounds);
            let looped = acp.prompt(&session)?;
            check_end(&looped, "no_objection", rounds + 1)?;
            let count = |kind: &str, status: Option<&str>| {
                looped
                    .updates
                    .iter()
                    .filter(|u| {
                        u["sessionUpdate"] == kind
                            && !is_hook_round(u)
                            && status.is_none_or(|s| u["status"] == s)
                    })
                    .count()
            };
            let (called, completed) = (
                count("tool_call", None),
                count("tool_call_update", Some("completed")),
            );
            if called != rounds || completed != rounds {
                return Err(format!(
                    "the tool loop showed {called} tool calls and {completed} completed, not {rounds}"
                ));
            }
            acp.call("session/close", json!({"sessionId": session}))?;
            if rep > 0 {
                samples.push((us(looped.total) - us(plain.total)) / rounds as f64);
            }
        }
        acp.finish();
        Ok(stats_us(samples))
    }
}

impl Surface {
    /// For profiling (`--profile-acp N PROMPTS`), not a figure: one
    /// `sprout acp` with `n` instant `_Stop` servers, hooks on unless
    /// `hooks_off`, given `prompts` one-round prompts, a fresh session every
    /// [`PROFILE_SESSION`]. Its
    /// pid is printed on stderr before the prompts start (for `perf record
    /// -p PID`), and `ready` is called with it.
    pub(crate) fn profile(
        &self,
        n: usize,
        prompts: usize,
        hooks_off: bool,
        ready: impl FnOnce(u32),
    ) -> Result<(), String> {
        let scratch = Scratch::new(&format!("bench-acp-profile-{n}"));
        let servers: Vec<Value> = (0..n)
            .map(|i| {
                json!({"name": format!("s{i}"), "command": self.fixture, "env": [],
                       "args": ["--tools", "t", "--hooks", "_Stop", "--stop", "empty"]})
            })
            .collect();
        let env: Vec<(&str, String)> = if hooks_off {
            Vec::new()
        } else {
            vec![("MCP_HOOK_SERVERS", "*".to_owned())]
        };
        let mut acp = self.acp(&scratch, "profile", &env)?;
        let mut session = acp.new_session(&scratch.0, &servers)?;
        self.model.call_tools("", 0);
        for _ in 0..10 {
            check_stop(&acp.prompt(&session)?, n, !hooks_off)?;
        }
        ready(acp.child.id());
        let cpu = acp.cpu()?;
        let started = Instant::now();
        for i in 1..=prompts {
            check_stop(&acp.prompt(&session)?, n, !hooks_off)?;
            // As long a history as the figures' sessions reach, no longer.
            if i % PROFILE_SESSION == 0 && i < prompts {
                acp.call("session/close", json!({"sessionId": session}))?;
                session = acp.new_session(&scratch.0, &servers)?;
            }
        }
        let wall = started.elapsed();
        let cpu = acp.cpu()? - cpu;
        eprintln!(
            "{prompts} prompts: {:.1} µs a prompt, agent CPU {:.1} µs a prompt",
            us(wall) / prompts as f64,
            cpu / prompts as f64
        );
        acp.finish();
        Ok(())
    }
}

impl Surface {
    /// Figure 15: prompt to first `agent_message_chunk` against a model that
    /// takes `gap` to finish its answer, with streaming on and off (two
    /// agents, no servers, prompts alternating). Returns (streamed, whole).
    pub(crate) fn first_bytes(&self, gap: Duration, reps: usize) -> Result<(Stats, Stats), String> {
        let scratch = Scratch::new("bench-acp-stream");
        let mut streamed = self.acp(
            &scratch,
            "streamed",
            &[("SPROUT_AGENT_STREAM", "on".into())],
        )?;
        let mut whole = self.acp(&scratch, "whole", &[("SPROUT_AGENT_STREAM", "off".into())])?;
        let streamed_session = streamed.new_session(&scratch.0, &[])?;
        let whole_session = whole.new_session(&scratch.0, &[])?;
        self.model.call_tools("", 0);
        self.model.set_gap(gap);
        let mut firsts = (Vec::with_capacity(reps), Vec::with_capacity(reps));
        let result = (|| {
            for i in 0..=reps {
                let a = streamed.prompt(&streamed_session)?;
                let b = whole.prompt(&whole_session)?;
                for (prompted, label) in [(&a, "streamed"), (&b, "whole")] {
                    check_end(prompted, "hooks_off", 1)?;
                    let text: String = prompted
                        .updates
                        .iter()
                        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
                        .filter_map(|u| u["content"]["text"].as_str())
                        .collect();
                    if text != "done" {
                        return Err(format!("the {label} answer read {text:?}, not \"done\""));
                    }
                }
                // The first pair warms up and is not counted.
                if i > 0 {
                    firsts
                        .0
                        .push(a.first_chunk.ok_or("no agent_message_chunk")?);
                    firsts
                        .1
                        .push(b.first_chunk.ok_or("no agent_message_chunk")?);
                }
            }
            Ok(())
        })();
        self.model.set_gap(Duration::ZERO);
        result?;
        streamed.finish();
        whole.finish();
        Ok((stats(firsts.0), stats(firsts.1)))
    }
}

fn is_hook_round(update: &Value) -> bool {
    update["toolCallId"]
        .as_str()
        .is_some_and(|id| id.starts_with("sprout-hook-round-"))
}

/// The prompt ended for `reason` after `rounds` model requests, and no
/// server failure or warning was shown on the way.
fn check_end(prompted: &Prompted, reason: &str, rounds: usize) -> Result<(), String> {
    let end = &prompted.result["_meta"]["sprout/end"];
    if end["reason"] != reason || end["rounds"] != rounds {
        return Err(format!(
            "a prompt ended with {end}, not {reason:?} after {rounds} round(s)"
        ));
    }
    if let Some(thought) = prompted
        .updates
        .iter()
        .find(|u| u["sessionUpdate"] == "agent_thought_chunk")
    {
        return Err(format!("sprout reported a problem: {thought}"));
    }
    Ok(())
}

/// A one-round prompt of figure 8: with hooks on, exactly one hook round
/// that asked all `n` servers, each answering empty; with hooks off, none.
/// Exactly one `agent_message_chunk` either way, so that no update of one
/// prompt is counted in the next.
fn check_stop(prompted: &Prompted, n: usize, hooks_on: bool) -> Result<(), String> {
    check_end(
        prompted,
        if hooks_on {
            "no_objection"
        } else {
            "hooks_off"
        },
        1,
    )?;
    let chunks = prompted
        .updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .count();
    let rounds: Vec<&Value> = prompted
        .updates
        .iter()
        .filter(|u| is_hook_round(u))
        .collect();
    if chunks != 1 {
        return Err(format!(
            "{chunks} agent_message_chunk updates in one prompt"
        ));
    }
    match (hooks_on, rounds.as_slice()) {
        (false, []) => Ok(()),
        (true, [round]) if round["status"] == "completed" => {
            let events = round["_meta"]["sprout/events"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            let asked = events
                .iter()
                .find(|e| e["event"] == "round_started")
                .and_then(|e| e["servers"].as_array())
                .map_or(0, Vec::len);
            let empty = events
                .iter()
                .filter(|e| e["event"] == "hook_called" && e["outcome"] == "empty")
                .count();
            if asked == n && empty == n {
                Ok(())
            } else {
                Err(format!(
                    "a hook round asked {asked} and heard {empty} empty answers, not {n}: {events:?}"
                ))
            }
        }
        _ => Err(format!(
            "hooks {}: unexpected hook round updates {rounds:?}",
            if hooks_on { "on" } else { "off" }
        )),
    }
}

/// A message from `sprout acp` and the time it was read.
type Timed = (Instant, Value);

/// A raw ACP client over a `sprout acp` child.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Each line of stdout with the time it was read.
    lines: Receiver<(Instant, String)>,
    next_id: u64,
    stderr: PathBuf,
}

impl Acp {
    fn start(mut command: Command, stderr: PathBuf) -> Result<Acp, String> {
        let log = std::fs::File::create(&stderr).map_err(|e| e.to_string())?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run sprout acp: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send((Instant::now(), line)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Acp {
            child,
            stdin,
            lines,
            next_id: 1,
            stderr,
        })
    }

    /// What went wrong, with the end of sprout's stderr.
    fn failure(&self, what: &str) -> String {
        let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(10).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("sprout acp: {what}; its stderr ends:\n{}", tail.join("\n"))
    }

    /// Writes a request; returns its id and the time just before the write.
    fn request(&mut self, method: &str, params: Value) -> Result<(u64, Instant), String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().ok_or("stdin is closed")?;
        let sent = Instant::now();
        stdin
            .write_all(line.as_bytes())
            .map_err(|e| format!("cannot write to sprout acp: {e}"))?;
        Ok((id, sent))
    }

    /// The next message and when it was read.
    fn next(&mut self) -> Result<(Instant, Value), String> {
        match self.lines.recv_timeout(PATIENCE) {
            Ok((at, line)) => serde_json::from_str(&line)
                .map(|v| (at, v))
                .map_err(|e| self.failure(&format!("a line that is not JSON ({e}): {line}"))),
            Err(RecvTimeoutError::Timeout) => {
                Err(self.failure(&format!("no answer within {PATIENCE:?}")))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.failure("stdout closed")),
        }
    }

    /// Waits for the response to `id`, keeping the updates before it with
    /// the times they were read.
    fn response(&mut self, id: u64) -> Result<(Instant, Value, Vec<Timed>), String> {
        let mut updates = Vec::new();
        loop {
            let (at, mut message) = self.next()?;
            if message.get("method").is_some() {
                updates.push((at, message["params"]["update"].take()));
            } else if message["id"] == id {
                if let Some(error) = message.get("error") {
                    return Err(self.failure(&format!("request {id} failed: {error}")));
                }
                return Ok((at, message["result"].clone(), updates));
            } else {
                return Err(self.failure(&format!("a response to no request: {message}")));
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let (id, _) = self.request(method, params)?;
        self.response(id).map(|(_, result, _)| result)
    }

    fn new_session(&mut self, cwd: &Path, servers: &[Value]) -> Result<String, String> {
        let result = self.call("session/new", json!({"cwd": cwd, "mcpServers": servers}))?;
        result["sessionId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| self.failure(&format!("session/new answered {result}")))
    }

    fn prompt(&mut self, session: &str) -> Result<Prompted, String> {
        let (id, sent) = self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "bench"}]}),
        )?;
        let (at, result, updates) = self.response(id)?;
        let first_chunk = updates
            .iter()
            .find(|(_, u)| u["sessionUpdate"] == "agent_message_chunk")
            .map(|(chunk, _)| *chunk - sent);
        Ok(Prompted {
            total: at - sent,
            first_chunk,
            result,
            updates: updates.into_iter().map(|(_, u)| u).collect(),
        })
    }

    /// The CPU time the agent process has used so far (all its threads,
    /// not its children), in µs, from `/proc/PID/task/*/schedstat`
    /// (nanoseconds, where `/proc/PID/stat` counts 10 ms ticks).
    fn cpu(&self) -> Result<f64, String> {
        match crate::cpu_ns(self.child.id()) {
            0 => Err(format!("no CPU time for pid {} in /proc", self.child.id())),
            ns => Ok(ns as f64 / 1000.0),
        }
    }

    /// Closes stdin and waits (up to 10 s) for the process to exit.
    fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        self.stop();
    }
}
