//! `sprout-cli`: the `sprout` command line. `main.rs` only calls
//! [`main_with`], the one public item (with `testing`, behind its feature);
//! the end-to-end tests run the built binary, as a user would. The modules
//! are private to the crate:
//!
//! - `cli`: commands, flags and their environment variables.
//! - `settings`: validated settings, and the exit-2 messages for bad ones.
//! - `render`: the event stream for a person, or as JSON Lines.
//! - `stdout`: the one writer of `sprout run`'s stdout, a thread behind a
//!   bounded queue.
//! - `demo`: the offline demo's script and settings.
//! - `environment`: variables under other tools' names, typos of ours,
//!   values that are not text, and where a refused API key came from.
//! - `acp`: `sprout acp`, the Agent Client Protocol agent.
//! - `approve`: asking the person about tool calls.
//! - `chat`: `sprout chat`, the interactive session.
//! - `sessions`: saved sessions: which one to pick up, the transcript a
//!   session writes, `sprout sessions`.
//! - `signals`: SIGINT, SIGTERM and SIGHUP.
//! - `trust`: project trust, and the tools allowed for good.
//! - `testing` (the `testing` feature): the human output of an event stream.

mod acp;
mod approve;
mod chat;
mod cli;
mod demo;
mod environment;
mod render;
mod sessions;
mod settings;
mod signals;
mod stdout;
#[cfg(feature = "testing")]
pub mod testing;
mod trust;

use std::ffi::OsString;
use std::io::Read;
use std::sync::Arc;

use agent_loop::{Agent, AgentSettings, Model};
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use hooks_core::{
    AskError, EndReason, HookConfig, HookContext, HookPoint, SessionEndReason, StopReason,
    ToolGate, ToolRun, ToolUse, TurnVerdict,
};
use hooks_mcp::{Host, HostOptions, ServerSpec};

use crate::cli::{Cli, Command, HookServerCommand, HooksCommand};
use crate::render::Renderer;
use crate::settings::ConfigProblem;
use crate::signals::Signals;

/// Exit status: the prompt ended normally.
const EXIT_OK: i32 = 0;
/// Exit status: any other failure.
const EXIT_FAILURE: i32 = 1;
/// Exit status: a usage or configuration error.
const EXIT_USAGE: i32 = 2;
/// Exit status: interrupted (Ctrl-C).
const EXIT_INTERRUPTED: i32 = 130;

/// Longest the exit waits for queued output to be written (a terminal or
/// pipe that does not read gets no more than this).
const OUTPUT_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the command line with `args` (the program name first) and returns
/// the exit status.
pub fn main_with(args: Vec<OsString>) -> i32 {
    let known = environment::known_variables(&Cli::command());
    // clap's message for a variable that is not UTF-8 does not name it.
    if let Some(name) = environment::not_text(&known) {
        report_error(&format!(
            "sprout: {name} is set to bytes that are not UTF-8 text; set it to a valid value, or unset it"
        ));
        return EXIT_USAGE;
    }
    let matches = match Cli::command().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    init_logging();
    // A typo of one of our names would otherwise be silently ignored.
    let set: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    for warning in environment::unknown_variables(&set, &known) {
        report_error(&format!("sprout: warning: {warning}"));
    }
    // One thread: the agent's work is IO, handed from task to task (model,
    // servers, client); on one thread a hand-off is a queue push, not a
    // futex wake-up of another worker. Blocking work has threads of its
    // own (the stdout writer, the blocking pool).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(dispatch(cli, &matches));
    // Hook server children and helpers are gone by now; do not wait on
    // blocking stdin readers.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    // Log lines still queued for stderr, within a bound.
    stdout::Stdout::stderr().finish(std::time::Duration::from_millis(500));
    match result {
        Ok(code) => code,
        Err(problem) => {
            report_error(&format!("sprout: {problem}"));
            EXIT_USAGE
        }
    }
}

