//! The command line's shape: every command, flag and environment variable.
//!
//! Flags win over environment variables \[C3\]; both show in `--help` with
//! their defaults. Values are taken as text here and validated in
//! [`crate::settings`], so that a bad one is reported in our words, naming
//! the flag or variable it came from.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Sprout: an LLM agent whose lifecycle MCP servers can steer through hook
/// tools (`_Stop`, `_PreToolUse`, `_PostCompact`, …).
#[derive(Debug, Parser)]
#[command(name = "sprout", version, propagate_version = true)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // Parsed once per process.
pub(crate) enum Command {
    /// Run one prompt in a new session, or in a saved one with --continue
    /// or --resume ("-" reads the prompt from stdin).
    Run {
        /// The prompt, or "-" to read it from stdin.
        prompt: String,
        #[command(flatten)]
        session: SessionArgs,
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        save: SaveArgs,
        #[command(flatten)]
        resume: ResumeArgs,
    },
    /// An interactive session in the terminal: several prompts, one session
    /// (one objection budget). Ctrl-C cancels the running prompt; Ctrl-C or
    /// Ctrl-D at the input line leaves.
    Chat {
        #[command(flatten)]
        session: SessionArgs,
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        save: SaveArgs,
        #[command(flatten)]
        resume: ResumeArgs,
    },
    /// List saved sessions, newest first: id, start, prompts, why the last
    /// prompt stopped, directory. `sprout run --continue` or `--resume ID`
    /// picks one up.
    Sessions {
        #[command(flatten)]
        dir: SessionsDirArgs,
        /// Print them as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The offline demo: a scripted model and the bundled todo hook server
    /// show an objection, a compaction and a re-injection. No key, no network.
    Demo {
        /// Print events as JSON Lines.
        #[arg(long)]
        json: bool,
    },
    /// Serve the Agent Client Protocol on stdio, for editors such as Zed.
    /// Sessions get the client's MCP servers (after any from --mcp-config).
    Acp {
        #[command(flatten)]
        session: SessionArgs,
        #[command(flatten)]
        model: ModelArgs,
        /// The largest protocol frame read, in bytes; a larger one gets a
        /// JSON-RPC error.
        #[arg(
            long,
            env = "SPROUT_ACP_MAX_FRAME_BYTES",
            value_name = "BYTES",
            default_value = "8388608"
        )]
        max_frame_bytes: String,
        #[command(flatten)]
        save: SaveArgs,
    },
    /// Inspect and exercise hooks.
    Hooks {
        #[command(subcommand)]
        command: HooksCommand,
    },
    /// Trust the MCP servers of DIR's .mcp.json, so sprout may start them:
    /// shows each entry's command line or URL, then asks. A changed entry
    /// must be trusted again.
    Trust {
        /// The project directory.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Trust the entries shown without asking.
        #[arg(long, conflicts_with_all = ["list", "revoke"])]
        yes: bool,
        /// Show every trusted entry, of every directory.
        #[arg(long, conflicts_with = "revoke")]
        list: bool,
        /// Forget DIR's entries: they are asked about again.
        #[arg(long)]
        revoke: bool,
    },
    /// Run a bundled hook server on stdio (for an MCP config entry).
    HookServer {
        #[command(subcommand)]
        server: HookServerCommand,
    },
}

/// `sprout hooks …`.
#[derive(Debug, Subcommand)]
pub(crate) enum HooksCommand {
    /// Connect to every configured server and show its tools, its hooks,
    /// whether the allowlist lets it hook, and every warning.
    List {
        #[command(flatten)]
        session: SessionArgs,
    },
    /// Call one hook exactly as the agent would (same deadline, same input
    /// by schema, same reading of the answer) and show each server's outcome
    /// and latency. As in a new session, `_SessionStart` is asked first
    /// (and shown, if a server lists it); then the hook.
    Call {
        /// The hook point: _SessionStart, _UserPromptSubmit, _PreToolUse,
        /// _PostToolUse, _Stop, _PreCompact, _PostCompact or _SessionEnd.
        hook: String,
        /// Call only this server's hook, whatever MCP_HOOK_SERVERS says.
        #[arg(long)]
        server: Option<String>,
        /// Input fields to supply, as a JSON object: session_id, cwd,
        /// prompt, tool, server, arguments, output, is_error,
        /// last_assistant_message, summary, reason. Each hook still gets
        /// only the fields its schema names.
        #[arg(long, value_name = "JSON")]
        input: Option<String>,
        #[command(flatten)]
        session: SessionArgs,
    },
}

