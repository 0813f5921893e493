//! The Anthropic provider against a fake server on 127.0.0.1.

use agent_loop::ToolDef;
use agent_loop::providers::Anthropic;
use agent_loop::{Message, Model, ModelRequest, ToolCall};
use hooks_core::{HookPoint, Injection, ServerName, StopReason};
use serde_json::json;

use crate::support::{FakeApi, http_settings};

fn answer(body: serde_json::Value) -> (u16, String) {
    (200, body.to_string())
}

fn text_answer() -> (u16, String) {
    answer(
        json!({"type": "message", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": {"input_tokens": 20, "output_tokens": 2}}),
    )
}

fn tools() -> Vec<ToolDef> {
    vec![ToolDef {
        name: "todo__todo".into(),
        description: None,
        input_schema: json!({"type": "object"}),
    }]
}

/// After an objection and a compaction: the end-of-turn text, the `_Stop`
/// pair, a `_PostCompact` pair and the prompt.
fn history() -> Vec<Message> {
    let server = ServerName::new("todo").unwrap();
    let mut history = vec![
        Message::user("task"),
        Message::Assistant {
            text: "done".into(),
            tool_calls: vec![],
        },
    ];
    history.extend(agent_loop::injection_pair(&Injection::new(
        HookPoint::Stop,
        &server,
        0,
        1,
        "open items",
    )));
    history.extend(agent_loop::injection_pair(&Injection::new(
        HookPoint::PostCompact,
        &server,
        0,
        2,
        "- [ ] a",
    )));
    history.push(Message::user("go on"));
    history
}

// [I1], [P2]: roles alternate: the hook's tool_use joins the assistant turn,
// and tool results share a user turn with the prompt after them. Headers
// carry the key and the API version.
#[tokio::test]
async fn merges_turns_so_roles_alternate_i1_p2() {
    let api = FakeApi::start(vec![text_answer()]).await;
    let model = Anthropic::new(&api.url, "key-1".into(), "claude-test", http_settings());
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
    let requests = api.requests.lock().unwrap();
    let (headers, body) = &requests[0];
    assert_eq!(headers["x-api-key"], "key-1");
    assert_eq!(headers["anthropic-version"], Anthropic::API_VERSION);
    assert_eq!(
        (body["system"].as_str(), body["max_tokens"].as_u64()),
        (Some("sys"), Some(8192))
    );
    let messages = body["messages"].as_array().unwrap();
    let shape: Vec<(String, Vec<String>)> = messages
        .iter()
        .map(|m| {
            let kinds = m["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["type"].as_str().unwrap().to_owned())
                .collect();
            (m["role"].as_str().unwrap().to_owned(), kinds)
        })
        .collect();
    let expected = [
        ("user", vec!["text"]),
        ("assistant", vec!["text", "tool_use"]),
        ("user", vec!["tool_result"]),
        ("assistant", vec!["tool_use"]),
        ("user", vec!["tool_result", "text"]),
    ];
    let expected: Vec<(String, Vec<String>)> = expected
        .iter()
        .map(|(r, k)| (r.to_string(), k.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(shape, expected);
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "sprout-1-0", "name": "todo___Stop", "input": {}})
    );
    assert_eq!(
        messages[2]["content"][0]["content"],
        r#"{"hook":"_Stop","server":"todo","text":"open items"}"#
    );
    drop(requests);
    api.stop();
}

// [V1]: without tools, no tool_use or tool_result blocks: JSON text instead,
// in the same positions.
#[tokio::test]
async fn falls_back_to_json_text_without_tools_v1() {
    let api = FakeApi::start(vec![text_answer()]).await;
    let model = Anthropic::new(&api.url, "k".into(), "m", http_settings());
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
    let text = body["messages"].to_string();
    assert!(
        !text.contains("tool_use\"") && !text.contains("\"tool_result\",\"tool_use_id"),
        "{text}"
    );
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    let result: serde_json::Value =
        serde_json::from_str(body["messages"][2]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        result["tool_result"]["content"],
        r#"{"hook":"_Stop","server":"todo","text":"open items"}"#
    );
    api.stop();
}

// tool_use blocks become calls; stop reasons map explicitly [S1]; a missing
// stop reason is named.
#[tokio::test]
async fn reads_tool_use_and_stop_reasons_s1() {
    let api = FakeApi::start(vec![
        answer(json!({"content": [{"type": "text", "text": "let me look"}, {"type": "tool_use", "id": "tu1", "name": "todo__todo", "input": {"items": []}}], "stop_reason": "tool_use"})),
        answer(json!({"content": [], "stop_reason": "max_tokens"})),
        answer(json!({"content": [], "stop_reason": "refusal"})),
        answer(json!({"content": [], "stop_reason": "pause_turn"})),
        answer(json!({"content": []})),
    ])
    .await;
    let model = Anthropic::new(&api.url, "k".into(), "m", http_settings());
    let request = ModelRequest {
        system: "",
        messages: &[],
        tools: &[],
    };
    let first = model.complete(request).await.unwrap();
    assert_eq!(first.text, "let me look");
    assert_eq!(
        first.tool_calls,
        [ToolCall {
            id: "tu1".into(),
            name: "todo__todo".into(),
            arguments: r#"{"items":[]}"#.into()
        }]
    );
    assert_eq!(first.stop, StopReason::ToolUse);
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
        StopReason::Other("pause_turn".into())
    );
    let err = model.complete(request).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the model API's answer was malformed: stop_reason is missing"
    );
    api.stop();
}
