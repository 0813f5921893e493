//! Writing hook servers: [`ToolServer`], and the two that ship with Sprout.
//!
//! A hook server is an ordinary MCP server that lists tools whose names start
//! with `_`, one per hook point it serves (`_Stop`, `_PreToolUse`,
//! `_PostCompact`, …). The agent calls each with `{}`, or, when the tool's
//! `inputSchema.properties` names fields of the hook input table, with
//! exactly those of them that apply at that hook point \[K1\]-\[K2\]
//! ([`ToolServer::hook_with_input`]). It reads the text the hook answers:
//! non-empty text objects (`_Stop`), refuses the tool call (`_PreToolUse`) or
//! is injected (the others); empty text means nothing. The agent gives each
//! call a deadline (`SPROUT_AGENT_HOOK_TIMEOUT_MS`, 2.5 s by default, or the
//! server's `hookTimeoutMs` in the MCP config \[C4\]) and cancels it with
//! `notifications/cancelled` when it runs out. `docs/hooks.md` is the whole
//! contract.
//!
//! [`ToolServer`] is a small builder over rmcp's `ServerHandler` for servers
//! with a fixed tool list:
//!
//! ```no_run
//! use hooks_core::HookPoint;
//! use hooks_mcp::server::ToolServer;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! ToolServer::new("tests-green")
//!     .hook(HookPoint::Stop, "Objects while the build is red.", |_cancel| async {
//!         if std::path::Path::new("BUILD_RED").exists() { "the build is red".to_owned() } else { String::new() }
//!     })
//!     .serve_stdio()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! - [`todo`](mod@todo): a `todo` tool, `_Stop` objecting while items are open
//!   (counting the prompt's attempts to finish), `_PreCompact` pinning the
//!   open items, `_PostCompact` re-injecting the list.
//! - [`gate`]: `_Stop` runs a command and objects while it fails;
//!   `_PreToolUse` refuses calls of the tools it gates while it fails.

pub mod gate;
pub mod todo;

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use hooks_core::{HookPoint, InputField};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use tokio_util::sync::CancellationToken;

/// What a tool handler returns: a result, or a JSON-RPC error.
pub type ToolFuture = BoxFuture<'static, Result<CallToolResult, ErrorData>>;

type Handler = Arc<dyn Fn(JsonObject, CancellationToken) -> ToolFuture + Send + Sync>;

/// An MCP server with a fixed list of tools, each with its handler.
#[derive(Clone)]
pub struct ToolServer {
    name: String,
    instructions: Option<String>,
    tools: Vec<(Tool, Handler)>,
    /// Tools per `tools/list` page; all in one page when `None`.
    page_size: Option<usize>,
}

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|(t, _)| t.name.as_ref()).collect();
        f.debug_struct("ToolServer")
            .field("name", &self.name)
            .field("tools", &names)
            .finish()
    }
}

/// The JSON Schema of a tool that takes any object (every hook).
pub fn any_object_schema() -> JsonObject {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), "object".into());
    schema
}

/// The JSON Schema of a hook that asks for `fields` of the hook input
/// \[K1\]-\[K2\]: an object whose `properties` name each field with its type.
/// No field is required (a field that does not apply, or that an older agent
/// does not know, is simply left out) and other properties are allowed.
/// Without fields it is the seed's `{"type": "object"}`.
pub fn hook_input_schema(fields: &[InputField]) -> JsonObject {
    let mut schema = any_object_schema();
    if !fields.is_empty() {
        let properties: JsonObject = fields
            .iter()
            .map(|field| (field.name().to_owned(), field_schema(*field)))
            .collect();
        schema.insert("properties".into(), properties.into());
    }
    schema
}

/// The schema of one hook input field, as the agent fills it \[K2\].
fn field_schema(field: InputField) -> serde_json::Value {
    use serde_json::json;
    let string = |description: &str| json!({"type": "string", "description": description});
    match field {
        InputField::SessionId => string("The agent's session id."),
        InputField::Cwd => string("The agent's working directory."),
        InputField::Prompt => string("The prompt's text."),
        InputField::Attempt => json!({
            "type": "integer", "minimum": 1,
            "description": "1 for the prompt's first _Stop round, then 2, ...",
        }),
        InputField::BudgetLeft => json!({
            "type": "integer", "minimum": 0,
            "description": "Objections the budget still allows, before this round.",
        }),
        InputField::LastAssistantMessage => string("The text of the model's last answer."),
        InputField::Tool => string("The bare name of the tool called."),
        InputField::Server => string("The server of the tool called."),
        InputField::Arguments => {
            json!({"type": "object", "description": "The tool call's arguments."})
        }
        InputField::Output => string("The tool's output text."),
        InputField::IsError => {
            json!({"type": "boolean", "description": "Whether the tool's result is an error."})
        }
        InputField::Summary => string("The compaction summary."),
        InputField::Pins => json!({
            "type": "array",
            "description": "What _PreCompact pinned: one {server, text} per answer.",
            "items": {
                "type": "object",
                "properties": {"server": {"type": "string"}, "text": {"type": "string"}},
            },
        }),
        InputField::Reason => string("Why the hook is called."),
    }
}

