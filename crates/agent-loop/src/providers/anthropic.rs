//! Anthropic Messages: `POST {base}/v1/messages` with `x-api-key` and
//! `anthropic-version`.
//!
//! Roles must alternate, so consecutive messages of one role are merged into
//! one turn: a hook's synthetic `tool_use` joins the assistant turn before it,
//! and tool results share a user turn with the prompt that follows them \[P2\].
//! When a request offers no tools, tool history is sent as JSON text blocks
//! in the same positions \[V1\].
//!
//! The wire format is typed by private serde types: a `Request` borrows from
//! the history, and an answer decodes as an `Answer`, with errors that name
//! the JSON path of what was wrong. A content block decodes as one flat
//! `AnswerBlock` with every field optional, checked by its `type` after
//! decoding: an error keeps its path (an internally tagged enum would lose
//! it), unknown block types pass, and a streamed `content_block_start` can
//! decode its block as one too.
//!
//! Streamed (`stream: true`), each event's `data:` is a `StreamEvent`;
//! `Stream` gathers `message_start`'s input tokens, the blocks by `index`
//! (`text_delta`s into the text, `input_json_delta`s into each tool call's
//! input, read as JSON at the end as a whole answer's `input` is), and
//! `message_delta`'s stop reason and output tokens into the response the
//! whole answer would give, until `message_stop`. An `error` event is the
//! HTTP status its type stands for.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use async_trait::async_trait;
use hooks_core::StopReason;
use reqwest::header::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::http::{
    Endpoint, Flow, HttpSettings, StreamDecoder, ask, cut_short, excerpt, status_with,
};
use super::wire::{JsonText, ToolCallText, decode, lenient};
use crate::gateway::ToolDef;
use crate::message::{Message, ToolCall};
use crate::model::{Model, ModelError, ModelRequest, ModelResponse, TextSink, Usage};
use sse_stream::Sse;

/// A Messages API client.
#[derive(Debug)]
pub struct Anthropic {
    client: reqwest::Client,
    base_url: String,
    api_key: String,
    model: String,
    max_tokens: u32,
    temperature: Option<f32>,
    settings: HttpSettings,
    /// Set once the server refused to stream.
    stream_refused: AtomicBool,
}

impl Anthropic {
    /// The default base URL.
    pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
    /// The API version header value.
    pub const API_VERSION: &str = "2023-06-01";
    /// A client for `model`.
    pub fn new(base_url: &str, api_key: String, model: &str, settings: HttpSettings) -> Anthropic {
        Anthropic {
            client: super::http::client(base_url),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model: model.to_owned(),
            max_tokens: 8192,
            temperature: None,
            settings,
            stream_refused: AtomicBool::new(false),
        }
    }

