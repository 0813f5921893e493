//! Streamed answers over real HTTP on 127.0.0.1: both providers against
//! fake servers that write server-sent events in pieces, stall, cut, fail
//! and refuse; and the loop with a stream, against the same answers whole.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_loop::providers::{Anthropic, HttpSettings, OpenAiCompat};
use agent_loop::{Agent, AgentEvent, AgentSettings, Message, Model, ModelError, ModelRequest};
use agent_loop::{ModelResponse, ToolCall, Usage};
use hooks_core::{EndReason, StopReason};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{FakeApi, FakeGateway, FakeServer, Reply, StreamEnd, cut, stream_settings};

/// Far longer than any test here takes: a bound, never a wait.
const BOUND: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Provider {
    OpenAi,
    Anthropic,
}

/// One scripted answer: text, calls `(id, name, arguments)`, usage.
#[derive(Clone, Debug)]
struct Turn {
    text: &'static str,
    calls: Vec<(&'static str, &'static str, &'static str)>,
    usage: (u64, u64),
}

impl Turn {
    fn response(&self) -> ModelResponse {
        ModelResponse {
            text: self.text.into(),
            tool_calls: self
                .calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: (*arguments).into(),
                })
                .collect(),
            stop: if self.calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            },
            usage: Some(Usage {
                input_tokens: self.usage.0,
                output_tokens: self.usage.1,
            }),
        }
    }

    /// The text in pieces of three characters (most of several bytes).
    fn pieces(&self) -> Vec<String> {
        let chars: Vec<char> = self.text.chars().collect();
        chars.chunks(3).map(|c| c.iter().collect()).collect()
    }

    /// The answer whole, as `provider` sends it.
    fn whole(&self, provider: Provider) -> String {
        let (input, output) = self.usage;
        match provider {
            Provider::OpenAi => {
                let calls: Vec<Value> = self
                    .calls
                    .iter()
                    .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect();
                let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
                let mut message = json!({"role": "assistant", "content": self.text});
                if !calls.is_empty() {
                    message["tool_calls"] = json!(calls);
                }
                json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}],
                       "usage": {"prompt_tokens": input, "completion_tokens": output}})
            }
            Provider::Anthropic => {
                let mut content = vec![json!({"type": "text", "text": self.text})];
                content.extend(self.calls.iter().map(|(id, name, args)| {
                    let input: Value = serde_json::from_str(args).unwrap();
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                }));
                let stop = if self.calls.is_empty() { "end_turn" } else { "tool_use" };
                json!({"type": "message", "role": "assistant", "content": content, "stop_reason": stop,
                       "usage": {"input_tokens": input, "output_tokens": output}})
            }
        }
        .to_string()
    }

    /// The answer as `provider` streams it: the text in pieces, each call's
    /// arguments in two halves, the second halves in reverse order (for
    /// OpenAI, calls interleave by index).
    fn events(&self, provider: Provider) -> Vec<Value> {
        let (input, output) = self.usage;
        let halves = |args: &'static str| {
            let mid = args
                .char_indices()
                .nth(args.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            (&args[..mid], &args[mid..])
        };
        let mut events = Vec::new();
        match provider {
            Provider::OpenAi => {
                let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": null});
                events.push(chunk(
                    json!({"role": "assistant", "content": ""}),
                    Value::Null,
                ));
                for piece in self.pieces() {
                    events.push(chunk(json!({"content": piece}), Value::Null));
                }
                for (i, (id, name, args)) in self.calls.iter().enumerate() {
                    let first = json!({"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": halves(args).0}});
                    events.push(chunk(json!({"tool_calls": [first]}), Value::Null));
                }
                for (i, (_, _, args)) in self.calls.iter().enumerate().rev() {
                    let second = json!({"index": i, "function": {"arguments": halves(args).1}});
                    events.push(chunk(json!({"tool_calls": [second]}), Value::Null));
                }
                let finish = if self.calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                events.push(chunk(json!({}), json!(finish)));
                events.push(json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output}}));
            }
            Provider::Anthropic => {
                events.push(json!({"type": "message_start", "message": {"type": "message", "role": "assistant", "content": [], "stop_reason": null, "usage": {"input_tokens": input, "output_tokens": 1}}}));
                events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
                events.push(json!({"type": "ping"}));
                for piece in self.pieces() {
                    events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}));
                }
                events.push(json!({"type": "content_block_stop", "index": 0}));
                for (i, (id, name, args)) in self.calls.iter().enumerate() {
                    let index = i + 1;
                    let (a, b) = halves(args);
                    events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
                    for part in [a, b] {
                        events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}));
                    }
                    events.push(json!({"type": "content_block_stop", "index": index}));
                }
                let stop = if self.calls.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                };
                events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output}}));
                events.push(json!({"type": "message_stop"}));
            }
        }
        events
    }

    /// The stream's text, as `provider` writes it.
    fn sse(&self, provider: Provider) -> String {
        sse(provider, &self.events(provider), true)
    }
}

