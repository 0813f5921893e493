//! `sprout acp` over the real binary's stdio, with a test client speaking the
//! Agent Client Protocol as raw JSON lines.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{FakeOpenAi, Scratch, end, fixture, sprout_command, streamed_end, tool};

/// A raw ACP client over a `sprout acp` child.
pub(crate) struct AcpClient {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    /// Notifications seen so far, in order.
    updates: Vec<Value>,
    /// Responses that arrived while waiting for another id.
    parked: Vec<Value>,
    /// Every line of stdout so far, in the order it came.
    seen: Arc<Mutex<Vec<Value>>>,
    next_id: u64,
    /// The kind of option every `session/request_permission` is answered
    /// with (`allow_once`, …), or `cancelled`.
    pub(crate) choose: String,
    /// Every request sprout sent, in order.
    pub(crate) asked: Vec<Value>,
}

impl AcpClient {
    pub(crate) fn start(scratch: &Scratch, env: &[(&str, &str)]) -> AcpClient {
        AcpClient::start_with(scratch, &["acp"], env)
    }

    /// `sprout ARGS` (`acp` and its flags) as the agent.
    pub(crate) fn start_with(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> AcpClient {
        let mut child = sprout_command(args, env, &scratch.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sprout acp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
                record.lock().unwrap().push(value.clone());
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        AcpClient {
            child,
            stdin,
            lines,
            updates: Vec::new(),
            parked: Vec::new(),
            seen,
            next_id: 1,
            choose: "allow_once".to_owned(),
            asked: Vec::new(),
        }
    }

    /// Answers a request from sprout: a permission request with the option
    /// of kind `self.choose` (or `cancelled`), anything else with an error.
    fn answer(&mut self, request: Value) {
        let result = if request["method"] == "session/request_permission" {
            let option = request["params"]["options"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|o| o["kind"] == self.choose.as_str())
                .map(|o| o["optionId"].clone());
            match option {
                Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
                None => json!({"outcome": {"outcome": "cancelled"}}),
            }
        } else {
            Value::Null
        };
        let line = if result.is_null() {
            json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "not here"}})
        } else {
            json!({"jsonrpc": "2.0", "id": request["id"], "result": result})
        };
        self.asked.push(request);
        self.send_raw(&line.to_string());
    }

    pub(crate) fn send_raw(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send_raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        id
    }

    pub(crate) fn notify(&mut self, method: &str, params: Value) {
        self.send_raw(&json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string());
    }

    /// Waits for the response with `id` (a JSON id), keeping notifications.
    pub(crate) fn response(&mut self, id: Value, within: Duration) -> Value {
        if let Some(i) = self.parked.iter().position(|r| r["id"] == id) {
            return self.parked.remove(i);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(message) if message.get("method").is_some() && message.get("id").is_some() => {
                    self.answer(message)
                }
                Ok(message) if message.get("method").is_some() => self.updates.push(message),
                Ok(message) if message["id"] == id => return message,
                Ok(message) => self.parked.push(message),
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no response {id} within {within:?}; updates: {:#?}",
                    self.updates
                ),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("sprout acp closed its stdout before response {id}")
                }
            }
        }
    }

    /// Waits (up to 30 s) for a `session/update` matching `pred`, keeping
    /// everything else that arrives.
    pub(crate) fn wait_update(&mut self, what: &str, pred: impl Fn(&Value) -> bool) {
        if self.updates.iter().any(|u| pred(&u["params"]["update"])) {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(message) if message.get("method").is_some() && message.get("id").is_some() => {
                    self.answer(message)
                }
                Ok(message) if message.get("method").is_some() => {
                    let hit = pred(&message["params"]["update"]);
                    self.updates.push(message);
                    if hit {
                        return;
                    }
                }
                Ok(message) => self.parked.push(message),
                Err(_) => panic!("no update {what}; updates: {:#?}", self.updates),
            }
        }
    }

    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(json!(id), Duration::from_secs(30))
    }

    pub(crate) fn initialize(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
    }

    pub(crate) fn new_session(&mut self, cwd: &std::path::Path, servers: Value) -> String {
        let response = self.call("session/new", json!({"cwd": cwd, "mcpServers": servers}));
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {response}"))
            .to_owned()
    }

    pub(crate) fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// The `sessionUpdate` kinds seen for `session`.
    pub(crate) fn update_kinds(&self, session: &str) -> Vec<String> {
        self.updates
            .iter()
            .filter(|u| u["params"]["sessionId"] == session)
            .map(|u| {
                u["params"]["update"]["sessionUpdate"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    }

    /// Closes stdin and waits for the process to exit.
    pub(crate) fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "sprout acp did not exit after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

pub(crate) fn fixture_server(name: &str, args: &[&str]) -> Value {
    json!({"name": name, "command": fixture(), "args": args, "env": []})
}

fn fake_env(
    fake: &FakeOpenAi,
    extra: &[(&'static str, &'static str)],
) -> Vec<(&'static str, String)> {
    let mut env = fake.env();
    env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    env
}

fn refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

// The handshake, then a prompt with a tool call and a _Stop objection: the
// client sees text, tool calls, the hook round, and the stop reason.
#[test]
fn prompt_with_tools_and_an_objection() {
    let scratch = Scratch::new("acp-prompt");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, tool("c1", "fx__work")),
        (Duration::ZERO, end("all done")),
        (Duration::ZERO, tool("c2", "fx__work")),
        (Duration::ZERO, end("now really done")),
    ]);
    let env = fake_env(&fake, &[("MCP_HOOK_SERVERS", "*")]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    let init = client.initialize();
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(init["result"]["agentInfo"]["name"], "sprout");
    let session = client.new_session(
        &scratch.0,
        json!([fixture_server(
            "fx",
            &["--tools", "work", "--stop", "text=tests are missing,empty"]
        )]),
    );
    let id = client.prompt(&session, "do the work");
    let response = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        response["result"]["_meta"]["sprout/end"]["reason"],
        "no_objection"
    );
    let kinds = client.update_kinds(&session);
    for kind in ["agent_message_chunk", "tool_call", "tool_call_update"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
    }
    let hook_round = client
        .updates
        .iter()
        .find(|u| {
            u["params"]["update"]["toolCallId"] == "sprout-hook-round-1"
                && u["params"]["update"]["status"] == "completed"
        })
        .expect("the hook round is shown as a tool call");
    let text = hook_round["params"]["update"]["content"].to_string();
    assert!(
        text.contains("tests are missing") && text.contains("objection honoured"),
        "{text}"
    );
    // A fast round is one message: a tool call created already completed,
    // with every event of the round in `_meta`.
    let round_messages: Vec<&Value> = client
        .updates
        .iter()
        .filter(|u| u["params"]["update"]["toolCallId"] == "sprout-hook-round-1")
        .collect();
    assert_eq!(round_messages.len(), 1, "{round_messages:#?}");
    assert_eq!(
        round_messages[0]["params"]["update"]["sessionUpdate"],
        "tool_call"
    );
    let events = &round_messages[0]["params"]["update"]["_meta"]["sprout/events"];
    assert_eq!(events.as_array().map(Vec::len), Some(3), "{events}");
    assert!(client.finish().success());
}

