//! The OpenAI-compatible provider against a fake server on 127.0.0.1.

use agent_loop::ToolDef;
use agent_loop::providers::OpenAiCompat;
use agent_loop::{Message, Model, ModelError, ModelRequest, ToolCall};
use hooks_core::{HookPoint, Injection, ServerName, StopReason};
use serde_json::json;

use crate::support::{FakeApi, http_settings};

fn history() -> Vec<Message> {
    let server = ServerName::new("todo").unwrap();
    let injection = Injection::new(HookPoint::Stop, &server, 0, 1, "1 item open");
    let mut history = vec![
        Message::user("build it"),
        Message::Assistant {
            text: "reading".into(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "todo__todo".into(),
                arguments: "{}".into(),
            }],
        },
        Message::ToolResult {
            call_id: "call_1".into(),
            name: "todo__todo".into(),
            content: "(empty)".into(),
            is_error: false,
        },
        Message::Assistant {
            text: "done".into(),
            tool_calls: vec![],
        },
    ];
    history.extend(agent_loop::injection_pair(&injection));
    history
}

fn tools() -> Vec<ToolDef> {
    vec![ToolDef {
        name: "todo__todo".into(),
        description: Some("the list".into()),
        input_schema: json!({"type": "object"}),
    }]
}

fn ok(body: serde_json::Value) -> (u16, String) {
    (200, body.to_string())
}

fn answer_text(text: &str) -> (u16, String) {
    ok(
        json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 12, "completion_tokens": 3}}),
    )
}

// [I1]: hook pairs go as an assistant tool call and a tool message; the
// request carries the key, the tools, the model; the answer's usage is read.
#[tokio::test]
async fn renders_history_tools_and_hook_pairs_i1() {
    let api = FakeApi::start(vec![answer_text("ok")]).await;
    let model = OpenAiCompat::new(
        &format!("{}/v1/", api.url),
        Some("sk-test".into()),
        "gpt-test",
        http_settings(),
    );
    let (history, tools) = (history(), tools());
    let response = model
        .complete(ModelRequest {
            system: "sys",
            messages: &history,
            tools: &tools,
        })
        .await
        .unwrap();
    assert_eq!(
        (response.text.as_str(), response.stop),
        ("ok", StopReason::EndTurn)
    );
    assert_eq!(response.usage.unwrap().input_tokens, 12);
    let requests = api.requests.lock().unwrap();
    let (headers, body) = &requests[0];
    assert_eq!(headers["authorization"], "Bearer sk-test");
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["tools"][0]["function"]["name"], "todo__todo");
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "assistant",
            "tool"
        ]
    );
    assert_eq!(
        messages[5]["tool_calls"][0]["function"],
        json!({"name": "todo___Stop", "arguments": "{}"})
    );
    // [V2]: a turn of calls only says "", never null (llama.cpp-based
    // servers refuse null and a missing field), and tools go with "auto".
    assert_eq!(messages[5]["content"], "");
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(
        messages[6]["tool_call_id"],
        messages[5]["tool_calls"][0]["id"]
    );
    assert_eq!(
        messages[6]["content"],
        r#"{"hook":"_Stop","server":"todo","text":"1 item open"}"#
    );
    drop(requests);
    api.stop();
}

// [V1]: with no tools to offer, tool history goes as JSON text, never as
// tool_calls or tool messages.
#[tokio::test]
async fn falls_back_to_json_text_without_tools_v1() {
    let api = FakeApi::start(vec![answer_text("ok")]).await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let history = history();
    model
        .complete(ModelRequest {
            system: "",
            messages: &history,
            tools: &[],
        })
        .await
        .unwrap();
    let body = &api.bodies()[0];
    assert!(body.get("tools").is_none());
    let messages = body["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .all(|m| m["role"] != "tool" && m.get("tool_calls").is_none()),
        "{messages:#?}"
    );
    let last: serde_json::Value =
        serde_json::from_str(messages[6]["content"].as_str().unwrap()).unwrap();
    assert_eq!(last["tool_result"]["name"], "todo___Stop");
    assert_eq!(
        last["tool_result"]["content"],
        r#"{"hook":"_Stop","server":"todo","text":"1 item open"}"#
    );
    assert!(
        api.requests.lock().unwrap()[0]
            .0
            .get("authorization")
            .is_none()
    );
    api.stop();
}

