//! Turning flags and environment variables into validated settings.
//!
//! Every bad value becomes a [`ConfigProblem`]: one message naming the flag or
//! variable it came from (or the file and key) and the bad value, and exit
//! status 2.

use std::ffi::OsString;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_loop::CompactionSettings;
use agent_loop::providers::{Anthropic, HttpSettings, OpenAiCompat, ScriptModel};
use agent_loop::{AgentSettings, Model, ToolSettings};
use clap::ArgMatches;
use clap::parser::ValueSource;
use hooks_core::{ConfigError, HookConfig};
use hooks_mcp::{HostOptions, SpecError};

use crate::cli::{ModelArgs, SaveArgs, SessionArgs, SessionsDirArgs};
use crate::trust::{self, Servers, Source, TrustError};

/// A configuration problem: what to print, with exit status 2. A setting's
/// problem names the flag or variable it came from (`setting`), or the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigProblem {
    /// A hook-policy value the core refused, renamed to its flag or variable.
    #[error(transparent)]
    Policy(#[from] ConfigError),
    /// Project trust \[U1\]-\[U3\].
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// Not a whole number in the range.
    #[error(
        "{setting}={value:?} is not valid: expected a whole number from {} to {}",
        range.start(),
        range.end()
    )]
    NotANumber {
        /// Where the value came from.
        setting: String,
        /// The value.
        value: String,
        /// The numbers allowed.
        range: RangeInclusive<u64>,
    },
    /// A switch that is neither `on` nor `off`.
    #[error("{setting}={value:?} is not valid: expected on or off")]
    NotOnOff {
        /// Where the value came from.
        setting: String,
        /// The value.
        value: String,
    },
    /// The compaction threshold is not a share of the window.
    #[error(
        "{setting}={value:?} is not valid: expected a share of the context window from 0.1 to 0.95"
    )]
    NotAShare {
        /// Where the value came from.
        setting: String,
        /// The value.
        value: String,
    },
    /// Not `ask` or `auto` \[U4\].
    #[error("{setting}={value:?} is not valid: expected ask or auto")]
    NotAnApprovalMode {
        /// Where the value came from.
        setting: String,
        /// The value.
        value: String,
    },
    /// A temperature out of range.
    #[error(
        "{setting}={value:?} is not valid: expected a temperature from 0 to 2, such as 0 or 0.7"
    )]
    NotATemperature {
        /// Where the value came from.
        setting: String,
        /// The value.
        value: String,
    },
    /// The MCP config file could not be read.
    #[error("cannot read the MCP config {}: {source}", path.display())]
    ReadMcpConfig {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The MCP config file is not a valid `mcpServers` config.
    #[error("MCP config {}: {source}", path.display())]
    McpConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: SpecError,
    },
    /// An OpenAI API other than Chat Completions.
    #[error("{setting}={value:?} is not supported: only \"chat\" (Chat Completions) is")]
    OpenAiApi {
        /// Where the value came from.
        setting: String,
        /// The value.
        value: String,
    },
    /// Not one of the providers.
    #[error("{setting}={value:?} is not a provider: expected openai, anthropic or script")]
    Provider {
        /// Where the value came from.
        setting: String,
        /// The value.
        value: String,
    },
    /// A value the provider needs is not set.
    #[error(
        "{env} is not set: the {what} is needed for --provider {provider}; set it or pass {flag}"
    )]
    Missing {
        /// What the value is, in words.
        what: &'static str,
        /// The provider that needs it.
        provider: String,
        /// Its flag.
        flag: &'static str,
        /// Its variable.
        env: &'static str,
    },
    /// A value the provider needs is empty or blank.
    #[error("{setting} is blank: the {what} is needed for --provider {provider}")]
    Blank {
        /// Where the value came from.
        setting: String,
        /// What the value is, in words.
        what: &'static str,
        /// The provider that needs it.
        provider: String,
    },
    /// A base URL the providers cannot use.
    #[error("{setting}={url:?} is not an http:// or https:// base URL: {why}")]
    BaseUrl {
        /// Where the value came from.
        setting: String,
        /// The URL.
        url: String,
        /// What is wrong with it.
        why: agent_loop::providers::BaseUrlError,
    },
    /// An API key with a control character; the key itself is never shown.
    #[error(
        "{setting} holds a control character (a line break?), which an HTTP header cannot carry"
    )]
    KeyControl {
        /// Where the key came from.
        setting: String,
    },
    /// The model script could not be read or parsed.
    #[error(transparent)]
    Script(agent_loop::providers::ScriptError),
    /// `-` was given and stdin could not be read.
    #[error("cannot read the prompt from stdin: {0}")]
    ReadPrompt(#[source] std::io::Error),
    /// The prompt has nothing but white space.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// `--json` with `acp`.
    #[error("--json does not apply to acp: stdout carries the protocol")]
    JsonWithAcp,
    /// `hooks call` of something that is not a hook point.
    #[error(
        "{0:?} is not a hook point: expected _SessionStart, _UserPromptSubmit, _PreToolUse, _PostToolUse, _Stop, _PreCompact, _PostCompact or _SessionEnd"
    )]
    NotAHookPoint(String),
    /// `hooks call --input` that is not an object of fields the caller may
    /// supply.
    #[error("--input {value:?} is not valid: {why}")]
    HookInput {
        /// The value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// `hooks call --server` of a server nobody configured.
    #[error("--server {0:?}: no configured MCP server has that name")]
    NoSuchServer(String),
    /// `hooks call` with hooks off and no `--server`.
    #[error(
        "MCP_HOOK_SERVERS is not set, so the agent would call no hook; set it (or --hook-servers), or pass --server NAME to call one server's hook"
    )]
    HooksOff,
    /// The demo cannot find this binary to run its todo server.
    #[error("cannot find the sprout binary to run its todo server: {0}")]
    OwnBinary(#[source] std::io::Error),
    /// Neither a sessions directory nor a state directory to put it in.
    #[error(
        "cannot tell where to keep sessions: neither XDG_STATE_HOME nor HOME is set; pass --sessions-dir DIR (or set SPROUT_SESSIONS_DIR), or --no-save"
    )]
    NoStateDir,
    /// `SPROUT_SESSIONS` is neither `on` nor `off`.
    #[error("SPROUT_SESSIONS={0:?} is not valid: expected on or off")]
    SessionsSwitch(String),
    /// `--resume ID` of no saved session.
    #[error("--resume {id:?}: no saved session has that id in {}; see `sprout sessions`", dir.display())]
    NoSuchSession {
        /// The id given.
        id: String,
        /// Where sessions were looked for.
        dir: PathBuf,
    },
    /// `--continue` where no session was started.
    #[error("--continue: no saved session was started in {cwd} (looked in {}); see `sprout sessions`", dir.display())]
    NoSessionHere {
        /// This directory.
        cwd: String,
        /// Where sessions were looked for.
        dir: PathBuf,
    },
    /// A saved session that cannot be read at all.
    #[error(transparent)]
    Transcript(agent_loop::transcript::ReadError),
    /// `--resume ID` or `--continue` of a session another process has open.
    #[error(
        "{flag}: session {id} is in use: another sprout process (`sprout run`, `sprout chat` or `sprout acp`) has it open; wait until that one ends, or start a new session without {flag} (`sprout sessions` shows which are in use)"
    )]
    SessionInUse {
        /// `--resume` or `--continue`.
        flag: &'static str,
        /// The session.
        id: String,
    },
    /// A saved session's lock cannot be taken (not because it is in use).
    #[error("cannot lock session {id} ({}): {source}", path.display())]
    LockSession {
        /// The session.
        id: String,
        /// Its transcript.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The sessions directory cannot be listed.
    #[error("cannot list the saved sessions in {}: {source}", dir.display())]
    ListSessions {
        /// The directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

/// How the setting with clap id `id` is named to the person: its flag if the
/// flag gave the value, else its environment variable.
fn source_name(matches: &ArgMatches, id: &str, flag: &str, env: &str) -> String {
    match matches.value_source(id) {
        Some(ValueSource::CommandLine) => flag.to_owned(),
        Some(ValueSource::EnvVariable) => env.to_owned(),
        _ => format!("{flag} (default)"),
    }
}

fn renamed(error: ConfigError, matches: &ArgMatches, id: &str, flag: &str) -> ConfigProblem {
    let env = error.setting.clone();
    ConfigProblem::Policy(error.for_setting(source_name(matches, id, flag, &env)))
}

/// A whole number in `range`, or a message naming the flag or variable
/// that gave the bad value.
pub(crate) fn number(
    matches: &ArgMatches,
    id: &str,
    flag: &str,
    env: &str,
    value: &str,
    range: RangeInclusive<u64>,
) -> Result<u64, ConfigProblem> {
    match value.trim().parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(ConfigProblem::NotANumber {
            setting: source_name(matches, id, flag, env),
            value: value.to_owned(),
            range,
        }),
    }
}

/// `value` as a decimal number in `range`, or `None`.
fn decimal(value: &str, range: RangeInclusive<f64>) -> Option<f64> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| range.contains(n))
}