// A slow round (one hook takes 1.5 s) is shown in progress after 100 ms and
// updated at most once per 100 ms with new lines: here two or three
// messages, never one per server nor one per event.
#[test]
fn a_slow_round_shows_progress_in_few_messages() {
    let scratch = Scratch::new("acp-slow-round");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("done")),
        (Duration::ZERO, end("done, really")),
    ]);
    let env = fake_env(&fake, &[("MCP_HOOK_SERVERS", "*")]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let session = client.new_session(
        &scratch.0,
        json!([
            fixture_server("slow", &["--stop", "delay=1500=check the build"]),
            fixture_server("quick", &["--stop", "empty"]),
        ]),
    );
    let id = client.prompt(&session, "x");
    let response = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let round: Vec<&Value> = client
        .updates
        .iter()
        .map(|u| &u["params"]["update"])
        .filter(|u| u["toolCallId"] == "sprout-hook-round-1")
        .collect();
    assert!((2..=3).contains(&round.len()), "{round:#?}");
    assert_eq!(round[0]["sessionUpdate"], "tool_call");
    assert_eq!(round[0]["status"], "in_progress");
    let last = round[round.len() - 1];
    assert_eq!(last["status"], "completed");
    let text = last["content"].to_string();
    assert!(
        text.contains("check the build") && text.contains("quick: empty"),
        "{text}"
    );
    assert!(client.finish().success());
}

// [S3] per session: the budget carries across two prompts of one session; a
// new session has a fresh one.
#[test]
fn budget_is_per_session() {
    let scratch = Scratch::new("acp-budget");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("first")),
        (Duration::ZERO, end("first again")),
        (Duration::ZERO, end("second prompt")),
        (Duration::ZERO, end("other session")),
        (Duration::ZERO, end("other session again")),
    ]);
    let env = fake_env(
        &fake,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_STOP_MAX_REJECTIONS", "1"),
        ],
    );
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let nag = || json!([fixture_server("nag", &["--stop", "text=not yet"])]);
    let one = client.new_session(&scratch.0, nag());
    let id = client.prompt(&one, "a");
    let first = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(
        first["result"]["_meta"]["sprout/end"]["reason"], "declined",
        "{first}"
    );
    let id = client.prompt(&one, "b");
    let second = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(
        second["result"]["_meta"]["sprout/end"]["reason"], "budget_spent",
        "{second}"
    );
    let two = client.new_session(&scratch.0, nag());
    let id = client.prompt(&two, "c");
    let fresh = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(
        fresh["result"]["_meta"]["sprout/end"]["reason"], "declined",
        "{fresh}"
    );
    assert!(client.finish().success());
}

