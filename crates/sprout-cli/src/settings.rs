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

/// A whole number in `range`, or a message naming the flag or variable
/// that gave the bad value.
pub(crate) fn number(
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

/// The hook policy \[C1\]-\[C3\].
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
        ..HookConfig::default()
    })
}

/// The MCP servers: `--mcp-config FILE`, else `.mcp.json` here, else none.
pub fn servers(args: &SessionArgs) -> Result<Vec<ServerSpec>, ConfigProblem> {
    match &args.mcp_config {
        Some(path) => servers_from(path),
        None => servers_in(Path::new(".")),
    }
}

/// The MCP servers of `.mcp.json` in `dir`, if it has one; none otherwise.
pub fn servers_in(dir: &Path) -> Result<Vec<ServerSpec>, ConfigProblem> {
    let path = dir.join(".mcp.json");
    if path.exists() {
        servers_from(&path)
    } else {
        Ok(Vec::new())
    }
}

fn servers_from(path: &Path) -> Result<Vec<ServerSpec>, ConfigProblem> {
    let path: PathBuf = path.to_path_buf();
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
    let provider = args.provider.as_str();
    match provider {
        "openai" => {
            if args.openai_api != "chat" {
                return Err(ConfigProblem(format!(
                    "{}={:?} is not supported: only \"chat\" (Chat Completions) is",
                    source_name(matches, "openai_api", "--openai-api", "OPENAI_COMPAT_API"),
                    args.openai_api
                )));
            }
            let model = required(
                args.openai_model.as_deref(),
                "model name",
                provider,
                matches,
                ("openai_model", "--openai-model", "OPENAI_COMPAT_MODEL"),
            )?;
            check_url(
                &args.openai_base_url,
                matches,
                "openai_base_url",
                "--openai-base-url",
                "OPENAI_COMPAT_BASE_URL",
            )?;
            // The key is optional (local servers take none), so a blank one
            // means none rather than an `Authorization: Bearer ` header.
            let key = args
                .openai_api_key
                .as_deref()
                .filter(|key| !key.trim().is_empty());
            if let Some(key) = key {
                check_key(
                    key,
                    matches,
                    "openai_api_key",
                    "--openai-api-key",
                    "OPENAI_COMPAT_API_KEY",
                )?;
            }
            let mut client =
                OpenAiCompat::new(&args.openai_base_url, key.map(str::to_owned), model, http);
            if let Some(max) = max_tokens {
                client = client.with_max_tokens(max);
            }
            Ok(Arc::new(client))
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
            Ok(Arc::new(client))
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
                .map_err(|e| ConfigProblem(e.to_string()))
        }
        other => Err(ConfigProblem(format!(
            "{}={other:?} is not a provider: expected openai, anthropic or script",
            source_name(matches, "provider", "--provider", "SPROUT_AGENT_PROVIDER")
        ))),
    }
}

/// A text value the chosen provider needs, given as `(clap id, flag,
/// variable)`: unset, empty or blank is a problem naming where it came from.
/// An empty variable is a value to clap, not an absence, so
/// `OPENAI_COMPAT_MODEL=` arrives here as `""`.
fn required<'v>(
    value: Option<&'v str>,
    what: &str,
    provider: &str,
    matches: &ArgMatches,
    setting: (&str, &str, &str),
) -> Result<&'v str, ConfigProblem> {
    match value {
        None => Err(missing(what, provider, setting)),
        Some(value) if value.trim().is_empty() => Err(blank(what, provider, matches, setting)),
        Some(value) => Ok(value),
    }
}

fn missing(what: &str, provider: &str, (_, flag, env): (&str, &str, &str)) -> ConfigProblem {
    ConfigProblem(format!(
        "{env} is not set: the {what} is needed for --provider {provider}; set it or pass {flag}"
    ))
}

fn blank(
    what: &str,
    provider: &str,
    matches: &ArgMatches,
    (id, flag, env): (&str, &str, &str),
) -> ConfigProblem {
    ConfigProblem(format!(
        "{} is blank: the {what} is needed for --provider {provider}",
        source_name(matches, id, flag, env)
    ))
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
    agent_loop::providers::check_base_url(url).map_err(|why| {
        ConfigProblem(format!(
            "{}={url:?} is not an http:// or https:// base URL: {why}",
            source_name(matches, id, flag, env)
        ))
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
        return Err(ConfigProblem(format!(
            "{} holds a control character (a line break?), which an HTTP header cannot carry",
            source_name(matches, id, flag, env)
        )));
    }
    Ok(())
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
            Err(ConfigProblem(message)) => message,
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
}
