//! OpenAI-compatible Chat Completions: OpenAI, Ollama, vLLM, llama.cpp,
//! OpenRouter and the rest that speak `POST {base}/chat/completions`.
//!
//! Hook pairs go as an assistant message with `tool_calls` and a `tool`
//! message \[I1\]. When a request offers no tools, tool history is sent as JSON
//! text instead (user messages in the tool-result position) \[V1\], since some
//! servers refuse tool-call history without tool definitions.
//!
//! The wire format is typed by private serde types: a `Request` borrows from
//! the history, and an answer decodes as an `Answer`, with errors that name
//! the JSON path of what was wrong. The answer's parts (`AnswerMessage`,
//! `AnswerToolCall`) have every field optional, checked after decoding, so a
//! streamed `delta`, which carries the same fields piece by piece, decodes
//! as them too.
//!
//! Streamed (`stream: true`, with `stream_options.include_usage` for the
//! final usage chunk), each `data:` event is a `Chunk`; `Stream` gathers
//! the text, the tool calls by their `index` (their pieces may interleave),
//! the finish reason and the usage into the response the whole answer would
//! give, until `data: [DONE]`.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use async_trait::async_trait;
use hooks_core::StopReason;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::http::{
    Endpoint, Flow, HttpSettings, StreamDecoder, ask, cut_short, excerpt, status_with,
};
use super::wire::{JsonText, ToolCallText, decode, lenient, null_as_default};
use crate::gateway::ToolDef;
use crate::message::{Message, ToolCall};
use crate::model::{Model, ModelError, ModelRequest, ModelResponse, TextSink, Usage};
use sse_stream::Sse;

/// A Chat Completions endpoint.
#[derive(Debug)]
pub struct OpenAiCompat {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    settings: HttpSettings,
    /// Set once the server refused to stream.
    stream_refused: AtomicBool,
}

impl OpenAiCompat {
    /// The default base URL.
    pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
    /// A client for `model` at `base_url` (e.g. `http://localhost:11434/v1`).
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        model: &str,
        settings: HttpSettings,
    ) -> OpenAiCompat {
        OpenAiCompat {
            client: super::http::client(base_url),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model: model.to_owned(),
            max_tokens: None,
            temperature: None,
            settings,
            stream_refused: AtomicBool::new(false),
        }
    }

    /// Caps the answer's length.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> OpenAiCompat {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// The sampling temperature (the server's default unless set).
    pub fn with_temperature(mut self, temperature: f32) -> OpenAiCompat {
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
        let mut messages = vec![RequestMessage::System {
            content: request.system,
        }];
        messages.extend(request.messages.iter().map(|message| match message {
            Message::User { text } => RequestMessage::User {
                content: UserContent::Text(text),
            },
            Message::Assistant { text, tool_calls } if tools_offered && !tool_calls.is_empty() => {
                RequestMessage::Assistant {
                    // `""`, never `null` or absent, for a turn of tool calls
                    // only: llama.cpp-based servers refuse both [V2].
                    content: AssistantContent { text, calls: &[] },
                    tool_calls: tool_calls.iter().map(RequestToolCall::new).collect(),
                }
            }
            // [V1] fallback: tool calls as JSON text.
            Message::Assistant { text, tool_calls } => RequestMessage::Assistant {
                content: AssistantContent {
                    text,
                    calls: tool_calls,
                },
                tool_calls: Vec::new(),
            },
            Message::ToolResult {
                call_id, content, ..
            } if tools_offered => RequestMessage::Tool {
                tool_call_id: call_id,
                content,
            },
            Message::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => RequestMessage::User {
                content: UserContent::ToolResult(JsonText(ToolResultText {
                    tool_result: ToolResultFields {
                        content,
                        is_error: *is_error,
                        name,
                        tool_call_id: call_id,
                    },
                })),
            },
        }));
        // OpenAI's own API wants max_completion_tokens (its reasoning models
        // refuse max_tokens); compatible servers know max_tokens.
        let (max_tokens, max_completion_tokens) = match self.max_tokens {
            Some(max) if self.base_url.contains("api.openai.com") => (None, Some(max)),
            max => (max, None),
        };
        Request {
            model: &self.model,
            messages,
            tools: request.tools.iter().map(RequestTool::new).collect(),
            tool_choice: tools_offered.then_some("auto"),
            max_tokens,
            max_completion_tokens,
            temperature: self.temperature,
            stream,
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
        }
    }
}