/// Writes a line to stderr; a stderr that is gone (a closed terminal after
/// SIGHUP) is no reason to fail.
fn report_error(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// Writes text to stdout in one write, through a writer thread, and waits
/// for it at most [`OUTPUT_DRAIN`]: a stdout that is gone is not an error
/// worth a panic (`println!` would panic), and one that nobody reads does
/// not hold the exit.
fn print_out(text: &str) {
    let out = stdout::Stdout::start(stdout::STALL_BOUND);
    out.push_essential(stdout::Item::Text(text.to_owned()));
    out.finish(OUTPUT_DRAIN);
}

fn fail(message: &str) -> i32 {
    report_error(&format!("sprout: {message}"));
    EXIT_FAILURE
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // rmcp logs every failed send of a connection we are ending on
        // purpose (a flooding server: dozens of lines); Sprout reports what
        // happened once, in its own words. RUST_LOG=rmcp=… shows them.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp=off"));
    let builder = tracing_subscriber::fmt()
        .with_writer(render::LogWriter)
        .with_ansi(false) // LogWriter escapes control bytes, colours included
        .with_env_filter(filter)
        .with_target(false);
    // On a terminal a person reads the lines as they come: no timestamps;
    // a file or pipe keeps them.
    let _ = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        builder.without_time().try_init()
    } else {
        builder.try_init()
    };
}

fn sub<'a>(matches: &'a ArgMatches, name: &str) -> &'a ArgMatches {
    matches.subcommand_matches(name).unwrap_or(matches)
}