// Cancel during a model call, a tool call and a hook round: each prompt
// answers `cancelled` promptly; a second prompt on a busy session is refused.
#[test]
fn cancel_at_each_stage_and_one_prompt_at_a_time() {
    let scratch = Scratch::new("acp-cancel");
    let long = Duration::from_secs(30);
    let fake = FakeOpenAi::start(vec![
        (long, end("never seen")),
        (Duration::ZERO, tool("c1", "fx__slow")),
        (Duration::ZERO, end("done")),
    ]);
    let env = fake_env(
        &fake,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "60000"),
        ],
    );
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let servers = json!([fixture_server(
        "fx",
        &["--tools", "slow", "--tool-delay", "60000", "--stop", "hang"]
    )]);
    let session = client.new_session(&scratch.0, servers);
    for stage in ["model call", "tool call", "hook round"] {
        let id = client.prompt(&session, stage);
        // Cancel only once the prompt is in that stage, whatever the speed
        // of the machine.
        match stage {
            "model call" => {
                let deadline = Instant::now() + Duration::from_secs(30);
                while fake.requests.lock().unwrap().is_empty() {
                    assert!(Instant::now() < deadline, "the model was never asked");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            "tool call" => client.wait_update("tool_call c1", |u| {
                u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "c1"
            }),
            _ => client.wait_update("the _Stop round", |u| {
                u["sessionUpdate"] == "tool_call"
                    && u["toolCallId"]
                        .as_str()
                        .is_some_and(|id| id.starts_with("sprout-hook-round-"))
            }),
        }
        if stage == "model call" {
            let busy = client.prompt(&session, "again");
            let refused = client.response(json!(busy), Duration::from_secs(10));
            assert!(
                refused["error"]["data"]
                    .as_str()
                    .unwrap_or("")
                    .contains("already running"),
                "{refused}"
            );
        }
        let started = Instant::now();
        client.notify("session/cancel", json!({"sessionId": session}));
        let response = client.response(json!(id), Duration::from_secs(10));
        assert_eq!(
            response["result"]["stopReason"], "cancelled",
            "{stage}: {response}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{stage}: cancel took {:?}",
            started.elapsed()
        );
    }
    assert!(client.finish().success());
}

// Two sessions prompt at once; both finish.
#[test]
fn two_sessions_at_once() {
    let scratch = Scratch::new("acp-two");
    // Each answer takes 30 s: run one after the other, the second request
    // could not reach the model within the 20 s this test waits for it.
    let slow = Duration::from_secs(30);
    let fake = FakeOpenAi::start(vec![(slow, end("one")), (slow, end("two"))]);
    let env = fake_env(&fake, &[]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let a = client.new_session(&scratch.0, json!([]));
    let b = client.new_session(&scratch.0, json!([]));
    let (ia, ib) = (client.prompt(&a, "x"), client.prompt(&b, "y"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while fake.requests.lock().unwrap().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the second session waited for the first"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for session in [&a, &b] {
        client.notify("session/cancel", json!({"sessionId": session}));
    }
    let ra = client.response(json!(ia), Duration::from_secs(20));
    let rb = client.response(json!(ib), Duration::from_secs(20));
    assert_eq!(
        (
            ra["result"]["stopReason"].as_str(),
            rb["result"]["stopReason"].as_str()
        ),
        (Some("cancelled"), Some("cancelled"))
    );
    assert!(client.finish().success());
}

// Malformed and oversized frames get JSON-RPC errors and the agent goes on.
#[test]
fn malformed_and_oversized_frames_get_errors() {
    let scratch = Scratch::new("acp-frames");
    let mut client = AcpClient::start(
        &scratch,
        &[
            ("SPROUT_ACP_MAX_FRAME_BYTES", "4096"),
            ("SPROUT_AGENT_PROVIDER", "openai"),
            ("OPENAI_COMPAT_MODEL", "m"),
        ],
    );
    client.send_raw("this is not json");
    let parse = client.response(Value::Null, Duration::from_secs(10));
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    client.send_raw(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"initialize\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(10_000)
    ));
    // An oversized request is answered with an error under its own id that
    // names the limit.
    let oversized = client.response(json!(99), Duration::from_secs(10));
    assert_eq!(oversized["error"]["code"], -32600, "{oversized}");
    assert!(
        oversized.to_string().contains("over the 4096-byte limit"),
        "{oversized}"
    );
    // An oversized line with no id in sight gets the same error under a null
    // id; a blank line gets nothing.
    client.send_raw("");
    client.send_raw(&"y".repeat(10_000));
    let garbage = client.response(Value::Null, Duration::from_secs(10));
    assert_eq!(garbage["error"]["code"], -32600, "{garbage}");
    assert!(
        garbage.to_string().contains("over the 4096-byte limit"),
        "{garbage}"
    );
    let unknown = client.call("session/frobnicate", json!({}));
    assert!(unknown["error"].is_object(), "{unknown}");
    let init = client.initialize();
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let bad = client.call("session/prompt", json!({"sessionId": "nope", "prompt": []}));
    assert!(
        bad["error"]["data"]
            .as_str()
            .unwrap_or("")
            .contains("unknown session"),
        "{bad}"
    );
    assert!(client.finish().success());
}

// session/close stops a session's servers; a client that disconnects in the
// middle of a prompt leaves no process behind either.
#[test]
fn close_and_disconnect_leave_no_process() {
    use crate::support::{all_gone, logged_pids};
    let scratch = Scratch::new("acp-close");
    let (closed_log, hung_log) = (scratch.path("closed.log"), scratch.path("hung.log"));
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("done"))]);
    let env = fake_env(
        &fake,
        &[
            ("MCP_HOOK_SERVERS", "*"),
            ("SPROUT_AGENT_HOOK_TIMEOUT_MS", "60000"),
        ],
    );
    let mut client = AcpClient::start(&scratch, &refs(&env));
    let init = client.initialize();
    assert!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["close"].is_object(),
        "{init}"
    );
    let closed = client.new_session(
        &scratch.0,
        json!([fixture_server(
            "fx",
            &["--grandchild", "--log", &closed_log]
        )]),
    );
    let closed_pids = [
        logged_pids(&closed_log, "start"),
        logged_pids(&closed_log, "grandchild"),
    ]
    .concat();
    assert_eq!(closed_pids.len(), 2);
    let response = client.call("session/close", json!({"sessionId": closed}));
    assert!(response["result"].is_object(), "{response}");
    // The group was killed before the answer; a grandchild may still take a
    // moment to be reaped by init, so wait (bounded) for it to be gone.
    assert!(
        all_gone(&closed_pids),
        "session/close left processes running"
    );
    let gone = client.prompt(&closed, "x");
    assert!(client.response(json!(gone), Duration::from_secs(10))["error"].is_object());

    let hung = client.new_session(
        &scratch.0,
        json!([fixture_server(
            "fx",
            &["--grandchild", "--log", &hung_log, "--stop", "hang"]
        )]),
    );
    client.prompt(&hung, "end and get stuck in _Stop");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&hung_log)
        .unwrap_or_default()
        .contains("\"call\"")
    {
        assert!(Instant::now() < deadline, "the hook was never called");
        std::thread::sleep(Duration::from_millis(20));
    }
    let hung_pids = [
        logged_pids(&hung_log, "start"),
        logged_pids(&hung_log, "grandchild"),
    ]
    .concat();
    assert!(client.finish().success());
    assert!(
        all_gone(&hung_pids),
        "a disconnect mid-prompt left processes running"
    );
}

