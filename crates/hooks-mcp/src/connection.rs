//! One live connection to one MCP server, over stdio or Streamable HTTP.
//!
//! A stdio server is a child process in its own process group, with a small
//! environment ([`crate::spec::child_environment`]) and its stderr read line
//! by line (bounded lines; the last few kept for start-up errors) and logged.
//! Killing it signals the whole group, SIGTERM and then SIGKILL shortly
//! after, so helpers it spawned die with it. An HTTP server's "kill" closes
//! its session.
//!
//! Every transport is [`Guarded`]: a server that floods us or stops reading
//! is found wedged and its connection ends (see [`crate::guard`]). The
//! listing at start is bounded in pages, tools and bytes ([`ListingLimits`]).
//!
//! Every connection has a watcher task: when the session ends for any reason
//! it reaps the child, kills what is left of its group, and reports the end
//! once. [`Connection::close`] always returns within a fixed bound, whatever
//! the server does. This module decides nothing: whether to kill, when to
//! restart, is the core's call, relayed by [`crate::host`].

use std::collections::{BTreeSet, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, PaginatedRequestParams, ProtocolVersion, Tool,
};
use rmcp::service::{Peer, RoleClient, RunningService, RunningServiceCancellationToken};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceError, ServiceExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead, LinesCodec, LinesCodecError};

use crate::guard::{Guarded, Limits, Tripwire};
use crate::process::kill_group;
use crate::reply::describe_service_error;
use crate::spec::{ServerSpec, TransportSpec, child_environment, redact_url};

/// Stderr lines kept per stdio server, for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// Longest stderr line kept; the rest of a longer line is dropped, so a
/// server that writes without newlines cannot grow our memory.
const STDERR_LINE_BYTES: usize = 4096;

/// How long a killed server has between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(250);

/// How long a child may take to exit after its stdin closed at shutdown,
/// before its group is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// How long a failed start waits for the stderr reader to take the last
/// lines once the pipe is closed (they go into the error).
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// How long the watcher may take to reap and report once the group was
/// killed; past it, [`Connection::close`] stops waiting.
const REAP_BOUND: Duration = Duration::from_secs(1);

/// The protocol revision offered in `initialize`: the newest one that has an
/// `initialize` request, which older servers negotiate down from.
const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Bounds on a server's `tools/list` at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListingLimits {
    /// Pages (`nextCursor` round trips).
    pub max_pages: usize,
    /// Tools, hooks included.
    pub max_tools: usize,
    /// Bytes of the listing, as JSON.
    pub max_bytes: usize,
}

impl Default for ListingLimits {
    fn default() -> Self {
        ListingLimits {
            max_pages: 100,
            max_tools: 1000,
            max_bytes: 4 * 1024 * 1024,
        }
    }
}

/// Why a server did not start. Every message names what happened in words a
/// person can act on.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The program could not be run.
    #[error("cannot run {command:?}: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// A configured header is not valid HTTP.
    #[error("the header {0:?} is not a valid HTTP header")]
    BadHeader(String),
    /// `initialize` and `tools/list` took longer than the start deadline.
    #[error("no answer to initialize and tools/list within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The handshake or the listing failed.
    #[error("{0}")]
    Handshake(String),
    /// The listing broke one of the [`ListingLimits`].
    #[error("its tool listing is too large: {0}")]
    Listing(String),
    /// The process exited or was found wedged while starting.
    #[error("{what}: {error}{tail}", tail = tail_text(.stderr_tail))]
    Ended {
        /// What happened to the process.
        what: String,
        /// The handshake's error.
        error: Box<StartError>,
        /// Its last stderr lines.
        stderr_tail: Vec<String>,
    },
}

/// Why a live server's session ended, as its watcher saw it: what the host
/// reports and the core is told \[T4\].
#[derive(Debug, thiserror::Error)]
pub(crate) enum Ended {
    /// The server closed the connection.
    #[error("its connection closed")]
    Closed,
    /// We shut it down.
    #[error("it was shut down")]
    ShutDown,
    /// The session ended for another reason.
    #[error("its session ended")]
    Otherwise,
    /// rmcp's session task panicked or was cancelled.
    #[error("its session task failed: {0}")]
    TaskFailed(#[source] tokio::task::JoinError),
    /// The guard found it wedged (why, in the guard's words).
    #[error("it was stopped as wedged: {0}")]
    Wedged(String),
    /// The process exited; then the session ended as `then` says.
    #[error("the process exited ({status}); {then}")]
    Exited {
        /// How it exited.
        status: std::process::ExitStatus,
        /// How the session ended.
        then: Box<Ended>,
    },
}

fn tail_text(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ends with: {}", lines.join(" | "))
    }
}