async fn dispatch(cli: Cli, matches: &ArgMatches) -> Result<i32, ConfigProblem> {
    match cli.command {
        Command::Run {
            prompt,
            session,
            model,
            save,
            resume,
        } => {
            // The prompt first: an empty one is the first thing to say.
            let prompt = read_prompt(&prompt)?;
            let setup =
                SessionSetup::from_args(&session, &model, &save, &resume, sub(matches, "run"))?;
            Ok(run_session(setup, &prompt, session.json).await)
        }
        Command::Chat {
            session,
            model,
            save,
            resume,
        } => {
            let setup =
                SessionSetup::from_args(&session, &model, &save, &resume, sub(matches, "chat"))?;
            Ok(chat::chat(setup).await)
        }
        Command::Sessions { dir, json } => {
            let dir = settings::sessions_dir(&dir)?;
            Ok(sessions::list_command(&dir, json))
        }
        Command::Demo { json } => {
            let model = agent_loop::providers::ScriptModel::parse("the demo script", demo::SCRIPT)
                .map_err(ConfigProblem::Script)?;
            // On stderr: stdout is the event stream, the same as --json's.
            report_error(
                "sprout demo: the model is a script (no key, no network); the todo hook server is real, a child process",
            );
            let setup = SessionSetup {
                model: Arc::new(model),
                // The demo's servers are the agent's own [U1].
                servers: trust::Servers::own(demo::servers()?),
                // The demo runs as it always did, unasked.
                approval: agent_loop::ApprovalMode::Auto,
                config: demo::hook_config(),
                options: demo::host_options(),
                settings: demo::settings(),
                // The demo is not saved: it is the same every time.
                plan: sessions::Plan::default(),
            };
            let code = run_session(setup, demo::PROMPT, json).await;
            Ok(code)
        }
        Command::Acp {
            session,
            model,
            max_frame_bytes,
            save,
        } => {
            let m = sub(matches, "acp");
            if session.json {
                return Err(ConfigProblem::JsonWithAcp);
            }
            let max_frame_bytes = settings::number(
                m,
                "max_frame_bytes",
                "--max-frame-bytes",
                "SPROUT_ACP_MAX_FRAME_BYTES",
                &max_frame_bytes,
                1024..=1 << 30,
            )?;
            // Invariant: at most 1 GiB, which fits a usize on every target
            // Rust supports here (32 and 64 bits).
            let max_frame_bytes = usize::try_from(max_frame_bytes).unwrap_or(1 << 30);
            let config = acp::AcpConfig {
                hooks: settings::hook_config(&session, m)?,
                host: settings::host_options(&session, m)?,
                agent: settings::agent_settings(&session, m)?,
                model: settings::model(&model, m)?,
                max_frame_bytes,
                // Without --mcp-config, each session reads `.mcp.json` in
                // its own cwd, not in ours.
                servers: match session.mcp_config {
                    Some(_) => Some(settings::servers(&session)?),
                    None => None,
                },
                approval: settings::approval_mode(&session, m)?,
                save_in: settings::saving(&save)?,
                sessions_dir: settings::sessions_dir(&save.dir).ok(),
            };
            let signals = Signals::install();
            Ok(match acp::serve(config, signals.token().clone()).await {
                Ok(()) => signals.exit_status().unwrap_or(EXIT_OK),
                Err(e) => fail(&e.to_string()),
            })
        }
        Command::Hooks {
            command: HooksCommand::List { session },
        } => {
            let m = sub(sub(matches, "hooks"), "list");
            let config = settings::hook_config(&session, m)?;
            let options = settings::host_options(&session, m)?;
            let specs = trust::admit(settings::servers(&session)?, trust::person_present())?.specs;
            Ok(hooks_list(specs, config, options, session.json).await)
        }
        Command::Hooks {
            command:
                HooksCommand::Call {
                    hook,
                    server,
                    input,
                    session,
                },
        } => {
            let m = sub(sub(matches, "hooks"), "call");
            let hook = HookPoint::from_tool_name(&hook)
                .ok_or_else(|| ConfigProblem::NotAHookPoint(hook.clone()))?;
            let input = CallInput::parse(input.as_deref())?;
            let mut config = settings::hook_config(&session, m)?;
            let servers = settings::servers(&session)?;
            let specs = &servers.specs;
            if let Some(name) = &server {
                if !specs.iter().any(|s| s.name.as_str() == name) {
                    return Err(ConfigProblem::NoSuchServer(name.clone()));
                }
                config.allowlist = hooks_core::Allowlist::Names(vec![name.clone()]);
            } else if config.allowlist.is_off() {
                return Err(ConfigProblem::HooksOff);
            }
            if let Some(name) = input.text("server")
                && !specs.iter().any(|s| s.name.as_str() == name)
            {
                return Err(ConfigProblem::HookInput {
                    value: input.raw.clone(),
                    why: format!("\"server\": no configured MCP server is named {name:?}"),
                });
            }
            let options = settings::host_options(&session, m)?;
            let mut servers = servers;
            if let Some(name) = &server {
                // The one server asked: the others are neither started nor
                // waited for (nor asked about).
                servers.specs.retain(|s| s.name.as_str() == name);
            }
            let specs = trust::admit(servers, trust::person_present())?.specs;
            Ok(hooks_call(specs, config, options, hook, input, session.json).await)
        }
        Command::Trust {
            dir,
            yes,
            list,
            revoke,
        } => {
            let action = if list {
                trust::TrustAction::List
            } else if revoke {
                trust::TrustAction::Revoke
            } else {
                trust::TrustAction::Trust { yes }
            };
            let text = trust::trust_command(&dir, action)?;
            print_out(&text);
            Ok(EXIT_OK)
        }
        Command::HookServer { server } => {
            Ok(hook_server(server, sub(matches, "hook-server")).await)
        }
    }
}

fn read_prompt(prompt: &str) -> Result<String, ConfigProblem> {
    let text = if prompt == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(ConfigProblem::ReadPrompt)?;
        text
    } else {
        prompt.to_owned()
    };
    if text.trim().is_empty() {
        return Err(ConfigProblem::EmptyPrompt);
    }
    Ok(text)
}