// A prompt with nothing to read is refused; a hook round with nobody to ask
// sends no update for a tool call the client never saw.
#[test]
fn blank_prompts_and_silent_rounds() {
    let scratch = Scratch::new("acp-blank");
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("done"))]);
    let env = fake_env(&fake, &[("MCP_HOOK_SERVERS", "*")]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let session = client.new_session(
        &scratch.0,
        json!([fixture_server("plain", &["--tools", "t", "--hooks", ""])]),
    );
    let blank = client.prompt(&session, "   ");
    let refused = client.response(json!(blank), Duration::from_secs(10));
    assert!(
        refused["error"]["data"]
            .as_str()
            .unwrap_or("")
            .contains("no text"),
        "{refused}"
    );
    let id = client.prompt(&session, "hello");
    let response = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let mut announced = std::collections::BTreeSet::new();
    for update in &client.updates {
        let update = &update["params"]["update"];
        match update["sessionUpdate"].as_str() {
            Some("tool_call") => {
                announced.insert(update["toolCallId"].to_string());
            }
            Some("tool_call_update") => {
                assert!(
                    announced.contains(&update["toolCallId"].to_string()),
                    "update for an unannounced call: {update}"
                );
            }
            _ => {}
        }
    }
    assert!(client.finish().success());
}

// Interop: the official TypeScript ACP SDK drives `sprout acp` through a
// prompt with a tool call and a `_Stop` objection. Needs Node.js and
// `npm ci --prefix tests/acp-node`; `cargo xtask ci` does both and builds the
// tests with the `acp-node` feature. Without the feature the test is not
// compiled, so it is never counted as passed when it did not run.
#[cfg(feature = "acp-node")]
#[test]
fn the_official_typescript_sdk_drives_sprout() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let client = root.join("acp-node").join("client.mjs");
    assert!(
        root.join("acp-node/node_modules/@agentclientprotocol/sdk")
            .exists(),
        "run npm ci --prefix tests/acp-node first"
    );
    let scratch = Scratch::new("acp-node");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, tool("c1", "fx__work")),
        (Duration::ZERO, end("done")),
        (Duration::ZERO, tool("c2", "fx__work")),
        (Duration::ZERO, end("done, tests too")),
        // The third agent: one prompt a permission option [U7].
        (Duration::ZERO, tool("a1", "fx__work")),
        (Duration::ZERO, end("done")),
        (Duration::ZERO, tool("a2", "fx__work")),
        (Duration::ZERO, end("done")),
        (Duration::ZERO, tool("a3", "fx__work")),
        (Duration::ZERO, end("done")),
        (Duration::ZERO, tool("a4", "fx__work")),
        (Duration::ZERO, end("done")),
        (Duration::ZERO, tool("a5", "fx__work")),
        (Duration::ZERO, end("done")),
    ]);
    let sprout = crate::support::sprout();
    let mut command = std::process::Command::new("node");
    command
        .arg(&client)
        .arg(&sprout)
        .arg(fixture())
        .arg(&scratch.0)
        .env_clear();
    for key in ["PATH", "HOME", "TMPDIR"] {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command
        .envs(fake.env())
        .env("MCP_HOOK_SERVERS", "*")
        // The first two agents' tool calls run unasked; the third asks.
        .env("SPROUT_AGENT_APPROVAL", "auto")
        // Sessions and trust are kept in the scratch directory, not the
        // real home.
        .env("XDG_STATE_HOME", scratch.0.join(".state"))
        .env("XDG_CONFIG_HOME", scratch.0.join(".config"));
    let out = command.output().expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(result["protocolVersion"], 1, "{result}");
    assert_eq!(result["agent"], "sprout");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["end"], "no_objection");
    let updates: Vec<&str> = result["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for kind in ["agent_message_chunk", "tool_call", "tool_call_update"] {
        assert!(updates.contains(&kind), "no {kind} in {updates:?}");
    }
    // A second `sprout acp` loads the session [issue 14]: its history comes
    // back as updates, the person's prompt first.
    assert_eq!(result["loadSession"], true, "{result}");
    assert_eq!(result["loaded"], true, "{result}");
    let replayed: Vec<&str> = result["replayed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        replayed.first(),
        Some(&"user_message_chunk"),
        "{replayed:?}"
    );
    for kind in ["agent_message_chunk", "tool_call", "tool_call_update"] {
        assert!(replayed.contains(&kind), "no {kind} in {replayed:?}");
    }
    // [U7]: the SDK's client answered each option; the call ran for the
    // allows only, and every question was about the call it had been shown.
    let approvals = result["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 5, "{result}");
    for (n, approval) in approvals.iter().enumerate() {
        let choice = approval["choice"].as_str().unwrap();
        assert_eq!(approval["stopReason"], "end_turn", "{approval}");
        let asked = approval["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{approval}");
        assert_eq!(asked[0]["toolCallId"], format!("a{}", n + 1), "{approval}");
        assert_eq!(
            asked[0]["kinds"],
            json!(["allow_once", "allow_always", "reject_once", "reject_always"])
        );
        let expected = if choice.starts_with("allow") {
            "completed"
        } else {
            "failed"
        };
        assert_eq!(
            approval["statuses"].as_array().unwrap().last(),
            Some(&json!(expected)),
            "{approval}"
        );
    }
}

