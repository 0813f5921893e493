//! The bundled `gate` hook server (`sprout hook-server gate [--gate-tool
//! NAME]… -- CMD ARGS…`).
//!
//! Its `_Stop` runs a command (a test suite, a linter) and objects with the
//! tail of the command's output while it exits non-zero. With `--gate-tool`
//! it also lists `_PreToolUse`, whose schema asks for `tool`, `server` and
//! `arguments` \[K2\]: a call of a gated tool (`git__push`, or any name a
//! pattern with `*` matches) runs the command first, and is refused with the
//! tail of its output while it fails ("no push while the suite is red").
//! Calls of other tools are let through at once. The command runs in its own
//! process group; when the agent cancels the call (its hook deadline passed)
//! or the gate's own deadline passes, the whole group is killed.
//!
//! Two deadlines apply: the gate's own ([`GateOptions::timeout`],
//! `SPROUT_GATE_TIMEOUT_MS`), after which it objects that the command did not
//! finish, and the agent's hook deadline, after which the agent stops
//! waiting, cancels the call and goes on as if the gate had said nothing
//! (the tool runs: hooks are advisory). The agent's deadline is
//! `SPROUT_AGENT_HOOK_TIMEOUT_MS` (2.5 s by default) unless the gate's entry
//! in the MCP config sets its own, `"hookTimeoutMs"` \[C4\]. A real test
//! suite needs `hookTimeoutMs` above the suite's run time, and the gate's
//! own deadline a little below `hookTimeoutMs`, so that a suite that hangs is
//! reported rather than silently let through.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hooks_core::{HookPoint, InputField};
use rmcp::model::JsonObject;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::ToolServer;
use crate::process::kill_group;

/// Environment variable for the gate's own deadline, in milliseconds.
pub const ENV_GATE_TIMEOUT_MS: &str = "SPROUT_GATE_TIMEOUT_MS";

/// How the gate runs its command.
#[derive(Clone, Debug)]
pub struct GateOptions {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The gate's own deadline for one run.
    pub timeout: Duration,
    /// Bytes of output kept for the objection (the end of it).
    pub tail_bytes: usize,
    /// The tools whose calls are gated through `_PreToolUse`: names as the
    /// model sees them (`git__push`) or bare (`push`), `*` matching any run
    /// of characters. Empty: the gate lists no `_PreToolUse`.
    pub tools: Vec<String>,
}

impl GateOptions {
    /// Runs `command` with the default deadline (5 minutes) and 4 KiB of tail.
    pub fn new(command: Vec<String>) -> GateOptions {
        GateOptions {
            command,
            timeout: Duration::from_secs(300),
            tail_bytes: 4096,
            tools: Vec::new(),
        }
    }

    /// Whether a call of the tool `tool` of server `server` is gated: some
    /// pattern matches its model name `server__tool` or its bare name.
    pub fn gates(&self, server: Option<&str>, tool: &str) -> bool {
        let qualified = server.map(|s| format!("{s}{}{tool}", hooks_core::name::SEPARATOR));
        self.tools.iter().any(|pattern| {
            hooks_core::name::glob(pattern, tool)
                || qualified
                    .as_deref()
                    .is_some_and(|q| hooks_core::name::glob(pattern, q))
        })
    }
}

/// How one run of the command ended.
enum Run {
    Passed,
    Failed {
        status: std::process::ExitStatus,
        tail: String,
    },
    /// The gate's own deadline passed; the command was killed.
    TimedOut,
    /// The agent cancelled the call; the command was killed.
    Cancelled,
    /// The command could not be run, or the gate lost track of it: why.
    Unavailable(String),
}

/// Runs the command once and returns the `_Stop` answer: empty when it
/// passed, else the objection.
pub async fn check(options: &GateOptions, cancel: &CancellationToken) -> String {
    let shown = options.command.join(" ");
    match run(options, cancel).await {
        Run::Passed | Run::Cancelled => String::new(),
        Run::Failed { status, tail } => {
            format!("`{shown}` failed ({status}).{}", output_tail(&tail))
        }
        Run::TimedOut => format!(
            "`{shown}` did not finish within {} ms and was stopped; it has to pass before you finish",
            options.timeout.as_millis()
        ),
        Run::Unavailable(problem) => problem,
    }
}