/// Starts the servers; a signal is honoured during the start-up too (the
/// servers started so far are stopped as the start is dropped). `Err` is
/// the exit status.
/// A resumed session's servers start with the failures it had left
/// (`carried`) \[T4\].
async fn start_host(
    specs: Vec<ServerSpec>,
    config: HookConfig,
    carried: &hooks_core::Carried,
    options: HostOptions,
    sink: agent_loop::Sink,
    signals: &Signals,
) -> Result<Host, i32> {
    let sink = agent_loop::hook_sink(sink);
    tokio::select! {
        started = Host::resume(specs, config, carried, options, sink) => started.map_err(|e| {
            report_error(&format!("sprout: {e}"));
            EXIT_USAGE
        }),
        () = signals.token().cancelled() => {
            report_error("sprout: interrupted while the MCP servers were starting");
            Err(signals.exit_status().unwrap_or(EXIT_INTERRUPTED))
        }
    }
}

/// Says which configured servers did not start, on stderr; true if any. A
/// server a resumed session had retired before is not started at all, and
/// its one event said so already \[T4\].
fn report_down_servers(host: &Host) -> bool {
    let mut any = false;
    for server in host.servers() {
        let retired_before =
            server.state == hooks_core::ServerState::Retired && server.last_error.is_none();
        if server.state != hooks_core::ServerState::Up {
            any = true;
        }
        if server.state != hooks_core::ServerState::Up && !retired_before {
            let why = server.last_error.as_deref().unwrap_or("it is not running");
            report_error(&format!(
                "sprout: warning: MCP server {} did not start: {}",
                server.name,
                render::printable(why)
            ));
        }
    }
    any
}

/// What a session of `run` or `chat` is made of, from the command line,
/// the environment and the configuration file.
pub(crate) struct SessionSetup {
    pub(crate) model: Arc<dyn Model>,
    /// The servers that may start (trusted \[U2\]) and where they came from.
    pub(crate) servers: trust::Servers,
    /// Whether tool calls wait for approval \[U4\].
    pub(crate) approval: agent_loop::ApprovalMode,
    pub(crate) config: HookConfig,
    pub(crate) options: HostOptions,
    pub(crate) settings: AgentSettings,
    pub(crate) plan: sessions::Plan,
}

impl SessionSetup {
    /// The setup that `run`'s and `chat`'s flags (`m`: their matches, for
    /// which flag or variable set what) and environment describe.
    fn from_args(
        session: &cli::SessionArgs,
        model: &cli::ModelArgs,
        save: &cli::SaveArgs,
        resume: &cli::ResumeArgs,
        m: &ArgMatches,
    ) -> Result<SessionSetup, ConfigProblem> {
        let config = settings::hook_config(session, m)?;
        let servers = settings::servers(session)?;
        let options = settings::host_options(session, m)?;
        let agent = settings::agent_settings(session, m)?;
        let approval = settings::approval_mode(session, m)?;
        let model = settings::model(model, m)?;
        let plan = sessions::Plan::new(
            settings::saving(save)?,
            || settings::sessions_dir(&save.dir),
            resume,
        )?;
        // Last: the person is asked only about a session that can run [U3].
        let servers = trust::admit(servers, trust::person_present())?;
        Ok(SessionSetup {
            config,
            servers,
            approval,
            options,
            settings: agent,
            model,
            plan,
        })
    }
}

