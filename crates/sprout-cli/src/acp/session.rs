//! The session table: every open session, one prompt at a time in each, and
//! the tasks that run starts and prompts.
//!
//! A session is its own agent with its own MCP servers (ours, then the
//! client's, run in its `cwd`) and its own hook budget \[S3\]. A prompt locks
//! its session's agent for as long as it runs: a second prompt gets an error,
//! not a queue. Starts and prompts run as tokio tasks of this table (not the
//! SDK's, which die with the connection), so that at the end of the
//! connection they can be cancelled, awaited, and their servers shut down.
//! What goes wrong is a [`SessionError`], which knows its JSON-RPC error.
//!
//! Not here: the SDK's handlers and reading the requests (`serve`), what the
//! client is told of a session (`updates`).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as s;
use agent_client_protocol::{self as acp, Client};
use agent_loop::{Agent, PromptOutcome};
use hooks_core::{HookContext, ServerName, ServerNameError, SessionEndReason, SetupError};
use hooks_mcp::{Host, ServerSpec, TransportSpec};
use tokio_util::sync::CancellationToken;

use super::ask::{self, TrustAnswer};
use super::framing::Out;
use super::updates::UpdateSink;
use super::{AcpConfig, lock};
use crate::sessions::{LockError, SessionLock};
use crate::settings::ConfigProblem;
use crate::trust::{Pending, Servers};

/// How long the end of a session, or of the connection, waits for a
/// running prompt to stop.
const DRAIN: Duration = Duration::from_secs(10);

/// Why a session could not be opened or prompted, or was not found.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// No open session has the id.
    #[error("unknown session {0:?}")]
    Unknown(String),
    /// The prompt had no text block, resource or link to read.
    #[error("the prompt has no text Sprout can read")]
    NoText,
    /// One prompt at a time per session.
    #[error("a prompt is already running in this session; cancel it or wait")]
    Busy,
    /// The session was shut down.
    #[error("the session is closed")]
    Closed,
    /// `session/new`'s `cwd`, as shown.
    #[error("cwd {0:?} is not an absolute path to an existing directory")]
    BadCwd(String),
    /// The `.mcp.json` of the session's `cwd`.
    #[error(transparent)]
    Config(#[from] ConfigProblem),
    /// A client's server with a name ours already has.
    #[error("MCP server {0} is configured by sprout already")]
    Configured(ServerName),
    /// A client's server listed twice.
    #[error("MCP server {0} is listed twice")]
    Twice(ServerName),
    /// A client's server with a name that is not a server name.
    #[error(transparent)]
    Name(#[from] ServerNameError),
    /// A client's HTTP server with a URL we cannot use.
    #[error("MCP server {name}: url {shown:?} {why}")]
    Url {
        /// The server.
        name: String,
        /// Its URL, credentials redacted.
        shown: String,
        /// What is wrong with it.
        why: hooks_mcp::UrlError,
    },
    /// A client's server over the old SSE transport.
    #[error("MCP server {0}: the SSE transport is not supported; use Streamable HTTP")]
    Sse(String),
    /// A server entry of a kind this SDK version does not know.
    #[error("an MCP server entry of an unknown kind")]
    UnknownKind,
    /// The policy refused the session's servers.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// `session/load` of an id that is no saved session.
    #[error("no saved session {0:?}")]
    NotSaved(String),
    /// `session/load` of a session that is open already.
    #[error("session {0:?} is open already")]
    Open(String),
    /// `session/load` of a session another process (or another load in
    /// this one) has open.
    #[error(
        "session {0:?} is in use: another sprout process has it open (or is loading it); close it there first, or start a new session"
    )]
    InUse(String),
    /// A saved session that cannot be read or picked up.
    #[error("cannot load session {id:?}: {why}")]
    Load {
        /// The session.
        id: String,
        /// Why.
        why: String,
    },
}

impl From<SessionError> for acp::Error {
    fn from(error: SessionError) -> acp::Error {
        let kind = match error {
            SessionError::Busy | SessionError::Closed => acp::Error::invalid_request(),
            _ => acp::Error::invalid_params(),
        };
        explained(kind, error.to_string())
    }
}