/// Process groups of live stdio children, so that [`kill_all_now`] can reach
/// them from a path that cannot wait (a second Ctrl-C).
static LIVE_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// A process group in [`LIVE_GROUPS`]. Released by whoever reaps its
/// leader; dropped unreleased (a start abandoned half-way, a task dropped at
/// runtime shutdown), it kills the group, since nobody else will.
#[derive(Debug)]
struct LiveGroup(i32);

impl LiveGroup {
    fn new(pgid: i32) -> LiveGroup {
        LIVE_GROUPS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pgid);
        LiveGroup(pgid)
    }

    /// The group is dead and its leader reaped: forget it without a signal
    /// (its id may be reused from now on).
    fn release(self) {
        LIVE_GROUPS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
        std::mem::forget(self);
    }
}

impl Drop for LiveGroup {
    fn drop(&mut self) {
        // Invariant: not released, so the leader was not reaped and the id
        // is still this group's.
        kill_group(Some(self.0));
        LIVE_GROUPS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

/// Ends the process group of every stdio server this process started and
/// has not reaped yet: SIGTERM, a tenth of a second to let servers stop what
/// they put in groups of their own (the gate's command), then SIGKILL. For a
/// process about to exit without waiting (a second Ctrl-C); it blocks the
/// calling thread that long.
pub fn kill_all_now() {
    let groups = LIVE_GROUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for pgid in &groups {
        let _ = killpg(Pid::from_raw(*pgid), Signal::SIGTERM);
    }
    std::thread::sleep(Duration::from_millis(100));
    for pgid in groups {
        kill_group(Some(pgid));
    }
}

/// A connected server.
pub(crate) struct Connection {
    peer: Peer<RoleClient>,
    /// Taken by the first of `kill` and `close`.
    stop: Mutex<Option<RunningServiceCancellationToken>>,
    /// Ends the transport's IO at once.
    wire: Tripwire,
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

/// Our side of a connection. It offers a server nothing a server may ask
/// of a client (sampling, roots, elicitation) and answers each such request
/// at once with a method-not-found error; nothing queues for them.
#[derive(Clone, Debug)]
struct SproutClient;

impl rmcp::ClientHandler for SproutClient {
    // Roots are deprecated in the protocol, but servers written for older
    // revisions still ask.
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        Err(rmcp::ErrorData::method_not_found::<
            rmcp::model::ListRootsRequestMethod,
        >())
    }

    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Err(rmcp::ErrorData::method_not_found::<
            rmcp::model::ElicitationCreateRequestMethod,
        >())
    }

    /// What `initialize` says about us: the protocol revision we offer, no
    /// capabilities, and our name and version.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("sprout", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(PROTOCOL_VERSION)
    }
}