// Tool calls and stop reasons are read explicitly [S1].
#[tokio::test]
async fn reads_tool_calls_and_maps_stop_reasons_s1() {
    let api = FakeApi::start(vec![
        ok(json!({"choices": [{"message": {"content": null, "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "todo__todo", "arguments": "{\"items\":[]}"}}]}, "finish_reason": "tool_calls"}]})),
        ok(json!({"choices": [{"message": {"content": "cut"}, "finish_reason": "length"}]})),
        ok(json!({"choices": [{"message": {"content": null, "refusal": "no"}, "finish_reason": "stop"}]})),
        ok(json!({"choices": [{"message": {"content": "x"}, "finish_reason": "content_filter"}]})),
    ])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let request = ModelRequest {
        system: "",
        messages: &[],
        tools: &[],
    };
    let first = model.complete(request).await.unwrap();
    assert_eq!(first.stop, StopReason::ToolUse);
    assert_eq!(
        first.tool_calls,
        [ToolCall {
            id: "c9".into(),
            name: "todo__todo".into(),
            arguments: r#"{"items":[]}"#.into()
        }]
    );
    assert_eq!(
        model.complete(request).await.unwrap().stop,
        StopReason::MaxTokens
    );
    assert_eq!(
        model.complete(request).await.unwrap().stop,
        StopReason::Refusal
    );
    assert_eq!(
        model.complete(request).await.unwrap().stop,
        StopReason::ContentFilter
    );
    api.stop();
}

// Retries with backoff on 429 and 5xx; not on 4xx.
#[tokio::test]
async fn retries_what_may_pass_and_only_that() {
    let api = FakeApi::start(vec![
        (429, "slow down".into()),
        (503, "busy".into()),
        answer_text("third time"),
    ])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let request = ModelRequest {
        system: "",
        messages: &[],
        tools: &[],
    };
    assert_eq!(model.complete(request).await.unwrap().text, "third time");
    assert_eq!(api.bodies().len(), 3);
    api.stop();

    let api = FakeApi::start(vec![
        (400, r#"{"error":"bad model"}"#.into()),
        answer_text("never"),
    ])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let err = model.complete(request).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Status { status: 400, body } if body == r#"{"error":"bad model"}"#),
        "{err:?}"
    );
    assert_eq!(api.bodies().len(), 1);
    api.stop();
}

// A malformed answer is an error that says what was malformed.
#[tokio::test]
async fn malformed_answers_say_what_is_wrong() {
    let api = FakeApi::start(vec![
        ok(json!({"choices": []})),
        (200, "<html>".into()),
        ok(json!({"choices": [{"message": {"tool_calls": [{"id": "x", "function": {}}]}, "finish_reason": "tool_calls"}]})),
        ok(json!({"choices": [{"message": {"content": "x"}}]})),
    ])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let request = ModelRequest {
        system: "",
        messages: &[],
        tools: &[],
    };
    let errors: Vec<String> = futures::future::join_all((0..4).map(|_| model.complete(request)))
        .await
        .into_iter()
        .map(|r| r.unwrap_err().to_string())
        .collect();
    let mut errors = errors;
    errors.sort();
    assert!(
        errors.contains(&"the model API's answer was malformed: choices[0] is missing".to_string()),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("the model API's answer was malformed: the body is not JSON")),
        "{errors:?}"
    );
    assert!(errors.contains(&"the model API's answer was malformed: choices[0].message.tool_calls[0].function.name is missing".to_string()), "{errors:?}");
    assert!(
        errors.contains(
            &"the model API's answer was malformed: choices[0].finish_reason is missing"
                .to_string()
        ),
        "{errors:?}"
    );
    api.stop();
}

