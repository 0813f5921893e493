//! Showing the event stream to a person, or as JSON Lines [O2].
//!
//! Both outputs read the same [`AgentEvent`]s: the human form is a rendering
//! of them, never a second code path with its own facts.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::AgentEvent;
use anstyle::{AnsiColor, Style};
use hooks_core::{Event, Outcome, PolicyDecision};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The spinner on screen, if any (one terminal, one spinner), so that log
/// lines (stderr) can be written around it instead of through it.
static SPINNER: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn lock_spinner() -> std::sync::MutexGuard<'static, Option<ProgressBar>> {
    SPINNER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes log output to stderr with the spinner, if one is drawn, hidden
/// for the moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let spinner = lock_spinner().clone();
        match spinner {
            Some(spinner) => spinner
                .suspend(|| std::io::stderr().write_all(buf))
                .map(|()| buf.len()),
            None => std::io::stderr().write_all(buf).map(|()| buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        LogWriter
    }
}

/// Where events go.
pub struct Renderer {
    json: bool,
    color: bool,
    terminal: bool,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("json", &self.json)
            .finish_non_exhaustive()
    }
}

impl Renderer {
    /// JSON Lines when `json`; otherwise text, with colour and a spinner
    /// only on a terminal.
    pub fn new(json: bool) -> Renderer {
        let terminal = std::io::stdout().is_terminal();
        Renderer {
            json,
            color: terminal && !json && std::env::var_os("NO_COLOR").is_none(),
            terminal: terminal && !json,
        }
    }