impl ToolServer {
    /// A server that introduces itself as `name`.
    pub fn new(name: impl Into<String>) -> ToolServer {
        ToolServer {
            name: name.into(),
            instructions: None,
            tools: Vec::new(),
            page_size: None,
        }
    }

    /// Instructions the server gives clients at initialize.
    pub fn instructions(mut self, text: impl Into<String>) -> ToolServer {
        self.instructions = Some(text.into());
        self
    }

    /// Lists tools `size` at a time, with `nextCursor` (useful to test
    /// clients' pagination).
    pub fn page_size(mut self, size: usize) -> ToolServer {
        self.page_size = Some(size.max(1));
        self
    }

    /// Adds a tool. The handler gets the call's arguments and a token that is
    /// cancelled when the client cancels the call.
    pub fn tool<F, Fut>(mut self, tool: Tool, handler: F) -> ToolServer
    where
        F: Fn(JsonObject, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |args, cancel| Box::pin(handler(args, cancel)));
        self.tools.push((tool, handler));
        self
    }

    /// Adds a hook whose input schema names no field: it is called with `{}`
    /// \[H5\] (anything more is accepted and ignored). The handler answers
    /// text: empty for nothing.
    pub fn hook<F, Fut>(self, hook: HookPoint, description: &str, handler: F) -> ToolServer
    where
        F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = String> + Send + 'static,
    {
        self.hook_with_input(hook, description, &[], move |_input, cancel| {
            handler(cancel)
        })
    }

    /// Adds a hook whose input schema names `fields` ([`hook_input_schema`]):
    /// the agent sends those of them that apply at `hook` \[K1\], and the
    /// handler gets the call's arguments as they came. A field may be
    /// missing (an agent that sends `{}` to every hook, a field without a
    /// value), so read each one as optional. The handler answers text: empty
    /// for nothing.
    pub fn hook_with_input<F, Fut>(
        self,
        hook: HookPoint,
        description: &str,
        fields: &[InputField],
        handler: F,
    ) -> ToolServer
    where
        F: Fn(JsonObject, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = String> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let tool = Tool::new(
            hook.tool_name(),
            description.to_owned(),
            hook_input_schema(fields),
        );
        self.tool(tool, move |input, cancel| {
            let handler = handler.clone();
            async move {
                Ok(CallToolResult::success(vec![ContentBlock::text(
                    handler(input, cancel).await,
                )]))
            }
        })
    }

    /// The rmcp handler, to serve over any transport (stdio, HTTP, a duplex
    /// pipe in tests).
    pub fn into_handler(self) -> ToolServerHandler {
        ToolServerHandler {
            server: Arc::new(self),
            gone: CancellationToken::new(),
        }
    }

    /// Serves over this process's stdin and stdout until the client goes.
    /// When stdin closes, or SIGTERM arrives (the agent killing a wedged
    /// server), every call in flight sees its token cancelled at once, so
    /// work a hook started (a gate's command) stops before the server exits
    /// and the client's grace period is not spent waiting.
    pub async fn serve_stdio(self) -> Result<(), std::io::Error> {
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        let (running, gone) = self.serve_on(stdin, stdout).await?;
        // SIGTERM (the agent killing a wedged server) stops every call in
        // flight, gives them a moment to clean up, and ends the server.
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            quit = running.waiting() => {
                quit.map_err(std::io::Error::other)?;
            }
            _ = terminate.recv() => {
                gone.cancel();
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// Serves over `input` and `output` (this process's stdio, or a duplex
    /// pipe for the host's in-process tests) once the client has initialized.
    /// Returns the running service and the token that fires when `input`
    /// ends; every call in flight sees its own token fire with it.
    pub(crate) async fn serve_on<R, W>(
        self,
        input: R,
        output: W,
    ) -> Result<
        (
            RunningService<RoleServer, ToolServerHandler>,
            CancellationToken,
        ),
        std::io::Error,
    >
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let handler = self.into_handler();
        let gone = handler.gone.clone();
        let input = EofSignal {
            inner: input,
            gone: gone.clone(),
        };
        // Tool calls are read straight, not as rmcp reads every request.
        let transport = crate::stdio::Stdio::<_, _, crate::stdio::Server>::new(input, output);
        let running = handler
            .serve(transport)
            .await
            .map_err(std::io::Error::other)?;
        Ok((running, gone))
    }
}

#[cfg(test)]
impl ToolServer {
    /// The listed tool named `name`, as `tools/list` shows it.
    pub(crate) fn listed(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().map(|(t, _)| t).find(|t| t.name == name)
    }

