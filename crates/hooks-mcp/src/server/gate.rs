//! The bundled `gate` hook server (`sprout hook-server gate -- CMD ARGS…`).
//!
//! Its `_Stop` runs a command (a test suite, a linter) and objects with the
//! tail of the command's output while it exits non-zero. The command runs in
//! its own process group; when the agent cancels the call (its hook deadline
//! passed) or the gate's own deadline passes, the whole group is killed.
//!
//! Two deadlines apply: the gate's own ([`GateOptions::timeout`],
//! `SPROUT_GATE_TIMEOUT_MS`), after which it objects that the command did not
//! finish, and the agent's hook deadline (`SPROUT_AGENT_HOOK_TIMEOUT_MS`,
//! 2.5 s by default), after which the agent stops waiting and cancels. A real
//! test suite needs the agent's deadline raised above the suite's run time.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hooks_core::HookPoint;
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
}

impl GateOptions {
    /// Runs `command` with the default deadline (5 minutes) and 4 KiB of tail.
    pub fn new(command: Vec<String>) -> GateOptions {
        GateOptions {
            command,
            timeout: Duration::from_secs(300),
            tail_bytes: 4096,
        }
    }
}

/// Runs the command once and returns the `_Stop` answer: empty when it
/// passed, else the objection.
pub async fn check(options: &GateOptions, cancel: &CancellationToken) -> String {
    let Some((program, args)) = options.command.split_first() else {
        return "the gate has no command to run".to_owned();
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
        Err(e) => return format!("the gate could not run `{shown}`: {e}"),
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
            return String::new(); // The agent has stopped listening.
        }
        () = tokio::time::sleep(options.timeout) => {
            kill();
            let _ = child.wait().await;
            return format!(
                "`{shown}` did not finish within {} ms and was stopped; it has to pass before you finish",
                options.timeout.as_millis()
            );
        }
    };
    // Helpers the command left behind go with it.
    kill();
    for reader in readers.into_iter().flatten() {
        let _ = reader.await;
    }
    let tail = output.lock().unwrap_or_else(|e| e.into_inner()).text();
    match status {
        Ok(status) if status.success() => String::new(),
        Ok(status) => format!("`{shown}` failed ({status}). The end of its output:\n{tail}"),
        Err(e) => format!("the gate lost track of `{shown}`: {e}"),
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

/// The gate server, ready to serve.
pub fn server(options: GateOptions) -> ToolServer {
    let options = Arc::new(options);
    let description = format!("Objects while `{}` fails.", options.command.join(" "));
    ToolServer::new("sprout-gate").hook(HookPoint::Stop, &description, move |cancel| {
        let options = options.clone();
        async move { check(&options, &cancel).await }
    })
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
}
