//! Asking the person about tool calls \[U4\]-\[U7\]: at the terminal of
//! `run` and `chat`, or nobody (no terminal). ACP asks its client instead
//! (`acp::session`), with the same memory of answers for good.
//!
//! Not here: what is decided before anyone is asked (rules, answers for
//! the session: `agent_loop::Approval`), the trust ledger (`trust`).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_loop::{Answer, Approval, ApprovalMode, ApprovalRequest, Approver, ToolOwner};
use async_trait::async_trait;

use crate::render::one_line;
use crate::stdout::Stdout;
use crate::trust::{Entry, Ledger, Servers, Store};

/// How often a question's reader looks whether it was withdrawn.
const WITHDRAW_POLL: Duration = Duration::from_millis(100);

/// A call's arguments up to this many characters are shown whole in the
/// question; longer ones by their start and end.
const SHOWN_ARGUMENTS: usize = 2000;

/// The longest answer line kept; the rest of a longer one is dropped.
const LONGEST_ANSWER: usize = 4096;

/// What the person allowed for good: in the trust ledger for servers of a
/// configuration file (by the entry's digest, so a changed entry forgets
/// it), in memory for the others (the session's only) \[U6\].
pub(crate) struct Remembered {
    /// The configuration file, and the entry of each of its servers that
    /// is to start (none withheld, none sent by a client).
    filed: Option<(PathBuf, Vec<Entry>)>,
    ledger: Mutex<Ledger>,
    unfiled: Mutex<BTreeSet<(Option<String>, String)>>,
}

impl Remembered {
    /// What was allowed for good among `servers`: those of its file that
    /// are in it now. Made before servers from elsewhere join it (an ACP
    /// client's), so that none of those is taken for a file's entry of the
    /// same name.
    pub(crate) fn of(servers: &Servers) -> Remembered {
        let ledger = match (&servers.source, Store::locate()) {
            (Some(_), Ok(store)) => store.read().unwrap_or_else(|e| {
                tracing::warn!("{e}");
                Ledger::default()
            }),
            _ => Ledger::default(),
        };
        let filed = servers.source.as_ref().map(|source| {
            let entries = servers
                .specs
                .iter()
                .filter_map(|spec| source.entry(spec.name.as_str()).cloned())
                .collect();
            (source.path.clone(), entries)
        });
        Remembered {
            filed,
            ledger: Mutex::new(ledger),
            unfiled: Mutex::default(),
        }
    }

    /// The file and entry of `owner`'s server, if it is a filed one.
    fn filed(&self, owner: &ToolOwner) -> Option<(&Path, &Entry)> {
        let (file, entries) = self.filed.as_ref()?;
        let server = owner.server.as_ref()?;
        let entry = entries.iter().find(|e| e.name == server.as_str())?;
        Some((file, entry))
    }