async fn run_session(setup: SessionSetup, prompt: &str, json: bool) -> i32 {
    let SessionSetup {
        model,
        servers,
        approval,
        config,
        options,
        settings,
        mut plan,
    } = setup;
    let renderer = Renderer::new(json);
    let stdout = renderer.stdout();
    // The transcript is written from the start: server start-up events too.
    let (context, sink, transcript) = plan.begin(renderer.into_sink());
    let saved = transcript.is_some();
    // Signals are honoured from the start, server start-up included.
    let signals = Signals::install();
    let approval = approve::approval(approval, &servers, trust::person_present(), stdout.clone());
    let host = match start_host(
        servers.specs,
        config,
        &plan.carried(),
        options,
        sink.clone(),
        &signals,
    )
    .await
    {
        Ok(host) => host,
        Err(code) => {
            stdout.finish(OUTPUT_DRAIN);
            return code;
        }
    };
    // A server that did not start was said once already, by its event.
    let agent = Agent::new(model, host, settings, sink)
        .with_hook_context(context.clone())
        .with_approval(approval);
    let mut agent = match plan.attach(agent, transcript) {
        Ok(agent) => agent,
        Err(code) => {
            stdout.finish(OUTPUT_DRAIN);
            return code;
        }
    };
    let outcome = agent.run_prompt(prompt, signals.token()).await;
    // [E6]: told within 1 s; a second signal exits at once meanwhile.
    let reason = if signals.token().is_cancelled() {
        SessionEndReason::Signal
    } else {
        SessionEndReason::Exit
    };
    agent.end_session(reason).await;
    agent.into_gateway().shutdown().await;
    stdout.finish(OUTPUT_DRAIN);
    plan.farewell(&context, saved && !json);
    if let Some(status) = signals.exit_status() {
        return status;
    }
    match outcome.reason {
        EndReason::Cancelled => EXIT_INTERRUPTED,
        reason if reason.is_normal() => EXIT_OK,
        _ => EXIT_FAILURE,
    }
}

/// The working directory as hooks get it (`cwd`) \[K2\]; empty if unknown.
fn working_directory() -> String {
    std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default()
}

/// Each hook point a server lists with the input fields it asked for, as
/// `sprout hooks list` shows them \[K1\].
fn hook_inputs(report: &hooks_mcp::ServerReport) -> Vec<(&'static str, Vec<&'static str>)> {
    report
        .hook_inputs
        .iter()
        .map(|(hook, fields)| (hook.tool_name(), fields.iter().map(|f| f.name()).collect()))
        .collect()
}