/// `events` as SSE text; OpenAI's end with `[DONE]` if `done`.
fn sse(provider: Provider, events: &[Value], done: bool) -> String {
    let mut text = String::new();
    for event in events {
        match provider {
            Provider::OpenAi => text.push_str(&format!("data: {event}\n\n")),
            Provider::Anthropic => {
                let kind = event["type"].as_str().unwrap();
                text.push_str(&format!("event: {kind}\ndata: {event}\n\n"));
            }
        }
    }
    if done && provider == Provider::OpenAi {
        text.push_str("data: [DONE]\n\n");
    }
    text
}

/// `text` cut inside every character of several bytes, and every 40 bytes.
fn split(text: &str) -> Vec<Vec<u8>> {
    let cuts: Vec<usize> = (1..text.len())
        .filter(|&i| !text.is_char_boundary(i) || i % 40 == 0)
        .collect();
    cut(text, &cuts)
}

fn streamed(turn: &Turn, provider: Provider) -> Reply {
    Reply::Stream(split(&turn.sse(provider)), StreamEnd::Close)
}

fn whole(turn: &Turn, provider: Provider) -> Reply {
    let json = ("content-type", "application/json".to_owned());
    Reply::Whole((200, vec![json], turn.whole(provider)))
}

fn provider_model(provider: Provider, url: &str, settings: HttpSettings) -> Arc<dyn Model> {
    match provider {
        Provider::OpenAi => Arc::new(OpenAiCompat::new(url, None, "m", settings)),
        Provider::Anthropic => Arc::new(Anthropic::new(url, "k".into(), "claude", settings)),
    }
}

/// Asks `model` once with a prompt; the answer and the pieces of text.
async fn ask(model: &dyn Model) -> (Result<ModelResponse, ModelError>, Vec<String>) {
    let pieces = Mutex::new(Vec::new());
    let history = [Message::user("go")];
    let request = ModelRequest {
        system: "sys",
        messages: &history,
        tools: &[],
    };
    let on_text = |text: &str| pieces.lock().unwrap().push(text.to_owned());
    let answer = tokio::time::timeout(BOUND, model.complete_streaming(request, &on_text))
        .await
        .expect("the model call outlived its bound");
    (answer, pieces.into_inner().unwrap())
}

fn looking() -> Turn {
    Turn {
        text: "Je vais voir… ça prend 🌍 un instant ✓",
        calls: vec![
            ("c1", "todo__list", r#"{"all":true,"tag":"é✓"}"#),
            ("c2", "todo__list", r#"{"all":false}"#),
        ],
        usage: (31, 17),
    }
}

fn done() -> Turn {
    Turn {
        text: "Fini ✓ — rien à faire 🎉",
        calls: vec![],
        usage: (60, 9),
    }
}

// Split UTF-8 and arguments in pieces (interleaved by index for OpenAI):
// the answer is the whole answer's, and the text arrives as its pieces.
#[tokio::test]
async fn both_providers_stream_split_utf8_and_tool_call_pieces() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let turn = looking();
        let api = FakeApi::start_replies(vec![streamed(&turn, provider)]).await;
        let model = provider_model(provider, &api.url, stream_settings());
        let (answer, pieces) = ask(model.as_ref()).await;
        assert_eq!(answer.ok(), Some(turn.response()), "{provider:?}");
        assert_eq!(pieces, turn.pieces(), "{provider:?}");
        let body = &api.bodies()[0];
        assert_eq!(body["stream"], true, "{provider:?}");
        if provider == Provider::OpenAi {
            assert_eq!(body["stream_options"], json!({"include_usage": true}));
        }
        api.stop();
    }
}