// `session/new` checks its `cwd`, and reads `.mcp.json` from that `cwd`, not
// from where the agent was started.
#[test]
fn sessions_use_their_own_cwd() {
    use crate::support::logged_pids;
    let scratch = Scratch::new("acp-cwd");
    let project = scratch.0.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let log = scratch.path("project.log");
    std::fs::write(
        project.join(".mcp.json"),
        json!({"mcpServers": {"proj": {"command": fixture(), "args": ["--log", &log]}}})
            .to_string(),
    )
    .unwrap();
    let fake = FakeOpenAi::start(vec![]);
    let env = fake_env(&fake, &[]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    for cwd in [json!("relative/dir"), json!(scratch.path("missing"))] {
        let refused = client.call("session/new", json!({"cwd": cwd, "mcpServers": []}));
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        // The explanation is the message too: clients show the message.
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("cwd"),
            "{refused}"
        );
        assert!(
            refused["error"]["data"]
                .as_str()
                .unwrap_or("")
                .contains("cwd"),
            "{refused}"
        );
    }
    // A client's HTTP server with a bad URL is refused, its secret hidden.
    let bad =
        json!([{"type": "http", "name": "web", "url": "ftp://x/?token=s3cret", "headers": []}]);
    let refused = client.call("session/new", json!({"cwd": scratch.0, "mcpServers": bad}));
    let said = refused["error"]["data"].as_str().unwrap_or("").to_owned();
    assert!(said.contains("MCP server web: url"), "{refused}");
    assert!(!said.contains("s3cret"), "{refused}");
    client.new_session(&scratch.0, json!([]));
    assert!(
        logged_pids(&log, "start").is_empty(),
        "the agent's own cwd has no .mcp.json"
    );
    client.new_session(&project, json!([]));
    assert_eq!(
        logged_pids(&log, "start").len(),
        1,
        "the project's .mcp.json was read (its servers started once the client allowed them [U3])"
    );
    assert_eq!(client.asked.len(), 1, "the client was asked once");
    assert!(client.finish().success());
}

// SIGTERM to `sprout acp` ends it in order: exit 143, every session's
// servers gone.
#[test]
fn sigterm_stops_acp_in_order() {
    use crate::support::{all_gone, logged_pids};
    let scratch = Scratch::new("acp-sigterm");
    let log = scratch.path("fx.log");
    let fake = FakeOpenAi::start(vec![]);
    let env = fake_env(&fake, &[]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    client.new_session(
        &scratch.0,
        json!([fixture_server("fx", &["--grandchild", "--log", &log])]),
    );
    let pids = [logged_pids(&log, "start"), logged_pids(&log, "grandchild")].concat();
    assert_eq!(pids.len(), 2);
    let pid = nix::unistd::Pid::from_raw(client.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = client.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "sprout acp did not exit on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(143));
    assert!(all_gone(&pids), "a server process survived SIGTERM");
}

// An oversized frame followed at once by the end of stdin still gets its
// error before `sprout acp` exits (the writer is drained, bounded, at exit).
#[test]
fn the_last_answer_is_not_lost_at_exit() {
    let scratch = Scratch::new("acp-last");
    let mut client = AcpClient::start(
        &scratch,
        &[
            ("SPROUT_ACP_MAX_FRAME_BYTES", "4096"),
            ("SPROUT_AGENT_PROVIDER", "openai"),
            ("OPENAI_COMPAT_MODEL", "m"),
        ],
    );
    client.send_raw(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(10_000)
    ));
    let lines = std::mem::replace(&mut client.lines, channel().1);
    assert!(client.finish().success());
    // The reader thread ends at stdout's end; take all it read.
    let mut answers = Vec::new();
    while let Ok(answer) = lines.recv_timeout(Duration::from_secs(10)) {
        answers.push(answer);
    }
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 7 && a["error"]["code"] == -32600),
        "{answers:?}"
    );
}

// `session/close` is answered, and the session's servers are gone, even
// when a server never reads its stdin and ignores SIGTERM.
#[test]
fn close_is_answered_even_for_a_deaf_server() {
    use crate::support::{all_gone, logged_pids};
    let scratch = Scratch::new("acp-close-deaf");
    let log = scratch.path("deaf.log");
    let fake = FakeOpenAi::start(vec![]);
    let env = fake_env(&fake, &[]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let session = client.new_session(
        &scratch.0,
        json!([fixture_server(
            "deaf",
            &[
                "--hostile",
                "deaf",
                "--ignore-sigterm",
                "--log",
                &log,
                "--grandchild"
            ]
        )]),
    );
    let pids = [logged_pids(&log, "start"), logged_pids(&log, "grandchild")].concat();
    assert_eq!(pids.len(), 2);
    let id = client.request("session/close", json!({"sessionId": session}));
    let closed = client.response(json!(id), Duration::from_secs(10));
    assert!(closed["result"].is_object(), "{closed}");
    assert!(all_gone(&pids), "a deaf server outlived session/close");
    assert!(client.finish().success());
}

// [E3], [E6] over ACP: `_PreToolUse` refuses a tool call (the client sees it
// fail with the refusal; the tool never runs), `session/close` tells
// `_SessionEnd` `closed`, and a client that goes away tells it
// `disconnected`, each with the session's id.
#[test]
fn pre_tool_use_and_session_end_over_acp() {
    let scratch = Scratch::new("acp-hookpoints");
    let (closed_log, gone_log) = (scratch.path("closed.log"), scratch.path("gone.log"));
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, tool("c1", "fx__work")),
        (Duration::ZERO, end("refused, so done")),
    ]);
    let env = fake_env(&fake, &[("MCP_HOOK_SERVERS", "*")]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let server = |log: &str| {
        json!([fixture_server(
            "fx",
            &[
                "--tools",
                "work",
                "--hooks",
                "_PreToolUse,_SessionEnd",
                "--script",
                "_PreToolUse=text=not in this repository",
                "--schema",
                "_SessionEnd=reason,session_id",
                "--log",
                log,
            ]
        )])
    };
    let session = client.new_session(&scratch.0, server(&closed_log));
    let id = client.prompt(&session, "work");
    let response = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let refused = client
        .updates
        .iter()
        .map(|u| &u["params"]["update"])
        .find(|u| u["toolCallId"] == "c1" && u["status"] == "failed")
        .unwrap_or_else(|| panic!("c1 failed: {:#?}", client.updates));
    assert!(
        refused.to_string().contains("not in this repository"),
        "{refused}"
    );
    let closed = client.call("session/close", json!({"sessionId": session}));
    assert!(closed["result"].is_object(), "{closed}");
    let ends = |log: &str| -> Vec<Value> {
        sprout_tests::log_events(log, "call")
            .into_iter()
            .filter(|c| c["tool"] == "_SessionEnd")
            .map(|c| c["arguments"].clone())
            .collect()
    };
    assert_eq!(
        ends(&closed_log),
        [json!({"reason": "closed", "session_id": session})]
    );
    // A session that never ran a prompt never asked _SessionStart, so the
    // policy has no session id to give: the hook gets the reason alone.
    client.new_session(&scratch.0, server(&gone_log));
    assert!(client.finish().success());
    assert_eq!(ends(&gone_log), [json!({"reason": "disconnected"})]);
}