/// `kind` with `text` as its message as well as its data: clients show
/// the message (\"Internal error\" says nothing), and `data` keeps it for
/// those that read it.
pub(super) fn explained(kind: acp::Error, text: String) -> acp::Error {
    let mut error = kind.data(text.clone());
    error.message = text;
    error
}

/// One open session.
struct Session {
    /// Locked by the prompt that runs; `None` only once shut down.
    agent: Arc<tokio::sync::Mutex<Option<Agent<Host>>>>,
    cancel: Mutex<Option<CancellationToken>>,
    /// Keeps the session's transcript to this process while it is open;
    /// a running prompt holds it too, so a prompt that outlives the
    /// session's close (past [`DRAIN`]) still writes under the lock
    /// (`None`: not saved, or the lock could not be taken).
    lock: Option<Arc<SessionLock>>,
}

impl Session {
    fn cancel(&self) {
        if let Some(token) = lock(&self.cancel).as_ref() {
            token.cancel();
        }
    }

    /// Cancels the session's prompt, waits for it, tells `_SessionEnd` why
    /// the session ends (within its 1 s deadline) \[E6\], and stops its
    /// servers.
    async fn close(&self, reason: SessionEndReason) {
        self.cancel();
        let agent = match tokio::time::timeout(DRAIN, self.agent.lock()).await {
            Ok(mut guard) => guard.take(),
            Err(_) => None,
        };
        if let Some(mut agent) = agent {
            agent.end_session(reason).await;
            agent.into_gateway().shutdown().await;
        }
    }
}

/// A prompt that holds its session's agent until it has run.
pub(super) struct Prompt {
    guard: tokio::sync::OwnedMutexGuard<Option<Agent<Host>>>,
    agent: Agent<Host>,
    text: String,
    token: CancellationToken,
    /// The session's lock, held until the prompt is over.
    _lock: Option<Arc<SessionLock>>,
}

impl Prompt {
    /// Runs the prompt to its end; `cancelled` resolving cancels it (the
    /// client's `$/cancel_request`). The session takes the next prompt
    /// from the moment this returns.
    pub(super) async fn run(
        self,
        cancelled: impl Future<Output = ()> + Send + 'static,
    ) -> PromptOutcome {
        let Prompt {
            mut guard,
            mut agent,
            text,
            token,
            _lock: lock,
        } = self;
        let linked = token.clone();
        let link = tokio::spawn(async move {
            cancelled.await;
            linked.cancel();
        });
        let outcome = agent.run_prompt(&text, &token).await;
        link.abort();
        *guard = Some(agent);
        // The agent (the last one to write the transcript, should the
        // session be gone) before the lock.
        drop(guard);
        drop(lock);
        outcome
    }
}

/// Every open session of the connection, and the tasks that serve them.
pub(super) struct Sessions {
    config: AcpConfig,
    open: Mutex<HashMap<String, Arc<Session>>>,
    next_session: AtomicU64,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Stdout, where every session's updates go.
    out: Arc<Out>,
}