/// What a failed run's output adds to the answer: its end, or that it
/// printed nothing (never a sentence that ends on a colon).
fn output_tail(tail: &str) -> String {
    if tail.trim().is_empty() {
        " It printed nothing.".to_owned()
    } else {
        format!(" The end of its output:\n{tail}")
    }
}

/// The `_PreToolUse` answer for a call of `tool` (of `server`) with
/// `arguments`: empty when the tool is not gated or the command passed,
/// else why the call is refused. Nothing runs for a tool that is not gated.
pub async fn check_tool_call(
    options: &GateOptions,
    server: Option<&str>,
    tool: &str,
    arguments: Option<&Value>,
    cancel: &CancellationToken,
) -> String {
    if !options.gates(server, tool) {
        return String::new();
    }
    let shown = options.command.join(" ");
    let call = match server {
        Some(server) => format!("{server}{}{tool}", hooks_core::name::SEPARATOR),
        None => tool.to_owned(),
    };
    let call = match arguments {
        Some(arguments) => format!("`{call}` {}", shorten(&arguments.to_string(), 200)),
        None => format!("`{call}`"),
    };
    match run(options, cancel).await {
        Run::Passed | Run::Cancelled => String::new(),
        Run::Failed { status, tail } => format!(
            "The call {call} was not run: it is gated on `{shown}`, which fails ({status}). \
             Make it pass, then call again.{}",
            output_tail(&tail)
        ),
        Run::TimedOut => format!(
            "The call {call} was not run: it is gated on `{shown}`, which did not finish \
             within {} ms and was stopped.",
            options.timeout.as_millis()
        ),
        Run::Unavailable(problem) => {
            format!("The call {call} was not run: it is gated on `{shown}`, and {problem}.")
        }
    }
}

/// `text` cut to at most `max` characters, with `…` when it was cut.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Runs the command once, under the gate's own deadline and `cancel`.
async fn run(options: &GateOptions, cancel: &CancellationToken) -> Run {
    let Some((program, args)) = options.command.split_first() else {
        return Run::Unavailable("the gate has no command to run".to_owned());
    };
    let shown = options.command.join(" ");
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => return Run::Unavailable(format!("the gate could not run `{shown}`: {e}")),
    };
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let output = Arc::new(Mutex::new(Tail::new(options.tail_bytes)));
    let readers = [
        child
            .stdout
            .take()
            .map(|s| tokio::spawn(collect(s, output.clone()))),
        child
            .stderr
            .take()
            .map(|s| tokio::spawn(collect(s, output.clone()))),
    ];
    let kill = || kill_group(pgid);
    let status = tokio::select! {
        status = child.wait() => status,
        () = cancel.cancelled() => {
            kill();
            return Run::Cancelled; // The agent has stopped listening.
        }
        () = tokio::time::sleep(options.timeout) => {
            kill();
            let _ = child.wait().await;
            return Run::TimedOut;
        }
    };
    // Helpers the command left behind go with it.
    kill();
    for reader in readers.into_iter().flatten() {
        let _ = reader.await;
    }
    let tail = output.lock().unwrap_or_else(|e| e.into_inner()).text();
    match status {
        Ok(status) if status.success() => Run::Passed,
        Ok(status) => Run::Failed { status, tail },
        Err(e) => Run::Unavailable(format!("the gate lost track of `{shown}`: {e}")),
    }
}

/// The last bytes of a stream.
struct Tail {
    bytes: Vec<u8>,
    max: usize,
    dropped: bool,
}

impl Tail {
    fn new(max: usize) -> Tail {
        Tail {
            bytes: Vec::new(),
            max,
            dropped: false,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > self.max {
            let cut = self.bytes.len() - self.max;
            self.bytes.drain(..cut);
            self.dropped = true;
        }
    }

    fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        // A cut may have split a character at the start; lossy decoding marks it.
        let text = text.trim_start_matches('\u{fffd}').trim_end();
        if self.dropped {
            format!("…{text}")
        } else {
            text.to_owned()
        }
    }
}

