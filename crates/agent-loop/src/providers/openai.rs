//! OpenAI-compatible Chat Completions: OpenAI, Ollama, vLLM, llama.cpp,
//! OpenRouter and the rest that speak `POST {base}/chat/completions`.
//!
//! Hook pairs go as an assistant message with `tool_calls` and a `tool`
//! message \[I1\]. When a request offers no tools, tool history is sent as JSON
//! text instead (user messages in the tool-result position) \[V1\], since some
//! servers refuse tool-call history without tool definitions.

use async_trait::async_trait;
use hooks_core::StopReason;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::http::{HttpSettings, excerpt, field_str, post_json};
use crate::message::{Message, ToolCall};
use crate::model::{Model, ModelError, ModelRequest, ModelResponse, Usage};

/// The default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// A Chat Completions endpoint.
#[derive(Debug)]
pub struct OpenAiCompat {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    max_tokens: Option<u32>,
    settings: HttpSettings,
}

impl OpenAiCompat {
    /// A client for `model` at `base_url` (e.g. `http://localhost:11434/v1`).
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        model: &str,
        settings: HttpSettings,
    ) -> OpenAiCompat {
        OpenAiCompat {
            client: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model: model.to_owned(),
            max_tokens: None,
            settings,
        }
    }

    /// Caps the answer's length.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> OpenAiCompat {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// The request body for `request` (public for tests and for the curious).
    pub fn body(&self, request: ModelRequest<'_>) -> Value {
        let tools_offered = !request.tools.is_empty();
        let mut messages = vec![json!({"role": "system", "content": request.system})];
        for message in request.messages {
            messages.push(match message {
                Message::User { text } => json!({"role": "user", "content": text}),
                Message::Assistant { text, tool_calls } if tools_offered && !tool_calls.is_empty() => {
                    let calls: Vec<Value> = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                    let content = if text.is_empty() { Value::Null } else { Value::String(text.clone()) };
                    json!({"role": "assistant", "content": content, "tool_calls": calls})
                }
                Message::Assistant { text, tool_calls } => {
                    // [V1] fallback: tool calls as JSON text.
                    let mut content = text.clone();
                    for call in tool_calls {
                        if !content.is_empty() {
                            content.push('\n');
                        }
                        content.push_str(&json!({"tool_call": {"id": call.id, "name": call.name, "arguments": call.arguments}}).to_string());
                    }
                    json!({"role": "assistant", "content": content})
                }
                Message::ToolResult { call_id, content, .. } if tools_offered => {
                    json!({"role": "tool", "tool_call_id": call_id, "content": content})
                }
                Message::ToolResult { call_id, name, content, is_error } => json!({
                    "role": "user",
                    "content": json!({"tool_result": {"tool_call_id": call_id, "name": name, "content": content, "is_error": is_error}}).to_string(),
                }),
            });
        }
        let mut body = json!({"model": self.model, "messages": messages});
        if tools_offered {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description.clone().unwrap_or_default(), "parameters": t.input_schema}}))
                .collect();
            body["tools"] = Value::Array(tools);
        }
        if let Some(max) = self.max_tokens {
            // OpenAI's own API wants max_completion_tokens (its reasoning
            // models refuse max_tokens); compatible servers know max_tokens.
            let key = if self.base_url.contains("api.openai.com") {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[key] = json!(max);
        }
        body
    }
}

/// A call id for a tool call that came without one, unique in the process.
fn fresh_call_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "sprout-call-{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// Reads a Chat Completions answer.
pub fn parse_response(value: &Value) -> Result<ModelResponse, ModelError> {
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| ModelError::Malformed("choices[0] is missing".into()))?;
    let message = choice
        .get("message")
        .ok_or_else(|| ModelError::Malformed("choices[0].message is missing".into()))?;
    let text = match message.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ModelError::Malformed(format!(
                "choices[0].message.content is not text: {}",
                excerpt(other)
            )));
        }
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").filter(|v| !v.is_null()) {
        let calls = calls.as_array().ok_or_else(|| {
            ModelError::Malformed("choices[0].message.tool_calls is not a list".into())
        })?;
        for (i, call) in calls.iter().enumerate() {
            let at = format!("choices[0].message.tool_calls[{i}]");
            let function = call
                .get("function")
                .ok_or_else(|| ModelError::Malformed(format!("{at}.function is missing")))?;
            tool_calls.push(ToolCall {
                // Some compatible servers leave the id out; the history needs one.
                id: match call.get("id").and_then(Value::as_str) {
                    Some(id) if !id.is_empty() => id.to_owned(),
                    _ => fresh_call_id(),
                },
                name: field_str(function, "name", &format!("{at}.function"))?.to_owned(),
                arguments: match function.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => "{}".to_owned(),
                    Some(other) => other.to_string(),
                },
            });
        }
    }
    let refused = message.get("refusal").is_some_and(|r| !r.is_null());
    let stop = match choice.get("finish_reason").and_then(Value::as_str) {
        _ if refused => StopReason::Refusal,
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::ContentFilter,
        Some(other) => StopReason::Other(other.to_owned()),
        None => {
            return Err(ModelError::Malformed(
                "choices[0].finish_reason is missing".into(),
            ));
        }
    };
    let usage = value.get("usage").and_then(|u| {
        Some(Usage {
            input_tokens: u.get("prompt_tokens")?.as_u64()?,
            output_tokens: u.get("completion_tokens")?.as_u64()?,
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
impl Model for OpenAiCompat {
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ModelError::Malformed("the API key is not a valid header value".into())
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        let url = format!("{}/chat/completions", self.base_url);
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
        format!("openai-compatible {} at {}", self.model, self.base_url)
    }
}