    /// The answer's length cap (the API requires one; 8192 by default).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Anthropic {
        self.max_tokens = max_tokens;
        self
    }

    /// The sampling temperature (the API's default unless set).
    pub fn with_temperature(mut self, temperature: f32) -> Anthropic {
        self.temperature = Some(temperature);
        self
    }

    /// The request body for `request`, as first sent (public for tests and
    /// for the curious: `serde_json::to_value` shows it); with
    /// `"stream": true` when the settings stream.
    pub fn body<'a>(&'a self, request: ModelRequest<'a>) -> impl Serialize + std::fmt::Debug + 'a {
        self.request_body(request, self.settings.stream)
    }

    fn request_body<'a>(&'a self, request: ModelRequest<'a>, stream: bool) -> Request<'a> {
        let tools_offered = !request.tools.is_empty();
        let mut turns: Vec<Turn<'a>> = Vec::new();
        for message in request.messages {
            let (role, blocks) = match message {
                Message::User { text } if text.is_empty() => continue,
                Message::User { text } => (
                    Role::User,
                    vec![RequestBlock::Text {
                        text: BlockText::Text(text),
                    }],
                ),
                Message::Assistant { text, tool_calls } => {
                    let mut blocks = Vec::new();
                    if !text.trim().is_empty() {
                        blocks.push(RequestBlock::Text {
                            text: BlockText::Text(text),
                        });
                    }
                    blocks.extend(tool_calls.iter().map(|call| {
                        if tools_offered {
                            RequestBlock::ToolUse {
                                id: &call.id,
                                name: &call.name,
                                // The API wants an object; arguments that are
                                // not one go as none.
                                input: serde_json::from_str::<Value>(&call.arguments)
                                    .ok()
                                    .filter(Value::is_object)
                                    .unwrap_or_else(|| Value::Object(serde_json::Map::new())),
                            }
                        } else {
                            RequestBlock::Text {
                                text: BlockText::ToolCall(JsonText(ToolCallText::new(call))),
                            }
                        }
                    }));
                    (Role::Assistant, blocks)
                }
                Message::ToolResult {
                    call_id,
                    name,
                    content,
                    is_error,
                } => {
                    let block = if tools_offered {
                        RequestBlock::ToolResult {
                            tool_use_id: call_id,
                            content,
                            is_error: *is_error,
                        }
                    } else {
                        RequestBlock::Text {
                            text: BlockText::ToolResult(JsonText(ToolResultText {
                                tool_result: ToolResultFields {
                                    content,
                                    is_error: *is_error,
                                    name,
                                    tool_use_id: call_id,
                                },
                            })),
                        }
                    };
                    (Role::User, vec![block])
                }
            };
            if blocks.is_empty() {
                continue;
            }
            match turns.last_mut() {
                Some(last) if last.role == role => last.content.extend(blocks),
                _ => turns.push(Turn {
                    role,
                    content: blocks,
                }),
            }
        }
        Request {
            model: &self.model,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            system: request.system,
            messages: turns,
            tools: request.tools.iter().map(RequestTool::new).collect(),
            stream,
        }
    }
}

/// A Messages request.
#[derive(Debug, Serialize)]
struct Request<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    system: &'a str,
    messages: Vec<Turn<'a>>,
    /// Absent when no tool is offered \[V1\].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<RequestTool<'a>>,
    /// Absent for a whole answer.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// One turn: the messages of one role in a row, merged \[P2\].
#[derive(Debug, Serialize)]
struct Turn<'a> {
    role: Role,
    content: Vec<RequestBlock<'a>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

/// One content block of a request.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RequestBlock<'a> {
    Text {
        text: BlockText<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        is_error: bool,
    },
}

/// A text block's text: the history's, or a tool call or result as JSON text
/// \[V1\].
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum BlockText<'a> {
    Text(&'a str),
    ToolCall(JsonText<ToolCallText<'a>>),
    ToolResult(JsonText<ToolResultText<'a>>),
}

/// `{"tool_result": {...}}`: a tool result as text \[V1\].
#[derive(Debug, Serialize)]
struct ToolResultText<'a> {
    tool_result: ToolResultFields<'a>,
}

/// In alphabetical order, as the text was before these types (see
/// `ToolCallText`).
#[derive(Debug, Serialize)]
struct ToolResultFields<'a> {
    content: &'a str,
    is_error: bool,
    name: &'a str,
    tool_use_id: &'a str,
}

/// A tool the model may call.
#[derive(Debug, Serialize)]
struct RequestTool<'a> {
    name: &'a str,
    /// Empty when the tool has none.
    description: &'a str,
    input_schema: &'a Value,
}