async fn hooks_list(
    specs: Vec<ServerSpec>,
    config: HookConfig,
    options: HostOptions,
    json: bool,
) -> i32 {
    let allowlist = config.allowlist.clone();
    let quiet: agent_loop::Sink = Arc::new(|_: &agent_loop::Emitted<'_>| {});
    let signals = Signals::install();
    let fresh = hooks_core::Carried::default();
    let host = match start_host(specs, config, &fresh, options, quiet, &signals).await {
        Ok(host) => host,
        Err(code) => return code,
    };
    let reports = host.servers();
    let warnings: Vec<String> = host.warnings().iter().map(ToString::to_string).collect();
    if json {
        let servers: Vec<serde_json::Value> = reports
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name.as_str(),
                    "state": state_word(r.state),
                    "may_hook": r.may_hook,
                    "required": r.required,
                    "tools": r.model_tools,
                    "hooks": r.hooks.iter().map(|h| h.tool_name()).collect::<Vec<_>>(),
                    "hook_inputs": hook_inputs(r)
                        .into_iter()
                        .map(|(hook, fields)| (hook.to_owned(), serde_json::json!(fields)))
                        .collect::<serde_json::Map<String, serde_json::Value>>(),
                    "error": r.last_error,
                })
            })
            .collect();
        print_out(&format!(
            "{}\n",
            serde_json::json!({"servers": servers, "warnings": warnings})
        ));
    } else {
        let policy = match &allowlist {
            hooks_core::Allowlist::Off => "hooks are off (MCP_HOOK_SERVERS is not set)".to_owned(),
            hooks_core::Allowlist::All => "every server may hook (MCP_HOOK_SERVERS=*)".to_owned(),
            hooks_core::Allowlist::Names(names) => {
                format!("these servers may hook: {}", names.join(", "))
            }
        };
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "{policy}");
        if reports.is_empty() {
            let _ = writeln!(
                out,
                "no MCP servers are configured (use --mcp-config FILE or a .mcp.json here)"
            );
        }
        for r in &reports {
            let state = state_word(r.state);
            let _ = writeln!(out, "\n{}: {state}", r.name);
            let _ = writeln!(out, "  may hook: {}", if r.may_hook { "yes" } else { "no" });
            if r.required {
                // [F2]: a required gate, and whether it is up to answer.
                let _ = writeln!(
                    out,
                    "  required: yes, its hooks fail closed ({})",
                    if r.state == hooks_core::ServerState::Up {
                        "up: it answers"
                    } else {
                        "down: _Stop objects and _PreToolUse refuses in its name"
                    }
                );
            }
            let hooks: Vec<&str> = r.hooks.iter().map(|h| h.tool_name()).collect();
            let _ = writeln!(
                out,
                "  hooks:    {}",
                if hooks.is_empty() {
                    "(none)".to_owned()
                } else {
                    hooks.join(" ")
                }
            );
            if !r.hooks.is_empty() {
                let inputs: Vec<String> = hook_inputs(r)
                    .into_iter()
                    .map(|(hook, fields)| format!("{hook} {{{}}}", fields.join(", ")))
                    .collect();
                let _ = writeln!(out, "  input:    {}", inputs.join("; "));
            }
            let _ = writeln!(
                out,
                "  tools:    {}",
                if r.model_tools.is_empty() {
                    "(none)".to_owned()
                } else {
                    r.model_tools.join(" ")
                }
            );
            if let Some(error) = &r.last_error {
                let _ = writeln!(out, "  error:    {}", render::printable(error));
            }
        }
        if !warnings.is_empty() {
            let _ = writeln!(out, "\nwarnings:");
            for w in &warnings {
                let _ = writeln!(out, "  - {}", render::printable(w));
            }
        }
        print_out(&out);
    }
    host.shutdown().await;
    let down: Vec<&str> = reports
        .iter()
        .filter(|r| r.state != hooks_core::ServerState::Up)
        .map(|r| r.name.as_str())
        .collect();
    if down.is_empty() {
        EXIT_OK
    } else {
        report_error(&format!(
            "sprout: {} configured MCP server(s) did not start: {}",
            down.len(),
            down.join(", ")
        ));
        EXIT_FAILURE
    }
}

/// A server's state in one word, for people and for `--json`.
fn state_word(state: hooks_core::ServerState) -> &'static str {
    match state {
        hooks_core::ServerState::Starting => "starting",
        hooks_core::ServerState::Up => "up",
        hooks_core::ServerState::Down { .. } => "down",
        hooks_core::ServerState::Retired => "retired",
    }
}

/// What `sprout hooks call --input` supplies: the fields the agent would
/// know at the hook point \[K2\]; fields the policy computes itself
/// (`attempt`, `budget_left`, `pins`) are not among them.
struct CallInput {
    raw: String,
    fields: serde_json::Map<String, serde_json::Value>,
}

impl CallInput {
    const STRINGS: [&'static str; 8] = [
        "session_id",
        "cwd",
        "prompt",
        "tool",
        "server",
        "output",
        "last_assistant_message",
        "summary",
    ];

    fn parse(raw: Option<&str>) -> Result<CallInput, ConfigProblem> {
        let raw = raw.unwrap_or("{}").to_owned();
        let bad = |why: String| ConfigProblem::HookInput {
            value: raw.clone(),
            why,
        };
        let fields = match serde_json::from_str::<serde_json::Value>(&raw) {
            Ok(serde_json::Value::Object(fields)) => fields,
            Ok(_) => return Err(bad("expected a JSON object".into())),
            Err(e) => return Err(bad(format!("not JSON ({e})"))),
        };
        for (key, value) in &fields {
            let fits = match key.as_str() {
                k if Self::STRINGS.contains(&k) => value.is_string(),
                "arguments" => value.is_object(),
                "is_error" => value.is_boolean(),
                "reason" => session_end_reason(value.as_str().unwrap_or("")).is_some(),
                "attempt" | "budget_left" | "pins" => {
                    return Err(bad(format!(
                        "{key:?} is computed by the agent and cannot be supplied"
                    )));
                }
                _ => return Err(bad(format!("{key:?} is not a hook input field"))),
            };
            if !fits {
                let expected = match key.as_str() {
                    "arguments" => "an object",
                    "is_error" => "true or false",
                    "reason" => "\"exit\", \"closed\", \"disconnected\" or \"signal\"",
                    _ => "a string",
                };
                return Err(bad(format!("{key:?} must be {expected}")));
            }
        }
        Ok(CallInput { raw, fields })
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(serde_json::Value::as_str)
    }
}