    /// A sink for the loop that renders through this renderer.
    pub fn into_sink(self) -> agent_loop::Sink {
        let shared = Arc::new(Mutex::new(self));
        Arc::new(move |event: &AgentEvent| {
            shared.lock().unwrap_or_else(|e| e.into_inner()).show(event)
        })
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.color {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }

    fn line(&mut self, text: String) {
        if let Some(spinner) = lock_spinner().take() {
            spinner.finish_and_clear();
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// Shows one event.
    pub fn show(&mut self, event: &AgentEvent) {
        if self.json {
            if let Ok(text) = serde_json::to_string(event) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
            return;
        }
        let dim = Style::new().dimmed();
        let bold = Style::new().bold();
        let red = Style::new().fg_color(Some(AnsiColor::Red.into()));
        let yellow = Style::new().fg_color(Some(AnsiColor::Yellow.into()));
        let green = Style::new().fg_color(Some(AnsiColor::Green.into()));
        let cyan = Style::new().fg_color(Some(AnsiColor::Cyan.into()));
        match event {
            AgentEvent::PromptStarted { prompt } => {
                let text = format!("{}{}", self.paint(bold, "prompt:"), first_lines(prompt, 3));
                self.line(text);
            }
            AgentEvent::ModelRequest {
                round,
                estimated_tokens,
                ..
            } => {
                if self.terminal {
                    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
                    spinner.set_style(
                        ProgressStyle::with_template("{spinner} {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    spinner.set_message(format!(
                        "model is working (round {round}, ~{estimated_tokens} tokens in)"
                    ));
                    spinner.enable_steady_tick(Duration::from_millis(100));
                    *lock_spinner() = Some(spinner);
                }
            }
            AgentEvent::ModelResponse {
                stop,
                tool_calls,
                latency,
                ..
            } => {
                let text = self.paint(
                    dim,
                    &format!(
                        "  model: {stop}, {tool_calls} tool call(s), {}",
                        human(*latency)
                    ),
                );
                self.line(text);
            }
            AgentEvent::AssistantText { text } => {
                let label = self.paint(bold, "assistant:");
                self.line(format!("{label} {}", text.trim_end()));
            }
            AgentEvent::ToolCall {
                name, arguments, ..
            } => {
                let text = format!(
                    "  {} {name} {}",
                    self.paint(cyan, "→ tool"),
                    clip(arguments, 160)
                );
                self.line(text);
            }
            AgentEvent::ToolResult {
                name,
                is_error,
                text,
                latency,
                ..
            } => {
                let mark = if *is_error {
                    self.paint(red, "← error")
                } else {
                    self.paint(cyan, "←")
                };
                self.line(format!(
                    "  {mark} {name} ({}):{}",
                    human(*latency),
                    first_lines(text, 4)
                ));
            }
            AgentEvent::Hook(event) => self.hook(event, yellow, red, green, dim),
            AgentEvent::Injected { tool_name, .. } => {
                let text = self.paint(
                    dim,
                    &format!("    injected as a {tool_name} tool result (JSON)"),
                );
                self.line(text);
            }
            AgentEvent::Compacted {
                kind,
                removed,
                before,
                after,
                note,
            } => {
                let mut text = format!(
                    "⇲ compacted by {kind}: {before} messages → {after} ({removed} removed)"
                );
                if let Some(note) = note {
                    text.push_str(&format!("; {note}"));
                }
                let text = self.paint(yellow, &text);
                self.line(text);
            }
            AgentEvent::PromptEnded {
                reason,
                detail,
                rounds,
            } => {
                let style = if reason.is_normal() { green } else { red };
                let mut text = format!("■ stopped: {reason} — {}", explain(reason));
                if let Some(detail) = detail {
                    text.push_str(&format!(": {detail}"));
                }
                text.push_str(&format!(" ({rounds} model round(s))"));
                let text = self.paint(style, &text);
                self.line(text);
            }
        }
    }

    fn hook(&mut self, event: &Event, yellow: Style, red: Style, green: Style, dim: Style) {
        let text = match event {
            Event::RoundStarted { round, hook, servers, left_out, .. } => {
                if servers.is_empty() && left_out.is_empty() {
                    return;
                }
                let mut text = format!("⚑ {hook} round {round}: asking {}", list(servers));
                if !left_out.is_empty() {
                    text.push_str(&format!(" (left out, down: {})", list(left_out)));
                }
                self.paint(yellow, &text)
            }
            Event::HookCalled { hook, server, outcome, latency, .. } => {
                let detail = match outcome {
                    Outcome::Objection { text } | Outcome::Injection { text } => format!(":{}", first_lines(text, 6)),
                    Outcome::Error { kind, detail } => format!(" ({kind}):{}", first_lines(detail, 2)),
                    _ => String::new(),
                };
                let style = match outcome {
                    Outcome::Objection { .. } | Outcome::Injection { .. } => yellow,
                    Outcome::Empty => dim,
                    _ => red,
                };
                let head = self.paint(style, &format!("  {server}.{hook}: {} ({})", outcome.label(), human(*latency)));
                format!("{head}{detail}")
            }
            Event::Decided { decision, .. } => match decision {
                PolicyDecision::ObjectionHonoured { servers, budget_used, budget } => self.paint(
                    yellow,
                    &format!("  ✋ objection from {} honoured (budget {budget_used}/{budget}): the agent goes on", list(servers)),
                ),
                PolicyDecision::Reinject { servers } if !servers.is_empty() => {
                    self.paint(yellow, &format!("  ↻ re-injecting what {} said after the compaction", list(servers)))
                }
                // The prompt's end is shown once, by the loop's own event.
                _ => return,
            },
            Event::ServerDown { server, cause, failures, retry_at } => {
                let cause = match cause {
                    hooks_core::DownCause::Killed => "killed after two hook timeouts in a row".to_owned(),
                    hooks_core::DownCause::Crashed(why) => format!("exited ({why})"),
                    hooks_core::DownCause::StartFailed(why) => format!("failed to start ({why})"),
                };
                let next = if retry_at.is_some() { "it will be restarted when next needed" } else { "it stays off for this session" };
                self.paint(red, &format!("✗ server {server} {cause}; failure {failures} of 3, {next}"))
            }
            Event::ServerStarting { server, attempt } if *attempt > 1 => self.paint(yellow, &format!("↺ restarting server {server} (attempt {attempt})")),
            Event::ServerStarting { .. } => return,
            Event::ServerUp { server, model_tools, hooks } => {
                let hooks: Vec<&str> = hooks.iter().map(|h| h.tool_name()).collect();
                let hooks = if hooks.is_empty() { "no hooks".to_owned() } else { hooks.join(" ") };
                self.paint(green, &format!("✓ server {server} up: {model_tools} tool(s), {hooks}"))
            }
            Event::Warning(warning) => self.paint(yellow, &format!("warning: {warning}")),
        };
        self.line(text);
    }
}

fn list(names: &[hooks_core::ServerName]) -> String {
    if names.is_empty() {
        "nobody".to_owned()
    } else {
        names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn explain(reason: &hooks_core::EndReason) -> &'static str {
    use hooks_core::EndReason::*;
    match reason {
        NoObjection => "the model finished and no hook objected",
        HooksOff => "the model finished; hooks are off (MCP_HOOK_SERVERS unset)",
        BudgetSpent => "the model finished; the _Stop budget is spent, so hooks were not asked",
        Declined => "the model finished again right after an objection, so it was let go",
        Model(_) => "the model stopped for a reason hooks do not gate",
        Cancelled => "cancelled",
        MaxRounds => "the round limit was reached",
        Failed => "the prompt failed",
    }
}

/// A duration for people: µs, ms or s.
pub fn human(d: Duration) -> String {
    let us = d.as_micros();
    if us < 1000 {
        format!("{us} µs")
    } else if us < 10_000_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}

/// The first `n` lines, each clipped, with a note of what was left out; led
/// by a space when it is one line, by a line break when it is more.
fn first_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let mut shown: Vec<String> = lines.iter().take(n).map(|l| clip(l, 200)).collect();
    if lines.len() > n {
        shown.push(format!("… ({} more line(s))", lines.len() - n));
    }
    match shown.len() {
        0 => String::new(),
        1 => format!(" {}", shown[0]),
        _ => format!("\n    {}", shown.join("\n    ")),
    }
}