impl Sessions {
    pub(super) fn new(config: AcpConfig, out: Arc<Out>) -> Arc<Sessions> {
        Arc::new(Sessions {
            config,
            out,
            open: Mutex::new(HashMap::new()),
            next_session: AtomicU64::new(1),
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// Stdout.
    pub(super) fn out(&self) -> &Arc<Out> {
        &self.out
    }

    /// Runs `task` as one of the table's, awaited at the end.
    pub(super) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(tokio::spawn(task));
    }

    /// Opens a session for `request`: checks the `cwd`, gathers the servers
    /// (ours, then the client's), starts them and makes the agent. The sink
    /// holds the session's updates until it is released, once the client
    /// has the response that names the session. With saving on, the
    /// session's transcript is written as it goes, under its id.
    pub(super) async fn open(
        &self,
        request: s::NewSessionRequest,
        client: ConnectionTo<Client>,
    ) -> Result<(s::NewSessionResponse, Arc<UpdateSink>), SessionError> {
        let n = self.next_session.fetch_add(1, Ordering::SeqCst);
        let id = match &self.config.save_in {
            // Unique across processes too: it names the transcript's file.
            Some(_) => format!("{}-{n}", crate::sessions::new_id()),
            None => format!("sprout-{n}"),
        };
        let (session_id, updates) = self
            .start(&id, &request.cwd, &request.mcp_servers, None, client)
            .await?;
        Ok((s::NewSessionResponse::new(session_id), updates))
    }

    /// Loads saved session `request.session_id` (`session/load`), unless
    /// another process (or another load here) has it open: its lock is
    /// taken first, within a short bound, never waited on for long. Its
    /// servers are started afresh (less those that used their failures
    /// \[T4\]), its history and `_Stop` budget restored,
    /// and the history replayed to the client as updates before the answer
    /// (\[E1\]: `_SessionStart` is asked again at the next prompt).
    pub(super) async fn load(
        &self,
        request: s::LoadSessionRequest,
        client: ConnectionTo<Client>,
    ) -> Result<(s::LoadSessionResponse, Arc<UpdateSink>), SessionError> {
        let id = request.session_id.0.to_string();
        if lock(&self.open).contains_key(&id) {
            return Err(SessionError::Open(id));
        }
        let Some(dir) = &self.config.sessions_dir else {
            return Err(SessionError::NotSaved(id));
        };
        if !agent_loop::transcript::valid_id(&id) {
            return Err(SessionError::NotSaved(id));
        }
        let path = dir.join(format!("{id}.{}", agent_loop::transcript::EXTENSION));
        if !path.is_file() {
            return Err(SessionError::NotSaved(id));
        }
        // Locked before it is read: what is read is what this process goes
        // on writing after.
        let lock = SessionLock::take_async(&path).await.map_err(|e| match e {
            LockError::InUse => SessionError::InUse(id.clone()),
            LockError::Io(e) => SessionError::Load {
                id: id.clone(),
                why: e.to_string(),
            },
        })?;
        let saved = agent_loop::transcript::read(&path).map_err(|e| SessionError::Load {
            id: id.clone(),
            why: e.to_string(),
        })?;
        let (_, updates) = self
            .start(
                &id,
                &request.cwd,
                &request.mcp_servers,
                Some((saved, lock)),
                client,
            )
            .await?;
        Ok((s::LoadSessionResponse::new(), updates))
    }

    /// The servers of the `.mcp.json` in `cwd` that may start: the
    /// trusted ones, and the untrusted ones if the person lets them start,
    /// asked through the client before any of them starts \[U3\]. The
    /// session works either way; what did not start is said to the person.
    async fn project_servers(
        &self,
        cwd: &Path,
        session: &str,
        client: &ConnectionTo<Client>,
        updates: &UpdateSink,
    ) -> Result<Servers, SessionError> {
        let mut servers = crate::settings::servers_in(cwd)?;
        let pending = Pending::of(&servers).map_err(ConfigProblem::from)?;
        if pending.is_empty() {
            return Ok(servers);
        }
        let not_started = |why: &str| {
            format!(
                "not starting {} of {}: {why}; the session goes on without them (`sprout trust {}` trusts them)",
                pending.names().join(", "),
                pending.file.display(),
                cwd.display()
            )
        };
        match ask::trust(client, session, &pending.file, &pending.shown).await {
            Ok(TrustAnswer::Always) => {
                if let Err(e) = pending.trust() {
                    tracing::warn!("{e}");
                    updates.say(&format!(
                        "could not record the trust ({e}); they start this once"
                    ));
                }
            }
            Ok(TrustAnswer::Once) => {}
            Ok(TrustAnswer::Reject) => {
                updates.say(&not_started("you chose not to start them"));
                pending.withhold(&mut servers);
            }
            Err(e) => {
                updates.say(&not_started(&format!(
                    "the client could not be asked ({e})"
                )));
                pending.withhold(&mut servers);
            }
        }
        Ok(servers)
    }

    /// Starts session `id` in `cwd` with the client's `servers` (after
    /// ours), picking up `saved` if given, and puts it in the table.
    async fn start(
        &self,
        id: &str,
        cwd: &Path,
        servers: &[s::McpServer],
        saved: Option<(agent_loop::transcript::SavedSession, SessionLock)>,
        client: ConnectionTo<Client>,
    ) -> Result<(s::SessionId, Arc<UpdateSink>), SessionError> {
        let (saved, mut held) = match saved {
            Some((saved, held)) => (Some(saved), Some(held)),
            None => (None, None),
        };
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(SessionError::BadCwd(cwd.display().to_string()));
        }
        let session_id = s::SessionId::new(id.to_owned());
        let updates = UpdateSink::new(self.out.clone(), session_id.clone());
        // The client's own servers are checked before the person is asked
        // about the project's.
        let theirs = client_servers(servers, cwd)?;
        let mut servers = match &self.config.servers {
            Some(servers) => servers.clone(),
            None => self.project_servers(cwd, id, &client, &updates).await?,
        };
        // What was allowed for good, of the file's servers that start;
        // taken before the client's join, so none of theirs is taken for
        // a file's entry of the same name [U6].
        let remembered = crate::approve::Remembered::of(&servers);
        for spec in theirs {
            if servers.specs.iter().any(|s| s.name == spec.name) {
                return Err(SessionError::Configured(spec.name));
            }
            servers.specs.push(spec);
        }
        let approval = crate::approve::with_rules(
            agent_loop::Approval::new(
                self.config.approval,
                ask::approver(ask::ClientApprover {
                    client,
                    session: session_id.clone(),
                    remembered,
                }),
            ),
            &servers,
        );
        let specs = servers.specs;
        let cwd = cwd.display().to_string();
        let sink = updates.clone().into_sink();
        let transcript = self.transcript(id, &cwd, saved.as_ref());
        if held.is_none()
            && let Some(transcript) = &transcript
        {
            // A new session: nobody else knows its id yet.
            match SessionLock::take_async(transcript.path()).await {
                Ok(taken) => held = Some(taken),
                Err(e) => tracing::warn!("cannot lock session {id}: {e}"),
            }
        }
        let sink = match &transcript {
            Some(transcript) => transcript.tee(sink),
            None => sink,
        };
        let config = &self.config;
        // [T4]: a loaded session's servers start with the failures it had left.
        let carried = saved
            .as_ref()
            .map(|s| s.carried.clone())
            .unwrap_or_default();
        let host = Host::resume(
            specs,
            config.hooks.clone(),
            &carried,
            config.host.clone(),
            agent_loop::hook_sink(sink.clone()),
        )
        .await?;
        let context = HookContext {
            session_id: id.to_owned(),
            cwd,
        };
        let mut agent = Agent::new(config.model.clone(), host, config.agent.clone(), sink)
            .with_hook_context(context)
            .with_approval(approval);
        if let Some(transcript) = transcript {
            agent = agent.with_observer(transcript);
        }
        if let Some(saved) = &saved {
            agent.resume(saved).map_err(|e| SessionError::Load {
                id: id.to_owned(),
                why: e.to_string(),
            })?;
            updates.replay(&saved.history);
        }
        let session = Arc::new(Session {
            agent: Arc::new(tokio::sync::Mutex::new(Some(agent))),
            cancel: Mutex::new(None),
            lock: held.map(Arc::new),
        });
        lock(&self.open).insert(id.to_owned(), session);
        Ok((session_id, updates))
    }

    /// The session's transcript, when sessions are saved: a new one, or the
    /// saved one picked up. One that cannot be written is a warning on
    /// stderr; the session goes on unsaved.
    fn transcript(
        &self,
        id: &str,
        cwd: &str,
        saved: Option<&agent_loop::transcript::SavedSession>,
    ) -> Option<agent_loop::transcript::Transcript> {
        let dir = self.config.save_in.as_ref()?;
        let sprout = env!("CARGO_PKG_VERSION");
        let opened = match saved {
            Some(saved) => agent_loop::transcript::Transcript::resume(saved, sprout),
            None => agent_loop::transcript::Transcript::create(dir, id, cwd, sprout),
        };
        match opened {
            Ok(transcript) => Some(transcript),
            Err(e) => {
                tracing::warn!(
                    "session {id} is not saved: cannot write its transcript in {}: {e}",
                    dir.display()
                );
                None
            }
        }
    }

    /// Takes session `id`'s agent for a prompt of `text`, unless a prompt
    /// runs there already; [`Sessions::cancel`] cancels it from now on.
    pub(super) fn prompt(&self, id: &str, text: String) -> Result<Prompt, SessionError> {
        let session = self.find(id)?;
        if text.trim().is_empty() {
            return Err(SessionError::NoText);
        }
        let Ok(mut guard) = session.agent.clone().try_lock_owned() else {
            return Err(SessionError::Busy);
        };
        let Some(agent) = guard.take() else {
            return Err(SessionError::Closed);
        };
        let token = CancellationToken::new();
        *lock(&session.cancel) = Some(token.clone());
        Ok(Prompt {
            guard,
            agent,
            text,
            token,
            _lock: session.lock.clone(),
        })
    }

    /// Cancels the prompt running in session `id`, if any.
    pub(super) fn cancel(&self, id: &str) {
        if let Ok(session) = self.find(id) {
            session.cancel();
        }
    }

    /// Takes session `id` out of the table; the future it gives cancels the
    /// session's prompt, waits for it, tells `_SessionEnd` (`closed`) and
    /// stops its servers.
    pub(super) fn remove(
        &self,
        id: &str,
    ) -> Result<impl Future<Output = ()> + Send + 'static, SessionError> {
        let session = lock(&self.open)
            .remove(id)
            .ok_or_else(|| SessionError::Unknown(id.to_owned()))?;
        Ok(async move { session.close(SessionEndReason::Closed).await })
    }

