//! Anthropic Messages: `POST {base}/v1/messages` with `x-api-key` and
//! `anthropic-version`.
//!
//! Roles must alternate, so consecutive messages of one role are merged into
//! one turn: a hook's synthetic `tool_use` joins the assistant turn before it,
//! and tool results share a user turn with the prompt that follows them \[P2\].
//! When a request offers no tools, tool history is sent as JSON text blocks
//! in the same positions \[V1\].

use async_trait::async_trait;
use hooks_core::StopReason;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::http::{HttpSettings, excerpt, field_str, post_json};
use crate::message::{Message, ToolCall};
use crate::model::{Model, ModelError, ModelRequest, ModelResponse, Usage};

/// The default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version header value.
pub const API_VERSION: &str = "2023-06-01";

/// A Messages API client.
#[derive(Debug)]
pub struct Anthropic {
    client: reqwest::Client,
    base_url: String,
    api_key: String,
    model: String,
    max_tokens: u32,
    settings: HttpSettings,
}

impl Anthropic {
    /// A client for `model`.
    pub fn new(base_url: &str, api_key: String, model: &str, settings: HttpSettings) -> Anthropic {
        Anthropic {
            client: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model: model.to_owned(),
            max_tokens: 8192,
            settings,
        }
    }

    /// The answer's length cap (the API requires one; 8192 by default).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Anthropic {
        self.max_tokens = max_tokens;
        self
    }

    /// The request body for `request`.
    pub fn body(&self, request: ModelRequest<'_>) -> Value {
        let tools_offered = !request.tools.is_empty();
        let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
        for message in request.messages {
            let (role, blocks) = match message {
                Message::User { text } if text.is_empty() => continue,
                Message::User { text } => ("user", vec![json!({"type": "text", "text": text})]),
                Message::Assistant { text, tool_calls } => {
                    let mut blocks = Vec::new();
                    if !text.trim().is_empty() {
                        blocks.push(json!({"type": "text", "text": text}));
                    }
                    for call in tool_calls {
                        blocks.push(if tools_offered {
                            let input = serde_json::from_str::<Value>(&call.arguments)
                                .ok()
                                .filter(Value::is_object)
                                .unwrap_or_else(|| json!({}));
                            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
                        } else {
                            let call = json!({"tool_call": {"id": call.id, "name": call.name, "arguments": call.arguments}});
                            json!({"type": "text", "text": call.to_string()})
                        });
                    }
                    ("assistant", blocks)
                }
                Message::ToolResult {
                    call_id,
                    name,
                    content,
                    is_error,
                } => {
                    let block = if tools_offered {
                        json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error})
                    } else {
                        let result = json!({"tool_result": {"tool_use_id": call_id, "name": name, "content": content, "is_error": is_error}});
                        json!({"type": "text", "text": result.to_string()})
                    };
                    ("user", vec![block])
                }
            };
            if blocks.is_empty() {
                continue;
            }
            match turns.last_mut() {
                Some((last, existing)) if *last == role => existing.extend(blocks),
                _ => turns.push((role, blocks)),
            }
        }
        let messages: Vec<Value> = turns
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": request.system,
            "messages": messages,
        });
        if tools_offered {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description.clone().unwrap_or_default(), "input_schema": t.input_schema}))
                .collect();
            body["tools"] = Value::Array(tools);
        }
        body
    }
}

/// Reads a Messages answer.
pub fn parse_response(value: &Value) -> Result<ModelResponse, ModelError> {
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(ModelError::Malformed(format!(
            "the API returned an error object: {}",
            excerpt(&value["error"])
        )));
    }
    let content = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ModelError::Malformed("content is missing or not a list".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        let at = format!("content[{i}]");
        match field_str(block, "type", &at)? {
            "text" => text.push_str(field_str(block, "text", &at)?),
            "tool_use" => tool_calls.push(ToolCall {
                id: field_str(block, "id", &at)?.to_owned(),
                name: field_str(block, "name", &at)?.to_owned(),
                arguments: block
                    .get("input")
                    .cloned()
                    .unwrap_or_else(|| json!({}))
                    .to_string(),
            }),
            // Thinking and other blocks carry nothing the loop uses.
            _ => {}
        }
    }
    let stop = match value.get("stop_reason").and_then(Value::as_str) {
        Some(word) => StopReason::from_word(word),
        None => return Err(ModelError::Malformed("stop_reason is missing".into())),
    };
    let usage = value.get("usage").and_then(|u| {
        Some(Usage {
            input_tokens: u.get("input_tokens")?.as_u64()?,
            output_tokens: u.get("output_tokens")?.as_u64()?,
        })
    });
    Ok(ModelResponse {
        text,
        tool_calls,
        stop,
        usage,
    })
}

#[async_trait]
impl Model for Anthropic {
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut headers = HeaderMap::new();
        let key = HeaderValue::from_str(&self.api_key)
            .map_err(|_| ModelError::Malformed("the API key is not a valid header value".into()))?;
        headers.insert("x-api-key", key);
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        let url = format!("{}/v1/messages", self.base_url);
        let answer = post_json(
            &self.client,
            &url,
            headers,
            &self.body(request),
            &self.settings,
        )
        .await?;
        parse_response(&answer)
    }

    fn describe(&self) -> String {
        format!("anthropic {} at {}", self.model, self.base_url)
    }
}