/// The hook policy \[C1\]-\[C3\].
pub(crate) fn hook_config(
    args: &SessionArgs,
    matches: &ArgMatches,
) -> Result<HookConfig, ConfigProblem> {
    let allowlist = match &args.hook_servers {
        None => hooks_core::Allowlist::Off,
        Some(value) => hooks_core::Allowlist::parse(value)
            .map_err(|e| renamed(e, matches, "hook_servers", "--hook-servers"))?,
    };
    let timeout = hooks_core::HookTimeout::parse(&args.hook_timeout_ms)
        .map_err(|e| renamed(e, matches, "hook_timeout_ms", "--hook-timeout-ms"))?;
    let stop_budget = hooks_core::StopBudget::parse(&args.stop_max_rejections)
        .map_err(|e| renamed(e, matches, "stop_max_rejections", "--stop-max-rejections"))?;
    // [G1]-[G3]
    let stop_budget_scope = hooks_core::BudgetScope::parse(&args.stop_budget_scope)
        .map_err(|e| renamed(e, matches, "stop_budget_scope", "--stop-budget-scope"))?;
    let stop_decline_rule = hooks_core::DeclineRule::parse(&args.stop_decline_rule)
        .map_err(|e| renamed(e, matches, "stop_decline_rule", "--stop-decline-rule"))?;
    Ok(HookConfig {
        allowlist,
        timeout,
        stop_budget,
        stop_budget_scope,
        stop_decline_rule,
    })
}