fn session_end_reason(word: &str) -> Option<SessionEndReason> {
    [
        SessionEndReason::Exit,
        SessionEndReason::Closed,
        SessionEndReason::Disconnected,
        SessionEndReason::Signal,
    ]
    .into_iter()
    .find(|r| r.as_str() == word)
}

/// Asks `hook` once, after `_SessionStart` as a new session would, with
/// what `input` supplies; says what the agent would do with the answers.
async fn ask_hook(
    host: &mut Host,
    hook: HookPoint,
    input: &CallInput,
    tool_server: Option<hooks_core::ServerId>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<String, AskError> {
    host.begin_prompt()?;
    let context = HookContext {
        session_id: input
            .text("session_id")
            .unwrap_or("sprout-hooks-call")
            .to_owned(),
        cwd: input
            .text("cwd")
            .map_or_else(working_directory, ToOwned::to_owned),
    };
    let added = host.session_start(context, cancel).await?;
    let tool_use = || ToolUse {
        server: tool_server.unwrap_or(hooks_core::ServerId(0)),
        tool: input.text("tool").unwrap_or_default().to_owned(),
        arguments: input
            .fields
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({})),
    };
    Ok(match hook {
        HookPoint::SessionStart => {
            format!(
                "the agent would add {} answer(s) after the first prompt",
                added.len()
            )
        }
        HookPoint::UserPromptSubmit => {
            let prompt = input.text("prompt").unwrap_or_default();
            let added = host.prompt_submitted(prompt, cancel).await?;
            format!(
                "the agent would add {} answer(s) after the prompt",
                added.len()
            )
        }
        HookPoint::PreToolUse => {
            let gates = host.tools_requested(vec![tool_use()], cancel).await?;
            match gates.first() {
                Some(ToolGate::Refused { refusals }) => {
                    format!(
                        "the agent would refuse the tool call: {} refusal(s)",
                        refusals.len()
                    )
                }
                _ => "the agent would run the tool".to_owned(),
            }
        }
        HookPoint::PostToolUse => {
            let run = ToolRun {
                call: tool_use(),
                output: input.text("output").unwrap_or_default().to_owned(),
                is_error: input.fields.get("is_error") == Some(&serde_json::Value::Bool(true)),
            };
            let notes = host.tools_ran(vec![run], cancel).await?;
            let n = notes.first().map_or(0, Vec::len);
            format!("the agent would append {n} note(s) to the tool's result")
        }
        HookPoint::Stop => {
            let last = input.text("last_assistant_message").unwrap_or_default();
            match host.end_turn(StopReason::EndTurn, 0, last, cancel).await? {
                TurnVerdict::Continue { injections } => {
                    format!("the agent would go on: {} objection(s)", injections.len())
                }
                TurnVerdict::End { reason } => format!("the agent would stop: {reason}"),
                // A turn without tool calls never runs tools [S1].
                TurnVerdict::RunTools => "the agent would run tools".to_owned(),
            }
        }
        HookPoint::PreCompact => {
            let pins = host.compacting(cancel).await?;
            format!(
                "the agent would pin {} answer(s) through the compaction",
                pins.len()
            )
        }
        HookPoint::PostCompact => {
            let added = host.compacted(1, input.text("summary"), cancel).await?;
            format!("the agent would re-inject {} answer(s)", added.len())
        }
        HookPoint::SessionEnd => {
            let reason = input
                .text("reason")
                .and_then(session_end_reason)
                .unwrap_or(SessionEndReason::Exit);
            host.session_end(reason).await?;
            format!("the agent would end the session ({reason}); answers are ignored")
        }
    })
}

