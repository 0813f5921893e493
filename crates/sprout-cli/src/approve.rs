//! Asking the person about tool calls \[U4\]-\[U7\]: at the terminal of
//! `run` and `chat`, or nobody (no terminal). ACP asks its client instead
//! (`acp::session`), with the same memory of answers for good.
//!
//! Not here: what is decided before anyone is asked (rules, answers for
//! the session: `agent_loop::Approval`), the trust ledger (`trust`).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_loop::{Answer, Approval, ApprovalMode, ApprovalRequest, Approver, ToolOwner};
use async_trait::async_trait;

use crate::render::printable;
use crate::stdout::Stdout;
use crate::trust::{Ledger, Servers, Source, Store};

/// How often a question's reader looks whether it was withdrawn.
const WITHDRAW_POLL: Duration = Duration::from_millis(100);

/// At most this much of a call's arguments is shown in the question.
const SHOWN_ARGUMENTS: usize = 600;

/// What the person allowed for good: in the trust ledger for servers of a
/// configuration file (by the entry's digest, so a changed entry forgets
/// it), in memory for the others (the session's only) \[U6\].
pub(crate) struct Remembered {
    source: Option<Source>,
    ledger: Mutex<Ledger>,
    unfiled: Mutex<BTreeSet<(Option<String>, String)>>,
}

impl Remembered {
    /// What was allowed for good among `servers`.
    pub(crate) fn of(servers: &Servers) -> Remembered {
        let ledger = match (&servers.source, Store::locate()) {
            (Some(_), Ok(store)) => store.read().unwrap_or_else(|e| {
                tracing::warn!("{e}");
                Ledger::default()
            }),
            _ => Ledger::default(),
        };
        Remembered {
            source: servers.source.clone(),
            ledger: Mutex::new(ledger),
            unfiled: Mutex::default(),
        }
    }

    fn filed(&self, owner: &ToolOwner) -> Option<(&Source, &crate::trust::Entry)> {
        let source = self.source.as_ref()?;
        let entry = source.entry(owner.server.as_ref()?.as_str())?;
        Some((source, entry))
    }

    fn key(owner: &ToolOwner) -> (Option<String>, String) {
        (
            owner.server.as_ref().map(|s| s.as_str().to_owned()),
            owner.tool.clone(),
        )
    }

    /// Whether `owner`'s tool was allowed for good.
    pub(crate) fn allowed(&self, owner: &ToolOwner) -> bool {
        match self.filed(owner) {
            Some((source, entry)) => lock(&self.ledger).always(&source.path, entry, &owner.tool),
            None => lock(&self.unfiled).contains(&Remembered::key(owner)),
        }
    }