/// Runs one prompt with `turns` answered whole or streamed; the history,
/// the request bodies without their streaming fields, and the events
/// without the deltas and latencies. Checks that each round's deltas came
/// before its text and make it.
async fn run(
    provider: Provider,
    stream: bool,
    turns: &[Turn],
) -> (Vec<Message>, Vec<Value>, Vec<AgentEvent>, EndReason) {
    let replies = turns
        .iter()
        .map(|t| {
            if stream {
                streamed(t, provider)
            } else {
                whole(t, provider)
            }
        })
        .collect();
    let api = FakeApi::start_replies(replies).await;
    let settings = HttpSettings {
        stream,
        ..stream_settings()
    };
    let model = provider_model(provider, &api.url, settings);
    let server = FakeServer {
        name: "todo",
        tools: vec!["list"],
        ..FakeServer::default()
    };
    let gateway = FakeGateway::new(vec![server], Some("*"), 3);
    let (sink, events) = crate::support::recording_sink();
    let mut agent = Agent::new(model, gateway, AgentSettings::default(), sink);
    let outcome = tokio::time::timeout(BOUND, agent.run_prompt("go", &CancellationToken::new()))
        .await
        .expect("the prompt outlived its bound");
    let mut kept = Vec::new();
    let mut deltas = String::new();
    for event in events.lock().unwrap().iter().cloned() {
        match event {
            AgentEvent::TextDelta { text } => deltas.push_str(&text),
            AgentEvent::AssistantText { text } => {
                assert_eq!(deltas, if stream { text.as_str() } else { "" });
                deltas.clear();
                kept.push(AgentEvent::AssistantText { text });
            }
            AgentEvent::ModelResponse {
                round,
                stop,
                tool_calls,
                input_tokens,
                output_tokens,
                ..
            } => kept.push(AgentEvent::ModelResponse {
                round,
                stop,
                tool_calls,
                input_tokens,
                output_tokens,
                latency: Duration::ZERO,
            }),
            other => kept.push(other),
        }
    }
    assert_eq!(deltas, "", "deltas after the last text");
    let bodies = api
        .bodies()
        .into_iter()
        .map(|mut body| {
            let object = body.as_object_mut().unwrap();
            assert_eq!(object.remove("stream").is_some(), stream);
            object.remove("stream_options");
            body
        })
        .collect();
    api.stop();
    (agent.history().to_vec(), bodies, kept, outcome.reason)
}

// The same answers, streamed and whole, give the same history, the same
// requests and the same events.
#[tokio::test]
async fn streamed_and_whole_answers_give_identical_histories() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let turns = [looking(), done()];
        let streamed = run(provider, true, &turns).await;
        let whole = run(provider, false, &turns).await;
        assert_eq!(streamed, whole, "{provider:?}");
        let (history, bodies, _, _) = streamed;
        assert_eq!(bodies.len(), 2, "{provider:?}");
        let Message::Assistant { text, tool_calls } = &history[1] else {
            panic!("{history:?}");
        };
        assert_eq!(text, looking().text);
        assert_eq!(tool_calls, &looking().response().tool_calls);
        assert!(
            matches!(&history[2], Message::ToolResult { content, .. } if content.starts_with("ok list")),
            "{history:?}"
        );
    }
}

// Cut after some text, cleanly or by a torn connection: an error, never a
// shorter answer, and not tried again (the person saw the text).
#[tokio::test]
async fn a_stream_cut_midway_is_an_error_and_not_retried() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        for end in [StreamEnd::Close, StreamEnd::Abort] {
            let turn = looking();
            let events = turn.events(provider);
            let text = sse(provider, &events[..5], false);
            let api = FakeApi::start_replies(vec![
                Reply::Stream(split(&text), end),
                streamed(&turn, provider),
            ])
            .await;
            let model = provider_model(provider, &api.url, stream_settings());
            let (answer, pieces) = ask(model.as_ref()).await;
            // The server was reached: the answer broke off, it was not
            // "could not be reached".
            let Err(ModelError::Interrupted(e)) = &answer else {
                panic!("{provider:?} {end:?}: {answer:?}");
            };
            if end == StreamEnd::Close {
                assert!(
                    e.starts_with("the stream ended before the answer was complete"),
                    "{e}"
                );
            }
            assert!(!pieces.is_empty(), "{provider:?} {end:?}");
            assert_eq!(api.bodies().len(), 1, "{provider:?} {end:?}");
            api.stop();
        }
    }
}

