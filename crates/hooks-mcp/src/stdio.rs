//! The line wire of MCP over stdio, for both ends: the agent's, over a
//! server's stdout and stdin ([`Client`]), and a hook server's, over its
//! own ([`Server`]). Every line is read as rmcp reads it (the same bounded
//! line: 16 MiB, a longer one dropped and logged; the same leniency:
//! non-MCP notifications ignored, a line that is not JSON ignored; the same
//! `Invalid Request` error for JSON that is no message), but for the lines
//! that make a hook call, read and written straight:
//!
//! - The answer to one of the agent's `tools/call`s (its id is remembered
//!   when the request goes out) is read as a `CallToolResult`, a text-only
//!   one without buffering ([`TextAnswer`]). rmcp reads every answer
//!   through its untagged `ServerResult`: serde buffers the result and
//!   tries the union's variants in order, and a tool call's answer is the
//!   sixteenth, so each one costs fifteen failed decodings (each an error
//!   message formatted and dropped) before the right one.
//! - The agent's `tools/call` is written straight from the request
//!   ([`call_line`]); rmcp first turns its parameters into a
//!   `serde_json::Value` to look for a second `_meta` in them.
//! - A hook server reads a plain `tools/call` straight ([`call_request`]);
//!   rmcp tries each request type it knows in turn.
//!
//! Each is tested against what rmcp reads or writes for the same line; any
//! line they do not take goes rmcp's way. Writing is one whole line per
//! message: a send whose future is dropped halfway leaves the rest of its
//! line to go out before the next one, as rmcp's framed writer does.
//!
//! Not here: the bounds on what a server may send or make us wait for
//! (`guard`), what a call means (`connection`).