impl Connection {
    /// Connects to `spec` and lists its tools, all within `deadline`. On
    /// success the watcher is running and will call `on_end` once, with a
    /// reason, when the session ends.
    pub(crate) async fn connect(
        spec: &ServerSpec,
        deadline: Duration,
        listing: ListingLimits,
        on_end: impl FnOnce(Ended) + Send + 'static,
    ) -> Result<(Arc<Connection>, Vec<Tool>), StartError> {
        let wire = Tripwire::default();
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
                let mut child = cmd.spawn().map_err(|source| StartError::Spawn {
                    command: command.clone(),
                    source,
                })?;
                let pgid = child.id().and_then(|id| i32::try_from(id).ok());
                let live = pgid.map(LiveGroup::new);
                let tail = Arc::new(Mutex::new(VecDeque::new()));
                let stderr_reader = child.stderr.take().map(|stderr| {
                    tokio::spawn(read_stderr(spec.name.to_string(), stderr, tail.clone()))
                });
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    // `live` kills the group as it goes.
                    let _ = child.start_kill();
                    return Err(StartError::Handshake(
                        "the child's stdio pipes were not available".into(),
                    ));
                };
                let transport = Guarded::new(
                    crate::stdio::Stdio::<_, _, crate::stdio::Client>::new(stdout, stdin),
                    Limits::stdio(),
                    wire.clone(),
                );
                match handshake(transport, deadline, listing).await {
                    Ok((service, tools)) => Ok((
                        Connection::watch(service, wire, pgid, Some((child, live)), on_end),
                        tools,
                    )),
                    Err(e) => {
                        wire.cut();
                        let error =
                            start_failure(e, &wire, &mut child, pgid, &tail, stderr_reader).await;
                        if let Some(live) = live {
                            live.release();
                        }
                        Err(error)
                    }
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
                        return Err(StartError::BadHeader(name.clone()));
                    };
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let transport = Guarded::new(
                    StreamableHttpClientTransport::from_config(config),
                    Limits::http(),
                    wire.clone(),
                );
                match handshake(transport, deadline, listing).await {
                    Ok((service, tools)) => {
                        Ok((Connection::watch(service, wire, None, None, on_end), tools))
                    }
                    Err(e) => {
                        wire.cut();
                        Err(match wire.wedged() {
                            Some(reason) => StartError::Handshake(reason),
                            None => redact_error(e, url),
                        })
                    }
                }
            }
        }
    }

    /// Connects to `server` running in this process, over an in-memory
    /// pipe, through the same [`Guarded`] transport (stdio's limits),
    /// handshake, listing and watcher as a stdio child; for the host's tests,
    /// which run in paused time and so cannot wait on a real process. A kill
    /// ends the session, and the server sees its input end.
    #[cfg(test)]
    pub(crate) async fn connect_in_process(
        server: crate::server::ToolServer,
        deadline: Duration,
        listing: ListingLimits,
        on_end: impl FnOnce(Ended) + Send + 'static,
    ) -> Result<(Arc<Connection>, Vec<Tool>), StartError> {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (their_input, their_output) = tokio::io::split(theirs);
        tokio::spawn(async move {
            if let Ok((running, _gone)) = server.serve_on(their_input, their_output).await {
                let _ = running.waiting().await;
            }
        });
        let (our_input, our_output) = tokio::io::split(ours);
        let wire = Tripwire::default();
        let transport = Guarded::new(
            crate::stdio::Stdio::<_, _, crate::stdio::Client>::new(our_input, our_output),
            Limits::stdio(),
            wire.clone(),
        );
        match handshake(transport, deadline, listing).await {
            Ok((service, tools)) => {
                Ok((Connection::watch(service, wire, None, None, on_end), tools))
            }
            Err(e) => {
                wire.cut();
                Err(e)
            }
        }
    }

    fn watch(
        service: RunningService<RoleClient, SproutClient>,
        wire: Tripwire,
        pgid: Option<i32>,
        child: Option<(Child, Option<LiveGroup>)>,
        on_end: impl FnOnce(Ended) + Send + 'static,
    ) -> Arc<Connection> {
        let peer = service.peer().clone();
        let stop = service.cancellation_token();
        let ended = Arc::new(AtomicBool::new(false));
        let ended_in_watcher = ended.clone();
        let wire_in_watcher = wire.clone();
        let watcher = tokio::spawn(async move {
            let wire = wire_in_watcher;
            let waiting = service.waiting();
            tokio::pin!(waiting);
            let mut quit = None;
            let mut status = None;
            match child {
                None => {
                    quit = Some(tokio::select! {
                        quit = &mut waiting => quit,
                        () = wire.fired() => {
                            // Wedged: the session's IO fails from now on;
                            // the session ends within the guard's bounds.
                            waiting.await
                        }
                    });
                }
                Some((mut child, live)) => {
                    // The child may exit while something it spawned still
                    // holds its stdout open, so watch the process as well as
                    // the session; and a wedged or killed server goes at once
                    // (first, when its session ends for that very reason).
                    tokio::select! {
                        biased;
                        () = wire.fired() => {
                            terminate_group(pgid, &ended_in_watcher).await;
                            let _ = child.start_kill();
                            status = child.wait().await.ok();
                        }
                        exited = child.wait() => status = exited.ok(),
                        ended = &mut waiting => {
                            quit = Some(ended);
                            status = match tokio::time::timeout(SHUTDOWN_GRACE, child.wait()).await {
                                Ok(status) => status.ok(),
                                Err(_) => {
                                    terminate_group(pgid, &ended_in_watcher).await;
                                    let _ = child.start_kill();
                                    child.wait().await.ok()
                                }
                            };
                        }
                    }
                    // Whatever the child left running in its group goes too;
                    // that closes the pipes it held. The leader is reaped, so
                    // this is the last signal to that id.
                    kill_group(pgid);
                    if let Some(live) = live {
                        live.release();
                    }
                    if quit.is_none() {
                        // With the process gone the session ends soon; if it
                        // does not, its IO is cut.
                        quit = Some(match tokio::time::timeout(REAP_BOUND, &mut waiting).await {
                            Ok(ended) => ended,
                            Err(_) => {
                                wire.cut();
                                waiting.await
                            }
                        });
                    }
                }
            }
            let mut reason = match quit {
                Some(Ok(rmcp::service::QuitReason::Closed)) => Ended::Closed,
                Some(Ok(rmcp::service::QuitReason::Cancelled)) => Ended::ShutDown,
                Some(Ok(_)) | None => Ended::Otherwise,
                Some(Err(e)) => Ended::TaskFailed(e),
            };
            if let Some(wedged) = wire.wedged() {
                reason = Ended::Wedged(wedged);
            } else if let Some(status) = status {
                reason = Ended::Exited {
                    status,
                    then: Box::new(reason),
                };
            }
            ended_in_watcher.store(true, Ordering::SeqCst);
            on_end(reason);
        });
        Arc::new(Connection {
            peer,
            stop: Mutex::new(Some(stop)),
            wire,
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

    /// Why the server was found wedged, if it was.
    pub(crate) fn wedged(&self) -> Option<String> {
        self.wire.wedged()
    }

    /// Kills the server now: its process group for stdio (the watcher sends
    /// SIGTERM, so a server can stop what it started in groups of its own,
    /// the gate's command, then SIGKILL shortly after), its session for HTTP
    /// \[T3\]. The watcher reaps and reports.
    pub(crate) fn kill(&self) {
        self.wire.cut();
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            stop.cancel();
        }
    }

    /// Closes the session (stdin EOF for a child, DELETE for HTTP), gives a
    /// child a moment to exit, and kills its group. Returns within about
    /// `SHUTDOWN_GRACE + KILL_GRACE + REAP_BOUND`, whatever the server does
    /// (one that never reads its stdin, say).
    pub(crate) async fn close(&self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            stop.cancel();
        }
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(mut watcher) = watcher else {
            return;
        };
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut watcher)
            .await
            .is_ok()
        {
            return;
        }
        // It did not go by itself: cut its IO; the watcher ends its group.
        self.wire.cut();
        if tokio::time::timeout(REAP_BOUND, &mut watcher)
            .await
            .is_err()
        {
            tracing::warn!("an MCP connection did not finish closing; leaving it");
            watcher.abort();
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
        self.wire.cut();
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

/// Initializes a session over `transport` and lists its tools (every page,
/// within `listing`), both within `deadline`.
async fn handshake<T>(
    transport: Guarded<T>,
    deadline: Duration,
    listing: ListingLimits,
) -> Result<(RunningService<RoleClient, SproutClient>, Vec<Tool>), StartError>
where
    T: rmcp::transport::Transport<RoleClient> + 'static,
{
    let started = tokio::time::timeout(deadline, async {
        let service = SproutClient
            .serve(transport)
            .await
            .map_err(|e| StartError::Handshake(describe_init_error(&e)))?;
        let tools = list_tools(service.peer(), listing).await?;
        Ok::<_, StartError>((service, tools))
    })
    .await;
    started.unwrap_or(Err(StartError::TimedOut(deadline)))
}

/// Every page of `tools/list`, within `limits`.
async fn list_tools(
    peer: &Peer<RoleClient>,
    limits: ListingLimits,
) -> Result<Vec<Tool>, StartError> {
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    for _ in 0..limits.max_pages {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|e| {
                StartError::Handshake(format!("tools/list failed: {}", describe_service_error(&e)))
            })?;
        for tool in &page.tools {
            bytes = bytes.saturating_add(serde_json::to_vec(tool).map_or(0, |v| v.len()));
        }
        if bytes > limits.max_bytes {
            return Err(StartError::Listing(format!(
                "more than {} bytes (the limit)",
                limits.max_bytes
            )));
        }
        if tools.len() + page.tools.len() > limits.max_tools {
            return Err(StartError::Listing(format!(
                "more than {} tools (the limit)",
                limits.max_tools
            )));
        }
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(StartError::Listing(format!(
        "more than {} pages (the limit): it keeps answering with a nextCursor",
        limits.max_pages
    )))
}

/// rmcp's handshake errors, in words (its own texts show Rust type names).
fn describe_init_error(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::ConnectionClosed(during) => {
            format!("the server closed the connection during {during}")
        }
        E::TransportError { error, context } => {
            format!("could not {context}: {}", error.error)
        }
        E::JsonRpcError(error) => format!(
            "the server refused initialize: {} (code {})",
            error.message, error.code.0
        ),
        E::ExpectedInitResponse(_) | E::ExpectedInitResult(_) => {
            "the server did not answer initialize with an initialize result".into()
        }
        E::Cancelled => "the start was cancelled".into(),
        other => other.to_string(),
    }
}

/// An HTTP start error with the URL's credentials hidden, also where a
/// library quoted the URL in its message.
fn redact_error(error: StartError, url: &str) -> StartError {
    let text = error.to_string();
    let shown = redact_url(url);
    let mut text = text.replace(url, &shown);
    if let Ok(normal) = reqwest::Url::parse(url) {
        text = text.replace(normal.as_str(), &shown);
    }
    StartError::Handshake(format!("{shown}: {text}"))
}

/// SIGTERM to a process group, then SIGKILL after [`KILL_GRACE`] unless
/// `ended` says its leader was reaped meanwhile (the id may then be reused).
async fn terminate_group(pgid: Option<i32>, ended: &AtomicBool) {
    if let Some(pgid) = pgid {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGTERM);
        tokio::time::sleep(KILL_GRACE).await;
        if !ended.load(Ordering::SeqCst) {
            kill_group(Some(pgid));
        }
    }
}