    /// The file of `owner`'s server, if it is a filed one: where a rule
    /// for it would go.
    pub(crate) fn file_of(&self, owner: &ToolOwner) -> Option<String> {
        self.filed(owner)
            .map(|(file, _)| file.display().to_string())
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
            Some((file, entry)) => lock(&self.ledger).always(file, entry, &owner.tool),
            None => lock(&self.unfiled).contains(&Remembered::key(owner)),
        }
    }

    /// Records that `owner`'s tool is allowed for good: in the ledger for
    /// a filed server (a failure to write it is said, and the answer holds
    /// for this session), else for this session.
    pub(crate) fn allow(&self, owner: &ToolOwner) {
        let Some((file, entry)) = self.filed(owner) else {
            lock(&self.unfiled).insert(Remembered::key(owner));
            return;
        };
        let recorded = Store::locate()
            .map_err(|e| e.to_string())
            .and_then(|store| {
                store
                    .change(|ledger| ledger.allow_always(file, entry, &owner.tool))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = recorded {
            tracing::warn!("cannot record that {} is always allowed: {e}", owner.tool);
        }
        lock(&self.ledger).allow_always(file, entry, &owner.tool);
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
        Arc::new(NobodyHere { remembered })
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

/// Where the person can be asked, for [`how_to_allow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AskedAt {
    /// At a terminal (`run`, `chat`).
    Terminal,
    /// In the editor (ACP).
    Editor,
}

/// How the person can let a call run that nobody could approve \[U6\]: be
/// asked, let every call run, or add a rule, when the server's entry is in
/// a file (`file`) where a rule can go.
pub(crate) fn how_to_allow(owner: &ToolOwner, file: Option<&str>, at: AskedAt) -> String {
    let rule = match (&owner.server, file) {
        (Some(server), Some(file)) => format!(
            ", or add {:?} to \"autoApprove\" in the entry of server {server} in {file}",
            owner.tool
        ),
        _ => String::new(),
    };
    let asked = match at {
        AskedAt::Terminal => "run sprout on a terminal to be asked",
        AskedAt::Editor => "answer the editor's question when it asks",
    };
    format!(
        "To let such calls run, {asked}, or start sprout with --approval auto (SPROUT_AGENT_APPROVAL=auto){rule}."
    )
}

/// No terminal: every question goes unanswered, saying how to allow.
struct NobodyHere {
    remembered: Remembered,
}

#[async_trait]
impl Approver for NobodyHere {
    fn allowed_always(&self, owner: &ToolOwner) -> bool {
        self.remembered.allowed(owner)
    }

    async fn ask(&self, request: &ApprovalRequest) -> Answer {
        let file = self.remembered.file_of(&request.owner);
        Answer::Unanswered {
            how: how_to_allow(&request.owner, file.as_deref(), AskedAt::Terminal),
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
        let asked = tokio::task::spawn_blocking(move || -> Option<Answer> {
            // The lines about the call are on the screen first.
            out.sync(Duration::from_secs(2));
            ask_terminal(&question, &withdrawn)
        });
        let file = self.remembered.file_of(&request.owner);
        let how = how_to_allow(&request.owner, file.as_deref(), AskedAt::Terminal);
        let answer = asked.await.ok().flatten().unwrap_or(Answer::Unanswered {
            how: format!("No answer came from the terminal. {how}"),
        });
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
    format!(
        "sprout: the model wants to run {} {}\n  y: allow once   s: allow for this session   a: always   n: deny (\"n REASON\" tells the model why)\nallow {}? [y/s/a/n] ",
        one_line(&call.name),
        shown_arguments(&call.arguments),
        one_line(&call.name),
    )
}

/// A call's arguments as the question shows them: on one line, whole when
/// short; else the start and the end with the size between, so that what
/// a long command does at its end is seen too.
fn shown_arguments(arguments: &str) -> String {
    let chars: Vec<char> = arguments.chars().collect();
    if chars.len() <= SHOWN_ARGUMENTS {
        return one_line(arguments);
    }
    let head: String = chars[..SHOWN_ARGUMENTS / 2].iter().collect();
    let tail: String = chars[chars.len() - SHOWN_ARGUMENTS / 4..].iter().collect();
    format!(
        "{} …({} characters in all)… {}",
        one_line(&head),
        chars.len(),
        one_line(&tail)
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
/// answer; `None` (nobody answered) when `withdrawn` is set, stdin ends or
/// fails, or three lines in a row are no answer. Reads the descriptor
/// itself, unbuffered, so nothing typed after the answer is taken from the
/// input line that comes next.
fn ask_terminal(question: &str, withdrawn: &AtomicBool) -> Option<Answer> {
    let mut stderr = std::io::stderr();
    for attempt in 0..3 {
        if withdrawn.load(Ordering::Relaxed) {
            return None; // cancelled before it was shown
        }
        let prompt = if attempt == 0 {
            question
        } else {
            "please answer y, s, a or n: "
        };
        let _ = stderr.write_all(prompt.as_bytes());
        let _ = stderr.flush();
        let Some(line) = read_line(withdrawn) else {
            let _ = stderr.write_all(b"\n");
            return None;
        };
        if let Some(answer) = parse_answer(&line) {
            return Some(answer);
        }
    }
    None
}

/// One line from stdin (a terminal in canonical mode gives it in one read;
/// past [`LONGEST_ANSWER`] bytes the rest of the line is read and dropped),
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
        // Withdrawn while waiting: what is typed now is the input line's.
        if withdrawn.load(Ordering::Relaxed) {
            return None;
        }
        match nix::unistd::read(stdin.as_fd(), &mut buf) {
            Ok(0) => return None,
            Ok(n) => {
                let room = LONGEST_ANSWER.saturating_sub(line.len());
                line.extend_from_slice(&buf[..n.min(room)]);
                if buf[..n].contains(&b'\n') {
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
    fn long_arguments_are_shown_by_both_ends() {
        let long = format!("{{\"cmd\": \"{}; rm -rf ~\"}}", "a".repeat(5000));
        let shown = shown_arguments(&long);
        assert!(shown.contains("rm -rf ~"), "the end is seen");
        assert!(shown.contains(&format!("({} characters in all)", long.chars().count())));
        assert!(shown.len() < 2000, "{}", shown.len());
        assert_eq!(shown_arguments("{\"a\":\"x\\ny\"}"), "{\"a\":\"x\\ny\"}");
        assert_eq!(shown_arguments("a\nb"), "a\\u{a}b", "no line of its own");
    }

    #[test]
    fn nobody_says_how_to_allow_the_tool_u6() {
        let owner = ToolOwner {
            server: Some(hooks_core::ServerName::new("git").unwrap()),
            tool: "push".into(),
        };
        let how = how_to_allow(&owner, Some("/p/.mcp.json"), AskedAt::Terminal);
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