// The text of an answer cut off after the person saw it stays in the
// history (and so in the next request), as the model's message marked as
// cut with why; the tool calls it had begun are not kept (they never ran),
// and every call still has its result.
#[tokio::test]
async fn a_cut_answer_keeps_the_text_that_was_shown() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let turn = looking();
        let events = turn.events(provider);
        let text = sse(provider, &events[..5], false);
        let api = FakeApi::start_replies(vec![Reply::Stream(split(&text), StreamEnd::Close)]).await;
        let model = provider_model(provider, &api.url, stream_settings());
        let deltas = Arc::new(Mutex::new(String::new()));
        let seen = deltas.clone();
        let sink: agent_loop::Sink = Arc::new(move |event: &agent_loop::Emitted<'_>| {
            if let AgentEvent::TextDelta { text } = event.event() {
                seen.lock().unwrap().push_str(text);
            }
        });
        let gateway = FakeGateway::new(vec![], Some("*"), 3);
        let mut agent = Agent::new(model, gateway, AgentSettings::default(), sink);
        let outcome =
            tokio::time::timeout(BOUND, agent.run_prompt("go", &CancellationToken::new()))
                .await
                .expect("the prompt outlived its bound");
        assert_eq!(outcome.reason, EndReason::Failed, "{provider:?}");
        let shown = deltas.lock().unwrap().clone();
        assert!(!shown.is_empty(), "{provider:?}");
        let history = agent.history();
        assert_eq!(history.len(), 2, "{provider:?}: {history:?}");
        let Message::Assistant { text, tool_calls } = &history[1] else {
            panic!("{provider:?}: {history:?}");
        };
        assert!(tool_calls.is_empty(), "{provider:?}");
        let mark = format!(
            "{shown}\n\n[{}: the model's answer failed: ",
            agent_loop::CUT_MARK
        );
        assert!(text.starts_with(&mark), "{provider:?}: {text}");
        agent_loop::check_pairing(history).unwrap();
        api.stop();
    }
}

// Without a sink (a summary request: nobody sees its pieces) a stream cut
// midway is retried like any failure, and the retry's answer is the answer.
#[tokio::test]
async fn an_unseen_stream_cut_midway_is_retried() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let turn = looking();
        let events = turn.events(provider);
        let text = sse(provider, &events[..5], false);
        let api = FakeApi::start_replies(vec![
            Reply::Stream(split(&text), StreamEnd::Close),
            streamed(&turn, provider),
        ])
        .await;
        let model = provider_model(provider, &api.url, stream_settings());
        let history = [Message::user("go")];
        let request = ModelRequest {
            system: "sys",
            messages: &history,
            tools: &[],
        };
        let answer = tokio::time::timeout(BOUND, model.complete(request))
            .await
            .expect("the model call outlived its bound");
        let answer = answer.unwrap_or_else(|e| panic!("{provider:?}: {e}"));
        assert_eq!(answer, turn.response(), "{provider:?}");
        assert_eq!(api.bodies().len(), 2, "{provider:?}");
        api.stop();
    }
}

// An error event before any text is retried as its status; after text, it
// ends the call.
#[tokio::test]
async fn an_error_event_is_retried_only_before_text() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let turn = done();
    let events = turn.events(Provider::Anthropic);
    let before = sse(
        Provider::Anthropic,
        &[events[0].clone(), overloaded.clone()],
        false,
    );
    let api = FakeApi::start_replies(vec![
        Reply::Stream(split(&before), StreamEnd::Close),
        streamed(&turn, Provider::Anthropic),
    ])
    .await;
    let model = provider_model(Provider::Anthropic, &api.url, stream_settings());
    let (answer, pieces) = ask(model.as_ref()).await;
    assert_eq!(answer.ok(), Some(turn.response()));
    assert_eq!(pieces, turn.pieces());
    assert_eq!(api.bodies().len(), 2);
    api.stop();

    let mut after = events[..4].to_vec();
    after.push(overloaded);
    let api = FakeApi::start_replies(vec![
        Reply::Stream(
            split(&sse(Provider::Anthropic, &after, false)),
            StreamEnd::Close,
        ),
        streamed(&turn, Provider::Anthropic),
    ])
    .await;
    let model = provider_model(Provider::Anthropic, &api.url, stream_settings());
    let (answer, pieces) = ask(model.as_ref()).await;
    let Err(ModelError::Status { status: 529, body }) = &answer else {
        panic!("{answer:?}");
    };
    assert!(body.contains("Overloaded"), "{body}");
    assert_eq!(pieces, turn.pieces()[..1]);
    assert_eq!(api.bodies().len(), 1);
    api.stop();
}