    /// Calls the tool `name` in process with `arguments` (a JSON object), as
    /// a `tools/call` would, and returns its text.
    pub(crate) async fn call_text(&self, name: &str, arguments: serde_json::Value) -> String {
        let (_, handler) = self
            .tools
            .iter()
            .find(|(t, _)| t.name == name)
            .unwrap_or_else(|| panic!("no tool {name}"));
        let arguments = arguments.as_object().cloned().unwrap_or_default();
        let result = handler(arguments, CancellationToken::new())
            .await
            .unwrap_or_else(|e| panic!("{name} failed: {e:?}"));
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }
}

/// A reader that cancels `gone` when it reaches the end of its input.
struct EofSignal<R> {
    inner: R,
    gone: CancellationToken,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for EofSignal<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let (before, room) = (buf.filled().len(), buf.remaining());
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(result) = &poll
            && (result.is_err() || (room > 0 && buf.filled().len() == before))
        {
            self.gone.cancel();
        }
        poll
    }
}

/// [`ToolServer`] as an rmcp `ServerHandler`.
#[derive(Clone, Debug)]
pub struct ToolServerHandler {
    server: Arc<ToolServer>,
    /// Cancelled when the client is gone (stdin closed).
    gone: CancellationToken,
}

impl ServerHandler for ToolServerHandler {
    fn get_info(&self) -> ServerConfig {
        let config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.server.name.clone(),
                env!("CARGO_PKG_VERSION"),
            ));
        match &self.server.instructions {
            Some(text) => config.with_instructions(text.clone()),
            None => config,
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let all: Vec<Tool> = self.server.tools.iter().map(|(t, _)| t.clone()).collect();
        let Some(size) = self.server.page_size else {
            return Ok(ListToolsResult::with_all_items(all));
        };
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= all.len())
                .ok_or_else(|| ErrorData::invalid_params(format!("bad cursor {cursor:?}"), None))?,
        };
        let end = (start + size).min(all.len());
        let mut page = ListToolsResult::with_all_items(all[start..end].to_vec());
        page.next_cursor = (end < all.len()).then(|| end.to_string());
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some((_, handler)) = self
            .server
            .tools
            .iter()
            .find(|(t, _)| t.name == request.name)
        else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        // The call's token fires on notifications/cancelled or when the
        // client is gone, whichever comes first.
        let token = self.gone.child_token();
        let call = handler(arguments, token.clone());
        tokio::pin!(call);
        // Passes the request's cancellation on, then lets the handler finish
        // its clean-up (its answer is discarded by rmcp).
        loop {
            tokio::select! {
                result = &mut call => return result.map(Into::into),
                () = context.ct.cancelled(), if !token.is_cancelled() => token.cancel(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(server: &ToolServer, name: &str) -> serde_json::Value {
        serde_json::Value::Object((*server.listed(name).unwrap().input_schema).clone())
    }

    // [H5], [K1]: a plain hook's schema names nothing, so it gets `{}`; one
    // built with fields names exactly those, typed, none required.
    #[tokio::test]
    async fn hooks_declare_the_input_they_want_k1() {
        let server = ToolServer::new("t")
            .hook(HookPoint::Stop, "plain", |_cancel| async {
                "no".to_owned()
            })
            .hook_with_input(
                HookPoint::PreToolUse,
                "with input",
                &[InputField::Tool, InputField::Arguments],
                |input, _cancel| async move { serde_json::Value::Object(input).to_string() },
            );
        assert_eq!(schema(&server, "_Stop"), json!({"type": "object"}));
        let asked = schema(&server, "_PreToolUse");
        assert_eq!(asked["type"], "object");
        assert_eq!(asked["properties"]["tool"]["type"], "string");
        assert_eq!(asked["properties"]["arguments"]["type"], "object");
        assert_eq!(asked["properties"].as_object().unwrap().len(), 2);
        assert!(asked.get("required").is_none());
        assert!(asked.get("additionalProperties").is_none());
        assert_eq!(server.call_text("_Stop", json!({"attempt": 1})).await, "no");
        // Compared as values: a workspace build keeps JSON keys in insertion
        // order (serde_json's preserve_order), a crate build sorts them.
        let echoed = server
            .call_text(
                "_PreToolUse",
                json!({"tool": "push", "arguments": {"f": 1}}),
            )
            .await;
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&echoed).unwrap(),
            json!({"arguments": {"f": 1}, "tool": "push"})
        );
    }

    // The core reads the schema's property names back as the fields asked
    // for [K1], with nothing unfillable [K4].
    #[test]
    fn every_field_schema_reads_back_as_its_field_k2() {
        for hook in HookPoint::ALL {
            let fields: Vec<InputField> = InputField::ALL
                .into_iter()
                .filter(|f| f.applies_at(hook))
                .collect();
            let listed =
                hooks_core::ListedTool::from_schema(hook.tool_name(), &hook_input_schema(&fields));
            let (input, unfillable) = hooks_core::HookInput::read(hook, &listed);
            assert_eq!(input.fields(), fields.as_slice(), "{hook}");
            assert!(unfillable.is_empty());
        }
    }
}