async fn start_failure(
    error: StartError,
    wire: &Tripwire,
    child: &mut Child,
    pgid: Option<i32>,
    tail: &Arc<Mutex<VecDeque<String>>>,
    stderr_reader: Option<JoinHandle<()>>,
) -> StartError {
    let exited = child.try_wait().ok().flatten();
    kill_group(pgid);
    // Also the leader itself, should it have left its group.
    let _ = child.start_kill();
    let _ = child.wait().await;
    // Let the stderr reader take the last lines (the pipe is closed now).
    if let Some(reader) = stderr_reader {
        let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
    }
    let what = match (wire.wedged(), exited) {
        (Some(wedged), _) => format!("it was stopped as wedged while starting ({wedged})"),
        (None, Some(status)) => format!("the process exited during start-up ({status})"),
        (None, None) => {
            let lines = tail.lock().unwrap_or_else(|e| e.into_inner());
            if lines.is_empty() {
                return error;
            }
            "it did not start".to_owned()
        }
    };
    let stderr_tail = tail
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    StartError::Ended {
        what,
        error: Box::new(error),
        stderr_tail,
    }
}

/// `LinesCodec` for a child's stderr, with its errors turned into marker
/// lines: a bad line neither ends the reading (a child whose stderr is not
/// read blocks once the pipe is full) nor leaves later lines waiting in the
/// buffer (a decoding error pauses tokio-util's reader until more input).
struct StderrLines(LinesCodec);