// A stream that stalls fails at the idle deadline as a Timeout naming it.
// Stalled after text, it is not tried again; stalled before any, it is, once
// (as a timed-out attempt is). The server sees each stalled body dropped.
#[tokio::test]
async fn a_stalled_stream_fails_at_the_idle_deadline() {
    let settings = HttpSettings {
        idle_timeout: Duration::from_millis(200),
        ..stream_settings()
    };
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let events = done().events(provider);
        let text_at = if provider == Provider::OpenAi { 2 } else { 4 };
        for (upto, attempts) in [(text_at, 1), (1, 2)] {
            let text = sse(provider, &events[..upto], false);
            let stalls = (0..3)
                .map(|_| Reply::Stream(split(&text), StreamEnd::Hang))
                .collect();
            let mut api = FakeApi::start_replies(stalls).await;
            let model = provider_model(provider, &api.url, settings.clone());
            let started = Instant::now();
            let (answer, pieces) = ask(model.as_ref()).await;
            let Err(ModelError::Timeout(e)) = &answer else {
                panic!("{provider:?}: {answer:?}");
            };
            assert_eq!(
                e, "the stream stalled: no event within the idle deadline of 200 ms",
                "{provider:?}"
            );
            assert_eq!(pieces.is_empty(), attempts == 2, "{provider:?}");
            assert_eq!(api.bodies().len(), attempts, "{provider:?} {upto}");
            assert!(started.elapsed() < BOUND / 2, "{:?}", started.elapsed());
            for _ in 0..attempts {
                let dropped = tokio::time::timeout(BOUND, api.dropped.recv()).await;
                assert!(
                    matches!(dropped, Ok(Some(()))),
                    "{provider:?}: the body was kept"
                );
            }
            api.stop();
        }
    }
}

// A server that refuses to stream is asked again whole, and whole from then
// on; one that answers a streaming request with JSON is read as whole.
#[tokio::test]
async fn a_server_that_will_not_stream_is_read_whole() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let turn = done();
        let refusal = json!({"error": {"message": "Streaming is not supported by this server"}});
        let api = FakeApi::start_replies(vec![
            Reply::Whole((400, vec![], refusal.to_string())),
            whole(&turn, provider),
            whole(&turn, provider),
        ])
        .await;
        let model = provider_model(provider, &api.url, stream_settings());
        for _ in 0..2 {
            let (answer, pieces) = ask(model.as_ref()).await;
            assert_eq!(answer.ok(), Some(turn.response()), "{provider:?}");
            assert!(pieces.is_empty());
        }
        let streams: Vec<bool> = api.bodies().iter().map(|b| b["stream"] == true).collect();
        assert_eq!(streams, [true, false, false], "{provider:?}");
        api.stop();

        // JSON to a streaming request; a 400 about something else is an
        // error as before.
        let other = json!({"error": {"message": "max_tokens is too large"}});
        let api = FakeApi::start_replies(vec![
            whole(&turn, provider),
            Reply::Whole((400, vec![], other.to_string())),
        ])
        .await;
        let model = provider_model(provider, &api.url, stream_settings());
        let (answer, _) = ask(model.as_ref()).await;
        assert_eq!(answer.ok(), Some(turn.response()), "{provider:?}");
        let (answer, _) = ask(model.as_ref()).await;
        assert!(
            matches!(&answer, Err(ModelError::Status { status: 400, .. })),
            "{answer:?}"
        );
        assert_eq!(api.bodies().len(), 2);
        api.stop();
    }
}

// What llama-cpp-python sends when the model picks a tool while streaming:
// a 200 event stream with nothing in it. The same request is asked once
// more, whole (not retried as a stream, nor said to be unreachable); the
// next request streams again.
#[tokio::test]
async fn an_empty_stream_is_asked_again_whole() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let turn = looking();
        let api = FakeApi::start_replies(vec![
            Reply::Stream(Vec::new(), StreamEnd::Close),
            whole(&turn, provider),
            streamed(&turn, provider),
        ])
        .await;
        let model = provider_model(provider, &api.url, stream_settings());
        let (answer, pieces) = ask(model.as_ref()).await;
        assert_eq!(answer.ok(), Some(turn.response()), "{provider:?}");
        assert!(pieces.is_empty());
        let (answer, _) = ask(model.as_ref()).await;
        assert_eq!(answer.ok(), Some(turn.response()), "{provider:?}");
        let streams: Vec<bool> = api.bodies().iter().map(|b| b["stream"] == true).collect();
        assert_eq!(streams, [true, false, true], "{provider:?}");
        api.stop();
    }
}

