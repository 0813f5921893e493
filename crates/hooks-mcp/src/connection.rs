//! One live connection to one MCP server, over stdio or Streamable HTTP.
//!
//! A stdio server is a child process in its own process group, with a small
//! environment ([`crate::spec::child_environment`]) and its stderr kept (the
//! last lines, for start-up errors) and logged. Killing it signals the whole
//! group, SIGTERM and then SIGKILL shortly after, so helpers it spawned die
//! with it. An HTTP server's "kill" closes its session.
//!
//! Every connection has a watcher task: when the session ends for any reason
//! it reaps the child, kills what is left of its group, and reports the end
//! once. This module decides nothing: whether to kill, when to restart, is
//! the core's call, relayed by [`crate::host`].

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool};
use rmcp::service::{Peer, RoleClient, RunningService, RunningServiceCancellationToken};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceError, ServiceExt};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::spec::{ServerSpec, TransportSpec, child_environment};

/// Stderr lines kept per stdio server, for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// How long a killed server has between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(250);

/// How long a child may take to exit after its stdin closed at shutdown,
/// before its group is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// A connected server.
pub(crate) struct Connection {
    peer: Peer<RoleClient>,
    /// Taken by the first of `kill` and `close`.
    stop: Mutex<Option<RunningServiceCancellationToken>>,
    /// The child's process group id (its pid); `None` for HTTP.
    pgid: Option<i32>,
    /// Set by the watcher once the child is reaped and its group killed:
    /// the id may then belong to someone else.
    ended: Arc<AtomicBool>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("pgid", &self.pgid)
            .finish_non_exhaustive()
    }
}

/// Why a start failed, for people.
pub(crate) type StartError = String;

impl Connection {
    /// Connects to `spec` and lists its tools, all within `deadline`. On
    /// success the watcher is running and will call `on_end` once, with a
    /// reason, when the session ends.
    pub(crate) async fn connect(
        spec: &ServerSpec,
        deadline: Duration,
        on_end: impl FnOnce(String) + Send + 'static,
    ) -> Result<(Arc<Connection>, Vec<Tool>), StartError> {
        match &spec.transport {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = Command::new(command);
                cmd.args(args)
                    .env_clear()
                    .envs(child_environment(std::env::vars(), env))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .process_group(0)
                    .kill_on_drop(true);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let mut child = cmd
                    .spawn()
                    .map_err(|e| format!("cannot run {command:?}: {e}"))?;
                let pgid = child.id().and_then(|id| i32::try_from(id).ok());
                let tail = Arc::new(Mutex::new(VecDeque::new()));
                let stderr_reader = child.stderr.take().map(|stderr| {
                    tokio::spawn(drain_stderr(spec.name.to_string(), stderr, tail.clone()))
                });
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    kill_group(pgid);
                    return Err("the child's stdio pipes were not available".into());
                };
                match handshake((stdout, stdin), deadline).await {
                    Ok((service, tools)) => {
                        Ok((Connection::watch(service, pgid, Some(child), on_end), tools))
                    }
                    Err(e) => Err(start_failure(&e, &mut child, pgid, &tail, stderr_reader).await),
                }
            }
            TransportSpec::Http { url, headers } => {
                let mut custom = std::collections::HashMap::new();
                for (name, value) in headers {
                    let parsed = (
                        reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                        reqwest::header::HeaderValue::from_str(value),
                    );
                    let (Ok(name), Ok(value)) = parsed else {
                        return Err(format!(
                            "{url}: the header {name:?} is not a valid HTTP header"
                        ));
                    };
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let transport = StreamableHttpClientTransport::from_config(config);
                match handshake(transport, deadline).await {
                    Ok((service, tools)) => {
                        Ok((Connection::watch(service, None, None, on_end), tools))
                    }
                    Err(e) => Err(format!("{url}: {e}")),
                }
            }
        }
    }

    fn watch(
        service: RunningService<RoleClient, ()>,
        pgid: Option<i32>,
        child: Option<Child>,
        on_end: impl FnOnce(String) + Send + 'static,
    ) -> Arc<Connection> {
        let peer = service.peer().clone();
        let stop = service.cancellation_token();
        let ended = Arc::new(AtomicBool::new(false));
        let ended_in_watcher = ended.clone();
        let watcher = tokio::spawn(async move {
            let waiting = service.waiting();
            tokio::pin!(waiting);
            let (quit, status) = match child {
                None => (waiting.await, None),
                Some(mut child) => {
                    // The child may exit while something it spawned still
                    // holds its stdout open, so watch the process as well as
                    // the session.
                    tokio::select! {
                        quit = &mut waiting => {
                            let status = match tokio::time::timeout(SHUTDOWN_GRACE, child.wait()).await {
                                Ok(status) => status.ok(),
                                Err(_) => {
                                    kill_group(pgid);
                                    child.wait().await.ok()
                                }
                            };
                            kill_group(pgid);
                            (quit, status)
                        }
                        status = child.wait() => {
                            // Whatever the child left running in its group
                            // goes too; that closes the pipes it held.
                            kill_group(pgid);
                            (waiting.await, status.ok())
                        }
                    }
                }
            };
            let mut reason = match quit {
                Ok(rmcp::service::QuitReason::Closed) => "its connection closed".to_owned(),
                Ok(rmcp::service::QuitReason::Cancelled) => "it was shut down".to_owned(),
                Ok(other) => format!("its session ended ({other:?})"),
                Err(e) => format!("its session task failed: {e}"),
            };
            if let Some(status) = status {
                reason = format!("the process exited ({status}); {reason}");
            }
            ended_in_watcher.store(true, Ordering::SeqCst);
            on_end(reason);
        });
        Arc::new(Connection {
            peer,
            stop: Mutex::new(Some(stop)),
            pgid,
            ended,
            watcher: Mutex::new(Some(watcher)),
        })
    }

    /// Calls tool `name` with `arguments`. Dropping the future cancels the
    /// request on the wire (`notifications/cancelled`).
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, ServiceError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        self.peer.call_tool(params).await
    }

    /// Kills the server now: its process group for stdio, its session for
    /// HTTP [T3]. The watcher reaps and reports.
    pub(crate) fn kill(&self) {
        // SIGTERM first, so a server can stop what it started in groups of
        // its own (the gate's command); SIGKILL to the group shortly after.
        if !self.ended.load(Ordering::SeqCst)
            && let Some(pgid) = self.pgid
        {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGTERM);
            let ended = self.ended.clone();
            tokio::spawn(async move {
                tokio::time::sleep(KILL_GRACE).await;
                if !ended.load(Ordering::SeqCst) {
                    kill_group(Some(pgid));
                }
            });
        }
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            stop.cancel();
        }
    }

    /// Closes the session (stdin EOF for a child, DELETE for HTTP), gives a
    /// child a moment to exit, kills its group, and waits for all of it.
    pub(crate) async fn close(&self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            stop.cancel();
        }
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(watcher) = watcher {
            let _ = watcher.await;
        }
    }
}