impl StderrLines {
    fn read(decoded: Result<Option<String>, LinesCodecError>) -> std::io::Result<Option<String>> {
        match decoded {
            Ok(line) => Ok(line),
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(format!(
                "[a line longer than {STDERR_LINE_BYTES} bytes, dropped]"
            ))),
            Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                Ok(Some("[a line that is not UTF-8, dropped]".into()))
            }
            Err(LinesCodecError::Io(e)) => Err(e),
        }
    }
}

impl Decoder for StderrLines {
    type Item = String;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<String>> {
        Self::read(self.0.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<String>> {
        Self::read(self.0.decode_eof(buf))
    }
}

/// Logs a child's stderr line by line and keeps the last lines in `tail`.
/// Lines are capped at [`STDERR_LINE_BYTES`] (a longer one is dropped, with
/// a marker) and need not be UTF-8.
async fn read_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let codec = StderrLines(LinesCodec::new_with_max_length(STDERR_LINE_BYTES));
    let mut lines = FramedRead::new(stderr, codec);
    while let Some(Ok(line)) = lines.next().await {
        keep_line(&server, &tail, line);
    }
}

/// Logs one stderr line and keeps it in the tail.
fn keep_line(server: &str, tail: &Mutex<VecDeque<String>>, text: String) {
    tracing::debug!(target: "sprout::mcp::stderr", server = %server, "{text}");
    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    if tail.len() == STDERR_TAIL_LINES {
        tail.pop_front();
    }
    tail.push_back(text);
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    // A line too long or not UTF-8 becomes a marker, and the lines after it
    // come through while the pipe is still open (no wait for more input).
    #[tokio::test]
    async fn bad_stderr_lines_neither_end_nor_hold_the_reading() {
        let (mut writer, reader) = tokio::io::duplex(1 << 16);
        let mut input = b"first\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', STDERR_LINE_BYTES + 10));
        input.extend_from_slice(b"\n\xff\xfe\nlast\n");
        writer.write_all(&input).await.unwrap();
        let codec = StderrLines(LinesCodec::new_with_max_length(STDERR_LINE_BYTES));
        let lines: Vec<String> = FramedRead::new(reader, codec)
            .take(4)
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(
            lines,
            [
                "first",
                "[a line longer than 4096 bytes, dropped]",
                "[a line that is not UTF-8, dropped]",
                "last"
            ]
        );
        drop(writer);
    }
}