// [V3]: a request too long for the window, in each API's words, is a
// context overflow (for the loop to compact), never retried as if the
// server were down; other 400s stay statuses.
#[tokio::test]
async fn a_context_overflow_in_any_servers_words_is_named() {
    let bodies = [
        json!({"error": {"message": "This model's maximum context length is 2048 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}),
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
        json!({"error": {"message": "Requested tokens (2100) exceed context window of 2048"}}),
        json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error"}}),
    ];
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        for body in &bodies {
            let api = FakeApi::start_replies(vec![
                Reply::Whole((400, vec![], body.to_string())),
                whole(&done(), provider),
            ])
            .await;
            let model = provider_model(provider, &api.url, stream_settings());
            let (answer, _) = ask(model.as_ref()).await;
            assert!(
                matches!(
                    &answer,
                    Err(ModelError::ContextOverflow { status: 400, .. })
                ),
                "{provider:?} {body}: {answer:?}"
            );
            assert!(!answer.unwrap_err().is_retryable());
            assert_eq!(api.bodies().len(), 1, "{provider:?} {body}");
            api.stop();
        }
    }
}

// The size cap counts the stream's bytes together.
#[tokio::test]
async fn the_size_cap_bounds_a_stream() {
    let settings = HttpSettings {
        max_response_bytes: 4096,
        ..stream_settings()
    };
    let piece =
        json!({"choices": [{"index": 0, "delta": {"content": "ab"}, "finish_reason": null}]});
    let events = vec![piece; 200];
    let text = sse(Provider::OpenAi, &events, true);
    let api = FakeApi::start_replies(vec![Reply::Stream(
        cut(&text, &[1000, 2000, 3000, 4000]),
        StreamEnd::Close,
    )])
    .await;
    let model = provider_model(Provider::OpenAi, &api.url, settings);
    let (answer, pieces) = ask(model.as_ref()).await;
    let Err(e @ ModelError::TooLarge { max: 4096 }) = &answer else {
        panic!("{answer:?}");
    };
    assert!(!e.is_retryable());
    assert_eq!(
        e.to_string(),
        "the model API's answer is larger than 4096 bytes"
    );
    assert!(!pieces.is_empty() && pieces.len() < 200, "{}", pieces.len());
    api.stop();
}

// Cancelling the prompt mid-stream (here at its first piece of text) ends
// it at once, and the server sees the stream dropped.
#[tokio::test]
async fn cancelling_during_a_stream_stops_reading_at_once() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let events = done().events(provider);
        let upto = if provider == Provider::OpenAi { 2 } else { 4 };
        let text = sse(provider, &events[..upto], false);
        let mut api =
            FakeApi::start_replies(vec![Reply::Stream(split(&text), StreamEnd::Hang)]).await;
        let model = provider_model(provider, &api.url, stream_settings());
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let deltas = Arc::new(Mutex::new(Vec::new()));
        let seen = deltas.clone();
        let sink: agent_loop::Sink = Arc::new(move |event: &agent_loop::Emitted<'_>| {
            if let AgentEvent::TextDelta { text } = event.event() {
                seen.lock().unwrap().push(text.clone());
                trigger.cancel();
            }
        });
        let gateway = FakeGateway::new(vec![], Some("*"), 3);
        let mut agent = Agent::new(model, gateway, AgentSettings::default(), sink);
        let outcome = tokio::time::timeout(BOUND, agent.run_prompt("go", &cancel))
            .await
            .expect("the prompt outlived its bound");
        assert_eq!(outcome.reason, EndReason::Cancelled, "{provider:?}");
        assert_eq!(*deltas.lock().unwrap(), done().pieces()[..1]);
        // What was shown stays, marked as cut.
        let kept = format!(
            "{}\n\n[{}: the prompt was cancelled]",
            done().pieces()[0],
            agent_loop::CUT_MARK
        );
        assert_eq!(
            agent.history().last(),
            Some(&Message::Assistant {
                text: kept,
                tool_calls: vec![]
            }),
            "{provider:?}"
        );
        let dropped = tokio::time::timeout(BOUND, api.dropped.recv()).await;
        assert!(
            matches!(dropped, Ok(Some(()))),
            "{provider:?}: the stream was kept"
        );
        api.stop();
    }
}