// Retry-After is honoured in its forms; a wait longer than we would sit
// through ends the request at once with the server's error.
#[tokio::test]
async fn retry_after_is_honoured_or_the_error_returned() {
    let wait = |v: &str| vec![("retry-after", v.to_string())];
    let api = FakeApi::start_with_headers(vec![
        (429, wait("1"), "slow down".into()),
        (200, vec![], answer_text("after the wait").1),
    ])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let request = ModelRequest {
        system: "",
        messages: &[],
        tools: &[],
    };
    let started = std::time::Instant::now();
    assert_eq!(
        model.complete(request).await.unwrap().text,
        "after the wait"
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(900),
        "the Retry-After wait was not honoured"
    );
    api.stop();

    let api = FakeApi::start_with_headers(vec![
        (429, wait("3600"), "come back in an hour".into()),
        (200, vec![], answer_text("no").1),
    ])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let err = model.complete(request).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Status { status: 429, body } if body == "come back in an hour"),
        "{err:?}"
    );
    assert_eq!(
        api.bodies().len(),
        1,
        "retried despite an hour's Retry-After"
    );
    api.stop();

    let date = httpdate::fmt_http_date(
        std::time::SystemTime::now() + std::time::Duration::from_secs(7200),
    );
    let api = FakeApi::start_with_headers(vec![
        (503, wait(&date), "maintenance".into()),
        (200, vec![], answer_text("no").1),
    ])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    assert!(model.complete(request).await.is_err());
    assert_eq!(
        api.bodies().len(),
        1,
        "an HTTP-date Retry-After was not read"
    );
    api.stop();
}

// A success that carries absurd retry headers is still a success: the
// headers are read (the read must not panic; `retry-after-ms: 1e300` once
// crashed `sprout run` in Duration::from_secs_f64) and then not needed.
#[tokio::test]
async fn absurd_retry_headers_on_a_success_are_harmless() {
    let (_, body) = answer_text("fine");
    let api = FakeApi::start_with_headers(vec![(
        200,
        vec![
            ("retry-after-ms", "1e300".to_string()),
            ("retry-after", "99999999999999999999".to_string()),
        ],
        body,
    )])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let request = ModelRequest {
        system: "",
        messages: &[],
        tools: &[],
    };
    assert_eq!(model.complete(request).await.unwrap().text, "fine");
    api.stop();
}

// An error that asks for an absurd wait returns the server's error at once:
// no panic, no retry, no sleep of years. The timeout bounds only whether it
// returns at all, generously.
#[tokio::test]
async fn absurd_retry_after_on_an_error_returns_the_error_promptly() {
    for headers in [
        vec![("retry-after-ms", "1e300".to_string())],
        vec![("retry-after-ms", "inf".to_string())],
        vec![("retry-after", "99999999999999999999".to_string())],
        vec![("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT".to_string())],
    ] {
        let api = FakeApi::start_with_headers(vec![
            (429, headers.clone(), "slow down".into()),
            answer_text_with_headers("too early"),
        ])
        .await;
        let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
        let request = ModelRequest {
            system: "",
            messages: &[],
            tools: &[],
        };
        let result =
            tokio::time::timeout(std::time::Duration::from_secs(10), model.complete(request))
                .await
                .unwrap_or_else(|_| panic!("still waiting after 10 s with {headers:?}"));
        let err = result.unwrap_err();
        assert!(
            matches!(&err, ModelError::Status { status: 429, body } if body == "slow down"),
            "{err:?} with {headers:?}"
        );
        assert_eq!(api.bodies().len(), 1, "retried despite {headers:?}");
        api.stop();
    }
}

fn answer_text_with_headers(text: &str) -> crate::support::ScriptedAnswer {
    let (status, body) = answer_text(text);
    (status, vec![], body)
}

