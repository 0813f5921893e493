//! A fake OpenAI-compatible Chat Completions endpoint on 127.0.0.1 that
//! answers every request at once, for the product-surface figures.
//!
//! It answers from a counter, not by reading the request: while tool calls
//! are left (see [`FakeModel::call_tools`]) each answer calls that tool with
//! `{}`, then each answer ends the turn with "done". The body is read in full
//! (as any server must) but parsed only when [`FakeModel::arm`] asked to see
//! the tools of the next request, which is how a figure checks that the model
//! was offered every server's tool. It runs on the benchmark's tokio runtime,
//! so its work shares the machine with the `sprout` under test, as a local
//! model server would (its cost is in the measured latency, not in the
//! agent's CPU figures).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{StatusCode, header};
use serde_json::{Value, json};

/// A running fake; cloning shares it.
#[derive(Clone)]
pub(crate) struct FakeModel {
    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    pub(crate) url: String,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    tool: Mutex<String>,
    tool_calls_left: AtomicUsize,
    next_call: AtomicU64,
    armed: AtomicBool,
    seen_tools: Mutex<Option<Vec<String>>>,
    /// How long the model "thinks" between the first piece of its answer
    /// and the rest, in µs; 0 answers at once, whole ([`FakeModel::set_gap`]).
    gap_us: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The end-of-turn answer, encoded once.
fn end_turn() -> &'static str {
    static END: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    END.get_or_init(|| {
        json!({
            "choices": [{"message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 1},
        })
        .to_string()
    })
}

/// The end of the turn as server-sent events: "do" at once, then after
/// `gap` "ne" and the end.
fn streamed_end(gap: std::time::Duration) -> axum::response::Response {
    use axum::response::IntoResponse;
    use futures::StreamExt;
    let piece = |text: &str| {
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
        format!("data: {chunk}\n\n")
    };
    let first = piece("do");
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let rest = format!("{}data: {end}\n\ndata: [DONE]\n\n", piece("ne"));
    let body = futures::stream::once(async move { Ok::<_, std::convert::Infallible>(first) })
        .chain(futures::stream::once(async move {
            tokio::time::sleep(gap).await;
            Ok(rest)
        }));
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let gap = std::time::Duration::from_micros(shared.gap_us.load(Ordering::SeqCst));
    if !gap.is_zero() {
        // Figure 15: a model that takes `gap` to finish its answer, asked
        // for a stream or not.
        let streamed = body.windows(13).any(|w| w == b"\"stream\":true");
        if streamed {
            return streamed_end(gap);
        }
        tokio::time::sleep(gap).await;
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            end_turn().to_owned(),
        )
            .into_response();
    }
    if shared.armed.swap(false, Ordering::SeqCst) {
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let names = request["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        *lock(&shared.seen_tools) = Some(names);
    }
    let tool_call = shared
        .tool_calls_left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let text = if tool_call {
        let id = shared.next_call.fetch_add(1, Ordering::Relaxed);
        let name = lock(&shared.tool).clone();
        json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call{id}"), "type": "function", "function": {"name": name, "arguments": "{}"}}
        ]}, "finish_reason": "tool_calls"}]})
        .to_string()
    } else {
        end_turn().to_owned()
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

impl FakeModel {
    /// Binds 127.0.0.1 and serves on the current runtime.
    pub(crate) async fn start() -> FakeModel {
        let shared = Arc::new(Shared::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let url = format!("http://{}/v1", listener.local_addr().expect("address"));
        let app = axum::Router::new()
            .fallback(axum::routing::post(answer))
            .with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel { url, shared }
    }

    /// The next `n` requests call `tool`; the ones after end the turn.
    pub(crate) fn call_tools(&self, tool: &str, n: usize) {
        *lock(&self.shared.tool) = tool.to_owned();
        self.shared.tool_calls_left.store(n, Ordering::SeqCst);
    }

    /// From now on the model takes `gap` to finish an answer, and streams
    /// it ("do", then after `gap` the rest) when asked to; zero answers at
    /// once, whole.
    pub(crate) fn set_gap(&self, gap: std::time::Duration) {
        let us = u64::try_from(gap.as_micros()).unwrap_or(u64::MAX);
        self.shared.gap_us.store(us, Ordering::SeqCst);
    }

    /// Keep the tool names offered in the next request.
    pub(crate) fn arm(&self) {
        *lock(&self.shared.seen_tools) = None;
        self.shared.armed.store(true, Ordering::SeqCst);
    }

    /// The tool names of the request seen since [`FakeModel::arm`], if any.
    pub(crate) fn seen_tools(&self) -> Option<Vec<String>> {
        lock(&self.shared.seen_tools).take()
    }

    /// The environment that points `sprout` at this fake.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("SPROUT_AGENT_PROVIDER", "openai".into()),
            ("OPENAI_COMPAT_BASE_URL", self.url.clone()),
            ("OPENAI_COMPAT_MODEL", "fake".into()),
        ]
    }
}
