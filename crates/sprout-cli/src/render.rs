//! Showing the event stream to a person, or as JSON Lines \[O2\].
//!
//! Both outputs read the same [`AgentEvent`]s: the human form is a rendering
//! of them, never a second code path with its own facts.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::AgentEvent;
use anstyle::{AnsiColor, Style};
use hooks_core::{Event, Outcome, PolicyDecision};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::stdout::{Item, Stdout};

/// The spinner on screen, if any (one terminal, one spinner), so that log
/// lines (stderr) can be written around it instead of through it.
static SPINNER: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn lock_spinner() -> std::sync::MutexGuard<'static, Option<ProgressBar>> {
    SPINNER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Clears the spinner, if one is drawn (the stdout writer, before a line).
pub(crate) fn clear_spinner() {
    if let Some(spinner) = lock_spinner().take() {
        spinner.finish_and_clear();
    }
}

/// Draws a spinner with `message` until the next line (the stdout writer).
pub(crate) fn show_spinner(message: String) {
    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
    spinner.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message(message);
    spinner.enable_steady_tick(Duration::from_millis(100));
    if let Some(old) = lock_spinner().replace(spinner) {
        old.finish_and_clear();
    }
}

/// Writes log output to stderr, through the stderr writer thread, with the
/// spinner, if one is drawn, hidden for the moment. Log lines quote servers (stderr tails, error reasons), so
/// the bytes are made [`printable`] on the way out; logging's own colours
/// are off for that reason (`init_logging`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let bytes = printable_bytes(buf);
        let clean = String::from_utf8_lossy(&bytes);
        // Whatever RUST_LOG lets through (the MCP SDK's errors quote the
        // URLs they failed on), no URL's credentials reach the log.
        let clean = redact_urls(&clean).into_owned();
        // Queued for the stderr writer thread, which never makes us wait.
        Stdout::stderr().push(Item::Text(clean));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `text` with every `http://` or `https://` URL in it (up to white space
/// or a quote) shown as [`hooks_mcp::redact_url`] shows it: user-info and
/// secret-looking query values as `***`.
pub(crate) fn redact_urls(text: &str) -> Cow<'_, str> {
    if !text.contains("http://") && !text.contains("https://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = [rest.find("http://"), rest.find("https://")]
        .into_iter()
        .flatten()
        .min()
    {
        out.push_str(&rest[..at]);
        let url = &rest[at..];
        let end = url
            .find(|c: char| c.is_whitespace() || "\"'`<>".contains(c))
            .unwrap_or(url.len());
        out.push_str(&hooks_mcp::redact_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Runs `write` with the spinner, if one is drawn, hidden for the moment
/// (the stderr writer, around a batch of log lines).
pub(crate) fn with_spinner_hidden<T>(write: impl FnOnce() -> T) -> T {
    let spinner = lock_spinner().clone();
    match spinner {
        Some(spinner) => spinner.suspend(write),
        None => write(),
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        LogWriter
    }
}

/// `text` on one line, as a question about it must show it: every control
/// character escaped as [`printable`] escapes it, line breaks and tabs
/// included, and so are the invisible Unicode characters that reorder or
/// hide text (bidirectional controls, zero-width ones, the soft hyphen), so
/// nothing in it can draw a line of its own or hide a part of itself.
pub(crate) fn one_line(text: &str) -> String {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    };
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` as it may be shown to a person on a terminal or in a pipe: every
/// control character (`char::is_control`: C0, DEL, and C1 U+0080..U+009F)
/// other than `\n` and `\t` is written as Rust's `\u{…}` escape in
/// lower-case hex: ESC as `\u{1b}`, CR as `\u{d}`, BEL as `\u{7}`, DEL as
/// `\u{7f}`, CSI as `\u{9b}`. Text from outside (the model, hooks, tools,
/// servers) thus cannot move the cursor, rewrite earlier lines, retitle the
/// window or ring the bell; other Unicode passes unchanged.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    let shown = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if text.chars().all(shown) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if shown(c) {
            out.push(c);
        } else {
            out.extend(c.escape_unicode());
        }
    }
    Cow::Owned(out)
}

/// [`printable`] for bytes that should be UTF-8 (a log line); bytes that are
/// not are shown as U+FFFD.
fn printable_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    match String::from_utf8_lossy(bytes) {
        Cow::Borrowed(text) => match printable(text) {
            Cow::Borrowed(_) => Cow::Borrowed(bytes),
            Cow::Owned(clean) => Cow::Owned(clean.into_bytes()),
        },
        Cow::Owned(text) => Cow::Owned(printable(&text).into_owned().into_bytes()),
    }
}

/// One line of human output, made of pieces that are made [`printable`] as
/// they are added and styled only when the line is written: the renderer's
/// own escape sequences are the only ones that reach the terminal.
#[derive(Debug, Default)]
struct Line(Vec<(Option<Style>, String)>);

impl Line {
    fn plain(mut self, text: &str) -> Line {
        self.0.push((None, printable(text).into_owned()));
        self
    }

    fn styled(mut self, style: Style, text: &str) -> Line {
        self.0.push((Some(style), printable(text).into_owned()));
        self
    }
}

/// Where a renderer's output goes: the [`Stdout`] writer, or a string
/// (`crate::testing`).
pub(crate) trait Out {
    /// Takes `item`; an `essential` one is never dropped.
    fn emit(&mut self, item: Item, essential: bool);
}

impl Out for Stdout {
    fn emit(&mut self, item: Item, essential: bool) {
        if essential {
            self.push_essential(item);
        } else {
            self.push(item);
        }
    }
}

/// The text as a pipe gets it: spinners are never drawn there.
impl Out for String {
    fn emit(&mut self, item: Item, _essential: bool) {
        if let Item::Text(text) = item {
            self.push_str(&text);
        }
    }
}

/// Where events go: formatted on the caller's task, written by the
/// [`Stdout`] thread.
pub(crate) struct Renderer<O = Stdout> {
    json: bool,
    color: bool,
    terminal: bool,
    out: O,
    /// The current answer's text is being shown as it streams: the
    /// `assistant:` line is open (not yet ended by a newline).
    open_line: bool,
    /// The current answer's text was shown as it streamed, so the whole
    /// text that follows it is not shown again.
    streamed: bool,
}

impl<O> std::fmt::Debug for Renderer<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("json", &self.json)
            .finish_non_exhaustive()
    }
}

impl Renderer {
    /// JSON Lines when `json`; otherwise text, with colour and a spinner
    /// only on a terminal.
    pub(crate) fn new(json: bool) -> Renderer {
        let terminal = std::io::stdout().is_terminal();
        Renderer {
            json,
            color: terminal && !json && std::env::var_os("NO_COLOR").is_none(),
            terminal: terminal && !json,
            out: Stdout::start(if json {
                crate::stdout::JSON_STALL_BOUND
            } else {
                crate::stdout::STALL_BOUND
            }),
            open_line: false,
            streamed: false,
        }
    }

    /// The writer this renderer writes through, to finish it at exit.
    pub(crate) fn stdout(&self) -> Stdout {
        self.out.clone()
    }

    /// A sink for the loop that renders through this renderer.
    pub(crate) fn into_sink(self) -> agent_loop::Sink {
        let shared = Arc::new(Mutex::new(self));
        Arc::new(move |event: &agent_loop::Emitted<'_>| {
            shared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .emitted(event)
        })
    }
}

impl<O: Out> Renderer<O> {
    /// A renderer into `out` for a pipe: no colour, no spinner; JSON Lines
    /// when `json`.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    pub(crate) fn piped(json: bool, out: O) -> Renderer<O> {
        Renderer {
            json,
            color: false,
            terminal: false,
            out,
            open_line: false,
            streamed: false,
        }
    }

    /// What it has written into.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    pub(crate) fn into_out(self) -> O {
        self.out
    }

    /// Shows one event.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    pub(crate) fn show(&mut self, event: &AgentEvent) {
        self.emitted(&agent_loop::Emitted::new(event));
    }

    /// Shows one event; as JSON, the text the loop's sinks share.
    pub(crate) fn emitted(&mut self, emitted: &agent_loop::Emitted<'_>) {
        let event = emitted.event();
        // How a prompt ended is never dropped, however stalled the output.
        let essential = matches!(event, AgentEvent::PromptEnded { .. });
        if self.json {
            if let Some(text) = json_line(emitted) {
                self.out.emit(Item::Text(text), essential);
            }
            return;
        }
        if let AgentEvent::TextDelta { text } = event {
            let line = if self.open_line {
                Line::default().plain(text)
            } else {
                Line::default()
                    .styled(Style::new().bold(), "assistant:")
                    .plain(" ")
                    .plain(text.trim_start())
            };
            self.open_line = true;
            self.streamed = true;
            self.out.emit(Item::Text(paint(&line, self.color)), false);
            return;
        }
        if std::mem::take(&mut self.open_line) {
            self.out.emit(Item::Text("\n".to_owned()), false);
        }
        if matches!(event, AgentEvent::AssistantText { .. }) && std::mem::take(&mut self.streamed) {
            return;
        }
        if let AgentEvent::ModelRequest {
            round,
            estimated_tokens,
            ..
        } = event
        {
            self.streamed = false;
            if self.terminal {
                self.out.emit(
                    Item::Spinner(format!(
                        "model is working (round {round}, ~{estimated_tokens} tokens in)"
                    )),
                    false,
                );
            }
            return;
        }
        if let Some(line) = human_line(event) {
            let mut text = paint(&line, self.color);
            text.push('\n');
            self.out.emit(Item::Text(text), essential);
        }
    }
}

/// The line's text, with colour if `color`.
fn paint(line: &Line, color: bool) -> String {
    let mut text = String::new();
    for (style, piece) in &line.0 {
        match style {
            Some(style) if color => text.push_str(&format!(
                "{}{piece}{}",
                style.render(),
                style.render_reset()
            )),
            _ => text.push_str(piece),
        }
    }
    text
}

/// An event as one JSON Lines record, newline included; serde_json escapes
/// control characters below U+0020 itself (ESC as `\u001b`).
fn json_line(event: &agent_loop::Emitted<'_>) -> Option<String> {
    let json = event.json().ok()?.get();
    let mut line = String::with_capacity(json.len() + 1);
    line.push_str(json);
    line.push('\n');
    Some(line)
}

/// An event as a line for people, or `None` for events not shown this way.
fn human_line(event: &AgentEvent) -> Option<Line> {
    let dim = Style::new().dimmed();
    let bold = Style::new().bold();
    let red = Style::new().fg_color(Some(AnsiColor::Red.into()));
    let yellow = Style::new().fg_color(Some(AnsiColor::Yellow.into()));
    let green = Style::new().fg_color(Some(AnsiColor::Green.into()));
    let cyan = Style::new().fg_color(Some(AnsiColor::Cyan.into()));
    let line = Line::default();
    Some(match event {
        AgentEvent::PromptStarted { prompt } => {
            line.styled(bold, "prompt:").plain(&first_lines(prompt, 3))
        }
        AgentEvent::ModelRequest { .. } => return None,
        // Shown as they arrive by `Renderer::show`, not as lines.
        AgentEvent::TextDelta { .. } => return None,
        AgentEvent::ModelResponse {
            stop,
            tool_calls,
            latency,
            ..
        } => line.styled(
            dim,
            &format!(
                "  model: {stop}, {tool_calls} tool call(s), {}",
                human(*latency)
            ),
        ),
        AgentEvent::AssistantText { text } => line
            .styled(bold, "assistant:")
            .plain(&format!(" {}", text.trim_end())),
        AgentEvent::ToolCall {
            name, arguments, ..
        } => line
            .plain("  ")
            .styled(cyan, "→ tool")
            .plain(&format!(" {name} {}", clip(arguments, 160))),
        AgentEvent::ToolResult {
            name,
            is_error,
            text,
            latency,
            ..
        } => {
            let line = if *is_error {
                line.plain("  ").styled(red, "← error")
            } else {
                line.plain("  ").styled(cyan, "←")
            };
            line.plain(&format!(
                " {name} ({}):{}",
                human(*latency),
                first_lines(text, 4)
            ))
        }
        AgentEvent::ApprovalAsked { name, .. } => line
            .plain("  ")
            .styled(yellow, &format!("? {name} waits for your approval")),
        AgentEvent::ApprovalAnswered {
            name,
            by,
            allowed,
            scope,
            reason,
            ..
        } => {
            let by = match by {
                agent_loop::DecidedBy::Rule => "a rule (autoApprove)",
                agent_loop::DecidedBy::Session => "an earlier answer for this session",
                agent_loop::DecidedBy::Always => "an earlier answer for good",
                agent_loop::DecidedBy::Person => "you",
                agent_loop::DecidedBy::Nobody => "nobody (no one could be asked)",
            };
            let mut text = if *allowed {
                format!("✓ {name} allowed by {by}")
            } else {
                format!("✗ {name} denied by {by}")
            };
            match scope.as_deref() {
                Some("session") => text.push_str(", for this session"),
                Some("always") => text.push_str(", for good"),
                _ => {}
            }
            if let Some(reason) = reason {
                text.push_str(&format!(": {reason}"));
            }
            let style = if *allowed { dim } else { red };
            line.plain("  ").styled(style, &text)
        }
        AgentEvent::Hook(event) => return hook_line(event, yellow, red, green, dim),
        AgentEvent::Injected { tool_name, .. } => line.styled(
            dim,
            &format!("    injected as a {tool_name} tool result (JSON)"),
        ),
        AgentEvent::Compacted {
            kind,
            removed,
            before,
            after,
            note,
        } => {
            let mut text = format!(
                "⇲ compacted by {kind}: {removed} of {before} messages removed; the history holds {after} now"
            );
            if let Some(note) = note {
                text.push_str(&format!("; {note}"));
            }
            line.styled(yellow, &text)
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
            text.push_str(&match rounds {
                0 => " (before any model request)".to_owned(),
                1 => " (1 model request)".to_owned(),
                n => format!(" ({n} model requests)"),
            });
            line.styled(style, &text)
        }
    })
}

fn hook_line(event: &Event, yellow: Style, red: Style, green: Style, dim: Style) -> Option<Line> {
    let line = Line::default();
    Some(match event {
        Event::RoundStarted { round, hook, servers, left_out, .. } => {
            if servers.is_empty() && left_out.is_empty() {
                return None;
            }
            let mut text = format!("⚑ {hook} round {round}: asking {}", list(servers));
            if !left_out.is_empty() {
                text.push_str(&format!(" (left out, down: {})", list(left_out)));
            }
            line.styled(yellow, &text)
        }
        Event::HookCalled { hook, server, outcome, latency, .. } => {
            let detail = match outcome {
                Outcome::Objection { text } | Outcome::Injection { text } => format!(":{}", first_lines(text, 6)),
                Outcome::Error { kind, detail } => format!(" ({kind}):{}", first_lines(detail, 2)),
                // Which deadline, and how to give the hook more time.
                Outcome::Timeout => " — no answer within its deadline (SPROUT_AGENT_HOOK_TIMEOUT_MS, or the entry's \"hookTimeoutMs\", gives it more)".to_owned(),
                _ => String::new(),
            };
            let style = match outcome {
                Outcome::Objection { .. } | Outcome::Injection { .. } => yellow,
                Outcome::Empty => dim,
                _ => red,
            };
            line.styled(style, &format!("  {server}.{hook}: {} ({})", outcome.label(), human(*latency)))
                .plain(&detail)
        }
        Event::Decided { decision, .. } => match decision {
            PolicyDecision::ObjectionHonoured { servers, budget_used, budget } => line.styled(
                yellow,
                &format!("  ✋ objection from {} honoured (budget {budget_used}/{budget}): the agent goes on", list(servers)),
            ),
            PolicyDecision::Reinject { servers } if !servers.is_empty() => {
                line.styled(yellow, &format!("  ↻ re-injecting what {} said after the compaction", list(servers)))
            }
            // The prompt's end is shown once, by the loop's own event.
            _ => return None,
        },
        Event::ServerDown { .. } => line.styled(red, &format!("✗ {}", server_down_text(event))),
        Event::ServerStarting { server, attempt } if *attempt > 1 => line.styled(yellow, &format!("↺ restarting server {server} (attempt {attempt})")),
        Event::ServerStarting { .. } => return None,
        Event::ServerUp { server, model_tools, hooks } => {
            let hooks: Vec<&str> = hooks.iter().map(|h| h.tool_name()).collect();
            let hooks = if hooks.is_empty() { "no hooks".to_owned() } else { hooks.join(" ") };
            line.styled(green, &format!("✓ server {server} up: {model_tools} tool(s), {hooks}"))
        }
        Event::Warning(warning) => line.styled(yellow, &format!("warning: {warning}")),
        Event::GuardDown { .. } => line.styled(red, &format!("⛔ {}", guard_text(event))),
        Event::GuardUp { .. } => line.styled(green, &format!("✓ {}", guard_text(event))),
    })
}

/// A required gate's [`Event::GuardDown`] or [`Event::GuardUp`] in words
/// \[F2\]; empty for any other event. Shared by the terminal and ACP.
pub(crate) fn guard_text(event: &Event) -> String {
    match event {
        Event::GuardDown {
            server,
            cause,
            retired,
        } => {
            let cause = match cause {
                hooks_core::DownCause::Killed => {
                    "it was killed after two hook timeouts in a row".to_owned()
                }
                hooks_core::DownCause::Crashed(why) => format!("it exited ({why})"),
                hooks_core::DownCause::StartFailed(why) => format!("it failed to start ({why})"),
                hooks_core::DownCause::BeforeResume => {
                    "it failed too often before this session was resumed".to_owned()
                }
            };
            let until = if *retired {
                "for the rest of this session"
            } else {
                "until it is back"
            };
            format!(
                "required gate {server} is down: {cause}. Its hooks fail closed {until}: _Stop objects and _PreToolUse refuses in its name"
            )
        }
        Event::GuardUp { server } => {
            format!("required gate {server} is back up: its hooks answer again")
        }
        _ => String::new(),
    }
}

/// A [`Event::ServerDown`] in words: which server, why, and what happens
/// next; empty for any other event. Shared by the terminal and ACP.
pub(crate) fn server_down_text(event: &Event) -> String {
    let Event::ServerDown {
        server,
        cause,
        failures,
        retry_at,
    } = event
    else {
        return String::new();
    };
    let cause = match cause {
        hooks_core::DownCause::Killed => "killed after two hook timeouts in a row".to_owned(),
        hooks_core::DownCause::Crashed(why) => format!("exited ({why})"),
        hooks_core::DownCause::StartFailed(why) => format!("failed to start ({why})"),
        hooks_core::DownCause::BeforeResume => {
            "is not started: it failed too often before this session was resumed".to_owned()
        }
    };
    let next = if retry_at.is_some() {
        "it will be restarted when next needed"
    } else {
        "it stays off for this session"
    };
    format!("server {server} {cause}; failure {failures} of 3, {next}")
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
        NoStopHook => {
            "the model finished; no hook server that is up lists _Stop, so nobody could object"
        }
        Model(hooks_core::StopReason::MaxTokens) => {
            "the answer reached its length limit and was cut there (SPROUT_AGENT_MAX_OUTPUT_TOKENS raises it); a cut answer is not put to _Stop"
        }
        Model(hooks_core::StopReason::Refusal) => "the model refused to answer",
        Model(hooks_core::StopReason::ContentFilter) => {
            "the provider's content filter stopped the answer"
        }
        Model(_) => "the model stopped for a reason hooks do not gate",
        Cancelled => "the prompt was cancelled (Ctrl-C, a signal, or the client) before it ended",
        MaxRounds => "the round limit was reached",
        Failed => "the prompt failed",
    }
}

/// A duration for people: µs, ms or s, from its microseconds, which is what
/// `--json` carries \[O2\].
pub(crate) fn human(d: Duration) -> String {
    let us = d.as_micros();
    if us < 1000 {
        format!("{us} µs")
    } else if us < 10_000_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{:.1} s", us as f64 / 1_000_000.0)
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

#[cfg(test)]
mod tests {

    #[test]
    fn one_line_hides_nothing() {
        assert_eq!(one_line("a\nb\tc"), "a\\u{a}b\\u{9}c");
        assert_eq!(one_line("x\u{202e}y\u{200b}z"), "x\\u{202e}y\\u{200b}z");
        assert_eq!(one_line("plain é"), "plain é");
    }

    #[test]
    fn log_lines_never_carry_a_urls_credentials() {
        let line = r#"worker quit: Client(reqwest::Error { url: "http://u:pw@127.0.0.1:9/mcp?api_key=s3cret&x=1", source: x }) and https://h/?token=t0k end"#;
        let shown = redact_urls(line);
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0k") && !shown.contains("pw"),
            "{shown}"
        );
        assert!(shown.contains("x=1"), "{shown}");
        assert!(shown.ends_with(" end"), "{shown}");
        assert_eq!(redact_urls("no url here"), "no url here");
    }

    use super::*;

    #[test]
    fn controls_are_escaped_in_one_form() {
        assert_eq!(printable("a\x1b[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(printable("over\rwrite"), "over\\u{d}write");
        assert_eq!(printable("ding\x07"), "ding\\u{7}");
        assert_eq!(printable("del\x7f"), "del\\u{7f}");
        assert_eq!(printable("\0"), "\\u{0}");
        // C1 controls: U+009B is a one-character CSI on some terminals.
        assert_eq!(
            printable("\u{80}\u{9b}31m\u{9f}"),
            "\\u{80}\\u{9b}31m\\u{9f}"
        );
    }

    #[test]
    fn newlines_tabs_and_unicode_pass_unchanged() {
        let text = "line one\n\tindented — ünïcødé ✓ 日本語 🌱 \u{a0}\u{200b}";
        assert!(matches!(printable(text), Cow::Borrowed(t) if t == text));
        assert!(matches!(printable(""), Cow::Borrowed("")));
    }

    #[test]
    fn log_bytes_are_escaped_and_bad_utf8_replaced() {
        assert_eq!(&*printable_bytes(b"ok\n"), b"ok\n");
        assert_eq!(
            &*printable_bytes(b"stderr: \x1b]0;pwned\x07\n"),
            b"stderr: \\u{1b}]0;pwned\\u{7}\n"
        );
        assert_eq!(&*printable_bytes(b"\xff\x1b"), "\u{fffd}\\u{1b}".as_bytes());
    }

    fn shown(event: &AgentEvent, color: bool) -> String {
        let line = human_line(event).expect("the event is shown");
        paint(&line, color)
    }

    // Text from outside reaches the human output escaped, piped or on a
    // terminal, while the renderer's own colours still work.
    #[test]
    fn external_text_is_escaped_and_styling_kept() {
        let event = AgentEvent::AssistantText {
            text: "hi\x1b[2J\rthere\x07".into(),
        };
        let piped = shown(&event, false);
        assert_eq!(piped, "assistant: hi\\u{1b}[2J\\u{d}there\\u{7}");
        let painted = shown(&event, true);
        let bold = Style::new().bold();
        assert_eq!(
            painted,
            format!(
                "{}assistant:{} hi\\u{{1b}}[2J\\u{{d}}there\\u{{7}}",
                bold.render(),
                bold.render_reset()
            )
        );
        // The only ESC bytes are the renderer's own two sequences.
        assert_eq!(painted.matches('\x1b').count(), 2, "{painted:?}");
    }

    #[test]
    fn every_kind_of_external_text_is_escaped() {
        let bad = "x\x1b]0;t\x07\u{9b}y";
        let server = hooks_core::ServerName::new("todo").unwrap();
        let events = [
            AgentEvent::PromptStarted { prompt: bad.into() },
            AgentEvent::ToolCall {
                id: "1".into(),
                name: bad.into(),
                arguments: bad.into(),
            },
            AgentEvent::ToolResult {
                id: "1".into(),
                name: bad.into(),
                is_error: true,
                text: bad.into(),
                latency: Duration::ZERO,
            },
            AgentEvent::Injected {
                hook: "_Stop".into(),
                server: "todo".into(),
                tool_name: bad.into(),
                content: bad.into(),
            },
            AgentEvent::Compacted {
                kind: agent_loop::CompactionKind::Summary,
                removed: 1,
                before: 2,
                after: 1,
                note: Some(bad.into()),
            },
            AgentEvent::PromptEnded {
                reason: hooks_core::EndReason::Failed,
                detail: Some(bad.into()),
                rounds: 1,
            },
            AgentEvent::ModelResponse {
                round: 1,
                stop: bad.into(),
                tool_calls: 0,
                input_tokens: None,
                output_tokens: None,
                latency: Duration::ZERO,
            },
            AgentEvent::Hook(Event::HookCalled {
                round: hooks_core::RoundId(1),
                hook: hooks_core::HookPoint::Stop,
                server: server.clone(),
                outcome: Outcome::Objection { text: bad.into() },
                latency: Duration::ZERO,
            }),
            AgentEvent::Hook(Event::ServerDown {
                server,
                cause: hooks_core::DownCause::Crashed(bad.into()),
                failures: 1,
                retry_at: None,
            }),
        ];
        for event in &events {
            for color in [false, true] {
                let text = shown(event, color);
                assert!(text.contains("x\\u{1b}]0;t\\u{7}\\u{9b}y"), "{text:?}");
                assert!(
                    !text.contains('\x07') && !text.contains('\u{9b}'),
                    "{text:?}"
                );
                // Escapes, if any, are the renderer's own SGR sequences.
                let own = text.matches("\x1b[").count();
                assert_eq!(text.matches('\x1b').count(), own, "{text:?}");
                if !color {
                    assert_eq!(own, 0, "{text:?}");
                }
            }
        }
    }

    // A streamed answer is shown as its pieces arrive, on one line, and its
    // whole text is not shown again; a pipe never gets a spinner.
    #[test]
    fn a_streamed_answer_is_shown_once() {
        let mut renderer = Renderer::piped(false, String::new());
        for event in [
            AgentEvent::ModelRequest {
                round: 1,
                messages: 1,
                tools: 0,
                estimated_tokens: 9,
            },
            AgentEvent::TextDelta {
                text: " Hel".into(),
            },
            AgentEvent::TextDelta { text: "lo".into() },
            AgentEvent::AssistantText {
                text: "Hello".into(),
            },
            AgentEvent::PromptEnded {
                reason: hooks_core::EndReason::NoObjection,
                detail: None,
                rounds: 1,
            },
        ] {
            renderer.show(&event);
        }
        assert_eq!(
            renderer.into_out(),
            "assistant: Hello\n■ stopped: no_objection — the model finished and no hook objected (1 model request)\n"
        );
    }

    // `--json` is left to serde_json, which escapes ESC itself.
    #[test]
    fn json_lines_escape_esc() {
        let line = json_line(&agent_loop::Emitted::new(&AgentEvent::AssistantText {
            text: "a\x1b[2Jb".into(),
        }))
        .unwrap();
        assert!(line.ends_with("}\n"), "one line: {line}");
        assert!(line.contains(r#""text":"a\u001b[2Jb""#), "{line}");
        assert!(!line.contains('\x1b'), "{line}");
    }
}