impl<'a> RequestTool<'a> {
    fn new(tool: &'a ToolDef) -> RequestTool<'a> {
        RequestTool {
            name: &tool.name,
            description: tool.description.as_deref().unwrap_or_default(),
            input_schema: &tool.input_schema,
        }
    }
}

/// A Messages answer, or an error object. Unknown fields are ignored, here
/// and below.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a Messages answer (a JSON object)")]
struct Answer {
    /// `"error"` for an error object; anything else is not read.
    #[serde(rename = "type", default, deserialize_with = "lenient")]
    kind: Option<String>,
    /// An error object's error, quoted in ours.
    #[serde(default)]
    error: Value,
    #[serde(default)]
    content: Option<Vec<AnswerBlock>>,
    #[serde(default)]
    stop_reason: Option<String>,
    /// Usage that is not two counts is no usage.
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<AnswerUsage>,
}

/// One content block of an answer, of any type: the fields of the types the
/// loop reads, checked by [`AnswerBlock::read`].
#[derive(Debug, Deserialize)]
#[serde(expecting = "a content block (a JSON object)")]
struct AnswerBlock {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    /// A `tool_use` block's input as sent; `{}` when absent.
    #[serde(default = "empty_object")]
    input: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// What one answer block means to the loop.
#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse(ToolCall),
    /// Thinking and other blocks carry nothing the loop uses.
    Other,
}

impl AnswerBlock {
    /// The block, or what is missing from it; `at` is its path.
    fn read(self, at: &str) -> Result<Block, ModelError> {
        let missing = |field: &str| ModelError::Malformed(format!("{at}.{field} is missing"));
        Ok(match self.kind.as_deref() {
            Some("text") => Block::Text(self.text.ok_or_else(|| missing("text"))?),
            Some("tool_use") => Block::ToolUse(ToolCall {
                id: self.id.ok_or_else(|| missing("id"))?,
                name: self.name.ok_or_else(|| missing("name"))?,
                arguments: self.input.to_string(),
            }),
            Some(_) => Block::Other,
            None => return Err(missing("type")),
        })
    }
}

#[derive(Debug, Deserialize)]
struct AnswerUsage {
    input_tokens: u64,
    output_tokens: u64,
}

/// Reads a Messages answer from its body.
pub(crate) fn parse_response(body: &[u8]) -> Result<ModelResponse, ModelError> {
    let answer: Answer = decode(body)?;
    if answer.kind.as_deref() == Some("error") {
        return Err(ModelError::Malformed(format!(
            "the API returned an error object: {}",
            excerpt(&answer.error)
        )));
    }
    let content = answer
        .content
        .ok_or_else(|| ModelError::Malformed("content is missing".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, block) in content.into_iter().enumerate() {
        match block.read(&format!("content[{i}]"))? {
            Block::Text(more) => text.push_str(&more),
            Block::ToolUse(call) => tool_calls.push(call),
            Block::Other => {}
        }
    }
    let stop = stop_reason(answer.stop_reason)?;
    Ok(ModelResponse {
        text,
        tool_calls,
        stop,
        usage: answer.usage.map(|u| Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
        }),
    })
}

fn stop_reason(word: Option<String>) -> Result<StopReason, ModelError> {
    match word {
        Some(word) => Ok(StopReason::from_word(&word)),
        None => Err(ModelError::Malformed("stop_reason is missing".into())),
    }
}

/// One streamed event: the `data:` of an SSE event, of any type, with the
/// fields of the types the loop reads. Unknown fields and types are ignored.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a Messages stream event (a JSON object)")]
struct StreamEvent {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    /// `message_start`'s message: only its usage is read.
    #[serde(default)]
    message: Option<StartMessage>,
    /// The block a `content_block_*` event is about.
    #[serde(default)]
    index: Option<u64>,
    /// `content_block_start`'s block, read as a whole answer's block.
    #[serde(default)]
    content_block: Option<AnswerBlock>,
    #[serde(default)]
    delta: Option<StreamDelta>,
    /// `message_delta`'s counts so far.
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<StreamUsage>,
    /// An `error` event's error.
    #[serde(default)]
    error: Value,
}

#[derive(Debug, Deserialize)]
struct StartMessage {
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<StreamUsage>,
}

/// A `content_block_delta`'s delta (by its `type`) or a `message_delta`'s.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a delta (a JSON object)")]
struct StreamDelta {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Counts as a stream reports them, each in its own event.
#[derive(Debug, Deserialize)]
struct StreamUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

/// A streamed answer gathered so far.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    text: String,
    /// By `index`, the order of a whole answer's content.
    blocks: BTreeMap<u64, OpenBlock>,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

/// A block that has started.
#[derive(Debug)]
enum OpenBlock {
    Text,
    /// The call as its start gave it, and the input's JSON text so far.
    ToolUse(ToolCall, String),
    Other,
}

impl Stream {
    fn count(&mut self, usage: Option<StreamUsage>) {
        if let Some(usage) = usage {
            self.input_tokens = usage.input_tokens.or(self.input_tokens);
            self.output_tokens = usage.output_tokens.or(self.output_tokens);
        }
    }
}

impl StreamDecoder for Stream {
    fn event(&mut self, event: Sse, on_text: &mut dyn FnMut(&str)) -> Result<Flow, ModelError> {
        let Some(data) = event.data else {
            return Ok(Flow::More);
        };
        let event: StreamEvent = decode(data.as_bytes())?;
        let index = || {
            event
                .index
                .ok_or_else(|| ModelError::Malformed("index is missing".into()))
        };
        match event.kind.as_deref() {
            Some("message_start") => self.count(event.message.and_then(|m| m.usage)),
            Some("content_block_start") => {
                let index = index()?;
                let block = event
                    .content_block
                    .ok_or_else(|| ModelError::Malformed("content_block is missing".into()))?;
                let open = match block.read("content_block")? {
                    Block::Text(text) => {
                        on_text(&text);
                        self.text.push_str(&text);
                        OpenBlock::Text
                    }
                    Block::ToolUse(call) => OpenBlock::ToolUse(call, String::new()),
                    Block::Other => OpenBlock::Other,
                };
                if self.blocks.insert(index, open).is_some() {
                    let e = format!("content block {index} started twice");
                    return Err(ModelError::Malformed(e));
                }
            }
            Some("content_block_delta") => {
                let index = index()?;
                let delta = event
                    .delta
                    .ok_or_else(|| ModelError::Malformed("delta is missing".into()))?;
                let missing =
                    |field: &str| ModelError::Malformed(format!("delta.{field} is missing"));
                let block = self.blocks.get_mut(&index).ok_or_else(|| {
                    ModelError::Malformed(format!("content block {index} has not started"))
                })?;
                match (delta.kind.as_deref(), block) {
                    (Some("text_delta"), OpenBlock::Text) => {
                        let text = delta.text.ok_or_else(|| missing("text"))?;
                        on_text(&text);
                        self.text.push_str(&text);
                    }
                    (Some("input_json_delta"), OpenBlock::ToolUse(_, input)) => {
                        input.push_str(&delta.partial_json.ok_or_else(|| missing("partial_json"))?);
                    }
                    (Some(kind @ ("text_delta" | "input_json_delta")), _) => {
                        let e =
                            format!("a {kind} for content block {index}, which is not of its type");
                        return Err(ModelError::Malformed(e));
                    }
                    (None, _) => return Err(missing("type")),
                    // Thinking, signatures, citations: nothing the loop uses.
                    (Some(_), _) => {}
                }
            }
            Some("message_delta") => {
                if let Some(stop) = event.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(stop);
                }
                self.count(event.usage);
            }
            Some("message_stop") => return Ok(Flow::Done),
            Some("error") => return Err(error_event(&event.error)),
            // `ping`, `content_block_stop`, and types to come.
            Some(_) => {}
            None => return Err(ModelError::Malformed("type is missing".into())),
        }
        Ok(Flow::More)
    }