use std::collections::HashSet;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use rmcp::model::{
    CallToolResult, ClientNotification, ClientRequest, ErrorData, JsonObject, JsonRpcMessage,
    JsonRpcResponse, JsonRpcVersion2_0, MetaObject, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use rmcp::{RoleClient, RoleServer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio_util::bytes::{Buf, BytesMut};
use tokio_util::codec::{Decoder, FramedRead};

/// Tool calls whose ids are remembered at once; past this, a call's answer
/// is read the slow way (it is still read).
const MAX_REMEMBERED_CALLS: usize = 1024;

/// UTF-8's byte order mark, which JSON readers may skip (RFC 8259 §8.1).
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A transport over lines of JSON-RPC: the agent's over a server's stdout
/// (`read`) and stdin (`write`), or a hook server's over its own stdio;
/// `S` is the side ([`Client`], [`Server`]) and what it reads fast.
pub(crate) struct Stdio<R, W: AsyncWrite, S = Client> {
    lines: FramedRead<R, LineCodec>,
    /// The peer's input. Each send holds it for its line, so lines go out
    /// whole, in the order the sends take it.
    writer: Arc<tokio::sync::Mutex<Pipe<W>>>,
    side: S,
    /// An `Invalid Request` reply being written; finished before the next
    /// line is read (kept here, so a cancelled receive does not lose it).
    replying: Option<Pin<Box<dyn Future<Output = io::Result<()>> + Send>>>,
}

/// The peer's input and what a dropped send left unwritten of its line.
struct Pipe<W> {
    /// `None` once closed.
    out: Option<W>,
    unsent: BytesMut,
}

/// One end of the wire, and the messages it reads (and writes) its own way
/// rather than rmcp's; where it does, what it reads is what rmcp would.
pub(crate) trait Side: Default + Send + 'static {
    type Role: ServiceRole;

    /// `line` (no newline) read the fast way, if it is a message this side
    /// reads so.
    fn fast(&self, line: &[u8]) -> Option<RxJsonRpcMessage<Self::Role>>;

    /// A message read rmcp's way.
    fn read(&self, message: &RxJsonRpcMessage<Self::Role>) {
        let _ = message;
    }

    /// `item` is about to be written: its line (no newline), if this side
    /// writes it its own way.
    fn sending(&self, item: &TxJsonRpcMessage<Self::Role>) -> Option<Vec<u8>>;
}

/// The agent's side: answers to its tool calls are read straight as a
/// `CallToolResult`, and its tool calls are written straight
/// ([`call_line`]).
#[derive(Default)]
pub(crate) struct Client {
    /// Ids of our `tools/call` requests not answered yet.
    calls: Mutex<HashSet<RequestId>>,
}

/// A hook server's side: a `tools/call` request is read straight, not by
/// trying each request type rmcp knows in turn (each a failed decoding
/// with its error message made and dropped) until `tools/call`'s.
#[derive(Default)]
pub(crate) struct Server;

impl<R, W, S> Stdio<R, W, S>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
    S: Side,
{
    /// Reads lines from `read` and writes them to `write`, as `S`.
    pub(crate) fn new(read: R, write: W) -> Self {
        Stdio {
            lines: FramedRead::new(read, LineCodec::new(DEFAULT_MAX_LINE_LENGTH)),
            writer: Arc::new(tokio::sync::Mutex::new(Pipe {
                out: Some(write),
                unsent: BytesMut::new(),
            })),
            side: S::default(),
            replying: None,
        }
    }

    /// Writes `item` as one line, after the lines of the sends that took
    /// the pipe before it.
    fn write(
        &self,
        item: &TxJsonRpcMessage<S::Role>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static + use<R, W, S> {
        // Made now, so the future holds bytes, not the message.
        let line = self
            .side
            .sending(item)
            .map_or_else(|| serde_json::to_vec(item), Ok)
            .map(|mut line| {
                line.push(b'\n');
                line
            });
        let writer = self.writer.clone();
        async move {
            let line = line.map_err(io::Error::other)?;
            let mut pipe = writer.lock().await;
            let Pipe { out, unsent } = &mut *pipe;
            let Some(out) = out.as_mut() else {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the MCP transport is closed",
                ));
            };
            // After what a dropped send left of its line; kept here until
            // written, should this future be dropped at an await.
            unsent.extend_from_slice(&line);
            while !unsent.is_empty() {
                match out.write(unsent).await {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => unsent.advance(n),
                    Err(e) => return Err(e),
                }
            }
            out.flush().await
        }
    }

    /// One line as a message: `Ok(None)` for a line to skip, `Err` for JSON
    /// that is no message (answered with `Invalid Request`).
    fn parse(&self, line: &[u8]) -> Result<Option<RxJsonRpcMessage<S::Role>>, ()> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(BOM).unwrap_or(line);
        if line.is_empty() {
            return Ok(None);
        }
        if let Some(message) = self.side.fast(line) {
            return Ok(Some(message));
        }
        match serde_json::from_slice::<RxJsonRpcMessage<S::Role>>(line) {
            Ok(message) => {
                self.side.read(&message);
                Ok(Some(message))
            }
            Err(e) => match e.classify() {
                // Not JSON: there is no id to answer, and answering could
                // start an echo storm; the other MCP SDKs ignore it too.
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                    tracing::debug!("ignoring an unparsable line from an MCP peer: {e}");
                    Ok(None)
                }
                _ if ignored_notification(line) => Ok(None),
                _ => {
                    tracing::debug!("protocol error on a line from an MCP peer: {e}");
                    Err(())
                }
            },
        }
    }
}

impl Client {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `line` read as the answer to one of our tool calls, if it is one.
    fn call_answer(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        #[derive(serde::Deserialize)]
        struct Answer {
            jsonrpc: JsonRpcVersion2_0,
            id: RequestId,
            result: CallToolResult,
            // A line that also carries `error` or `method` is no plain
            // answer: rmcp calls it an invalid message, so it goes rmcp's way.
            #[serde(default)]
            error: Option<serde::de::IgnoredAny>,
            #[serde(default)]
            method: Option<serde::de::IgnoredAny>,
        }
        if self.calls().is_empty() {
            return None;
        }
        let (jsonrpc, id, result) = match serde_json::from_slice::<TextAnswer>(line) {
            // rmcp refuses a result with none of its fields.
            Ok(answer) if answer.result.content.is_some() || answer.result.is_error.is_some() => {
                (answer.jsonrpc, answer.id, answer.result.into())
            }
            _ => {
                let answer: Answer = serde_json::from_slice(line).ok()?;
                if answer.error.is_some() || answer.method.is_some() {
                    return None;
                }
                (answer.jsonrpc, answer.id, answer.result)
            }
        };
        if !self.calls().remove(&id) {
            return None;
        }
        Some(JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc,
            id,
            result: ServerResult::CallToolResult(result),
        }))
    }
}