    /// The connection is over (the client went, `disconnected`, or a
    /// signal came, `signal`): cancels every prompt, lets the tasks end
    /// (within a bound), and closes every session for `reason`.
    pub(super) async fn end(&self, reason: SessionEndReason) {
        let sessions: Vec<Arc<Session>> = lock(&self.open).values().cloned().collect();
        for session in &sessions {
            session.cancel();
        }
        let tasks: Vec<_> = lock(&self.tasks).drain(..).collect();
        let _ = tokio::time::timeout(DRAIN, futures::future::join_all(tasks)).await;
        let sessions: Vec<Arc<Session>> = lock(&self.open).drain().map(|(_, s)| s).collect();
        futures::future::join_all(sessions.iter().map(|s| s.close(reason))).await;
    }

    fn find(&self, id: &str) -> Result<Arc<Session>, SessionError> {
        lock(&self.open)
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::Unknown(id.to_owned()))
    }
}

/// The client's `mcpServers` as our specs, run in the session's `cwd`.
fn client_servers(servers: &[s::McpServer], cwd: &Path) -> Result<Vec<ServerSpec>, SessionError> {
    let mut specs = Vec::new();
    for server in servers {
        let spec = match server {
            s::McpServer::Stdio(stdio) => {
                let name = ServerName::new(stdio.name.clone())?;
                let env: BTreeMap<String, String> = stdio
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect();
                ServerSpec {
                    name,
                    transport: TransportSpec::Stdio {
                        command: stdio.command.to_string_lossy().into_owned(),
                        args: stdio.args.clone(),
                        env,
                        cwd: Some(cwd.to_path_buf()),
                    },
                    hook_timeout: None,
                    auto_approve: Vec::new(),
                    required: false,
                }
            }
            s::McpServer::Http(http) => {
                hooks_mcp::check_http_url(&http.url).map_err(|why| SessionError::Url {
                    name: http.name.clone(),
                    shown: hooks_mcp::redact_url(&http.url),
                    why,
                })?;
                ServerSpec {
                    name: ServerName::new(http.name.clone())?,
                    transport: TransportSpec::Http {
                        url: http.url.clone(),
                        headers: http
                            .headers
                            .iter()
                            .map(|h| (h.name.clone(), h.value.clone()))
                            .collect(),
                    },
                    hook_timeout: None,
                    auto_approve: Vec::new(),
                    required: false,
                }
            }
            s::McpServer::Sse(sse) => return Err(SessionError::Sse(sse.name.clone())),
            _ => return Err(SessionError::UnknownKind),
        };
        if specs
            .iter()
            .any(|existing: &ServerSpec| existing.name == spec.name)
        {
            return Err(SessionError::Twice(spec.name));
        }
        specs.push(spec);
    }
    Ok(specs)
}