/// A Chat Completions request.
#[derive(Debug, Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: Vec<RequestMessage<'a>>,
    /// Absent when no tool is offered \[V1\].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<RequestTool<'a>>,
    /// `"auto"` whenever tools are offered: OpenAI's own default, but some
    /// servers (llama-cpp-python's function-calling formats) leave the
    /// tools out of the prompt without it \[V2\].
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    /// Absent for a whole answer.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

/// Asks for the usage chunk at a stream's end.
#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One message of a request.
#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum RequestMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        /// `""` for a turn of tool calls only \[V2\].
        content: AssistantContent<'a>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<RequestToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A user message's text: the person's, or a tool result as JSON text \[V1\].
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(&'a str),
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
    tool_call_id: &'a str,
}

/// An assistant message's text, then each of `calls` as JSON text on a line
/// of its own \[V1\] (none when the calls go as `tool_calls`).
#[derive(Debug)]
struct AssistantContent<'a> {
    text: &'a str,
    calls: &'a [ToolCall],
}

impl Serialize for AssistantContent<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.calls.is_empty() {
            return serializer.serialize_str(self.text);
        }
        let mut content = self.text.to_owned();
        for call in self.calls {
            if !content.is_empty() {
                content.push('\n');
            }
            let text = serde_json::to_string(&ToolCallText::new(call))
                .map_err(serde::ser::Error::custom)?;
            content.push_str(&text);
        }
        serializer.serialize_str(&content)
    }
}

/// A tool call in an assistant message.
#[derive(Debug, Serialize)]
struct RequestToolCall<'a> {
    id: &'a str,
    /// Always `"function"`.
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionCall<'a>,
}