impl Side for Client {
    type Role = RoleClient;

    fn fast(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.call_answer(line)
    }

    fn read(&self, message: &RxJsonRpcMessage<RoleClient>) {
        let id = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = id {
            self.calls().remove(id);
        }
    }

    fn sending(&self, item: &TxJsonRpcMessage<RoleClient>) -> Option<Vec<u8>> {
        match item {
            JsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::CallToolRequest(_)) =>
            {
                let mut calls = self.calls();
                if calls.len() < MAX_REMEMBERED_CALLS {
                    calls.insert(request.id.clone());
                }
            }
            // A cancelled call may never be answered: forget it.
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.calls().remove(id);
                }
            }
            _ => {}
        }
        call_line(item)
    }
}

impl Side for Server {
    type Role = RoleServer;

    fn fast(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        call_request(line)
    }

    fn sending(&self, _: &TxJsonRpcMessage<RoleServer>) -> Option<Vec<u8>> {
        None
    }
}

/// The answer most calls get, text only, read without the buffering that
/// rmcp's content union needs (serde reads a tagged union into a tree
/// first, to find its tag): nothing but `jsonrpc`, `id` and a `result` of
/// text blocks (each only `type` and `text`) and `isError`. Any other
/// line fails to read as one and is read as [`CallToolResult`] instead,
/// so where this reads, it reads what rmcp would.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TextAnswer {
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    result: TextResult,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TextResult {
    content: Option<Vec<TextBlock>>,
    is_error: Option<bool>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TextBlock {
    #[serde(rename = "type")]
    _kind: TextKind,
    text: String,
}

#[derive(serde::Deserialize)]
enum TextKind {
    #[serde(rename = "text")]
    Text,
}

impl From<TextResult> for CallToolResult {
    fn from(result: TextResult) -> CallToolResult {
        let content = result
            .content
            .unwrap_or_default()
            .into_iter()
            .map(|block| rmcp::model::ContentBlock::text(block.text))
            .collect();
        let mut read = CallToolResult::default();
        read.result_type = None;
        read.content = content;
        read.is_error = result.is_error;
        read
    }
}

/// Whether `line` is a notification rmcp ignores for compatibility: one of
/// a method that is not MCP's (an LSP message, say), or an MCP-looking
/// `notifications/...` that MCP does not define.
fn ignored_notification(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<String>,
        #[serde(default)]
        id: Option<serde::de::IgnoredAny>,
    }
    let Ok(Probe {
        method: Some(method),
        id,
    }) = serde_json::from_slice::<Probe>(line)
    else {
        return false;
    };
    let standard_notification = matches!(
        method.as_str(),
        "notifications/cancelled"
            | "notifications/initialized"
            | "notifications/message"
            | "notifications/progress"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/roots/list_changed"
            | "notifications/subscriptions/acknowledged"
            | "notifications/tools/list_changed"
    );
    let standard = standard_notification
        || matches!(
            method.as_str(),
            "initialize"
                | "ping"
                | "server/discover"
                | "prompts/get"
                | "prompts/list"
                | "resources/list"
                | "resources/read"
                | "resources/subscribe"
                | "resources/unsubscribe"
                | "resources/templates/list"
                | "subscriptions/listen"
                | "tools/call"
                | "tools/list"
                | "completion/complete"
                | "elicitation/create"
                | "logging/setLevel"
                | "roots/list"
                | "sampling/createMessage"
        );
    (id.is_none() && !standard) || (method.starts_with("notifications/") && !standard_notification)
}