/// A connection dropped without [`Connection::close`] (its host was dropped,
/// say) still takes its processes with it.
impl Drop for Connection {
    fn drop(&mut self) {
        if !self.ended.load(Ordering::SeqCst) {
            kill_group(self.pgid);
        }
        if let Some(stop) = self
            .stop
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            stop.cancel();
        }
    }
}

/// Initializes a session over `transport` and lists its tools (all pages),
/// both within `deadline`.
async fn handshake<T, E, A>(
    transport: T,
    deadline: Duration,
) -> Result<(RunningService<RoleClient, ()>, Vec<Tool>), String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let started = tokio::time::timeout(deadline, async {
        let service = ().serve(transport).await.map_err(|e| e.to_string())?;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((service, tools))
    })
    .await;
    started.unwrap_or_else(|_| {
        Err(format!(
            "no answer to initialize and tools/list within {}ms",
            deadline.as_millis()
        ))
    })
}

/// SIGKILL to a whole process group; a group that is gone already is fine.
fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

async fn start_failure(
    error: &str,
    child: &mut Child,
    pgid: Option<i32>,
    tail: &Arc<Mutex<VecDeque<String>>>,
    stderr_reader: Option<JoinHandle<()>>,
) -> StartError {
    let exited = child.try_wait().ok().flatten();
    kill_group(pgid);
    let _ = child.wait().await;
    // Let the stderr reader take the last lines (the pipe is closed now).
    if let Some(reader) = stderr_reader {
        let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
    }
    let mut message = match exited {
        Some(status) => format!("the process exited during start-up ({status}): {error}"),
        None => error.to_owned(),
    };
    let lines = tail.lock().unwrap_or_else(|e| e.into_inner());
    if !lines.is_empty() {
        message.push_str("; its stderr ends with: ");
        message.push_str(&lines.iter().cloned().collect::<Vec<_>>().join(" | "));
    }
    message
}

/// Longest stderr line kept; the rest of a longer line is dropped, so a
/// server that writes without newlines cannot grow our memory.
const STDERR_LINE_BYTES: usize = 4096;

async fn drain_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut reader = BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let (piece, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(end) => (&chunk[..end], true),
            None => (chunk, false),
        };
        let room = STDERR_LINE_BYTES.saturating_sub(line.len());
        cut |= piece.len() > room;
        line.extend_from_slice(&piece[..piece.len().min(room)]);
        let used = piece.len() + usize::from(newline);
        reader.consume(used);
        if newline {
            keep_line(&server, &tail, &line, cut);
            line.clear();
            cut = false;
        }
    }
    if !line.is_empty() {
        keep_line(&server, &tail, &line, cut);
    }
}

/// Logs one stderr line and keeps it in the tail.
fn keep_line(server: &str, tail: &Mutex<VecDeque<String>>, line: &[u8], cut: bool) {
    let mut text = String::from_utf8_lossy(line).into_owned();
    if cut {
        text.push_str(" […]");
    }
    tracing::debug!(target: "sprout::mcp::stderr", server = %server, "{text}");
    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    if tail.len() == STDERR_TAIL_LINES {
        tail.pop_front();
    }
    tail.push_back(text);
}