// A streamed answer reaches the client as one agent_message_chunk per piece,
// as it arrives, and the whole text is not sent again after them.
#[test]
fn a_streamed_answer_is_sent_piece_by_piece_once() {
    let scratch = Scratch::new("acp-stream");
    let pieces = ["Hel", "lo, ", "world"];
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, streamed_end(&pieces))]);
    let env = fake_env(&fake, &[]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let session = client.new_session(&scratch.0, json!([]));
    let id = client.prompt(&session, "say hello");
    let response = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let chunks: Vec<&str> = client
        .updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["params"]["update"]["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(chunks, pieces);
    assert!(client.finish().success());
}

// Every hook point a prompt passes through reaches the client as a round of
// its own, named for its hook point, with its events in `_meta` [O1]: the
// session's start and the prompt's [E1] [E2], before and after the tool
// call [E3] [E4], and the end of the turn.
#[test]
fn every_hook_point_of_a_prompt_is_a_round_over_acp() {
    let scratch = Scratch::new("acp-every-hook");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, tool("c1", "fx__work")),
        (Duration::ZERO, end("done")),
    ]);
    let env = fake_env(&fake, &[("MCP_HOOK_SERVERS", "*")]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let hooks = "_SessionStart,_UserPromptSubmit,_PreToolUse,_PostToolUse,_Stop";
    let session = client.new_session(
        &scratch.0,
        json!([fixture_server(
            "fx",
            &[
                "--tools",
                "work",
                "--hooks",
                hooks,
                "--script",
                "_SessionStart=text=welcome",
                "--script",
                "_UserPromptSubmit=text=mind the tests",
                "--script",
                "_PostToolUse=text=ran fine",
                "--stop",
                "empty"
            ]
        )]),
    );
    let id = client.prompt(&session, "work");
    let response = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let rounds: Vec<String> = client
        .updates
        .iter()
        .map(|u| &u["params"]["update"])
        .filter(|u| {
            u["sessionUpdate"] == "tool_call"
                && u["toolCallId"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("sprout-hook-round-"))
        })
        .map(|u| {
            u["_meta"]["sprout/events"][0]["hook"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect();
    assert_eq!(
        rounds,
        [
            "_SessionStart",
            "_UserPromptSubmit",
            "_PreToolUse",
            "_PostToolUse",
            "_Stop"
        ],
        "{:#?}",
        client.updates
    );
    // The tool ran, and its result carries the _PostToolUse note [E4].
    let result = client
        .updates
        .iter()
        .map(|u| &u["params"]["update"])
        .find(|u| u["toolCallId"] == "c1" && u["status"] == "completed")
        .unwrap_or_else(|| panic!("c1 completed: {:#?}", client.updates));
    assert!(result.to_string().contains("ran fine"), "{result}");
    assert!(client.finish().success());
}

// `session/load` [issue 14]: a session of one `sprout acp` process, saved as
// it went, is picked up by another: the history is replayed to the client
// before the answer, and the next prompt's request carries it. An id that
// is no saved session is refused by name.
#[test]
fn a_saved_session_is_loaded_by_another_process() {
    let scratch = Scratch::new("acp-load");
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("first answer")),
        (Duration::ZERO, end("second answer")),
    ]);
    let env = fake_env(&fake, &[]);
    let mut first = AcpClient::start(&scratch, &refs(&env));
    let init = first.initialize();
    assert_eq!(
        init["result"]["agentCapabilities"]["loadSession"], true,
        "{init}"
    );
    let session = first.new_session(&scratch.0, json!([]));
    let id = first.prompt(&session, "first prompt");
    let response = first.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(first.finish().success());

    let mut second = AcpClient::start(&scratch, &refs(&env));
    second.initialize();
    let unknown = second.call(
        "session/load",
        json!({"sessionId": "no-such-session", "cwd": scratch.0, "mcpServers": []}),
    );
    assert!(
        unknown["error"].to_string().contains("no saved session"),
        "{unknown}"
    );
    let loaded = second.call(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.0, "mcpServers": []}),
    );
    assert!(loaded["result"].is_object(), "{loaded}");
    let replayed: Vec<(String, String)> = second
        .updates
        .iter()
        .map(|u| &u["params"]["update"])
        .filter_map(|u| {
            Some((
                u["sessionUpdate"].as_str()?.to_owned(),
                u["content"]["text"].as_str()?.to_owned(),
            ))
        })
        .collect();
    assert_eq!(
        replayed,
        [
            ("user_message_chunk".to_owned(), "first prompt".to_owned()),
            ("agent_message_chunk".to_owned(), "first answer".to_owned()),
        ]
    );
    let id = second.prompt(&session, "second prompt");
    let response = second.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = fake.requests.lock().unwrap().clone();
    let history = requests[1]["messages"].to_string();
    assert!(
        history.contains("first prompt") && history.contains("first answer"),
        "{history}"
    );
    assert!(second.finish().success());
}

