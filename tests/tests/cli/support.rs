//! Shared pieces of the command-line tests.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

/// The `sprout` binary, built once per test run (cargo builds test targets of
/// this package only, so the binary of sprout-cli is built here).
pub(crate) fn sprout() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .to_path_buf();
            // With the feature the tests build sprout-cli's library with
            // (`sprout_cli::testing`, which the binary never calls), so the
            // library is built once, not once per feature set.
            let status = Command::new(cargo)
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "sprout-cli",
                    "--bin",
                    "sprout",
                    "--features",
                    "testing",
                ])
                .current_dir(&root)
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building sprout failed");
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"));
            target.join("debug").join("sprout")
        })
        .clone()
}

/// The fixture MCP server.
pub(crate) fn fixture() -> &'static str {
    env!("CARGO_BIN_EXE_mcp-fixture")
}

/// A command running sprout with a clean environment plus `env`.
pub(crate) fn sprout_command(
    args: &[&str],
    env: &[(&str, &str)],
    dir: &std::path::Path,
) -> Command {
    let mut cmd = Command::new(sprout());
    cmd.args(args)
        .env_clear()
        .current_dir(dir)
        .stdin(Stdio::null());
    for key in ["PATH", "HOME", "TMPDIR"] {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    // Saved sessions go under the test's own directory, never the real
    // ~/.local/state.
    cmd.env("XDG_STATE_HOME", dir.join(".state"));
    // Trusted servers and tools allowed for good [U2] too: never the real
    // ~/.config.
    cmd.env("XDG_CONFIG_HOME", dir.join(".config"));
    // Tool calls run unasked, as a script that set --approval auto has them;
    // the approval tests ask for `ask` themselves [U4].
    cmd.env("SPROUT_AGENT_APPROVAL", "auto");
    cmd.envs(env.iter().copied());
    cmd
}

/// Runs sprout to the end.
pub(crate) fn run_sprout(args: &[&str], env: &[(&str, &str)], dir: &std::path::Path) -> Output {
    sprout_command(args, env, dir)
        .output()
        .expect("sprout runs")
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The environment of the fake model (`FakeOpenAi::env`) plus `extra`.
pub(crate) fn env_with<'a>(
    fake: &'a [(&'static str, String)],
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut env: Vec<(&str, &str)> = fake.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend(extra.iter().copied());
    env
}

/// Asserts that sprout exited 0, showing its output if not; its stdout.
pub(crate) fn assert_ok(out: &Output) -> String {
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    stdout
}

pub(crate) use sprout_tests::{Scratch, alive, all_gone, logged_pids};

/// Writes `{"mcpServers": servers}` into `scratch`, returning its path.
pub(crate) fn write_mcp_servers(scratch: &Scratch, servers: Value) -> String {
    let path = scratch.path("mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path
}

/// The config entry of the bundled gate server running `sh -c script`.
pub(crate) fn gate_server(script: &str) -> Value {
    json!({"command": sprout(), "args": ["hook-server", "gate", "--", "sh", "-c", script]})
}

/// Writes an mcpServers config of fixture servers `(name, args)` into
/// `scratch`, returning its path.
pub(crate) fn mcp_config(scratch: &Scratch, servers: &[(&str, Vec<&str>)]) -> String {
    let entries: serde_json::Map<String, Value> = servers
        .iter()
        .map(|(name, args)| {
            (
                name.to_string(),
                json!({"command": fixture(), "args": args}),
            )
        })
        .collect();
    write_mcp_servers(scratch, Value::Object(entries))
}

/// A Chat Completions answer that ends the turn with `text`.
pub(crate) fn end(text: &str) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
}

/// A Chat Completions answer calling `name` with `{}`.
pub(crate) fn tool(id: &str, name: &str) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]})
}

/// An answer that ends the turn with `pieces` of text, served as a Chat
/// Completions stream (server-sent events, one piece an event).
pub(crate) fn streamed_end(pieces: &[&str]) -> Value {
    json!({"sse_pieces": pieces})
}

/// An answer whose stream of `pieces` ends before the answer does (no
/// finish_reason, no `[DONE]`): the connection closes midway.
pub(crate) fn streamed_cut(pieces: &[&str]) -> Value {
    json!({"sse_pieces": pieces, "sse_cut": true})
}

/// The server-sent events of a [`streamed_end`] (or [`streamed_cut`]) answer.
fn sse_body(pieces: &Value, cut: bool) -> String {
    let mut body = String::new();
    for piece in pieces.as_array().into_iter().flatten() {
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": piece}}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    if cut {
        return body;
    }
    let last = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    body.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
    body
}

/// A fake OpenAI-compatible API on 127.0.0.1: answers each request with the
/// next scripted answer (after its delay) and keeps every request body.
pub(crate) struct FakeOpenAi {
    pub(crate) url: String,
    pub(crate) requests: Arc<Mutex<Vec<Value>>>,
    /// Serves the fake; dropping it stops the server.
    _runtime: tokio::runtime::Runtime,
}

impl FakeOpenAi {
    pub(crate) fn start(answers: Vec<(Duration, Value)>) -> FakeOpenAi {
        use axum::extract::State;
        type Shared = (
            Arc<Mutex<VecDeque<(Duration, Value)>>>,
            Arc<Mutex<Vec<Value>>>,
        );
        async fn handle(
            State((answers, requests)): State<Shared>,
            body: String,
        ) -> axum::response::Response {
            use axum::response::IntoResponse;
            requests
                .lock()
                .unwrap()
                .push(serde_json::from_str(&body).unwrap_or(Value::Null));
            let next = answers.lock().unwrap().pop_front();
            match next {
                Some((delay, answer)) => {
                    tokio::time::sleep(delay).await;
                    if let Some(status) = answer.get("http_status").and_then(Value::as_u64) {
                        let status = axum::http::StatusCode::from_u16(status as u16)
                            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
                        let body = answer["body"].as_str().unwrap_or_default().to_owned();
                        return (status, body).into_response();
                    }
                    match answer.get("sse_pieces") {
                        Some(pieces) => (
                            [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
                            sse_body(pieces, answer.get("sse_cut").is_some()),
                        )
                            .into_response(),
                        None => (axum::http::StatusCode::OK, answer.to_string()).into_response(),
                    }
                }
                None => (
                    axum::http::StatusCode::BAD_REQUEST,
                    "the fake model has no more answers",
                )
                    .into_response(),
            }
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state: Shared = (Arc::new(Mutex::new(answers.into())), requests.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .fallback(axum::routing::post(handle))
            .with_state(state);
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeOpenAi {
            url,
            requests,
            _runtime: runtime,
        }
    }

    /// The environment that points sprout at this fake.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("SPROUT_AGENT_PROVIDER", "openai".into()),
            ("OPENAI_COMPAT_BASE_URL", self.url.clone()),
            ("OPENAI_COMPAT_MODEL", "fake".into()),
        ]
    }
}