/// The MCP servers: `--mcp-config FILE` (the person's own), else
/// `.mcp.json` here (the project's \[U1\]), else none.
pub(crate) fn servers(args: &SessionArgs) -> Result<Servers, ConfigProblem> {
    match &args.mcp_config {
        Some(path) => servers_from(path, false),
        None => servers_in(Path::new(".")),
    }
}

/// The MCP servers of `.mcp.json` in `dir` (a project's \[U1\]), if it has
/// one; none otherwise.
pub(crate) fn servers_in(dir: &Path) -> Result<Servers, ConfigProblem> {
    let path = dir.join(".mcp.json");
    if path.exists() {
        servers_from(&path, true)
    } else {
        Ok(Servers::default())
    }
}

fn servers_from(path: &Path, project: bool) -> Result<Servers, ConfigProblem> {
    let path: PathBuf = path.to_path_buf();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(ConfigProblem::ReadMcpConfig { path, source }),
    };
    let config = hooks_mcp::parse_mcp_config(&text).map_err(|source| ConfigProblem::McpConfig {
        path: path.clone(),
        source,
    })?;
    for note in &config.notes {
        crate::report_error(&format!("sprout: note: {}: {note}", path.display()));
    }
    let specs = config.servers;
    Ok(Servers {
        specs,
        source: Some(Source {
            path: trust::absolute(&path),
            entries: trust::entries(&text),
            project,
        }),
    })
}