// A session is open in one process at a time [issue 14]: while one `sprout
// acp` has a session open, another's `session/load` of it is answered at
// once with a JSON-RPC error naming it, and `sprout run --resume` of it
// exits 2; once the first has closed it, the second loads it, and loading
// it again there is refused as open already.
#[test]
fn a_session_open_elsewhere_is_refused() {
    let scratch = Scratch::new("acp-lock");
    let fake = FakeOpenAi::start(vec![(Duration::ZERO, end("first answer"))]);
    let env = fake_env(&fake, &[]);
    let mut first = AcpClient::start(&scratch, &refs(&env));
    first.initialize();
    let session = first.new_session(&scratch.0, json!([]));
    let id = first.prompt(&session, "first prompt");
    let response = first.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let mut second = AcpClient::start(&scratch, &refs(&env));
    second.initialize();
    let load = json!({"sessionId": session, "cwd": scratch.0, "mcpServers": []});
    let refused = second.call("session/load", load.clone());
    let error = refused["error"].to_string();
    assert!(
        error.contains(&format!("session \\\"{session}\\\" is in use")),
        "{refused}"
    );
    let out =
        crate::support::run_sprout(&["run", "x", "--resume", &session], &refs(&env), &scratch.0);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        crate::support::text(&out.stderr)
            .contains(&format!("--resume: session {session} is in use")),
        "{}",
        crate::support::text(&out.stderr)
    );
    assert!(first.finish().success());

    let loaded = second.call("session/load", load.clone());
    assert!(loaded["result"].is_object(), "{loaded}");
    let again = second.call("session/load", load);
    assert!(
        again["error"].to_string().contains("is open already"),
        "{again}"
    );
    assert!(second.finish().success());
}

// [T4] over ACP: a client's server that crashes in `_SessionStart` in every
// process uses its three failures over three `sprout acp` processes of one
// session (new, then loaded twice); the fourth load does not start it, does
// not offer its tool, and tells the client why, after the answer to
// `session/load` (the update is held until the client knows the session).
#[test]
fn a_loaded_session_keeps_its_server_failures() {
    let scratch = Scratch::new("acp-failures");
    let log = scratch.path("crashy.log");
    let crashy = fixture_server(
        "crashy",
        &[
            "--tools",
            "work",
            "--hooks",
            "_SessionStart",
            "--script",
            "_SessionStart=exit",
            "--log",
            &log,
        ],
    );
    let fake = FakeOpenAi::start((0..4).map(|_| (Duration::ZERO, end("ok"))).collect());
    let env = fake_env(&fake, &[("MCP_HOOK_SERVERS", "*")]);
    let mut session = String::new();
    for run in 0..4 {
        let mut client = AcpClient::start(&scratch, &refs(&env));
        client.initialize();
        if run == 0 {
            session = client.new_session(&scratch.0, json!([crashy]));
        } else {
            let loaded = client.call(
                "session/load",
                json!({"sessionId": session, "cwd": scratch.0, "mcpServers": [crashy]}),
            );
            assert!(loaded["result"].is_object(), "run {run}: {loaded}");
        }
        let id = client.prompt(&session, "go");
        let response = client.response(json!(id), Duration::from_secs(30));
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        let starts = sprout_tests::log_events(&log, "start").len();
        assert_eq!(starts, (run + 1).min(3), "run {run}");
        let told = client.updates.iter().any(|u| {
            u.to_string()
                .contains("failed too often before this session was resumed")
        });
        assert_eq!(told, run == 3, "run {run}: {:#?}", client.updates);
        if run == 3 {
            let seen = client.seen.lock().unwrap().clone();
            let at = |what: &dyn Fn(&Value) -> bool| seen.iter().position(what).unwrap();
            // `session/load` is request 2, after `initialize`.
            let answered = at(&|m| m["result"].is_object() && m["id"] == json!(2));
            let why = at(&|m| m.to_string().contains("failed too often before"));
            assert!(answered < why, "the update came first: {seen:#?}");
        }
        assert!(client.finish().success());
    }
    let requests = fake.requests.lock().unwrap();
    let tools = |i: usize| requests[i]["tools"].to_string();
    assert!(tools(0).contains("crashy__work"), "{}", tools(0));
    assert!(!tools(3).contains("crashy__work"), "{}", tools(3));
}

