//! `sprout chat`: an interactive session in the terminal. Several prompts
//! share one session, so one objection budget \[S3\] and one set of
//! servers; each prompt is shown as `sprout run` shows it.
//!
//! Keys: a line is a prompt (with line editing and this session's history,
//! from rustyline); Ctrl-C while a prompt runs cancels that prompt \[T5\]
//! and brings the input line back; Ctrl-C (or Ctrl-D) at the input line
//! leaves. A second Ctrl-C while a cancelled prompt is still stopping exits
//! at once, like a second signal to `sprout run`. A SIGINT while no prompt
//! runs (servers starting, an input line read from a pipe, `kill -INT`),
//! SIGTERM and SIGHUP end the session as they end `sprout run`.
//!
//! Not here: how events look (`render`), the loop itself (`agent-loop`).

use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex};

use agent_loop::Agent;
use hooks_core::SessionEndReason;
use rustyline::error::ReadlineError;
use rustyline::{DefaultEditor, ExternalPrinter as _};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::render::Renderer;
use crate::signals::{EXIT_SIGINT, Signals};
use crate::{EXIT_FAILURE, EXIT_OK, OUTPUT_DRAIN, SessionSetup, report_error, start_host};

/// What the input line shows.
const PROMPT: &str = "sprout> ";

/// The prompt that runs now, for Ctrl-C to cancel, and the session's
/// signals, for a Ctrl-C when none runs.
#[derive(Clone)]
struct Running {
    prompt: Arc<Mutex<Option<CancellationToken>>>,
    signals: Signals,
}

impl Running {
    fn new(signals: Signals) -> Running {
        Running {
            prompt: Arc::default(),
            signals,
        }
    }

    fn set(&self, token: Option<CancellationToken>) {
        *self.prompt.lock().unwrap_or_else(|e| e.into_inner()) = token;
    }

    /// Ctrl-C: cancels the running prompt; a second one while it stops
    /// exits now.
    fn interrupt(&self) {
        let running = self
            .prompt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match running {
            Some(token) if !token.is_cancelled() => token.cancel(),
            Some(_) => {
                report_error("sprout: a second Ctrl-C: stopping every server now and exiting");
                hooks_mcp::kill_all_now();
                std::process::exit(EXIT_SIGINT);
            }
            // No prompt runs. At a terminal's input line Ctrl-C is a key, not
            // a signal, so this one came while servers start, from a pipe's
            // input line, or from outside: it ends the session, as it ends
            // `sprout run` (a second one exits at once).
            None => self.signals.interrupt(),
        }
    }

    /// Listens for SIGINT for the life of the process.
    fn listen(&self) {
        let running = self.clone();
        match signal(SignalKind::interrupt()) {
            Ok(mut stream) => {
                tokio::spawn(async move {
                    while stream.recv().await.is_some() {
                        running.interrupt();
                    }
                });
            }
            Err(e) => tracing::warn!("cannot listen for SIGINT: {e}"),
        }
    }
}

/// What one read of the input line gave.
enum Read {
    Line(String),
    /// Ctrl-C or Ctrl-D at the input line.
    Leave,
    Failed(String),
}

/// Reads one line on a blocking thread; the editor goes there and back
/// (`Err` if that thread died, and the editor with it). While the line is
/// up, log lines (a server found wedged, say) go through the editor's
/// external printer, which writes them above the line and draws it again,
/// instead of into what is being typed. Only on a terminal, and only when
/// standard error is one too (else they belong where it goes).
async fn read_line(editor: DefaultEditor) -> Result<(DefaultEditor, Read), String> {
    let joined = tokio::task::spawn_blocking(move || {
        let mut editor = editor;
        let printer = std::io::stderr()
            .is_terminal()
            .then(|| editor.create_external_printer().ok())
            .flatten();
        if let Some(mut printer) = printer {
            crate::stdout::Stdout::stderr()
                .print_through(Some(Box::new(move |text| printer.print(text).is_ok())));
        }
        let line = editor.readline(PROMPT);
        crate::stdout::Stdout::stderr().print_through(None);
        let read = match line {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                }
                Read::Line(line)
            }
            Err(ReadlineError::Interrupted | ReadlineError::Eof) => Read::Leave,
            Err(e) => Read::Failed(e.to_string()),
        };
        (editor, read)
    })
    .await;
    joined.map_err(|e| format!("the input line stopped: {e}"))
}

/// Runs the interactive session; returns the exit status.
pub(crate) async fn chat(setup: SessionSetup) -> i32 {
    let SessionSetup {
        model,
        servers,
        approval,
        config,
        options,
        settings,
        mut plan,
    } = setup;
    let mut editor = match DefaultEditor::new() {
        Ok(editor) => editor,
        Err(e) => {
            report_error(&format!("sprout: cannot start the input line: {e}"));
            return EXIT_FAILURE;
        }
    };
    // The terminal as it is now, to put back if a signal ends the session
    // while the input line has it in raw mode.
    let terminal = nix::sys::termios::tcgetattr(std::io::stdin()).ok();
    let renderer = Renderer::new(false);
    let stdout = renderer.stdout();
    let (context, sink, transcript) = plan.begin(renderer.into_sink());
    let saved = transcript.is_some();
    let signals = Signals::install_without_interrupt();
    let running = Running::new(signals.clone());
    running.listen();
    let carried = plan.carried();
    let approval = crate::approve::approval(
        approval,
        &servers,
        crate::trust::person_present(),
        stdout.clone(),
    );
    let host = match start_host(
        servers.specs,
        config,
        &carried,
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
    let mut code = EXIT_OK;
    loop {
        // Everything shown so far is on the terminal before the input line.
        stdout.sync(OUTPUT_DRAIN);
        let read = tokio::select! {
            read = read_line(editor) => match read {
                Ok((back, read)) => {
                    editor = back;
                    read
                }
                Err(e) => {
                    report_error(&format!("sprout: {e}"));
                    code = EXIT_FAILURE;
                    break;
                }
            },
            () = signals.token().cancelled() => {
                // The reading thread is left inside rustyline, which would
                // restore the terminal only when its read returned.
                if let Some(terminal) = &terminal {
                    let _ = nix::sys::termios::tcsetattr(
                        std::io::stdin(),
                        nix::sys::termios::SetArg::TCSANOW,
                        terminal,
                    );
                    // Bracketed paste off, as rustyline turns it on.
                    report_error("\x1b[?2004l");
                }
                break;
            }
        };
        let prompt = match read {
            Read::Line(line) if line.trim().is_empty() => continue,
            Read::Line(line) => line,
            Read::Leave => break,
            Read::Failed(e) => {
                report_error(&format!("sprout: the input line failed: {e}"));
                code = EXIT_FAILURE;
                break;
            }
        };
        let token = signals.token().child_token();
        running.set(Some(token.clone()));
        agent.run_prompt(&prompt, &token).await;
        running.set(None);
        if signals.exit_status().is_some() {
            break;
        }
    }
    // [E6]: told within 1 s, whichever way the session ends.
    let reason = if signals.token().is_cancelled() {
        SessionEndReason::Signal
    } else {
        SessionEndReason::Exit
    };
    agent.end_session(reason).await;
    agent.into_gateway().shutdown().await;
    stdout.finish(OUTPUT_DRAIN);
    plan.farewell(&context, saved);
    signals.exit_status().unwrap_or(code)
}