/// The approval mode \[U4\].
pub(crate) fn approval_mode(
    args: &SessionArgs,
    matches: &ArgMatches,
) -> Result<agent_loop::ApprovalMode, ConfigProblem> {
    agent_loop::ApprovalMode::parse(&args.approval).ok_or_else(|| {
        ConfigProblem::NotAnApprovalMode {
            setting: source_name(matches, "approval", "--approval", "SPROUT_AGENT_APPROVAL"),
            value: args.approval.clone(),
        }
    })
}

/// Host settings.
pub(crate) fn host_options(
    args: &SessionArgs,
    matches: &ArgMatches,
) -> Result<HostOptions, ConfigProblem> {
    let ms = number(
        matches,
        "server_start_timeout_ms",
        "--server-start-timeout-ms",
        "SPROUT_AGENT_SERVER_START_TIMEOUT_MS",
        &args.server_start_timeout_ms,
        1..=600_000,
    )?;
    Ok(HostOptions {
        start_timeout: Duration::from_millis(ms),
        ..HostOptions::default()
    })
}

/// Loop settings.
pub(crate) fn agent_settings(
    args: &SessionArgs,
    matches: &ArgMatches,
) -> Result<AgentSettings, ConfigProblem> {
    let tool_ms = number(
        matches,
        "tool_timeout_ms",
        "--tool-timeout-ms",
        "SPROUT_AGENT_TOOL_TIMEOUT_MS",
        &args.tool_timeout_ms,
        1..=3_600_000,
    )?;
    let max_rounds = number(
        matches,
        "max_rounds",
        "--max-rounds",
        "SPROUT_AGENT_MAX_ROUNDS",
        &args.max_rounds,
        1..=10_000,
    )?;
    let window = number(
        matches,
        "context_window",
        "--context-window",
        "SPROUT_AGENT_CONTEXT_WINDOW",
        &args.context_window,
        1_000..=10_000_000,
    )?;
    let threshold =
        decimal(&args.compact_threshold, 0.1..=0.95).ok_or_else(|| ConfigProblem::NotAShare {
            setting: source_name(
                matches,
                "compact_threshold",
                "--compact-threshold",
                "SPROUT_AGENT_COMPACT_THRESHOLD",
            ),
            value: args.compact_threshold.clone(),
        })?;
    Ok(AgentSettings {
        max_rounds: max_rounds as u32,
        tools: ToolSettings {
            timeout: Duration::from_millis(tool_ms),
            ..ToolSettings::default()
        },
        compaction: CompactionSettings {
            context_window: window,
            threshold,
            ..CompactionSettings::default()
        },
        ..AgentSettings::default()
    })
}