async fn collect(mut stream: impl AsyncRead + Unpin, tail: Arc<Mutex<Tail>>) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(&buf[..n]);
    }
}

/// The gate server, ready to serve: `_Stop` always, `_PreToolUse` when
/// [`GateOptions::tools`] names any.
pub fn server(options: GateOptions) -> ToolServer {
    let options = Arc::new(options);
    let shown = options.command.join(" ");
    let description = format!("Objects while `{shown}` fails.");
    let for_stop = options.clone();
    let server =
        ToolServer::new("sprout-gate").hook(HookPoint::Stop, &description, move |cancel| {
            let options = for_stop.clone();
            async move { check(&options, &cancel).await }
        });
    if options.tools.is_empty() {
        return server;
    }
    let description = format!(
        "Refuses calls of {} while `{shown}` fails.",
        options
            .tools
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    server.hook_with_input(
        HookPoint::PreToolUse,
        &description,
        &[InputField::Tool, InputField::Server, InputField::Arguments],
        move |input: JsonObject, cancel| {
            let options = options.clone();
            async move {
                let text = |key: &str| input.get(key).and_then(Value::as_str);
                let Some(tool) = text("tool") else {
                    return String::new(); // An agent that sends `{}`: nothing to gate.
                };
                check_tool_call(
                    &options,
                    text("server"),
                    tool,
                    input.get("arguments"),
                    &cancel,
                )
                .await
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> GateOptions {
        GateOptions::new(vec!["sh".into(), "-c".into(), script.into()])
    }

    #[tokio::test]
    async fn passes_quietly_and_objects_with_the_tail() {
        let cancel = CancellationToken::new();
        assert_eq!(check(&sh("echo fine"), &cancel).await, "");
        let failed = check(&sh("echo one; echo two >&2; exit 3"), &cancel).await;
        assert!(
            failed.starts_with("`sh -c echo one; echo two >&2; exit 3` failed (exit status: 3)."),
            "{failed}"
        );
        assert!(
            failed.contains("one") && failed.ends_with("two"),
            "{failed}"
        );
        let mut long = sh("yes x | head -c 10000; exit 1");
        long.tail_bytes = 100;
        let text = check(&long, &cancel).await;
        let tail = text.split_once(":\n").unwrap().1;
        assert!(tail.starts_with('…') && tail.len() <= 104, "{tail:?}");
        // A command that printed nothing says so, instead of a dangling colon.
        let quiet = check(&sh("exit 4"), &cancel).await;
        assert_eq!(
            quiet,
            "`sh -c exit 4` failed (exit status: 4). It printed nothing."
        );
        let missing = check(&GateOptions::new(vec!["/nonexistent/tool".into()]), &cancel).await;
        assert!(
            missing.starts_with("the gate could not run `/nonexistent/tool`"),
            "{missing}"
        );
    }

    #[tokio::test]
    async fn its_own_deadline_kills_the_command() {
        let mut slow = sh("sleep 30");
        slow.timeout = Duration::from_millis(100);
        let started = std::time::Instant::now();
        let text = check(&slow, &CancellationToken::new()).await;
        assert!(
            text.starts_with("`sh -c sleep 30` did not finish within 100 ms"),
            "{text}"
        );
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn patterns_match_model_and_bare_names() {
        for (pattern, name, matches) in [
            ("git__push", "git__push", true),
            ("git__push", "git__pushed", false),
            ("git__*", "git__push", true),
            ("*push*", "git__force_push_all", true),
            ("*", "", true),
            ("a*b*c", "abbbc", true),
            ("a*b*c", "abcb", false),
            ("*__push", "git__push", true),
            ("", "x", false),
        ] {
            assert_eq!(
                hooks_core::name::glob(pattern, name),
                matches,
                "{pattern} {name}"
            );
        }
        let mut options = sh("exit 1");
        options.tools = vec!["git__push".into(), "deploy*".into()];
        assert!(options.gates(Some("git"), "push"));
        assert!(!options.gates(Some("hg"), "push"));
        assert!(!options.gates(None, "push"));
        assert!(options.gates(Some("ops"), "deploy_prod"));
        assert!(options.gates(None, "deploy"));
        assert!(!options.gates(Some("git"), "status"));
    }

    // `_PreToolUse` is listed only with `--gate-tool`, asks for `tool`,
    // `server` and `arguments` [K2], refuses a gated call with the failing
    // command's tail [E3], and lets other calls through without running it.
    #[tokio::test]
    async fn gated_tool_calls_are_refused_while_the_command_fails_e3() {
        let dir = std::env::temp_dir().join(format!("sprout-gate-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let red = dir.join("RED");
        let runs = dir.join("runs");
        let script = format!(
            "echo run >> {runs}; if [ -e {red} ]; then echo 3 tests failed; exit 1; fi",
            runs = runs.display(),
            red = red.display()
        );
        assert!(server(sh(&script)).listed("_PreToolUse").is_none());
        let mut options = sh(&script);
        options.tools = vec!["git__push".into()];
        let server = server(options);
        let schema = &server.listed("_PreToolUse").unwrap().input_schema;
        let listed = hooks_core::ListedTool::from_schema("_PreToolUse", schema);
        let (input, _) = hooks_core::HookInput::read(HookPoint::PreToolUse, &listed);
        assert_eq!(
            input.fields(),
            [InputField::Tool, InputField::Server, InputField::Arguments]
        );

        std::fs::write(&red, "").unwrap();
        let push =
            serde_json::json!({"tool": "push", "server": "git", "arguments": {"remote": "origin"}});
        let refused = server.call_text("_PreToolUse", push.clone()).await;
        assert!(
            refused.starts_with(
                "The call `git__push` {\"remote\":\"origin\"} was not run: it is gated on `sh -c echo run"
            ),
            "{refused}"
        );
        assert!(
            refused.contains("which fails (exit status: 1)") && refused.ends_with("3 tests failed"),
            "{refused}"
        );
        // Another tool, and an agent that sends `{}`: let through, nothing run.
        let status = serde_json::json!({"tool": "status", "server": "git", "arguments": {}});
        assert_eq!(server.call_text("_PreToolUse", status).await, "");
        assert_eq!(
            server.call_text("_PreToolUse", serde_json::json!({})).await,
            ""
        );
        assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
        // Green: the push goes through.
        std::fs::remove_file(&red).unwrap();
        assert_eq!(server.call_text("_PreToolUse", push).await, "");
        assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\nrun\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // A gated call whose command hangs past the gate's own deadline is
    // refused, saying so; a cancelled one (the agent's deadline) says nothing.
    #[tokio::test]
    async fn a_hanging_command_refuses_the_call_and_a_cancel_lets_it_through() {
        let mut slow = sh("sleep 30");
        slow.timeout = Duration::from_millis(100);
        slow.tools = vec!["*".into()];
        let text = check_tool_call(&slow, None, "deploy", None, &CancellationToken::new()).await;
        assert_eq!(
            text,
            "The call `deploy` was not run: it is gated on `sh -c sleep 30`, which did not finish within 100 ms and was stopped."
        );
        slow.timeout = Duration::from_secs(30);
        let cancel = CancellationToken::new();
        let started = std::time::Instant::now();
        let check = check_tool_call(&slow, None, "deploy", None, &cancel);
        tokio::pin!(check);
        // Once the check is under way (its command started, it waits), the
        // agent cancels the call.
        assert!(futures::poll!(&mut check).is_pending());
        cancel.cancel();
        assert_eq!(check.await, "");
        assert!(started.elapsed() < Duration::from_secs(20));
        let missing = GateOptions {
            tools: vec!["*".into()],
            ..GateOptions::new(vec!["/nonexistent/tool".into()])
        };
        let text = check_tool_call(
            &missing,
            Some("git"),
            "push",
            None,
            &CancellationToken::new(),
        )
        .await;
        assert!(
            text.starts_with("The call `git__push` was not run: it is gated on `/nonexistent/tool`, and the gate could not run"),
            "{text}"
        );
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(shorten("abc", 3), "abc");
    }
}