impl<R, W, S> Transport<S::Role> for Stdio<R, W, S>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
    S: Side,
{
    type Error = io::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        "stdio".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<S::Role>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        self.write(&item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<S::Role>> {
        loop {
            if let Some(reply) = self.replying.as_mut() {
                let written = reply.await;
                self.replying = None;
                if written.is_err() {
                    return None;
                }
            }
            let line = match self.lines.next().await? {
                Ok(Line::Whole(line)) => line,
                Ok(Line::Oversized) => {
                    tracing::error!(
                        max_line_length = DEFAULT_MAX_LINE_LENGTH,
                        "a message from an MCP peer exceeded the maximum line length; discarding it"
                    );
                    continue;
                }
                Err(e) => {
                    tracing::error!("error reading from an MCP peer: {e}");
                    return None;
                }
            };
            match self.parse(&line) {
                Ok(Some(message)) => return Some(message),
                Ok(None) => {}
                Err(()) => {
                    let reply = TxJsonRpcMessage::<S::Role>::error(
                        ErrorData::invalid_request("Invalid request", None),
                        None,
                    );
                    self.replying = Some(Box::pin(self.write(&reply)));
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        // The peer's end of input: shut down (for a pipe, a no-op; for an
        // in-process duplex, its end), then dropped (closed). As with rmcp's
        // transport, closing does not fail.
        if let Some(mut out) = self.writer.lock().await.out.take() {
            let _ = out.shutdown().await;
        }
        Ok(())
    }
}

/// A `tools/call` request as the line rmcp would write for it (newline
/// not included), made without rmcp's detour through a `Value`: `None` for
/// any other message, and for a call whose `_meta` rmcp would merge from
/// more than one place (then rmcp's own serialisation writes it).
fn call_line(item: &TxJsonRpcMessage<RoleClient>) -> Option<Vec<u8>> {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        jsonrpc: &'a JsonRpcVersion2_0,
        id: &'a RequestId,
        method: &'a rmcp::model::CallToolRequestMethod,
        params: Params<'a>,
    }
    #[derive(serde::Serialize)]
    struct Params<'a> {
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<&'a JsonObject>,
        name: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        arguments: Option<&'a JsonObject>,
    }
    let JsonRpcMessage::Request(request) = item else {
        return None;
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return None;
    };
    let params = &call.params;
    let plain = params.meta.is_none()
        && params.input_responses.is_none()
        && params.request_state.is_none()
        && call.extensions.get::<MetaObject>().is_none();
    if !plain {
        return None;
    }
    let line = Line {
        jsonrpc: &request.jsonrpc,
        id: &request.id,
        method: &call.method,
        params: Params {
            meta: call
                .extensions
                .get::<RequestMetaObject>()
                .map(|meta| &meta.0.0),
            name: &params.name,
            arguments: params.arguments.as_ref(),
        },
    };
    serde_json::to_vec(&line).ok()
}

/// `line` read as a `tools/call` request, as rmcp reads one, if it is a
/// plain one: nothing but `jsonrpc`, `id`, `method` and `params` of
/// `name`, `arguments` and `_meta` (which rmcp keeps in the request's
/// extensions). Any other line is for rmcp to read.
fn call_request(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Call {
        jsonrpc: JsonRpcVersion2_0,
        id: RequestId,
        method: rmcp::model::CallToolRequestMethod,
        params: Params,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<JsonObject>,
        name: String,
        arguments: Option<JsonObject>,
    }
    let call: Call = serde_json::from_slice(line).ok()?;
    let mut params = rmcp::model::CallToolRequestParams::new(call.params.name);
    params.arguments = call.params.arguments;
    let mut request = rmcp::model::Request::new(params);
    request.method = call.method;
    if let Some(meta) = call.params.meta {
        request.extensions.insert(RequestMetaObject::from(meta));
    }
    Some(JsonRpcMessage::Request(rmcp::model::JsonRpcRequest {
        jsonrpc: call.jsonrpc,
        id: call.id,
        request: ClientRequest::CallToolRequest(request),
    }))
}

/// One line of input.
#[derive(Debug, PartialEq)]
enum Line {
    /// A line within the cap, with its newline.
    Whole(BytesMut),
    /// A line over the cap, dropped.
    Oversized,
}

/// Lines of bytes, at most `max` each (newline included); the rest of a
/// longer line is dropped as it comes, so it never grows the buffer.
struct LineCodec {
    max: usize,
    /// Where to go on looking for a newline.
    searched: usize,
    /// Dropping the rest of an oversized line.
    discarding: bool,
}

impl LineCodec {
    fn new(max: usize) -> LineCodec {
        LineCodec {
            max,
            searched: 0,
            discarding: false,
        }
    }
}

impl Decoder for LineCodec {
    type Item = Line;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        loop {
            let newline = buf[self.searched..].iter().position(|b| *b == b'\n');
            let Some(at) = newline.map(|i| self.searched + i) else {
                if self.discarding {
                    buf.clear();
                    self.searched = 0;
                } else if buf.len() > self.max {
                    buf.clear();
                    self.searched = 0;
                    self.discarding = true;
                    return Ok(Some(Line::Oversized));
                } else {
                    self.searched = buf.len();
                }
                return Ok(None);
            };
            self.searched = 0;
            if self.discarding {
                buf.advance(at + 1);
                self.discarding = false;
                continue;
            }
            if at + 1 > self.max {
                buf.advance(at + 1);
                return Ok(Some(Line::Oversized));
            }
            return Ok(Some(Line::Whole(buf.split_to(at + 1))));
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        // A last line without its newline is a message cut short: dropped,
        // as rmcp drops it.
        let line = self.decode(buf)?;
        if line.is_none() {
            buf.clear();
            self.searched = 0;
            self.discarding = false;
        }
        Ok(line)
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolRequestParams, ClientJsonRpcMessage, NumberOrString, ServerJsonRpcMessage,
    };
    use serde::Deserialize as _;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;

    fn lines(max: usize, input: &[u8]) -> Vec<Line> {
        let mut codec = LineCodec::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        // Fed a byte at a time, as a slow pipe would.
        for b in input {
            buf.extend_from_slice(&[*b]);
            while let Some(line) = codec.decode(&mut buf).unwrap() {
                out.push(line);
            }
        }
        while let Some(line) = codec.decode_eof(&mut buf).unwrap() {
            out.push(line);
        }
        out
    }

    fn whole(s: &str) -> Line {
        Line::Whole(BytesMut::from(s.as_bytes()))
    }

    // Lines within the cap pass whole; a longer one, whether its newline
    // comes before or after the cap is passed, is one `Oversized`, and the
    // line after it is read whole; a cut last line is dropped.
    #[test]
    fn lines_are_bounded() {
        let input = b"ab\n0123456789\ncd\n0123456789abcdef\nef\ncut";
        assert_eq!(
            lines(8, input),
            [
                whole("ab\n"),
                Line::Oversized,
                whole("cd\n"),
                Line::Oversized,
                whole("ef\n")
            ]
        );
        // The newline counts: 8 bytes with it fit, 9 do not.
        assert_eq!(lines(8, b"1234567\n"), [whole("1234567\n")]);
        assert_eq!(lines(8, b"12345678\n"), [Line::Oversized]);
    }

    /// A transport over one end of a pipe; the other end as the server's
    /// lines in and out.
    type Read = tokio::io::ReadHalf<tokio::io::DuplexStream>;
    type Write = tokio::io::WriteHalf<tokio::io::DuplexStream>;

    fn pipe() -> (Stdio<Read, Write>, BufReader<Read>, Write) {
        pipe_of(1 << 16)
    }

    /// A transport of side `S` over a duplex pipe of `capacity` bytes, and
    /// the peer's ends.
    fn pipe_of<S: Side>(capacity: usize) -> (Stdio<Read, Write, S>, BufReader<Read>, Write) {
        let (ours, theirs) = tokio::io::duplex(capacity);
        let (read, write) = tokio::io::split(ours);
        let (their_read, their_write) = tokio::io::split(theirs);
        (
            Stdio::new(read, write),
            BufReader::new(their_read),
            their_write,
        )
    }

    /// The next line the peer read, as JSON.
    async fn next_json(input: &mut BufReader<Read>) -> serde_json::Value {
        let mut line = String::new();
        input.read_line(&mut line).await.unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn call(id: i64) -> ClientJsonRpcMessage {
        ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(rmcp::model::Request::new(CallToolRequestParams::new(
                "_Stop",
            ))),
            NumberOrString::Number(id),
        )
    }

    // The answer to a tool call comes through as that call's result, read
    // straight; an answer to no call of ours, and a tools/list answer, are
    // read as rmcp reads them; a line that is not JSON is skipped; JSON
    // that is no message is answered with Invalid Request.
    #[tokio::test]
    async fn answers_are_read_as_rmcp_reads_them() {
        tokio::time::timeout(std::time::Duration::from_secs(10), read_as_rmcp())
            .await
            .expect("the reading did not end");
    }

    async fn read_as_rmcp() {
        let (mut transport, mut their_input, mut their_output) = pipe();
        transport.send(call(7)).await.unwrap();
        let sent = next_json(&mut their_input).await;
        assert_eq!(sent["method"], "tools/call");
        assert_eq!(sent["id"], 7);
        assert_eq!(transport.side.calls().len(), 1);

        let lines = concat!(
            "not json\n",
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\r\n",
            "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"tools\":[]}}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"$/lsp\"}\n",
            "{\"what\":1}\n",
            "\u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n",
        );
        their_output.write_all(lines.as_bytes()).await.unwrap();

        let answer = transport.receive().await.unwrap();
        let JsonRpcMessage::Response(response) = answer else {
            panic!("not a response: {answer:?}");
        };
        assert_eq!(response.id, NumberOrString::Number(7));
        let ServerResult::CallToolResult(result) = response.result else {
            panic!("not a tool result: {:?}", response.result);
        };
        assert_eq!(result.content.len(), 1);
        assert!(transport.side.calls().is_empty());

        let listing = transport.receive().await.unwrap();
        assert!(
            matches!(
                &listing,
                ServerJsonRpcMessage::Response(r) if matches!(r.result, ServerResult::ListToolsResult(_))
            ),
            "{listing:?}"
        );
        // A notification of a method MCP does not define reads as a custom
        // one, as rmcp reads it; then `{"what":1}` is answered, and the
        // tools notification comes through.
        for _ in 0..2 {
            let notification = transport.receive().await.unwrap();
            assert!(
                matches!(notification, ServerJsonRpcMessage::Notification(_)),
                "{notification:?}"
            );
        }
        let reply = next_json(&mut their_input).await;
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        assert_eq!(reply["id"], serde_json::Value::Null, "{reply}");
    }

    // A line with our call's id that carries `error` beside `result` is no
    // answer (rmcp calls it invalid): it is not taken as the call's result
    // the fast way, the call stays unanswered, and the real answer after it
    // is the one that comes through.
    #[tokio::test]
    async fn a_result_with_an_error_beside_it_is_not_an_answer() {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let (mut transport, mut their_input, mut their_output) = pipe();
            transport.send(call(5)).await.unwrap();
            let mut sent = String::new();
            their_input.read_line(&mut sent).await.unwrap();
            let lines = concat!(
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[]},\"error\":{\"code\":1,\"message\":\"x\"}}\n",
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"real\"}]}}\n",
            );
            their_output.write_all(lines.as_bytes()).await.unwrap();
            let answer = transport.receive().await.unwrap();
            let ServerJsonRpcMessage::Response(response) = answer else {
                panic!("not an answer: {answer:?}");
            };
            let ServerResult::CallToolResult(result) = response.result else {
                panic!("not a tool result: {:?}", response.result);
            };
            assert_eq!(result.content.len(), 1, "the line with an error was taken");
            assert!(transport.side.calls().is_empty());
        })
        .await
        .expect("the reading did not end");
    }

    // A call that is cancelled is forgotten: its late answer, should it
    // come, is read the slow way.
    #[tokio::test]
    async fn a_cancelled_call_is_forgotten() {
        let (mut transport, _their_input, _their_output) = pipe();
        transport.send(call(3)).await.unwrap();
        let cancelled = ClientJsonRpcMessage::notification(
            ClientNotification::CancelledNotification(rmcp::model::Notification::new(
                rmcp::model::CancelledNotificationParam::new(Some(NumberOrString::Number(3)), None),
            )),
        );
        transport.send(cancelled).await.unwrap();
        assert!(transport.side.calls().is_empty());
    }

    // A tool call's line, written the fast way, is the line rmcp writes for
    // it: with and without a progress token in `_meta`, with arguments
    // whose strings need escaping. A call whose `_meta` rmcp would merge
    // from its parameters too, and any other message, go rmcp's way.
    #[test]
    fn a_calls_line_is_the_one_rmcp_writes() {
        let rmcp_line = |item: &ClientJsonRpcMessage| -> serde_json::Value {
            serde_json::to_value(item).unwrap()
        };
        let ours = |item: &ClientJsonRpcMessage| -> serde_json::Value {
            serde_json::from_slice(&call_line(item).expect("a plain call")).unwrap()
        };
        let mut arguments = JsonObject::new();
        arguments.insert("text".into(), "a \"quote\"\n\u{1b}".into());
        arguments.insert("n".into(), serde_json::json!({"deep": [1, 2.5, null]}));
        let mut with_args = call(3);
        let JsonRpcMessage::Request(request) = &mut with_args else {
            unreachable!()
        };
        let ClientRequest::CallToolRequest(call_request) = &mut request.request else {
            unreachable!()
        };
        call_request.params.arguments = Some(arguments);
        let mut with_token = with_args.clone();
        let JsonRpcMessage::Request(request) = &mut with_token else {
            unreachable!()
        };
        rmcp::model::GetMeta::get_meta_mut(&mut request.request)
            .set_progress_token(rmcp::model::ProgressToken(NumberOrString::Number(9)));
        for item in [call(1), with_args, with_token.clone()] {
            assert_eq!(ours(&item), rmcp_line(&item), "{item:?}");
        }
        assert_eq!(ours(&with_token)["params"]["_meta"]["progressToken"], 9);

        let mut merged = with_token;
        let JsonRpcMessage::Request(request) = &mut merged else {
            unreachable!()
        };
        let ClientRequest::CallToolRequest(call_request) = &mut request.request else {
            unreachable!()
        };
        call_request.params.meta = Some(RequestMetaObject::default());
        assert!(call_line(&merged).is_none(), "two _meta maps: rmcp's way");
        let listing = ClientJsonRpcMessage::request(
            ClientRequest::ListToolsRequest(Default::default()),
            NumberOrString::Number(2),
        );
        assert!(call_line(&listing).is_none());
    }

    // After close, a send fails (it does not write to a pipe that is gone)
    // and the server reads its end of input.
    #[tokio::test]
    async fn a_closed_transport_writes_nothing() {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let (mut transport, mut their_input, _their_output) = pipe();
            transport.close().await.unwrap();
            let error = transport.send(call(1)).await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::NotConnected);
            let mut rest = String::new();
            assert_eq!(their_input.read_line(&mut rest).await.unwrap(), 0, "{rest}");
        })
        .await
        .expect("the close did not end");
    }

    // A text-only answer, read without rmcp's buffering, is the result rmcp
    // reads from it; every other shape of answer (annotations, images,
    // structured content, a result type, no known field) is read rmcp's
    // way, and a result rmcp refuses is refused.
    #[tokio::test]
    async fn text_answers_read_as_rmcp_reads_them() {
        let fast = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a \"b\"\n\u00e9"}]}}"#,
            r#"{"id":1,"result":{"isError":true,"content":[{"text":"x","type":"text"},{"type":"text","text":""}]},"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":"s-1","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false}}"#,
        ];
        let slow = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a","annotations":{"priority":0.5}}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"ok":true}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"a"}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a"}],"_meta":{"k":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text"}]}}"#,
        ];
        let (transport, _their_input, _their_output) = pipe();
        for line in fast.iter().chain(&slow) {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let rmcp = CallToolResult::deserialize(&value["result"]).ok();
            let id: RequestId = serde_json::from_value(value["id"].clone()).unwrap();
            transport.side.calls().insert(id.clone());
            let ours = transport.side.call_answer(line.as_bytes()).map(|message| {
                let JsonRpcMessage::Response(response) = message else {
                    panic!("not a response: {message:?}");
                };
                assert_eq!(response.id, id);
                let ServerResult::CallToolResult(result) = response.result else {
                    panic!("not a tool result: {:?}", response.result);
                };
                result
            });
            assert_eq!(ours, rmcp, "{line}");
            assert_eq!(transport.side.calls().remove(&id), rmcp.is_none(), "{line}");
        }
        for line in fast {
            assert!(serde_json::from_str::<TextAnswer>(line).is_ok(), "{line}");
        }
        for line in &slow[..5] {
            assert!(serde_json::from_str::<TextAnswer>(line).is_err(), "{line}");
        }
    }

    // A plain tool call reads, the fast way, as the request rmcp reads from
    // it: the same method, id, name, arguments and `_meta` (in the
    // extensions, as rmcp keeps it), written back the same; a call with
    // anything more, or another request, is left for rmcp to read.
    #[test]
    fn a_servers_tool_calls_read_as_rmcp_reads_them() {
        let plain = [
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"_Stop","arguments":{}}}"#,
            r#"{"params":{"_meta":{"progressToken":"p-1"},"arguments":{"text":"a \"b\"\n","n":[1,2.5]},"name":"t"},"method":"tools/call","id":"x","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","arguments":null,"_meta":null}}"#,
        ];
        for line in plain {
            let ours = call_request(line.as_bytes()).expect("a plain call");
            let theirs: ClientJsonRpcMessage = serde_json::from_str(line).unwrap();
            let (JsonRpcMessage::Request(ours), JsonRpcMessage::Request(theirs)) = (&ours, &theirs)
            else {
                panic!("not requests: {ours:?} {theirs:?}");
            };
            assert_eq!(ours.id, theirs.id, "{line}");
            let (ClientRequest::CallToolRequest(a), ClientRequest::CallToolRequest(b)) =
                (&ours.request, &theirs.request)
            else {
                panic!("not tool calls: {ours:?} {theirs:?}");
            };
            assert_eq!(a.params, b.params, "{line}");
            assert_eq!(
                a.extensions.get::<RequestMetaObject>(),
                b.extensions.get::<RequestMetaObject>(),
                "{line}"
            );
            assert_eq!(
                serde_json::to_value(ours).unwrap(),
                serde_json::to_value(theirs).unwrap(),
                "{line}"
            );
        }
        let other = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
        ];
        for line in other {
            assert!(call_request(line.as_bytes()).is_none(), "{line}");
        }
    }

    // The fast write covers every field rmcp 3.11's call parameters have;
    // an rmcp with another field fails here, not silently on the wire.
    #[test]
    fn a_calls_fields_are_the_ones_call_line_writes() {
        let fields = format!("{:?}", CallToolRequestParams::new("t"));
        assert_eq!(
            fields,
            r#"CallToolRequestParams { meta: None, name: "t", arguments: None, input_responses: None, request_state: None }"#,
            "call_line (and its `plain` check) must learn the new field"
        );
    }

    // A send dropped halfway through its line (the pipe full) leaves the
    // rest to go out first: the peer reads both lines whole, in order.
    #[tokio::test]
    async fn a_dropped_send_does_not_tear_its_line() {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let (mut transport, mut their_input, _their_output) = pipe_of::<Client>(32);
            let mut first = Box::pin(transport.send(call(1)));
            assert!(
                futures::poll!(&mut first).is_pending(),
                "the pipe holds 32 bytes"
            );
            drop(first);
            let second = tokio::spawn(transport.send(call(2)));
            for id in [1, 2] {
                let message = next_json(&mut their_input).await;
                assert_eq!(message["id"], id, "{message}");
            }
            second.await.unwrap().unwrap();
        })
        .await
        .expect("the lines did not come");
    }

    // A hook server's side, through `receive`: a line that is not JSON is
    // skipped, a plain tool call comes through read the fast way, JSON that
    // is no message is answered with Invalid Request, and the line after it
    // is read as rmcp reads it.
    #[tokio::test]
    async fn a_server_reads_calls_and_answers_bad_messages() {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let (mut transport, mut their_input, mut their_output) = pipe_of::<Server>(1 << 16);
            let lines = concat!(
                "not json\n",
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"_Stop\",\"arguments\":{}}}\n",
                "{\"what\":1}\n",
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            );
            their_output.write_all(lines.as_bytes()).await.unwrap();
            let call = transport.receive().await.unwrap();
            let JsonRpcMessage::Request(request) = call else {
                panic!("not a request: {call:?}");
            };
            assert_eq!(request.id, NumberOrString::Number(7));
            assert!(matches!(request.request, ClientRequest::CallToolRequest(_)));
            let next = transport.receive().await.unwrap();
            assert!(matches!(next, JsonRpcMessage::Notification(_)), "{next:?}");
            let reply = next_json(&mut their_input).await;
            assert_eq!(reply["error"]["code"], -32600, "{reply}");
        })
        .await
        .expect("the reading did not end");
    }
}