/// The model.
pub(crate) fn model(
    args: &ModelArgs,
    matches: &ArgMatches,
) -> Result<Arc<dyn Model>, ConfigProblem> {
    let timeout = number(
        matches,
        "model_timeout_ms",
        "--model-timeout-ms",
        "SPROUT_AGENT_MODEL_TIMEOUT_MS",
        &args.model_timeout_ms,
        1..=3_600_000,
    )?;
    let max_tokens = match &args.max_output_tokens {
        None => None,
        Some(value) => Some(number(
            matches,
            "max_output_tokens",
            "--max-output-tokens",
            "SPROUT_AGENT_MAX_OUTPUT_TOKENS",
            value,
            1..=1_000_000,
        )? as u32),
    };
    let temperature = match &args.temperature {
        None => None,
        Some(value) => Some(decimal(value, 0.0..=2.0).map(|t| t as f32).ok_or_else(|| {
            ConfigProblem::NotATemperature {
                setting: source_name(
                    matches,
                    "temperature",
                    "--temperature",
                    "SPROUT_AGENT_TEMPERATURE",
                ),
                value: value.clone(),
            }
        })?),
    };
    let stream = match args.stream.as_str() {
        "on" => true,
        "off" => false,
        other => {
            return Err(ConfigProblem::NotOnOff {
                setting: source_name(matches, "stream", "--stream", "SPROUT_AGENT_STREAM"),
                value: other.to_owned(),
            });
        }
    };
    let idle = number(
        matches,
        "stream_idle_ms",
        "--stream-idle-ms",
        "SPROUT_AGENT_STREAM_IDLE_MS",
        &args.stream_idle_ms,
        1..=3_600_000,
    )?;
    let http = HttpSettings {
        timeout: Duration::from_millis(timeout),
        stream,
        idle_timeout: Duration::from_millis(idle),
        ..HttpSettings::default()
    };
    let provider = args.provider.as_str();
    match provider {
        "openai" => {
            if args.openai_api != "chat" {
                return Err(ConfigProblem::OpenAiApi {
                    setting: source_name(
                        matches,
                        "openai_api",
                        "--openai-api",
                        "OPENAI_COMPAT_API",
                    ),
                    value: args.openai_api.clone(),
                });
            }
            // Ours first, then the names other tools read (OPENAI_MODEL, …).
            let (model, _) = crate::environment::or_standard(
                args.openai_model.as_deref(),
                "OPENAI_COMPAT_MODEL",
            );
            let model = required(
                model.as_deref(),
                "model name",
                provider,
                matches,
                ("openai_model", "--openai-model", "OPENAI_COMPAT_MODEL"),
            )?;
            let ours = matches!(
                matches.value_source("openai_base_url"),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            );
            let (base_url, url_source) = crate::environment::or_standard(
                ours.then_some(args.openai_base_url.as_str()),
                "OPENAI_COMPAT_BASE_URL",
            );
            let base_url = base_url.unwrap_or_else(|| args.openai_base_url.clone());
            if url_source == "OPENAI_BASE_URL" {
                agent_loop::providers::check_base_url(&base_url).map_err(|why| {
                    ConfigProblem::BaseUrl {
                        setting: url_source.clone(),
                        url: base_url.clone(),
                        why,
                    }
                })?;
            } else {
                check_url(
                    &base_url,
                    matches,
                    "openai_base_url",
                    "--openai-base-url",
                    "OPENAI_COMPAT_BASE_URL",
                )?;
            }
            // The key is optional (local servers take none), so a blank one
            // means none rather than an `Authorization: Bearer ` header.
            let (key, key_source) = crate::environment::or_standard(
                args.openai_api_key.as_deref(),
                "OPENAI_COMPAT_API_KEY",
            );
            let key = key.filter(|key| !key.trim().is_empty());
            let key_source = key.as_ref().map(|_| {
                if key_source == "OPENAI_API_KEY" {
                    key_source.clone()
                } else {
                    source_name(
                        matches,
                        "openai_api_key",
                        "--openai-api-key",
                        "OPENAI_COMPAT_API_KEY",
                    )
                }
            });
            if let Some(key) = &key
                && key.chars().any(|c| c.is_control() && c != '\t')
            {
                return Err(ConfigProblem::KeyControl {
                    setting: key_source.clone().unwrap_or_default(),
                });
            }
            let hint = crate::environment::key_hint(
                key_source.as_deref(),
                "OPENAI_COMPAT_API_KEY",
                "--openai-api-key",
            );
            let model = model.to_owned();
            let mut client = OpenAiCompat::new(&base_url, key, &model, http);
            if let Some(max) = max_tokens {
                client = client.with_max_tokens(max);
            }
            if let Some(temperature) = temperature {
                client = client.with_temperature(temperature);
            }
            Ok(Arc::new(crate::environment::KeyHinted::new(
                Arc::new(client),
                hint,
            )))
        }
        "anthropic" => {
            let key = required(
                args.anthropic_api_key.as_deref(),
                "API key",
                provider,
                matches,
                (
                    "anthropic_api_key",
                    "--anthropic-api-key",
                    "ANTHROPIC_API_KEY",
                ),
            )?;
            check_key(
                key,
                matches,
                "anthropic_api_key",
                "--anthropic-api-key",
                "ANTHROPIC_API_KEY",
            )?;
            let model = required(
                args.anthropic_model.as_deref(),
                "model name",
                provider,
                matches,
                ("anthropic_model", "--anthropic-model", "ANTHROPIC_MODEL"),
            )?;
            check_url(
                &args.anthropic_base_url,
                matches,
                "anthropic_base_url",
                "--anthropic-base-url",
                "ANTHROPIC_BASE_URL",
            )?;
            let mut client = Anthropic::new(&args.anthropic_base_url, key.to_owned(), model, http);
            if let Some(max) = max_tokens {
                client = client.with_max_tokens(max);
            }
            if let Some(temperature) = temperature {
                client = client.with_temperature(temperature);
            }
            let hint = crate::environment::key_hint(
                Some(&source_name(
                    matches,
                    "anthropic_api_key",
                    "--anthropic-api-key",
                    "ANTHROPIC_API_KEY",
                )),
                "ANTHROPIC_API_KEY",
                "--anthropic-api-key",
            );
            Ok(Arc::new(crate::environment::KeyHinted::new(
                Arc::new(client),
                hint,
            )))
        }
        "script" => {
            // An empty path never gets here: clap's path parser refuses it.
            let path = args.script.as_deref().ok_or_else(|| {
                missing(
                    "script file",
                    provider,
                    ("script", "--script", "SPROUT_AGENT_SCRIPT"),
                )
            })?;
            ScriptModel::from_file(path)
                .map(|m| Arc::new(m) as Arc<dyn Model>)
                .map_err(ConfigProblem::Script)
        }
        other => Err(ConfigProblem::Provider {
            setting: source_name(matches, "provider", "--provider", "SPROUT_AGENT_PROVIDER"),
            value: other.to_owned(),
        }),
    }
}