// Token counts are the server's numbers: u64::MAX for both must not
// overflow the loop's sum (this panicked in debug builds).
#[tokio::test]
async fn huge_usage_counts_do_not_overflow_the_loop() {
    let api = FakeApi::start(vec![ok(json!({
        "choices": [{"message": {"content": "counted"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": u64::MAX, "completion_tokens": u64::MAX},
    }))])
    .await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let gateway = crate::support::FakeGateway::new(vec![], None, 3);
    let (sink, events) = crate::support::recording_sink();
    let mut agent = agent_loop::Agent::new(
        std::sync::Arc::new(model),
        gateway,
        agent_loop::AgentSettings::default(),
        sink,
    );
    let outcome = agent
        .run_prompt("count", &tokio_util::sync::CancellationToken::new())
        .await;
    assert_eq!(outcome.text, "counted", "{outcome:?}");
    assert!(
        events.lock().unwrap().iter().any(|e| matches!(
            e,
            agent_loop::AgentEvent::ModelResponse {
                input_tokens: Some(u64::MAX),
                ..
            }
        )),
        "the counts were not reported as sent"
    );
    api.stop();
}

// An endpoint that never answers: each attempt ends at its deadline as a
// typed Timeout (no matching on message text), and a timed-out attempt is
// tried once more at most, so a hung endpoint costs two deadlines, not
// `retries + 1`.
#[tokio::test]
async fn a_hung_endpoint_times_out_twice_at_most() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(socket);
        }
    });
    let settings = agent_loop::providers::HttpSettings {
        timeout: std::time::Duration::from_millis(200),
        retries: 3,
        ..http_settings()
    };
    let model = OpenAiCompat::new(&url, None, "m", settings);
    let request = ModelRequest {
        system: "",
        messages: &[],
        tools: &[],
    };
    let err = model.complete(request).await.unwrap_err();
    assert!(matches!(err, ModelError::Timeout(_)), "{err:?}");
    assert!(err.to_string().contains("did not answer in time"), "{err}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    server.abort();
}

// An http:// endpoint's client loads no TLS roots; a redirect to https says
// what to do instead of failing with a certificate error.
#[tokio::test]
async fn a_redirect_to_https_says_to_use_the_https_url() {
    // As often as the client tries (a transport error is retried).
    let redirect = || {
        (
            307,
            vec![("location", "https://127.0.0.1:9/v1/chat/completions".into())],
            String::new(),
        )
    };
    let api = FakeApi::start_with_headers((0..4).map(|_| redirect()).collect()).await;
    let model = OpenAiCompat::new(&api.url, None, "m", http_settings());
    let request = ModelRequest {
        system: "",
        messages: &[],
        tools: &[],
    };
    let error = model.complete(request).await.unwrap_err().to_string();
    assert!(error.contains("redirected to https"), "{error}");
}

// A key an HTTP header cannot carry is its own error, raised before any
// request is sent, never retried, and never shown.
#[tokio::test]
async fn an_api_key_with_a_line_break_is_refused_unsent() {
    let api = FakeApi::start(vec![]).await;
    let history = vec![Message::user("hi")];
    let request = ModelRequest {
        system: "",
        messages: &history,
        tools: &[],
    };
    let secret = "sk-secret\nX-Injected: 1";
    let models: [Box<dyn Model>; 2] = [
        Box::new(OpenAiCompat::new(
            &api.url,
            Some(secret.into()),
            "m",
            http_settings(),
        )),
        Box::new(agent_loop::providers::Anthropic::new(
            &api.url,
            secret.into(),
            "m",
            http_settings(),
        )),
    ];
    for model in models {
        let err = model.complete(request).await.unwrap_err();
        assert!(matches!(err, ModelError::InvalidApiKey), "{err:?}");
        assert!(!err.is_retryable());
        let message = err.to_string();
        assert_eq!(
            message,
            "the API key cannot be sent: it holds a character an HTTP header cannot carry (a line break?)"
        );
        assert!(!message.contains("sk-secret"));
    }
    assert!(api.bodies().is_empty(), "a request was sent");
    api.stop();
}
