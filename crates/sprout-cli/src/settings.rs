//! Turning flags and environment variables into validated settings.
//!
//! Every bad value becomes a [`ConfigProblem`]: one message naming the flag or
//! variable it came from (or the file and key) and the bad value, and exit
//! status 2.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_loop::compaction::CompactionSettings;
use agent_loop::providers::{Anthropic, HttpSettings, OpenAiCompat, ScriptModel};
use agent_loop::{AgentSettings, Model, ToolSettings};
use clap::ArgMatches;
use clap::parser::ValueSource;
use hooks_core::{ConfigError, HookConfig};
use hooks_mcp::{HostOptions, ServerSpec};

use crate::cli::{ModelArgs, SessionArgs};

/// A configuration problem: the message to print, with exit status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem(pub String);

impl std::fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
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
    ConfigProblem(
        error
            .for_setting(source_name(matches, id, flag, &env))
            .to_string(),
    )
}

fn number(
    matches: &ArgMatches,
    id: &str,
    flag: &str,
    env: &str,
    value: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ConfigProblem> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            ConfigProblem(format!(
                "{}={value:?} is not valid: expected a whole number from {} to {}",
                source_name(matches, id, flag, env),
                range.start(),
                range.end()
            ))
        })
}

/// The hook policy [C1]-[C3].
pub fn hook_config(args: &SessionArgs, matches: &ArgMatches) -> Result<HookConfig, ConfigProblem> {
    let allowlist = match &args.hook_servers {
        None => hooks_core::Allowlist::Off,
        Some(value) => hooks_core::Allowlist::parse(value)
            .map_err(|e| renamed(e, matches, "hook_servers", "--hook-servers"))?,
    };
    let timeout = hooks_core::HookTimeout::parse(&args.hook_timeout_ms)
        .map_err(|e| renamed(e, matches, "hook_timeout_ms", "--hook-timeout-ms"))?;
    let stop_budget = hooks_core::StopBudget::parse(&args.stop_max_rejections)
        .map_err(|e| renamed(e, matches, "stop_max_rejections", "--stop-max-rejections"))?;
    Ok(HookConfig {
        allowlist,
        timeout,
        stop_budget,
    })
}

/// The MCP servers: `--mcp-config FILE`, else `.mcp.json` here, else none.
pub fn servers(args: &SessionArgs) -> Result<Vec<ServerSpec>, ConfigProblem> {
    let path: PathBuf = match &args.mcp_config {
        Some(path) => path.clone(),
        None if Path::new(".mcp.json").exists() => PathBuf::from(".mcp.json"),
        None => return Ok(Vec::new()),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ConfigProblem(format!(
            "cannot read the MCP config {}: {e}",
            path.display()
        ))
    })?;
    hooks_mcp::parse_mcp_servers(&text)
        .map_err(|e| ConfigProblem(format!("MCP config {}: {e}", path.display())))
}

/// Host settings.
pub fn host_options(
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
pub fn agent_settings(
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
    let threshold = args
        .compact_threshold
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|t| (0.1..=0.95).contains(t))
        .ok_or_else(|| {
            ConfigProblem(format!(
                "{}={:?} is not valid: expected a share of the context window from 0.1 to 0.95",
                source_name(
                    matches,
                    "compact_threshold",
                    "--compact-threshold",
                    "SPROUT_AGENT_COMPACT_THRESHOLD"
                ),
                args.compact_threshold
            ))
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
pub fn model(args: &ModelArgs, matches: &ArgMatches) -> Result<Arc<dyn Model>, ConfigProblem> {
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
    let http = HttpSettings {
        timeout: Duration::from_millis(timeout),
        ..HttpSettings::default()
    };
    let missing = |flag: &str, env: &str, what: &str| {
        ConfigProblem(format!(
            "{env} is not set: the {what} is needed for --provider {}; set it or pass {flag}",
            args.provider
        ))
    };
    match args.provider.as_str() {
        "openai" => {
            if args.openai_api != "chat" {
                return Err(ConfigProblem(format!(
                    "{}={:?} is not supported: only \"chat\" (Chat Completions) is",
                    source_name(matches, "openai_api", "--openai-api", "OPENAI_COMPAT_API"),
                    args.openai_api
                )));
            }
            let model = args
                .openai_model
                .as_deref()
                .ok_or_else(|| missing("--openai-model", "OPENAI_COMPAT_MODEL", "model name"))?;
            check_url(
                &args.openai_base_url,
                matches,
                "openai_base_url",
                "--openai-base-url",
                "OPENAI_COMPAT_BASE_URL",
            )?;
            let mut client = OpenAiCompat::new(
                &args.openai_base_url,
                args.openai_api_key.clone(),
                model,
                http,
            );
            if let Some(max) = max_tokens {
                client = client.with_max_tokens(max);
            }
            Ok(Arc::new(client))
        }
        "anthropic" => {
            let key = args
                .anthropic_api_key
                .clone()
                .ok_or_else(|| missing("--anthropic-api-key", "ANTHROPIC_API_KEY", "API key"))?;
            let model = args
                .anthropic_model
                .as_deref()
                .ok_or_else(|| missing("--anthropic-model", "ANTHROPIC_MODEL", "model name"))?;
            check_url(
                &args.anthropic_base_url,
                matches,
                "anthropic_base_url",
                "--anthropic-base-url",
                "ANTHROPIC_BASE_URL",
            )?;
            let mut client = Anthropic::new(&args.anthropic_base_url, key, model, http);
            if let Some(max) = max_tokens {
                client = client.with_max_tokens(max);
            }
            Ok(Arc::new(client))
        }
        "script" => {
            let path = args
                .script
                .as_deref()
                .ok_or_else(|| missing("--script", "SPROUT_AGENT_SCRIPT", "script file"))?;
            ScriptModel::from_file(path)
                .map(|m| Arc::new(m) as Arc<dyn Model>)
                .map_err(|e| ConfigProblem(e.to_string()))
        }
        other => Err(ConfigProblem(format!(
            "{}={other:?} is not a provider: expected openai, anthropic or script",
            source_name(matches, "provider", "--provider", "SPROUT_AGENT_PROVIDER")
        ))),
    }
}

fn check_url(
    url: &str,
    matches: &ArgMatches,
    id: &str,
    flag: &str,
    env: &str,
) -> Result<(), ConfigProblem> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(ConfigProblem(format!(
            "{}={url:?} is not an http:// or https:// URL",
            source_name(matches, id, flag, env)
        )))
    }
}