/// A text value the chosen provider needs, given as `(clap id, flag,
/// variable)`: unset, empty or blank is a problem naming where it came from.
/// An empty variable is a value to clap, not an absence, so
/// `OPENAI_COMPAT_MODEL=` arrives here as `""`.
fn required<'v>(
    value: Option<&'v str>,
    what: &'static str,
    provider: &str,
    matches: &ArgMatches,
    setting: (&str, &'static str, &'static str),
) -> Result<&'v str, ConfigProblem> {
    match value {
        None => Err(missing(what, provider, setting)),
        Some(value) if value.trim().is_empty() => Err(blank(what, provider, matches, setting)),
        Some(value) => Ok(value),
    }
}

fn missing(
    what: &'static str,
    provider: &str,
    (_, flag, env): (&str, &'static str, &'static str),
) -> ConfigProblem {
    ConfigProblem::Missing {
        what,
        provider: provider.to_owned(),
        flag,
        env,
    }
}

fn blank(
    what: &'static str,
    provider: &str,
    matches: &ArgMatches,
    (id, flag, env): (&str, &'static str, &'static str),
) -> ConfigProblem {
    ConfigProblem::Blank {
        setting: source_name(matches, id, flag, env),
        what,
        provider: provider.to_owned(),
    }
}

/// A base URL must parse, be http or https, name a host and have no query
/// or fragment; the problem names the flag or variable it came from.
fn check_url(
    url: &str,
    matches: &ArgMatches,
    id: &str,
    flag: &str,
    env: &str,
) -> Result<(), ConfigProblem> {
    agent_loop::providers::check_base_url(url).map_err(|why| ConfigProblem::BaseUrl {
        setting: source_name(matches, id, flag, env),
        url: url.to_owned(),
        why,
    })
}

/// An API key goes in an HTTP header, which cannot carry control
/// characters (a stray CR or newline from a key file, say). The problem
/// names the setting but never shows the key.
fn check_key(
    key: &str,
    matches: &ArgMatches,
    id: &str,
    flag: &str,
    env: &str,
) -> Result<(), ConfigProblem> {
    if key.chars().any(|c| c.is_control() && c != '\t') {
        return Err(ConfigProblem::KeyControl {
            setting: source_name(matches, id, flag, env),
        });
    }
    Ok(())
}