    fn finish(self, at_end: bool) -> Result<ModelResponse, ModelError> {
        // The stop reason comes last but for `message_stop`.
        if !at_end && self.stop_reason.is_none() {
            return Err(cut_short(
                "no message_delta with a stop_reason, no message_stop",
            ));
        }
        let mut tool_calls = Vec::new();
        for (index, block) in self.blocks {
            if let OpenBlock::ToolUse(mut call, input) = block {
                if !input.trim().is_empty() {
                    // As a whole answer's `input` is read: JSON, then text.
                    let value: Value = serde_json::from_str(&input).map_err(|e| {
                        ModelError::Malformed(format!(
                            "the input of content block {index} is not JSON ({e})"
                        ))
                    })?;
                    call.arguments = value.to_string();
                }
                tool_calls.push(call);
            }
        }
        Ok(ModelResponse {
            text: self.text,
            tool_calls,
            stop: stop_reason(self.stop_reason)?,
            usage: self.input_tokens.zip(self.output_tokens).map(
                |(input_tokens, output_tokens)| Usage {
                    input_tokens,
                    output_tokens,
                },
            ),
        })
    }

    fn whole(body: &[u8]) -> Result<ModelResponse, ModelError> {
        parse_response(body)
    }
}

/// An `error` event as the HTTP status its type stands for (the API's
/// error table), so an overloaded or rate-limited stream is retried as the
/// status would be; a type not in the table is a malformed answer.
fn error_event(error: &Value) -> ModelError {
    let status = match error.get("type").and_then(Value::as_str) {
        Some("invalid_request_error") => 400,
        Some("authentication_error") => 401,
        Some("billing_error") => 402,
        Some("permission_error") => 403,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("api_error") => 500,
        Some("timeout_error") => 504,
        Some("overloaded_error") => 529,
        _ => {
            return ModelError::Malformed(format!(
                "the stream sent an error event: {}",
                excerpt(error)
            ));
        }
    };
    status_with(
        status,
        format!("an error event in the stream: {}", excerpt(error)),
    )
}

#[async_trait]
impl Model for Anthropic {
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.ask(request, None).await
    }