/// `sprout hook-server …`.
#[derive(Debug, Subcommand)]
pub(crate) enum HookServerCommand {
    /// A `todo` tool; `_Stop` objects while items are open; `_PreCompact`
    /// pins the open items; `_PostCompact` re-injects the list.
    Todo,
    /// `_Stop` runs CMD and objects with the tail of its output while it
    /// fails; with --gate-tool, `_PreToolUse` refuses calls of those tools
    /// while it fails.
    Gate {
        /// The gate's own deadline for one run of CMD, in milliseconds. The
        /// agent's SPROUT_AGENT_HOOK_TIMEOUT_MS must be raised above the
        /// command's run time too, or the agent stops waiting first.
        #[arg(long, env = "SPROUT_GATE_TIMEOUT_MS", default_value = "300000")]
        timeout_ms: String,
        /// Also refuse calls of this tool while CMD fails (`_PreToolUse`):
        /// its name as the model sees it (`git__push`) or bare (`push`), `*`
        /// matching any run of characters. Repeat for more tools.
        #[arg(long = "gate-tool", value_name = "NAME")]
        gate_tools: Vec<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// Servers, hook policy, loop limits and output.
#[derive(Debug, Args)]
pub(crate) struct SessionArgs {
    /// MCP servers, in the mcpServers JSON format [default: .mcp.json in the
    /// working directory, if there is one].
    #[arg(long, value_name = "FILE")]
    pub(crate) mcp_config: Option<PathBuf>,
    /// Servers that may hook: `*` for all, or comma-separated names. Unset:
    /// hooks are off.
    #[arg(long, env = "MCP_HOOK_SERVERS", value_name = "LIST")]
    pub(crate) hook_servers: Option<String>,
    /// Deadline of each hook call, 1 to 600000 ms.
    #[arg(
        long,
        env = "SPROUT_AGENT_HOOK_TIMEOUT_MS",
        value_name = "MS",
        default_value = "2500"
    )]
    pub(crate) hook_timeout_ms: String,
    /// `_Stop` objections honoured per session (or per prompt, see
    /// --stop-budget-scope), 0 to 1000 (0 disables _Stop).
    #[arg(
        long,
        env = "SPROUT_AGENT_STOP_MAX_REJECTIONS",
        value_name = "N",
        default_value = "3"
    )]
    pub(crate) stop_max_rejections: String,
    /// What the `_Stop` budget counts over: `session` (one budget for the
    /// session) or `prompt` (refilled for every prompt).
    #[arg(
        long,
        env = "SPROUT_AGENT_STOP_BUDGET_SCOPE",
        value_name = "SCOPE",
        default_value = "session"
    )]
    pub(crate) stop_budget_scope: String,
    /// The "declined twice" rule: `on` (a model that ends again right after
    /// an objection is let go) or `off` (every bare end of turn asks _Stop
    /// while the budget lasts).
    #[arg(
        long,
        env = "SPROUT_AGENT_STOP_DECLINE_RULE",
        value_name = "ON_OFF",
        default_value = "on"
    )]
    pub(crate) stop_decline_rule: String,
    /// Deadline for an MCP server to start (spawn, initialize, list tools).
    #[arg(
        long,
        env = "SPROUT_AGENT_SERVER_START_TIMEOUT_MS",
        value_name = "MS",
        default_value = "10000"
    )]
    pub(crate) server_start_timeout_ms: String,
    /// Deadline of one tool call.
    #[arg(
        long,
        env = "SPROUT_AGENT_TOOL_TIMEOUT_MS",
        value_name = "MS",
        default_value = "120000"
    )]
    pub(crate) tool_timeout_ms: String,
    /// Model requests allowed per prompt.
    #[arg(
        long,
        env = "SPROUT_AGENT_MAX_ROUNDS",
        value_name = "N",
        default_value = "50"
    )]
    pub(crate) max_rounds: String,
    /// The model's context window, in tokens (1000 to 10000000).
    #[arg(
        long,
        env = "SPROUT_AGENT_CONTEXT_WINDOW",
        value_name = "TOKENS",
        default_value = "128000"
    )]
    pub(crate) context_window: String,
    /// Compact when a request would pass this share of the window (0.1 to 0.95).
    #[arg(
        long,
        env = "SPROUT_AGENT_COMPACT_THRESHOLD",
        value_name = "SHARE",
        default_value = "0.8"
    )]
    pub(crate) compact_threshold: String,
    /// Tool calls: `ask` (each runs only if a rule of its server's entry
    /// (`autoApprove`), an earlier answer or you allow it; with nobody to
    /// ask it is denied) or `auto` (every call runs unasked).
    #[arg(
        long,
        env = "SPROUT_AGENT_APPROVAL",
        value_name = "ask|auto",
        default_value = "ask"
    )]
    pub(crate) approval: String,
    /// Print events as JSON Lines on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Which model, and how to reach it.