/// The directory of saved sessions: `--sessions-dir` (or
/// `SPROUT_SESSIONS_DIR`), else the XDG state directory's
/// `sprout/sessions`.
pub(crate) fn sessions_dir(args: &SessionsDirArgs) -> Result<PathBuf, ConfigProblem> {
    match &args.sessions_dir {
        Some(dir) => Ok(dir.clone()),
        None => state_dir(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
            .map(|state| state.join("sprout").join("sessions"))
            .ok_or(ConfigProblem::NoStateDir),
    }
}

/// `$XDG_STATE_HOME`, else `$HOME/.local/state`. As the XDG base directory
/// spec says, a relative or empty `XDG_STATE_HOME` is ignored (and so is a
/// relative or empty `HOME`).
fn state_dir(xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    base_dir(xdg, home, &[".local", "state"])
}

/// An XDG base directory: `xdg` (`$XDG_…_HOME`) if it is absolute, else
/// `under_home` in an absolute `home`.
pub(crate) fn base_dir(
    xdg: Option<OsString>,
    home: Option<OsString>,
    under_home: &[&str],
) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg).or_else(|| absolute(home).map(|h| under_home.iter().fold(h, |p, d| p.join(d))))
}

/// Where this session is saved, or `None` for `--no-save` or
/// `SPROUT_SESSIONS=off`.
pub(crate) fn saving(args: &SaveArgs) -> Result<Option<PathBuf>, ConfigProblem> {
    let on = match std::env::var_os("SPROUT_SESSIONS") {
        None => true,
        Some(value) => match value.to_string_lossy().trim() {
            word if word.eq_ignore_ascii_case("on") => true,
            word if word.eq_ignore_ascii_case("off") => false,
            _ => {
                return Err(ConfigProblem::SessionsSwitch(
                    value.to_string_lossy().into_owned(),
                ));
            }
        },
    };
    if args.no_save || !on {
        return Ok(None);
    }
    sessions_dir(&args.dir).map(Some)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::{Cli, Command};

    /// The model settings' answer for `sprout run x ARGS`. Every test passes
    /// the values it relies on as flags, which win over any variable set
    /// where the tests run.
    fn model_for(args: &[&str]) -> Result<String, ConfigProblem> {
        let argv = ["sprout", "run", "x"].iter().chain(args);
        let matches = Cli::command()
            .try_get_matches_from(argv)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let cli = Cli::from_arg_matches(&matches).unwrap();
        let Command::Run { model: args, .. } = cli.command else {
            panic!("not a run")
        };
        let run = matches.subcommand_matches("run").unwrap();
        model(&args, run).map(|m| m.describe())
    }

    fn problem(args: &[&str]) -> String {
        match model_for(args) {
            Ok(described) => panic!("{args:?} was accepted as {described}"),
            Err(problem) => problem.to_string(),
        }
    }

    const OPENAI: [&str; 4] = [
        "--provider",
        "openai",
        "--openai-base-url",
        "http://127.0.0.1:9/v1",
    ];
    const ANTHROPIC: [&str; 6] = [
        "--provider",
        "anthropic",
        "--anthropic-base-url",
        "http://127.0.0.1:9",
        "--anthropic-api-key",
        "sk-test",
    ];

    fn with<const N: usize>(base: [&'static str; N], more: &[&'static str]) -> Vec<&'static str> {
        base.iter().chain(more).copied().collect()
    }

    #[test]
    fn valid_settings_make_a_model() {
        let described = model_for(&with(OPENAI, &["--openai-model", "m"])).unwrap();
        assert_eq!(described, "openai-compatible m at http://127.0.0.1:9/v1");
        let described = model_for(&with(ANTHROPIC, &["--anthropic-model", "c"])).unwrap();
        assert_eq!(described, "anthropic c at http://127.0.0.1:9");
    }

    #[test]
    fn a_blank_model_name_is_refused_naming_the_flag() {
        for blank in ["", "   ", "\t"] {
            assert_eq!(
                problem(&with(OPENAI, &["--openai-model", blank])),
                "--openai-model is blank: the model name is needed for --provider openai"
            );
            assert_eq!(
                problem(&with(ANTHROPIC, &["--anthropic-model", blank])),
                "--anthropic-model is blank: the model name is needed for --provider anthropic"
            );
        }
    }

    #[test]
    fn api_keys_blank_or_with_controls_are_refused_when_needed() {
        let anthropic = |key: &'static str| {
            problem(&[
                "--provider",
                "anthropic",
                "--anthropic-model",
                "c",
                "--anthropic-api-key",
                key,
            ])
        };
        assert_eq!(
            anthropic(""),
            "--anthropic-api-key is blank: the API key is needed for --provider anthropic"
        );
        assert_eq!(
            anthropic(" "),
            "--anthropic-api-key is blank: the API key is needed for --provider anthropic"
        );
        let message = anthropic("sk-secret\r");
        assert!(
            message.starts_with("--anthropic-api-key holds a control character"),
            "{message}"
        );
        assert!(
            !message.contains("sk-secret"),
            "the key was shown: {message}"
        );
        // OpenAI-compatible servers may take no key: a blank one is none.
        let described = model_for(&with(
            OPENAI,
            &["--openai-model", "m", "--openai-api-key", ""],
        ))
        .unwrap();
        assert_eq!(described, "openai-compatible m at http://127.0.0.1:9/v1");
        let message = problem(&with(
            OPENAI,
            &["--openai-model", "m", "--openai-api-key", "k\n"],
        ));
        assert!(
            message.starts_with("--openai-api-key holds a control character"),
            "{message}"
        );
    }

    // clap refuses an empty path itself (exit 2), before these settings.
    #[test]
    fn an_empty_script_path_is_refused_by_clap() {
        let argv = ["sprout", "run", "x", "--provider", "script", "--script", ""];
        let error = Cli::command().try_get_matches_from(argv).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(error.to_string().contains("--script <FILE>"), "{error}");
    }

    #[test]
    fn bad_base_urls_are_refused_naming_the_flag() {
        let openai = |url: &'static str| {
            problem(&[
                "--provider",
                "openai",
                "--openai-model",
                "m",
                "--openai-base-url",
                url,
            ])
        };
        for (url, why) in [
            ("", "not a URL"),
            ("localhost:11434/v1", "the scheme is \"localhost\""),
            ("api.openai.com/v1", "not a URL"),
            ("ftp://example.com/v1", "the scheme is \"ftp\""),
            ("http://", "not a URL"),
            ("http://:8080/v1", "not a URL"),
            ("http://exa mple.com", "not a URL"),
            ("http://h/v1?x=1", "it has a query or fragment"),
        ] {
            let message = openai(url);
            assert!(
                message.starts_with(&format!(
                    "--openai-base-url={url:?} is not an http:// or https:// base URL: {why}"
                )),
                "{url:?}: {message}"
            );
        }
        let message = problem(&[
            "--provider",
            "anthropic",
            "--anthropic-model",
            "c",
            "--anthropic-api-key",
            "k",
            "--anthropic-base-url",
            "mailto:x@example.com",
        ]);
        assert!(
            message.starts_with("--anthropic-base-url=\"mailto:x@example.com\" is not an http"),
            "{message}"
        );
    }

    #[test]
    fn the_state_dir_is_xdg_state_home_else_home_local_state() {
        let os = |s: &str| Some(OsString::from(s));
        assert_eq!(state_dir(os("/x"), os("/h")), Some(PathBuf::from("/x")));
        assert_eq!(
            state_dir(None, os("/h")),
            Some(PathBuf::from("/h/.local/state"))
        );
        // A relative or empty value is ignored, as the XDG spec says.
        assert_eq!(
            state_dir(os("rel"), os("/h")),
            Some(PathBuf::from("/h/.local/state"))
        );
        assert_eq!(state_dir(os(""), os("")), None);
        assert_eq!(state_dir(None, None), None);
    }
}