    /// Records that `owner`'s tool is allowed for good: in the ledger for
    /// a filed server (a failure to write it is said, and the answer holds
    /// for this session), else for this session.
    pub(crate) fn allow(&self, owner: &ToolOwner) {
        let Some((source, entry)) = self.filed(owner) else {
            lock(&self.unfiled).insert(Remembered::key(owner));
            return;
        };
        let recorded = Store::locate()
            .map_err(|e| e.to_string())
            .and_then(|store| {
                store
                    .change(|ledger| ledger.allow_always(&source.path, entry, &owner.tool))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = recorded {
            tracing::warn!("cannot record that {} is always allowed: {e}", owner.tool);
        }
        lock(&self.ledger).allow_always(&source.path, entry, &owner.tool);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The session's approval: `mode`, each server's `autoApprove` rules
/// (every server that starts is trusted configuration \[U2\]), and the
/// person at the terminal when there is one (`person`), else nobody.
pub(crate) fn approval(
    mode: ApprovalMode,
    servers: &Servers,
    person: bool,
    out: Stdout,
) -> Approval {
    let remembered = Remembered::of(servers);
    let approver: Arc<dyn Approver> = if person {
        Arc::new(Terminal { remembered, out })
    } else {
        Arc::new(NobodyHere {
            remembered,
            file: servers
                .source
                .as_ref()
                .map(|s| s.path.display().to_string()),
        })
    };
    with_rules(Approval::new(mode, approver), servers)
}

/// `approval` with each server's `autoApprove` rules \[U4\]: every server
/// that starts is trusted configuration \[U2\].
pub(crate) fn with_rules(approval: Approval, servers: &Servers) -> Approval {
    servers.specs.iter().fold(approval, |approval, spec| {
        approval.with_rules(spec.name.clone(), spec.auto_approve.clone())
    })
}

/// How the person can let a call run that nobody could approve \[U6\].
pub(crate) fn how_to_allow(owner: &ToolOwner, file: Option<&str>) -> String {
    let rule = match (&owner.server, file) {
        (Some(server), Some(file)) => format!(
            ", or add {:?} to \"autoApprove\" in the entry of server {server} in {file}",
            owner.tool
        ),
        (Some(server), None) => format!(
            ", or add {:?} to \"autoApprove\" in the entry of server {server}",
            owner.tool
        ),
        _ => String::new(),
    };
    format!(
        "To let such calls run, run sprout on a terminal to be asked, or with --approval auto (SPROUT_AGENT_APPROVAL=auto){rule}."
    )
}

/// No terminal: every question goes unanswered, saying how to allow.
struct NobodyHere {
    remembered: Remembered,
    file: Option<String>,
}

#[async_trait]
impl Approver for NobodyHere {
    fn allowed_always(&self, owner: &ToolOwner) -> bool {
        self.remembered.allowed(owner)
    }

    async fn ask(&self, request: &ApprovalRequest) -> Answer {
        Answer::Unanswered {
            how: how_to_allow(&request.owner, self.file.as_deref()),
        }
    }
}

/// The person at the terminal: stdin and stderr \[U3\].
struct Terminal {
    remembered: Remembered,
    /// The event lines' writer, caught up with before a question.
    out: Stdout,
}

#[async_trait]
impl Approver for Terminal {
    fn allowed_always(&self, owner: &ToolOwner) -> bool {
        self.remembered.allowed(owner)
    }

    async fn ask(&self, request: &ApprovalRequest) -> Answer {
        let out = self.out.clone();
        let question = question(request);
        // Dropping this future (a cancel) sets `withdrawn`, and the
        // reader lets go of stdin within WITHDRAW_POLL.
        let withdrawn = Arc::new(AtomicBool::new(false));
        let _withdraw = Withdraw(withdrawn.clone());
        let asked = tokio::task::spawn_blocking(move || {
            // The lines about the call are on the screen first.
            out.sync(Duration::from_secs(2));
            ask_terminal(&question, &withdrawn)
        });
        let answer = asked.await.unwrap_or(Answer::Deny { reason: None });
        if answer == Answer::AllowAlways {
            self.remembered.allow(&request.owner);
        }
        answer
    }
}

/// Sets its flag when dropped.
struct Withdraw(Arc<AtomicBool>);

impl Drop for Withdraw {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn question(request: &ApprovalRequest) -> String {
    let call = &request.call;
    let mut arguments: String = call.arguments.chars().take(SHOWN_ARGUMENTS).collect();
    if arguments.len() < call.arguments.len() {
        arguments.push('…');
    }
    format!(
        "sprout: the model wants to run {} {}\n  y: allow once   s: allow for this session   a: always   n: deny (\"n REASON\" tells the model why)\nallow {}? [y/s/a/n] ",
        printable(&call.name),
        printable(&arguments),
        printable(&call.name),
    )
}

/// Reads an answer from a terminal's line.
pub(crate) fn parse_answer(line: &str) -> Option<Answer> {
    let line = line.trim();
    let (word, rest) = match line.split_once(|c: char| c.is_whitespace() || c == ':') {
        Some((word, rest)) => (word, rest.trim()),
        None => (line, ""),
    };
    let reason = (!rest.is_empty()).then(|| rest.to_owned());
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(Answer::AllowOnce),
        "s" | "session" => Some(Answer::AllowSession),
        "a" | "always" => Some(Answer::AllowAlways),
        "n" | "no" | "deny" => Some(Answer::Deny { reason }),
        _ => None,
    }
}

/// Asks `question` on stderr and reads lines from stdin until one is an
/// answer (three tries, then a denial); gives up, denying, when
/// `withdrawn` is set, stdin ends or fails. Reads the descriptor itself,
/// unbuffered, so nothing typed after the answer is taken from the input
/// line that comes next.
fn ask_terminal(question: &str, withdrawn: &AtomicBool) -> Answer {
    let mut stderr = std::io::stderr();
    for attempt in 0..3 {
        let prompt = if attempt == 0 {
            question
        } else {
            "please answer y, s, a or n: "
        };
        let _ = stderr.write_all(prompt.as_bytes());
        let _ = stderr.flush();
        let Some(line) = read_line(withdrawn) else {
            return Answer::Deny { reason: None };
        };
        if let Some(answer) = parse_answer(&line) {
            return answer;
        }
    }
    Answer::Deny { reason: None }
}

/// One line from stdin (a terminal in canonical mode gives it in one read),
/// or `None` when withdrawn, at the end of input or on an error.
fn read_line(withdrawn: &AtomicBool) -> Option<String> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let stdin = std::io::stdin();
    let mut line = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        if withdrawn.load(Ordering::Relaxed) {
            return None;
        }
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(WITHDRAW_POLL).unwrap_or(PollTimeout::NONE);
        match poll(&mut fds, timeout) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return None,
        }
        match nix::unistd::read(stdin.as_fd(), &mut buf) {
            Ok(0) => return None,
            Ok(n) => {
                line.extend_from_slice(&buf[..n]);
                if line.contains(&b'\n') || line.len() > 4096 {
                    return Some(String::from_utf8_lossy(&line).into_owned());
                }
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_a_person_types_them_u6() {
        assert_eq!(parse_answer("y\n"), Some(Answer::AllowOnce));
        assert_eq!(parse_answer(" YES "), Some(Answer::AllowOnce));
        assert_eq!(parse_answer("s"), Some(Answer::AllowSession));
        assert_eq!(parse_answer("always"), Some(Answer::AllowAlways));
        assert_eq!(parse_answer("n"), Some(Answer::Deny { reason: None }));
        assert_eq!(
            parse_answer("n use the staging branch"),
            Some(Answer::Deny {
                reason: Some("use the staging branch".into())
            })
        );
        assert_eq!(
            parse_answer("no: not now"),
            Some(Answer::Deny {
                reason: Some("not now".into())
            })
        );
        assert_eq!(
            parse_answer(""),
            None,
            "no default: an empty line asks again"
        );
        assert_eq!(parse_answer("maybe"), None);
    }

    #[test]
    fn nobody_says_how_to_allow_the_tool_u6() {
        let owner = ToolOwner {
            server: Some(hooks_core::ServerName::new("git").unwrap()),
            tool: "push".into(),
        };
        let how = how_to_allow(&owner, Some("/p/.mcp.json"));
        assert!(
            how.contains("--approval auto (SPROUT_AGENT_APPROVAL=auto)"),
            "{how}"
        );
        assert!(
            how.contains(
                "add \"push\" to \"autoApprove\" in the entry of server git in /p/.mcp.json"
            ),
            "{how}"
        );
    }
}