#[derive(Debug, Args)]
pub(crate) struct ModelArgs {
    /// `openai` (any OpenAI-compatible endpoint), `anthropic`, or `script`.
    #[arg(
        long,
        env = "SPROUT_AGENT_PROVIDER",
        value_name = "NAME",
        default_value = "openai"
    )]
    pub(crate) provider: String,
    /// OpenAI-compatible base URL (Ollama: http://localhost:11434/v1).
    #[arg(long, env = "OPENAI_COMPAT_BASE_URL", value_name = "URL", default_value = agent_loop::providers::OpenAiCompat::DEFAULT_BASE_URL)]
    pub(crate) openai_base_url: String,
    /// OpenAI-compatible API key (optional for local servers).
    #[arg(
        long,
        env = "OPENAI_COMPAT_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub(crate) openai_api_key: Option<String>,
    /// OpenAI-compatible model name.
    #[arg(long, env = "OPENAI_COMPAT_MODEL", value_name = "MODEL")]
    pub(crate) openai_model: Option<String>,
    /// Which OpenAI API to use; only `chat` (Chat Completions) is supported.
    #[arg(
        long,
        env = "OPENAI_COMPAT_API",
        value_name = "API",
        default_value = "chat"
    )]
    pub(crate) openai_api: String,
    /// Anthropic API key.
    #[arg(
        long,
        env = "ANTHROPIC_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub(crate) anthropic_api_key: Option<String>,
    /// Anthropic model name.
    #[arg(long, env = "ANTHROPIC_MODEL", value_name = "MODEL")]
    pub(crate) anthropic_model: Option<String>,
    /// Anthropic base URL.
    #[arg(long, env = "ANTHROPIC_BASE_URL", value_name = "URL", default_value = agent_loop::providers::Anthropic::DEFAULT_BASE_URL)]
    pub(crate) anthropic_base_url: String,
    /// The script of model turns (JSON Lines) for `--provider script`.
    #[arg(long, env = "SPROUT_AGENT_SCRIPT", value_name = "FILE")]
    pub(crate) script: Option<PathBuf>,
    /// Most tokens the model may write per answer [default: 8192 for
    /// anthropic (lower it for models that allow less); the server's own for
    /// openai].
    #[arg(long, env = "SPROUT_AGENT_MAX_OUTPUT_TOKENS", value_name = "N")]
    pub(crate) max_output_tokens: Option<String>,
    /// Sampling temperature, 0 to 2 (0: the likeliest answer, as tests and
    /// reproducible runs want) [default: the server's own].
    #[arg(long, env = "SPROUT_AGENT_TEMPERATURE", value_name = "T")]
    pub(crate) temperature: Option<String>,
    /// Deadline of one model request attempt.
    #[arg(
        long,
        env = "SPROUT_AGENT_MODEL_TIMEOUT_MS",
        value_name = "MS",
        default_value = "300000"
    )]
    pub(crate) model_timeout_ms: String,
    /// `on`: ask for the answer as a stream, so its text shows as it
    /// arrives (a server that refuses is asked again without); `off`: ask
    /// for whole answers.
    #[arg(
        long,
        env = "SPROUT_AGENT_STREAM",
        value_name = "on|off",
        default_value = "on"
    )]
    pub(crate) stream: String,
    /// Longest wait between two events of a streamed answer before the
    /// model counts as stalled.
    #[arg(
        long,
        env = "SPROUT_AGENT_STREAM_IDLE_MS",
        value_name = "MS",
        default_value = "120000"
    )]
    pub(crate) stream_idle_ms: String,
}

/// Where saved sessions are.
#[derive(Debug, Args)]
pub(crate) struct SessionsDirArgs {
    /// The directory of saved session transcripts [default:
    /// $XDG_STATE_HOME/sprout/sessions, else ~/.local/state/sprout/sessions].
    #[arg(long, env = "SPROUT_SESSIONS_DIR", value_name = "DIR")]
    pub(crate) sessions_dir: Option<PathBuf>,
}

/// Whether and where this session is saved.
#[derive(Debug, Args)]
pub(crate) struct SaveArgs {
    #[command(flatten)]
    pub(crate) dir: SessionsDirArgs,
    /// Do not save this session's transcript (SPROUT_SESSIONS=off does the
    /// same; its other value is `on`, the default).
    #[arg(long)]
    pub(crate) no_save: bool,
}

/// Which saved session to pick up.
#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// Continue the newest saved session started in this directory.
    #[arg(long = "continue", conflicts_with = "resume")]
    pub(crate) continue_last: bool,
    /// Continue the saved session with this id (see `sprout sessions`).
    #[arg(long, value_name = "ID")]
    pub(crate) resume: Option<String>,
}