    async fn complete_streaming(
        &self,
        request: ModelRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        self.ask(request, Some(on_text)).await
    }

    fn describe(&self) -> String {
        self.description()
    }
}

impl Anthropic {
    /// One answer; its text pieces go to `on_text` if someone sees them.
    async fn ask(
        &self,
        request: ModelRequest<'_>,
        on_text: Option<&TextSink<'_>>,
    ) -> Result<ModelResponse, ModelError> {
        let mut headers = HeaderMap::new();
        let key = HeaderValue::from_str(&self.api_key).map_err(|_| ModelError::InvalidApiKey)?;
        headers.insert("x-api-key", key);
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(Anthropic::API_VERSION),
        );
        let url = format!("{}/v1/messages", self.base_url);
        let endpoint = Endpoint {
            client: &self.client,
            url: &url,
            headers,
            settings: &self.settings,
            refused: &self.stream_refused,
        };
        ask::<Stream>(
            &endpoint,
            &self.request_body(request, true),
            &self.request_body(request, false),
            on_text,
        )
        .await
    }

    fn description(&self) -> String {
        format!("anthropic {} at {}", self.model, self.base_url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn result(call_id: &str, name: &str, content: &str, is_error: bool) -> Message {
        Message::ToolResult {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
            is_error,
        }
    }

    /// A prompt, a turn of text and a call, its result, a blank turn (left
    /// out), a turn of text, a hook's call (merged into that turn), its
    /// result, an empty prompt (left out) and the next prompt (merged with
    /// the result into one user turn).
    fn history() -> Vec<Message> {
        vec![
            Message::user("task"),
            Message::Assistant {
                text: "looking".into(),
                tool_calls: vec![call("t1", "todo__list", r#"{"all":true}"#)],
            },
            result("t1", "todo__list", "(empty)", false),
            Message::Assistant {
                text: " \n".into(),
                tool_calls: vec![],
            },
            Message::Assistant {
                text: "done".into(),
                tool_calls: vec![],
            },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("t2", "todo___Stop", "[1]")],
            },
            result("t2", "todo___Stop", "open items", true),
            Message::user(""),
            Message::user("go on"),
        ]
    }

    fn tools() -> Vec<ToolDef> {
        vec![ToolDef {
            name: "todo__list".into(),
            description: None,
            input_schema: json!({"type": "object"}),
        }]
    }

    fn body(messages: &[Message], tools: &[ToolDef]) -> Value {
        let model = Anthropic::new(
            Anthropic::DEFAULT_BASE_URL,
            "k".into(),
            "claude",
            HttpSettings::default(),
        )
        .with_max_tokens(1000);
        let request = ModelRequest {
            system: "sys",
            messages,
            tools,
        };
        // Streamed (the default), the request is the whole one and `stream`.
        let whole = serde_json::to_value(model.request_body(request, false)).unwrap();
        let mut streamed = whole.clone();
        streamed["stream"] = json!(true);
        assert_eq!(serde_json::to_value(model.body(request)).unwrap(), streamed);
        whole
    }

    fn parse(answer: Value) -> Result<ModelResponse, ModelError> {
        parse_response(answer.to_string().as_bytes())
    }

    fn malformed(answer: &str) -> String {
        match parse_response(answer.as_bytes()) {
            Err(ModelError::Malformed(e)) => e,
            other => panic!("not malformed: {other:?}"),
        }
    }

    // [P2]: roles alternate; arguments that are no object go as `{}`.
    #[test]
    fn a_request_with_tools_is_exactly_the_wire_format_p2() {
        let expected = json!({
            "model": "claude",
            "max_tokens": 1000,
            "system": "sys",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "task"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "looking"},
                    {"type": "tool_use", "id": "t1", "name": "todo__list", "input": {"all": true}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "(empty)", "is_error": false},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "done"},
                    {"type": "tool_use", "id": "t2", "name": "todo___Stop", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t2", "content": "open items", "is_error": true},
                    {"type": "text", "text": "go on"},
                ]},
            ],
            "tools": [{"name": "todo__list", "description": "", "input_schema": {"type": "object"}}],
        });
        assert_eq!(body(&history(), &tools()), expected);
    }

    // [V1]: the text is the one built from `serde_json::Value`s before the
    // typed format (keys sorted), byte for byte.
    #[test]
    fn a_request_without_tools_sends_tool_history_as_text_v1() {
        let expected = json!({
            "model": "claude",
            "max_tokens": 1000,
            "system": "sys",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "task"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "looking"},
                    {"type": "text", "text": "{\"tool_call\":{\"arguments\":\"{\\\"all\\\":true}\",\"id\":\"t1\",\"name\":\"todo__list\"}}"},
                ]},
                {"role": "user", "content": [
                    {"type": "text", "text": "{\"tool_result\":{\"content\":\"(empty)\",\"is_error\":false,\"name\":\"todo__list\",\"tool_use_id\":\"t1\"}}"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "done"},
                    {"type": "text", "text": "{\"tool_call\":{\"arguments\":\"[1]\",\"id\":\"t2\",\"name\":\"todo___Stop\"}}"},
                ]},
                {"role": "user", "content": [
                    {"type": "text", "text": "{\"tool_result\":{\"content\":\"open items\",\"is_error\":true,\"name\":\"todo___Stop\",\"tool_use_id\":\"t2\"}}"},
                    {"type": "text", "text": "go on"},
                ]},
            ],
        });
        assert_eq!(body(&history(), &[]), expected);
    }

    // Text blocks concatenate; tool_use blocks become calls with their input
    // as text (`{}` when absent, as sent otherwise); other blocks pass.
    #[test]
    fn an_answer_with_text_tool_use_and_usage_is_read() {
        let response = parse(json!({
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "let me "},
                {"type": "redacted_thinking", "data": "xyz"},
                {"type": "text", "text": "look"},
                {"type": "tool_use", "id": "tu1", "name": "a", "input": {"items": [1]}},
                {"type": "tool_use", "id": "tu2", "name": "b"},
                {"type": "tool_use", "id": "tu3", "name": "c", "input": null},
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"q": "x"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": u64::MAX, "output_tokens": 2},
        }))
        .unwrap();
        assert_eq!(
            response,
            ModelResponse {
                text: "let me look".into(),
                tool_calls: vec![
                    call("tu1", "a", r#"{"items":[1]}"#),
                    call("tu2", "b", "{}"),
                    call("tu3", "c", "null"),
                ],
                stop: StopReason::ToolUse,
                usage: Some(Usage {
                    input_tokens: u64::MAX,
                    output_tokens: 2
                }),
            }
        );
    }

    #[test]
    fn stop_reasons_map_by_word() {
        for (word, reason) in [
            ("end_turn", StopReason::EndTurn),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::MaxTokens),
            ("refusal", StopReason::Refusal),
            ("pause_turn", StopReason::Other("pause_turn".into())),
        ] {
            let stop = parse(json!({"content": [], "stop_reason": word})).map(|r| r.stop);
            assert_eq!(stop.ok(), Some(reason), "{word}");
        }
    }

    #[test]
    fn unknown_fields_are_ignored_and_bad_usage_is_none() {
        let response = parse(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "stop_sequence": null, "container": null,
            "content": [{"type": "text", "text": "hi", "citations": [{"type": "x"}]}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 0, "service_tier": "standard"},
        }))
        .unwrap();
        assert_eq!(
            (response.text.as_str(), response.usage),
            (
                "hi",
                Some(Usage {
                    input_tokens: 1,
                    output_tokens: 2
                })
            )
        );
        for usage in [
            json!(null),
            json!([1, 2]),
            json!({"output_tokens": 2}),
            json!({"input_tokens": "1", "output_tokens": 2}),
        ] {
            let response =
                parse(json!({"content": [], "stop_reason": "end_turn", "usage": usage})).unwrap();
            assert_eq!(response.usage, None, "{usage}");
        }
    }

    #[test]
    fn an_error_object_is_quoted() {
        let e = malformed(
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string(),
        );
        // The object's keys come in serde_json's map order, which a
        // workspace build changes (agent-client-protocol turns on
        // `preserve_order`): compare the quoted object as JSON.
        let quoted = e
            .strip_prefix("the API returned an error object: ")
            .unwrap_or_else(|| panic!("{e}"));
        assert_eq!(
            serde_json::from_str::<Value>(quoted).unwrap(),
            json!({"type": "overloaded_error", "message": "Overloaded"})
        );
        assert_eq!(
            malformed(r#"{"type": "error"}"#),
            "the API returned an error object: null"
        );
    }

    // The path names the field; the answer's start follows.
    #[test]
    fn a_wrongly_typed_field_is_named_by_its_path() {
        let answer = json!({"content": [
            {"type": "text", "text": "a"},
            {"type": "tool_use", "id": "t", "name": ["x"], "input": {}},
        ], "stop_reason": "tool_use"})
        .to_string();
        let e = malformed(&answer);
        assert!(
            e.starts_with(
                "content[1].name: invalid type: sequence, expected a string at line 1 column "
            ),
            "{e}"
        );
        let start: String = answer.chars().take(120).collect();
        assert!(e.ends_with(&format!("; the answer began {start:?}")), "{e}");
        for (answer, path) in [
            (
                json!({"content": [{"type": "text", "text": 5}]}),
                "content[0].text: invalid type: integer `5`, expected a string",
            ),
            (
                json!({"content": [{"type": 5}]}),
                "content[0].type: invalid type: integer `5`, expected a string",
            ),
            (
                json!({"content": [null]}),
                "content[0]: invalid type: null, expected a content block (a JSON object)",
            ),
            (
                json!({"content": "hi"}),
                "content: invalid type: string \"hi\", expected a sequence",
            ),
            (
                json!({"content": [], "stop_reason": false}),
                "stop_reason: invalid type: boolean `false`, expected a string",
            ),
            (
                json!(7),
                "invalid type: integer `7`, expected a Messages answer (a JSON object)",
            ),
        ] {
            let e = malformed(&answer.to_string());
            assert!(e.starts_with(path), "{e}");
        }
    }

    #[test]
    fn what_is_missing_is_named() {
        for (answer, e) in [
            (json!({"stop_reason": "end_turn"}), "content is missing"),
            (
                json!({"content": null, "stop_reason": "end_turn"}),
                "content is missing",
            ),
            (
                json!({"content": [{"text": "a"}]}),
                "content[0].type is missing",
            ),
            (
                json!({"content": [{"type": "text"}, {"type": "text"}]}),
                "content[0].text is missing",
            ),
            (
                json!({"content": [{"type": "text", "text": ""}, {"type": "tool_use", "name": "a"}]}),
                "content[1].id is missing",
            ),
            (
                json!({"content": [{"type": "tool_use", "id": "a", "name": null}]}),
                "content[0].name is missing",
            ),
            (json!({"content": []}), "stop_reason is missing"),
            (
                json!({"content": [], "stop_reason": null}),
                "stop_reason is missing",
            ),
        ] {
            assert_eq!(malformed(&answer.to_string()), e, "{answer}");
        }
    }

    /// Events as the API writes them: `event:` and `data:` of each.
    fn sse(events: &[Value]) -> String {
        events
            .iter()
            .map(|e| {
                format!(
                    "event: {}\ndata: {e}\n\n",
                    e["type"].as_str().unwrap_or("x")
                )
            })
            .collect()
    }

    async fn streamed(
        text: &str,
        cuts: &[usize],
    ) -> (Result<ModelResponse, ModelError>, Vec<String>) {
        crate::providers::http::read_cut::<Stream>(text, cuts).await
    }

    /// A thinking block, text in pieces of multi-byte characters, two
    /// tool_use blocks with their input in pieces (the second with none),
    /// pings, and the final counts.
    fn events() -> Vec<Value> {
        vec![
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "stop_reason": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ça "}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "va 🌍"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "tu1", "name": "a", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"é"}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\", \"n\": [1, 2]}"}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "tu2", "name": "b", "input": {}}}),
            json!({"type": "content_block_stop", "index": 3}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 15}}),
            json!({"type": "message_stop"}),
        ]
    }

    // Wherever the server's writes cut the bytes, the stream reads as the
    // whole answer does, and the pieces delivered make its text.
    #[tokio::test]
    async fn a_stream_reads_as_the_whole_answer_wherever_it_is_cut() {
        let whole = parse(json!({
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "ça va 🌍"},
                {"type": "tool_use", "id": "tu1", "name": "a", "input": {"path": "é", "n": [1, 2]}},
                {"type": "tool_use", "id": "tu2", "name": "b", "input": {}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 25, "output_tokens": 15},
        }))
        .unwrap();
        let text = sse(&events());
        crate::providers::http::assert_reads_whole_wherever_cut::<Stream>(
            &text,
            &whole,
            &["ça ", "va 🌍"],
        )
        .await;
    }

    #[tokio::test]
    async fn a_stream_cut_midway_is_an_error() {
        let (answer, pieces) = streamed(&sse(&events()[..13]), &[]).await;
        assert!(
            matches!(&answer, Err(ModelError::Interrupted(e)) if e ==
                "the stream ended before the answer was complete (no message_delta with a stop_reason, no message_stop)"),
            "{answer:?}"
        );
        assert_eq!(pieces.concat(), "ça va 🌍");
        // Closed after the stop reason, before message_stop: whole.
        let (answer, _) = streamed(&sse(&events()[..18]), &[]).await;
        assert_eq!(answer.unwrap().stop, StopReason::ToolUse);
    }

    #[tokio::test]
    async fn an_error_event_is_the_status_of_its_type() {
        let mut events = events()[..8].to_vec();
        events.push(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
        let (answer, _) = streamed(&sse(&events), &[]).await;
        let Err(ModelError::Status { status: 529, body }) = answer else {
            panic!("{answer:?}");
        };
        assert!(body.starts_with("an error event in the stream: "), "{body}");
        assert!(body.contains("Overloaded"), "{body}");
        let (answer, _) = streamed(
            &sse(&[json!({"type": "error", "error": {"type": "new_error"}})]),
            &[],
        )
        .await;
        let Err(ModelError::Malformed(e)) = answer else {
            panic!("{answer:?}");
        };
        assert!(
            e.starts_with("stream event 1: the stream sent an error event: "),
            "{e}"
        );
    }

    // A bad event is named by its number and the JSON path in it, or by
    // what it lacks.
    #[tokio::test]
    async fn a_malformed_event_is_named_by_event_and_path() {
        let malformed = |events: Vec<Value>| async move {
            match streamed(&sse(&events), &[]).await.0 {
                Err(ModelError::Malformed(e)) => e,
                other => panic!("{other:?}"),
            }
        };
        let start = events()[0].clone();
        let e = malformed(vec![start.clone(), json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": ["x"]}})]).await;
        assert!(
            e.starts_with(
                "stream event 2: content_block.name: invalid type: sequence, expected a string"
            ),
            "{e}"
        );
        let e = malformed(vec![json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "name": "x"}})]).await;
        assert_eq!(e, "stream event 1: content_block.id is missing");
        let e = malformed(vec![json!({"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta", "text": "a"}})]).await;
        assert_eq!(e, "stream event 1: content block 4 has not started");
        let e = malformed(vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}),
        ])
        .await;
        assert_eq!(
            e,
            "stream event 2: a input_json_delta for content block 0, which is not of its type"
        );
        let e = malformed(vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "x", "input": {}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
            json!({"type": "message_stop"}),
        ])
        .await;
        assert!(
            e.starts_with("the input of content block 0 is not JSON ("),
            "{e}"
        );
        let e = malformed(vec![json!({"type": "message_stop"})]).await;
        assert_eq!(e, "stop_reason is missing");
    }
}