#[derive(Debug, Serialize)]
struct FunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl<'a> RequestToolCall<'a> {
    fn new(call: &'a ToolCall) -> RequestToolCall<'a> {
        RequestToolCall {
            id: &call.id,
            kind: "function",
            function: FunctionCall {
                name: &call.name,
                arguments: &call.arguments,
            },
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Serialize)]
struct RequestTool<'a> {
    /// Always `"function"`.
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDef<'a>,
}

#[derive(Debug, Serialize)]
struct FunctionDef<'a> {
    name: &'a str,
    /// Empty when the tool has none.
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> RequestTool<'a> {
    fn new(tool: &'a ToolDef) -> RequestTool<'a> {
        RequestTool {
            kind: "function",
            function: FunctionDef {
                name: &tool.name,
                description: tool.description.as_deref().unwrap_or_default(),
                parameters: &tool.input_schema,
            },
        }
    }
}

/// A Chat Completions answer. Unknown fields are ignored, here and below.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a Chat Completions answer (a JSON object)")]
struct Answer {
    /// Only the first is read; `null` or absent reads as none.
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    /// Usage that is not two counts is no usage: servers vary.
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<AnswerUsage>,
}

/// One choice of an answer.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a choice (a JSON object)")]
struct Choice {
    /// `null` reads as a message with nothing in it.
    #[serde(default, deserialize_with = "null_as_default")]
    message: Option<AnswerMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// An answer's message (a streamed chunk's `delta` has the same fields).
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a message (a JSON object)")]
struct AnswerMessage {
    #[serde(default)]
    content: Option<String>,
    /// Any value but `null` is a refusal, whatever its type.
    #[serde(default)]
    refusal: Option<IgnoredAny>,
    #[serde(default)]
    tool_calls: Option<Vec<AnswerToolCall>>,
}

/// A tool call in an answer (in a streamed `delta` too, where the id and the
/// name come in the first piece only).
#[derive(Debug, Deserialize)]
#[serde(expecting = "a tool call (a JSON object)")]
struct AnswerToolCall {
    /// Which call a streamed piece belongs to; not read in a whole answer.
    #[serde(default, deserialize_with = "lenient")]
    index: Option<u64>,
    /// Some compatible servers leave the id out, or send no string.
    #[serde(default, deserialize_with = "lenient")]
    id: Option<String>,
    /// `null` reads as a function with no name, which is named as missing.
    #[serde(default, deserialize_with = "null_as_default")]
    function: Option<AnswerFunction>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a function call (a JSON object)")]
struct AnswerFunction {
    #[serde(default)]
    name: Option<String>,
    /// JSON text, as the API specifies; some servers send the object itself.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct AnswerUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

impl AnswerToolCall {
    /// The call, or what is missing from it; `at` is its path.
    fn into_tool_call(self, at: &str) -> Result<ToolCall, ModelError> {
        let function = self
            .function
            .ok_or_else(|| ModelError::Malformed(format!("{at}.function is missing")))?;
        let name = function
            .name
            .ok_or_else(|| ModelError::Malformed(format!("{at}.function.name is missing")))?;
        Ok(ToolCall {
            // The history needs an id.
            id: self
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(fresh_call_id),
            name,
            arguments: match function.arguments {
                Some(Value::String(s)) => s,
                None => "{}".to_owned(),
                Some(other) => other.to_string(),
            },
        })
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

/// Reads a Chat Completions answer from its body.
pub(crate) fn parse_response(body: &[u8]) -> Result<ModelResponse, ModelError> {
    let answer: Answer = decode(body)?;
    let choice = answer
        .choices
        .and_then(|choices| choices.into_iter().next())
        .ok_or_else(|| ModelError::Malformed("choices[0] is missing".into()))?;
    let message = choice
        .message
        .ok_or_else(|| ModelError::Malformed("choices[0].message is missing".into()))?;
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, call)| call.into_tool_call(&format!("choices[0].message.tool_calls[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ModelResponse {
        text: message.content.unwrap_or_default(),
        tool_calls,
        stop: stop_reason(message.refusal.is_some(), choice.finish_reason.as_deref())?,
        usage: answer.usage.map(AnswerUsage::read),
    })
}

/// The stop reason, mapped explicitly \[S1\]: a refusal wins.
fn stop_reason(refused: bool, finish_reason: Option<&str>) -> Result<StopReason, ModelError> {
    Ok(match finish_reason {
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
    })
}

impl AnswerUsage {
    fn read(self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
        }
    }
}

/// One streamed chunk: the `data:` of an event. Unknown fields are ignored.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a Chat Completions chunk (a JSON object)")]
struct Chunk {
    /// Only the first is read; the usage chunk has none.
    #[serde(default)]
    choices: Option<Vec<ChunkChoice>>,
    /// `null` in every chunk but the last, which `include_usage` asks for.
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<AnswerUsage>,
    /// What some servers send in place of a chunk when they fail midway.
    #[serde(default)]
    error: Option<Value>,
}

/// One choice of a chunk.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a choice (a JSON object)")]
struct ChunkChoice {
    #[serde(default, deserialize_with = "null_as_default")]
    delta: Option<AnswerMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// A streamed answer gathered so far.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    text: String,
    refused: bool,
    /// By `index`, which orders them as a whole answer's list.
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<AnswerUsage>,
    /// Whether any chunk had a `choices[0]`.
    chosen: bool,
}

/// A tool call's pieces so far.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
}

impl Stream {
    /// Adds a piece of a tool call. The id and the name come in the first
    /// piece (a server that repeats them is read the same); the arguments'
    /// text is the pieces' in order. A piece without an `index` starts a
    /// call if it has an id or a name and goes on the last one otherwise.
    fn add_call(&mut self, piece: AnswerToolCall) {
        let last = self.calls.keys().next_back().copied();
        let function = piece.function.unwrap_or_default();
        let key = match piece.index {
            Some(index) => index,
            None if piece.id.is_some() || function.name.is_some() => last.map_or(0, |k| k + 1),
            None => last.unwrap_or(0),
        };
        let call = self.calls.entry(key).or_default();
        if call.id.as_deref().is_none_or(str::is_empty) {
            call.id = piece.id.or(call.id.take());
        }
        if call.name.is_none() {
            call.name = function.name;
        }
        let more = match function.arguments {
            None | Some(Value::Null) => return,
            Some(Value::String(text)) => text,
            Some(other) => other.to_string(),
        };
        call.arguments.get_or_insert_default().push_str(&more);
    }
}

impl StreamDecoder for Stream {
    fn event(&mut self, event: Sse, on_text: &mut dyn FnMut(&str)) -> Result<Flow, ModelError> {
        let Some(data) = event.data else {
            return Ok(Flow::More);
        };
        if data.trim() == "[DONE]" {
            return Ok(Flow::Done);
        }
        if event.event.as_deref() == Some("error") {
            let error: Value = decode(data.as_bytes())?;
            return Err(error_event(error.get("error").unwrap_or(&error)));
        }
        let chunk: Chunk = decode(data.as_bytes())?;
        if let Some(error) = &chunk.error {
            return Err(error_event(error));
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let Some(choice) = chunk.choices.and_then(|choices| choices.into_iter().next()) else {
            return Ok(Flow::More);
        };
        self.chosen = true;
        if let Some(delta) = choice.delta {
            if let Some(text) = delta.content {
                on_text(&text);
                self.text.push_str(&text);
            }
            self.refused |= delta.refusal.is_some();
            for piece in delta.tool_calls.unwrap_or_default() {
                self.add_call(piece);
            }
        }
        if choice.finish_reason.is_some() {
            self.finish_reason = choice.finish_reason;
        }
        Ok(Flow::More)
    }

    fn finish(self, at_end: bool) -> Result<ModelResponse, ModelError> {
        // The finish reason says the answer is whole; the usage chunk and
        // `[DONE]` may follow it, and a server may close without `[DONE]`.
        if !at_end && self.finish_reason.is_none() {
            return Err(cut_short("no finish_reason and no [DONE]"));
        }
        if !self.chosen {
            return Err(ModelError::Malformed("no chunk had a choices[0]".into()));
        }
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| {
                AnswerToolCall {
                    index: None,
                    id: call.id,
                    function: Some(AnswerFunction {
                        name: call.name,
                        arguments: call.arguments.map(Value::String),
                    }),
                }
                .into_tool_call(&format!("the tool call of index {index}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ModelResponse {
            text: self.text,
            tool_calls,
            stop: stop_reason(self.refused, self.finish_reason.as_deref())?,
            usage: self.usage.map(AnswerUsage::read),
        })
    }

    fn whole(body: &[u8]) -> Result<ModelResponse, ModelError> {
        parse_response(body)
    }
}

/// An error the server sent in the stream, as the status it names (its
/// `code` when that is one, 400 for `context_length_exceeded` \[V3\], else
/// 500: the server failed midway).
fn error_event(error: &Value) -> ModelError {
    let code = error.get("code");
    let status = match code.and_then(Value::as_u64) {
        Some(code) if (400..600).contains(&code) => code as u16,
        _ if code.and_then(Value::as_str) == Some("context_length_exceeded") => 400,
        _ => 500,
    };
    status_with(
        status,
        format!("an error event in the stream: {}", excerpt(error)),
    )
}

#[async_trait]
impl Model for OpenAiCompat {
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

impl OpenAiCompat {
    /// One answer; its text pieces go to `on_text` if someone sees them.
    async fn ask(
        &self,
        request: ModelRequest<'_>,
        on_text: Option<&TextSink<'_>>,
    ) -> Result<ModelResponse, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| ModelError::InvalidApiKey)?;
            headers.insert(AUTHORIZATION, value);
        }
        let url = format!("{}/chat/completions", self.base_url);
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
        format!("openai-compatible {} at {}", self.model, self.base_url)
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

    /// Text, a turn of text and a call, its result, a turn of calls only, an
    /// error result, and a reply.
    fn history() -> Vec<Message> {
        vec![
            Message::user("build it"),
            Message::Assistant {
                text: "reading".into(),
                tool_calls: vec![call("c1", "todo__list", r#"{"all":true}"#)],
            },
            Message::ToolResult {
                call_id: "c1".into(),
                name: "todo__list".into(),
                content: "(empty)".into(),
                is_error: false,
            },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("c2", "todo__add", "not json")],
            },
            Message::ToolResult {
                call_id: "c2".into(),
                name: "todo__add".into(),
                content: "bad arguments".into(),
                is_error: true,
            },
            Message::Assistant {
                text: "done".into(),
                tool_calls: vec![],
            },
        ]
    }

    fn tools() -> Vec<ToolDef> {
        vec![
            ToolDef {
                name: "todo__list".into(),
                description: Some("the list".into()),
                input_schema: json!({"type": "object", "properties": {"all": {"type": "boolean"}}}),
            },
            ToolDef {
                name: "todo__add".into(),
                description: None,
                input_schema: json!({"type": "object"}),
            },
        ]
    }

    fn body(model: &OpenAiCompat, messages: &[Message], tools: &[ToolDef]) -> Value {
        let request = ModelRequest {
            system: "sys",
            messages,
            tools,
        };
        // Streamed (the default), the request is the whole one with the
        // streaming fields.
        let whole = serde_json::to_value(model.request_body(request, false)).unwrap();
        let mut streamed = whole.clone();
        streamed["stream"] = json!(true);
        streamed["stream_options"] = json!({"include_usage": true});
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

    #[test]
    fn a_request_with_tools_is_exactly_the_wire_format() {
        let model = OpenAiCompat::new(
            "http://localhost:11434/v1",
            None,
            "m",
            HttpSettings::default(),
        )
        .with_max_tokens(100)
        .with_temperature(0.0);
        let expected = json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "build it"},
                {"role": "assistant", "content": "reading", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "todo__list", "arguments": "{\"all\":true}"}},
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "(empty)"},
                // [V2]: "" for a turn of calls only, never null.
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c2", "type": "function", "function": {"name": "todo__add", "arguments": "not json"}},
                ]},
                {"role": "tool", "tool_call_id": "c2", "content": "bad arguments"},
                {"role": "assistant", "content": "done"},
            ],
            "tools": [
                {"type": "function", "function": {"name": "todo__list", "description": "the list", "parameters": {"type": "object", "properties": {"all": {"type": "boolean"}}}}},
                {"type": "function", "function": {"name": "todo__add", "description": "", "parameters": {"type": "object"}}},
            ],
            // [V2]: said, whenever tools are offered.
            "tool_choice": "auto",
            "max_tokens": 100,
            "temperature": 0.0,
        });
        assert_eq!(body(&model, &history(), &tools()), expected);
    }

    // [V1]: the text is the one built from `serde_json::Value`s before the
    // typed format (keys sorted), byte for byte.
    #[test]
    fn a_request_without_tools_sends_tool_history_as_text_v1() {
        let model = OpenAiCompat::new(
            OpenAiCompat::DEFAULT_BASE_URL,
            None,
            "gpt",
            HttpSettings::default(),
        )
        .with_max_tokens(7);
        let expected = json!({
            "model": "gpt",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "build it"},
                {"role": "assistant", "content": "reading\n{\"tool_call\":{\"arguments\":\"{\\\"all\\\":true}\",\"id\":\"c1\",\"name\":\"todo__list\"}}"},
                {"role": "user", "content": "{\"tool_result\":{\"content\":\"(empty)\",\"is_error\":false,\"name\":\"todo__list\",\"tool_call_id\":\"c1\"}}"},
                {"role": "assistant", "content": "{\"tool_call\":{\"arguments\":\"not json\",\"id\":\"c2\",\"name\":\"todo__add\"}}"},
                {"role": "user", "content": "{\"tool_result\":{\"content\":\"bad arguments\",\"is_error\":true,\"name\":\"todo__add\",\"tool_call_id\":\"c2\"}}"},
                {"role": "assistant", "content": "done"},
            ],
            // OpenAI's own API gets the newer name.
            "max_completion_tokens": 7,
        });
        assert_eq!(body(&model, &history(), &[]), expected);
    }

    #[test]
    fn an_answer_with_text_calls_and_usage_is_read() {
        let response = parse(json!({
            "choices": [{"message": {"content": "looking", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{\"x\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "b", "arguments": {"y": [2]}}},
                {"id": "c3", "type": "function", "function": {"name": "c", "arguments": null}},
                {"id": "c4", "type": "function", "function": {"name": "d"}},
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": u64::MAX, "completion_tokens": 3},
        }))
        .unwrap();
        assert_eq!(
            response,
            ModelResponse {
                text: "looking".into(),
                tool_calls: vec![
                    call("c1", "a", r#"{"x":1}"#),
                    call("c2", "b", r#"{"y":[2]}"#),
                    call("c3", "c", "{}"),
                    call("c4", "d", "{}"),
                ],
                stop: StopReason::ToolUse,
                usage: Some(Usage {
                    input_tokens: u64::MAX,
                    output_tokens: 3
                }),
            }
        );
    }

    #[test]
    fn stop_reasons_map_explicitly_and_a_refusal_wins() {
        let stop = |message: Value, finish: Value| {
            parse(json!({"choices": [{"message": message, "finish_reason": finish}]}))
                .map(|r| r.stop)
        };
        let text = json!({"content": "x"});
        for (word, reason) in [
            ("stop", StopReason::EndTurn),
            ("tool_calls", StopReason::ToolUse),
            ("function_call", StopReason::ToolUse),
            ("length", StopReason::MaxTokens),
            ("content_filter", StopReason::ContentFilter),
            ("eos", StopReason::Other("eos".into())),
        ] {
            assert_eq!(stop(text.clone(), json!(word)).ok(), Some(reason), "{word}");
        }
        // Any refusal that is not null, even with no finish reason.
        for refusal in [json!("no"), json!({"why": 1}), json!(0)] {
            let message = json!({"content": null, "refusal": refusal});
            assert_eq!(
                stop(message.clone(), json!("stop")).ok(),
                Some(StopReason::Refusal)
            );
            assert_eq!(stop(message, Value::Null).ok(), Some(StopReason::Refusal));
        }
        assert_eq!(
            stop(json!({"content": "x", "refusal": null}), json!("stop")).ok(),
            Some(StopReason::EndTurn)
        );
    }

    // What the current servers leave out or send as null reads as nothing.
    #[test]
    fn missing_and_null_optional_fields_are_read_leniently() {
        let response = parse(json!({"choices": [{"message": {"content": null, "tool_calls": null}, "finish_reason": "stop"}]})).unwrap();
        assert_eq!((response.text.as_str(), response.tool_calls.len()), ("", 0));
        assert_eq!(response.usage, None);
        let response =
            parse(json!({"choices": [{"message": null, "finish_reason": "stop"}]})).unwrap();
        assert_eq!(response.text, "");
        let response =
            parse(json!({"choices": [{"message": {}, "finish_reason": "stop"}]})).unwrap();
        assert_eq!(response.text, "");
        // Usage that is not two counts is no usage, not an error.
        for usage in [
            json!(null),
            json!("lots"),
            json!({"prompt_tokens": 1}),
            json!({"prompt_tokens": -1, "completion_tokens": 2}),
            json!({"prompt_tokens": 1.5, "completion_tokens": 2}),
            json!({"prompt_tokens": 1e30, "completion_tokens": 2}),
        ] {
            let response = parse(json!({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], "usage": usage})).unwrap();
            assert_eq!(response.usage, None, "{usage}");
        }
    }

    #[test]
    fn a_call_without_a_usable_id_gets_a_fresh_one() {
        let response = parse(json!({"choices": [{"message": {"tool_calls": [
            {"function": {"name": "a"}},
            {"id": "", "function": {"name": "b"}},
            {"id": 7, "function": {"name": "c"}},
            {"id": null, "function": {"name": "d"}},
        ]}, "finish_reason": "tool_calls"}]}))
        .unwrap();
        let ids: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert!(
            ids.iter().all(|id| id.starts_with("sprout-call-")),
            "{ids:?}"
        );
        let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(unique.len(), 4, "{ids:?}");
    }

    #[test]
    fn unknown_fields_are_ignored_at_every_level() {
        let response = parse(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "system_fingerprint": null, "service_tier": "default",
            "choices": [{"index": 0, "logprobs": null, "extra": [1, 2], "finish_reason": "stop",
                "message": {"role": "assistant", "content": "hi", "annotations": [], "audio": null, "reasoning_content": "hmm",
                    "tool_calls": [{"id": "c", "type": "function", "index": 0, "function": {"name": "f", "arguments": "{}", "strict": true}}]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}},
        }))
        .unwrap();
        assert_eq!(
            response,
            ModelResponse {
                text: "hi".into(),
                tool_calls: vec![call("c", "f", "{}")],
                stop: StopReason::EndTurn,
                usage: Some(Usage {
                    input_tokens: 1,
                    output_tokens: 2
                }),
            }
        );
    }

    // The path names the field; the answer's start follows.
    #[test]
    fn a_wrongly_typed_field_is_named_by_its_path() {
        let answer = json!({"choices": [{"message": {"tool_calls": [
            {"id": "c1", "function": {"name": "a", "arguments": "{}"}},
            {"id": "c2", "function": {"name": 5, "arguments": "{}"}},
        ]}, "finish_reason": "tool_calls"}]})
        .to_string();
        let e = malformed(&answer);
        assert!(
            e.starts_with("choices[0].message.tool_calls[1].function.name: invalid type: integer `5`, expected a string at line 1 column "),
            "{e}"
        );
        let start: String = answer.chars().take(120).collect();
        assert!(e.ends_with(&format!("; the answer began {start:?}")), "{e}");
        for (answer, path) in [
            (
                json!({"choices": [{"message": {"content": ["a", "b"]}, "finish_reason": "stop"}]}),
                "choices[0].message.content: invalid type: sequence, expected a string",
            ),
            (
                json!({"choices": [{"message": {"tool_calls": {"id": "c"}}, "finish_reason": "stop"}]}),
                "choices[0].message.tool_calls: invalid type: map, expected a sequence",
            ),
            (
                json!({"choices": [{"message": {"content": "x"}, "finish_reason": 1}]}),
                "choices[0].finish_reason: invalid type: integer `1`, expected a string",
            ),
            (
                json!({"choices": [{"message": {"tool_calls": [7]}}]}),
                "choices[0].message.tool_calls[0]: invalid type: integer `7`, expected a tool call (a JSON object)",
            ),
            (
                json!({"choices": "none"}),
                "choices: invalid type: string \"none\", expected a sequence",
            ),
            (
                json!("choices"),
                "invalid type: string \"choices\", expected a Chat Completions answer (a JSON object)",
            ),
            (
                json!(["choices"]),
                "the answer is a JSON array, not an object: \"[\\\"choices\\\"]\"",
            ),
        ] {
            let e = malformed(&answer.to_string());
            assert!(e.starts_with(path), "{e}");
        }
    }

    #[test]
    fn what_is_missing_is_named() {
        for (answer, e) in [
            (json!({}), "choices[0] is missing"),
            (json!({"choices": null}), "choices[0] is missing"),
            (json!({"choices": []}), "choices[0] is missing"),
            (
                json!({"choices": [{"finish_reason": "stop"}]}),
                "choices[0].message is missing",
            ),
            (
                json!({"choices": [{"message": {"tool_calls": [{"id": "x"}]}, "finish_reason": "tool_calls"}]}),
                "choices[0].message.tool_calls[0].function is missing",
            ),
            (
                json!({"choices": [{"message": {"tool_calls": [{"id": "x", "function": {}}]}, "finish_reason": "tool_calls"}]}),
                "choices[0].message.tool_calls[0].function.name is missing",
            ),
            (
                json!({"choices": [{"message": {"tool_calls": [{"id": "x", "function": null}]}, "finish_reason": "tool_calls"}]}),
                "choices[0].message.tool_calls[0].function.name is missing",
            ),
            (
                json!({"choices": [{"message": {"content": "x"}}]}),
                "choices[0].finish_reason is missing",
            ),
            (
                json!({"choices": [{"message": {"content": "x"}, "finish_reason": null}]}),
                "choices[0].finish_reason is missing",
            ),
        ] {
            assert_eq!(malformed(&answer.to_string()), e, "{answer}");
        }
    }

    #[test]
    fn a_body_that_is_not_json_says_so() {
        for body in ["<html>", "", "{\"choices\": [", "{} {}"] {
            let e = malformed(body);
            assert!(e.starts_with("the body is not JSON ("), "{e}");
            assert!(e.ends_with(&format!("): {body:?}")), "{e}");
        }
    }

    /// `data:` events of `chunks`, as a server writes them.
    fn sse(chunks: &[Value]) -> String {
        let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        text.push_str("data: [DONE]\n\n");
        text
    }

    async fn streamed(
        text: &str,
        cuts: &[usize],
    ) -> (Result<ModelResponse, ModelError>, Vec<String>) {
        crate::providers::http::read_cut::<Stream>(text, cuts).await
    }

    /// Text with characters of two to four bytes, and two tool calls whose
    /// pieces interleave by index (the second starts before the first's
    /// arguments end), then the finish reason and the usage chunk.
    fn interleaved() -> Vec<Value> {
        vec![
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": null}, "finish_reason": null}], "usage": null}),
            json!({"choices": [{"index": 0, "delta": {"content": "héllo "}, "finish_reason": null}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "wörld 🌍"}, "finish_reason": null}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "a", "arguments": ""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "b", "arguments": "{\"q\":"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "th\":\"é\"}"}}, {"index": 1, "function": {"arguments": "[1]}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}),
        ]
    }

    // Wherever the server's writes cut the bytes (inside a character, a
    // line, an event), the stream reads as the whole answer does, and the
    // pieces delivered make its text.
    #[tokio::test]
    async fn a_stream_reads_as_the_whole_answer_wherever_it_is_cut() {
        let whole = parse(json!({
            "choices": [{"message": {"content": "héllo wörld 🌍", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{\"path\":\"é\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{\"q\":[1]}"}},
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4},
        }))
        .unwrap();
        let text = sse(&interleaved());
        crate::providers::http::assert_reads_whole_wherever_cut::<Stream>(
            &text,
            &whole,
            &["héllo ", "wörld 🌍"],
        )
        .await;
    }

    // A server that sends each call whole without an index, and no [DONE].
    #[tokio::test]
    async fn calls_without_an_index_and_a_close_without_done_read() {
        let chunks = [
            json!({"choices": [{"delta": {"tool_calls": [{"id": "x", "function": {"name": "a", "arguments": "{}"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"id": "y", "function": {"name": "b", "arguments": {"k": 1}}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        ];
        let text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        let (answer, _) = streamed(&text, &[]).await;
        let answer = answer.unwrap();
        assert_eq!(
            answer.tool_calls,
            [call("x", "a", "{}"), call("y", "b", r#"{"k":1}"#)]
        );
        assert_eq!((answer.stop, answer.usage), (StopReason::ToolUse, None));
    }

    // Cut before the finish reason: an error, never a shorter answer.
    #[tokio::test]
    async fn a_stream_cut_midway_is_an_error() {
        let chunks = &interleaved()[..5];
        let text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        let (answer, pieces) = streamed(&text, &[]).await;
        assert!(
            matches!(&answer, Err(ModelError::Interrupted(e)) if e ==
                "the stream ended before the answer was complete (no finish_reason and no [DONE])"),
            "{answer:?}"
        );
        assert_eq!(pieces.concat(), "héllo wörld 🌍");
        // [DONE] without a finish reason is what a whole answer without one is.
        let (answer, _) = streamed(&sse(&interleaved()[..5]), &[]).await;
        assert!(
            matches!(&answer, Err(ModelError::Malformed(e)) if e == "choices[0].finish_reason is missing"),
            "{answer:?}"
        );
    }

    // A bad chunk is named by its event and the JSON path in it.
    #[tokio::test]
    async fn a_malformed_chunk_is_named_by_event_and_path() {
        let text = sse(&[
            json!({"choices": [{"delta": {"content": "a"}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": 5}}]}}]}),
        ]);
        let (answer, _) = streamed(&text, &[]).await;
        let Err(ModelError::Malformed(e)) = answer else {
            panic!("{answer:?}");
        };
        assert!(
            e.starts_with("stream event 2: choices[0].delta.tool_calls[0].function.name: invalid type: integer `5`"),
            "{e}"
        );
        let (answer, _) = streamed("data: {\"choices\": [\n\n", &[]).await;
        let Err(ModelError::Malformed(e)) = answer else {
            panic!("{answer:?}");
        };
        assert!(e.starts_with("stream event 1: the body is not JSON"), "{e}");
        let (answer, _) = streamed("data: {}\n\nnonsense\n\n", &[]).await;
        let Err(ModelError::Malformed(e)) = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(e, "the event stream broke the SSE format: invalid line");
    }

    #[tokio::test]
    async fn an_error_in_the_stream_is_its_status() {
        let text = sse(&[
            json!({"choices": [{"delta": {"content": "a"}}]}),
            json!({"error": {"message": "overloaded", "type": "server_error", "code": 503}}),
        ]);
        let (answer, _) = streamed(&text, &[]).await;
        let Err(ModelError::Status { status: 503, body }) = answer else {
            panic!("{answer:?}");
        };
        assert!(body.starts_with("an error event in the stream: "), "{body}");
        assert!(body.contains("overloaded"), "{body}");
        let text = "event: error\ndata: {\"error\": {\"message\": \"boom\"}}\n\n";
        let (answer, _) = streamed(text, &[]).await;
        assert!(
            matches!(&answer, Err(ModelError::Status { status: 500, body }) if body.contains("boom")),
            "{answer:?}"
        );
    }

    // A refusal streamed as pieces of `refusal` wins over the finish reason.
    #[tokio::test]
    async fn a_streamed_refusal_is_a_refusal() {
        let text = sse(&[
            json!({"choices": [{"delta": {"content": null, "refusal": "I can"}}]}),
            json!({"choices": [{"delta": {"refusal": "not"}, "finish_reason": "stop"}]}),
        ]);
        let (answer, pieces) = streamed(&text, &[]).await;
        assert_eq!(answer.unwrap().stop, StopReason::Refusal);
        assert!(pieces.is_empty());
    }
}