async fn hooks_call(
    specs: Vec<ServerSpec>,
    config: HookConfig,
    options: HostOptions,
    hook: HookPoint,
    input: CallInput,
    json: bool,
) -> i32 {
    let renderer = Renderer::new(json);
    let stdout = renderer.stdout();
    let sink = renderer.into_sink();
    let signals = Signals::install();
    let fresh = hooks_core::Carried::default();
    let mut host = match start_host(specs, config, &fresh, options, sink, &signals).await {
        Ok(host) => host,
        Err(code) => {
            stdout.finish(OUTPUT_DRAIN);
            return code;
        }
    };
    // The hook is asked of the allowlisted servers that are up and list it;
    // with nobody to ask, the call would show nothing, so it fails.
    let askable: Vec<_> = host
        .servers()
        .into_iter()
        .filter(|r| r.may_hook && r.state == hooks_core::ServerState::Up && r.hooks.contains(&hook))
        .collect();
    if askable.is_empty() {
        report_down_servers(&host);
        report_error(&format!(
            "sprout: no allowlisted MCP server that is up lists {}; see `sprout hooks list`",
            hook.tool_name()
        ));
        host.shutdown().await;
        stdout.finish(OUTPUT_DRAIN);
        return EXIT_FAILURE;
    }
    // The tool's server for _PreToolUse and _PostToolUse: the one named in
    // the input, else the first that is asked.
    let tool_server = host
        .session()
        .server_id(input.text("server").unwrap_or(askable[0].name.as_str()));
    let cancel = signals.token();
    let answered = ask_hook(&mut host, hook, &input, tool_server, cancel).await;
    host.shutdown().await;
    // The round's events are written before the summary.
    stdout.finish(OUTPUT_DRAIN);
    let (code, summary) = match answered {
        Ok(summary) => (EXIT_OK, summary),
        Err(AskError::Cancelled) => (
            signals.exit_status().unwrap_or(EXIT_INTERRUPTED),
            "cancelled".to_owned(),
        ),
        Err(AskError::Usage(e)) => (EXIT_FAILURE, format!("the hook policy refused: {e}")),
    };
    if json {
        print_out(&format!(
            "{}\n",
            serde_json::json!({"event": "hooks_call_summary", "summary": summary})
        ));
    } else {
        print_out(&format!("{summary}\n"));
    }
    code
}

async fn hook_server(server: HookServerCommand, matches: &ArgMatches) -> i32 {
    let result = match server {
        HookServerCommand::Todo => {
            hooks_mcp::server::todo::server(hooks_mcp::server::todo::TodoList::default())
                .serve_stdio()
                .await
        }
        HookServerCommand::Gate {
            timeout_ms,
            gate_tools,
            command,
        } => {
            let m = sub(matches, "gate");
            let ms = match settings::number(
                m,
                "timeout_ms",
                "--timeout-ms",
                hooks_mcp::server::gate::ENV_GATE_TIMEOUT_MS,
                &timeout_ms,
                1..=86_400_000,
            ) {
                Ok(ms) => ms,
                Err(problem) => {
                    report_error(&format!("sprout: {problem}"));
                    return EXIT_USAGE;
                }
            };
            let mut options = hooks_mcp::server::gate::GateOptions::new(command);
            options.timeout = std::time::Duration::from_millis(ms);
            options.tools = gate_tools;
            hooks_mcp::server::gate::server(options).serve_stdio().await
        }
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => fail(&format!("the hook server stopped: {e}")),
    }
}