// [U3] under ACP: before any server of the session cwd's `.mcp.json`
// starts, the client is asked with `session/request_permission`. Reject
// starts none (the session works, and says so), allow once starts them for
// that session only, allow always records trust: the next session asks
// nothing.
#[test]
fn project_servers_start_only_when_the_client_allows_u3() {
    use crate::support::logged_pids;
    let scratch = Scratch::new("acp-trust");
    let project = scratch.0.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let log = scratch.path("project.log");
    std::fs::write(
        project.join(".mcp.json"),
        json!({"mcpServers": {"proj": {"command": fixture(), "args": ["--log", &log]}}})
            .to_string(),
    )
    .unwrap();
    let fake = FakeOpenAi::start(vec![]);
    let env = fake_env(&fake, &[]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let starts = || logged_pids(&log, "start").len();

    client.choose = "reject_once".into();
    let session = client.new_session(&project, json!([]));
    assert_eq!(client.asked.len(), 1, "asked before starting");
    let question = &client.asked[0]["params"];
    assert_eq!(question["sessionId"], session.as_str(), "{question}");
    let title = question["toolCall"]["title"].as_str().unwrap();
    assert!(title.starts_with("Start the MCP servers of"), "{title}");
    assert!(
        question["toolCall"].to_string().contains("proj: "),
        "{question}"
    );
    assert_eq!(starts(), 0, "rejected: nothing started");
    client.wait_update("the person is told", |u| {
        u["sessionUpdate"] == "agent_message_chunk"
            && u["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("not starting proj"))
    });

    client.choose = "allow_once".into();
    client.new_session(&project, json!([]));
    assert_eq!(starts(), 1, "allowed once: started");
    client.new_session(&project, json!([]));
    assert_eq!(client.asked.len(), 3, "once is not remembered");

    client.choose = "allow_always".into();
    client.new_session(&project, json!([]));
    assert_eq!(client.asked.len(), 4);
    client.choose = "reject_once".into();
    client.new_session(&project, json!([]));
    assert_eq!(client.asked.len(), 4, "trusted for good: not asked again");
    assert_eq!(starts(), 4);
    assert!(client.finish().success());
}

// [U4] [U6] [U7] under ACP: a tool call that needs approval is put to the
// client as the tool call it already shows, with the four options; each
// answer does what it says, and the always and reject-always answers hold
// for the session's next prompt without asking. A client that answers
// `cancelled` denies the call, and the model is told how to allow it.
#[test]
fn tool_calls_wait_for_the_clients_answer_u7() {
    let scratch = Scratch::new("acp-approval");
    let cases = [
        ("allow_once", true, true),
        ("reject_once", false, true),
        ("allow_always", true, false),
        ("reject_always", false, false),
        ("cancelled", false, true),
    ];
    // One call id a prompt: a model that used one id twice in a session
    // would have the second renamed.
    let mut answers = Vec::new();
    for n in 0..cases.len() * 2 {
        answers.push((Duration::ZERO, tool(&format!("c{n}"), "fx__work")));
        answers.push((Duration::ZERO, end("done")));
    }
    let fake = FakeOpenAi::start(answers);
    let env = fake_env(&fake, &[("SPROUT_AGENT_APPROVAL", "ask")]);
    let mut client = AcpClient::start(&scratch, &refs(&env));
    client.initialize();
    let mut request = 0;
    for (choice, runs, asked_again) in cases {
        client.choose = choice.into();
        let session = client.new_session(
            &scratch.0,
            json!([fixture_server("fx", &["--tools", "work"])]),
        );
        for prompt in 0..2 {
            let before = client.asked.len();
            let id = client.prompt(&session, "work");
            let response = client.response(json!(id), Duration::from_secs(30));
            assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
            let asked = client.asked.len() - before;
            let expected = if prompt == 0 || asked_again { 1 } else { 0 };
            assert_eq!(asked, expected, "{choice}, prompt {prompt}");
            if asked == 1 {
                let question = &client.asked[before]["params"];
                assert_eq!(
                    question["toolCall"]["toolCallId"],
                    format!("c{}", request / 2),
                    "{question}"
                );
                let kinds: Vec<&str> = question["options"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o["kind"].as_str().unwrap())
                    .collect();
                assert_eq!(
                    kinds,
                    ["allow_once", "allow_always", "reject_once", "reject_always"]
                );
            }
            let result = {
                let requests = fake.requests.lock().unwrap();
                let last = requests[request + 1]["messages"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()
                    .clone();
                last["content"].as_str().unwrap().to_owned()
            };
            request += 2;
            if runs {
                assert_eq!(result, "{}", "{choice}, prompt {prompt}: the tool ran");
            } else if choice == "cancelled" {
                assert!(
                    result.contains("The client cancelled the question."),
                    "{result}"
                );
                assert!(result.contains("--approval auto"), "{result}");
            } else {
                assert!(
                    result.contains("the person denied this call of fx__work"),
                    "{choice}, prompt {prompt}: {result}"
                );
            }
        }
    }
    assert!(client.finish().success());
}

// [F2] under ACP: a required gate that goes down is a visible message to
// the client (an agent message, not a thought), with the event in `_meta`.
#[test]
fn a_required_gate_going_down_is_shown_to_the_client_f2() {
    let scratch = Scratch::new("acp-guard");
    let config = scratch.path("gate.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"gate": {"command": fixture(), "args": ["--stop", "exit"], "required": true}}})
            .to_string(),
    )
    .unwrap();
    let fake = FakeOpenAi::start(vec![
        (Duration::ZERO, end("done")),
        (Duration::ZERO, end("done, really")),
    ]);
    let env = fake_env(&fake, &[("MCP_HOOK_SERVERS", "*")]);
    let mut client =
        AcpClient::start_with(&scratch, &["acp", "--mcp-config", &config], &refs(&env));
    client.initialize();
    let session = client.new_session(&scratch.0, json!([]));
    let id = client.prompt(&session, "go");
    let response = client.response(json!(id), Duration::from_secs(30));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let shown = client
        .updates
        .iter()
        .map(|u| &u["params"]["update"])
        .find(|u| u["_meta"]["sprout/event"]["event"] == "guard_down")
        .unwrap_or_else(|| panic!("no guard_down: {:#?}", client.updates))
        .clone();
    assert_eq!(shown["sessionUpdate"], "agent_message_chunk", "{shown}");
    assert!(
        shown["content"]["text"]
            .as_str()
            .unwrap()
            .contains("required gate gate is down"),
        "{shown}"
    );
    assert!(client.finish().success());
}
