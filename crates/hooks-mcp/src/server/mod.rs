//! Writing hook servers: [`ToolServer`], and the two that ship with Sprout.
//!
//! A hook server is an ordinary MCP server that lists tools whose names start
//! with `_` (`_Stop`, `_PostCompact`). The agent calls them with `{}` and
//! reads the text they answer: non-empty text objects (for `_Stop`) or is
//! re-injected (for `_PostCompact`); empty text means nothing. The agent gives
//! each call a deadline (`SPROUT_AGENT_HOOK_TIMEOUT_MS`, 2.5 s by default) and
//! cancels it with `notifications/cancelled` when it runs out.
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
//! - [`todo`](mod@todo): a `todo` tool, `_Stop` objecting while items are open,
//!   `_PostCompact` re-injecting the list.
//! - [`gate`]: `_Stop` runs a command and objects while it fails.

pub mod gate;
pub mod todo;

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use hooks_core::HookPoint;
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

    /// Adds a hook: a `_Stop` or `_PostCompact` tool whose input (normally
    /// `{}`, possibly more from a future agent) is accepted and ignored. The
    /// handler answers text: empty for nothing.
    pub fn hook<F, Fut>(self, hook: HookPoint, description: &str, handler: F) -> ToolServer
    where
        F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = String> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let tool = Tool::new(
            hook.tool_name(),
            description.to_owned(),
            any_object_schema(),
        );
        self.tool(tool, move |_args, cancel| {
            let handler = handler.clone();
            async move {
                Ok(CallToolResult::success(vec![ContentBlock::text(
                    handler(cancel).await,
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
        let running = handler
            .serve((input, output))
            .await
            .map_err(std::io::Error::other)?;
        Ok((running, gone))
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
