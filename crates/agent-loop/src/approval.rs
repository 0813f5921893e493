//! Tool approval \[U4\]-\[U7\]: a model tool call runs only if the person
//! allowed it, by a rule of its server's entry, by an earlier answer, or
//! now.
//!
//! [`Approval`] is the decision for one session: its mode, the rules, what
//! the person allowed for the session, and the [`Approver`] that asks. The
//! loop asks it about each call `_PreToolUse` let through \[U5\]; how the
//! person is asked (a terminal, an editor over ACP, nobody) is the
//! approver's business.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use hooks_core::ServerName;
use serde::{Deserialize, Serialize};

use crate::message::ToolCall;

/// Whether tool calls wait for the person \[U4\].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Every call is approved by a rule, an earlier answer, or the person.
    #[default]
    Ask,
    /// Every call runs unasked.
    Auto,
}

impl ApprovalMode {
    /// `ask` or `auto`, any case; `None` for anything else.
    pub fn parse(text: &str) -> Option<ApprovalMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "ask" => Some(ApprovalMode::Ask),
            "auto" => Some(ApprovalMode::Auto),
            _ => None,
        }
    }
}

/// Which tool a call would run: the server and its bare tool name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOwner {
    /// The server, if the gateway knows servers.
    pub server: Option<ServerName>,
    /// The tool's name on that server.
    pub tool: String,
}

/// A call that waits for the person's answer.
#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    /// The call, as the model made it (its id, name and arguments).
    pub call: ToolCall,
    /// The tool it would run.
    pub owner: ToolOwner,
}

/// The person's answer \[U6\], as an [`Approver`] gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// Run this call.
    AllowOnce,
    /// Run this tool's calls for the rest of the session.
    AllowSession,
    /// Run this tool's calls from now on; the approver has recorded it.
    AllowAlways,
    /// Do not run this call; `reason` goes to the model.
    Deny {
        /// The person's reason, if they gave one.
        reason: Option<String>,
    },
    /// Do not run this tool's calls for the rest of the session.
    DenySession {
        /// The person's reason, if they gave one.
        reason: Option<String>,
    },
    /// Nobody could answer (no terminal; a client that cancelled): the
    /// call is denied, and `how` tells the model how the person can allow
    /// it.
    Unanswered {
        /// How the person can let such calls run.
        how: String,
    },
}

/// Who decided a call \[U7\].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// A rule of the server's entry (`autoApprove`).
    Rule,
    /// An earlier answer for this session.
    Session,
    /// An earlier answer for good.
    Always,
    /// The person, now.
    Person,
    /// Nobody could answer, or the question was withdrawn.
    Nobody,
}

/// Asks the person about tool calls.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Whether the person allowed `tool` of `server` for good, earlier.
    fn allowed_always(&self, owner: &ToolOwner) -> bool {
        let _ = owner;
        false
    }

    /// Asks about one call and waits for the answer; an [`Answer::AllowAlways`]
    /// is recorded by the approver before it returns. The loop drops the
    /// future when the prompt is cancelled: that withdraws the question
    /// \[U5\].
    async fn ask(&self, request: &ApprovalRequest) -> Answer;
}

/// An approver with nobody behind it: every question is unanswered, with
/// `how` saying how to allow calls.
#[derive(Clone, Debug)]
pub struct Nobody {
    how: String,
}

impl Nobody {
    /// Answers every question "nobody could answer", with `how`.
    pub fn new(how: impl Into<String>) -> Nobody {
        Nobody { how: how.into() }
    }
}

#[async_trait]
impl Approver for Nobody {
    async fn ask(&self, _: &ApprovalRequest) -> Answer {
        Answer::Unanswered {
            how: self.how.clone(),
        }
    }
}

/// What [`Approval::decide`] says about a call before anyone is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// It runs: decided by a rule or an earlier answer.
    Allowed(DecidedBy),
    /// It does not: denied for the session earlier.
    Denied(Option<String>),
    /// The person must be asked.
    Ask,
}

/// A tool, as answers for the session remember it: server and bare name.
type ToolKey = (Option<ServerName>, String);

/// One session's approval: its mode, the servers' rules, the answers
/// given for the session, and who asks \[U4\]-\[U6\].
#[derive(Clone)]
pub struct Approval {
    mode: ApprovalMode,
    rules: Vec<(ServerName, Vec<String>)>,
    allowed: BTreeSet<ToolKey>,
    /// Tools denied for the session, each with the person's reason.
    denied: Vec<(ToolKey, Option<String>)>,
    approver: Arc<dyn Approver>,
}

impl std::fmt::Debug for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approval")
            .field("mode", &self.mode)
            .field("rules", &self.rules)
            .field("allowed", &self.allowed)
            .finish_non_exhaustive()
    }
}

impl Default for Approval {
    /// Every call runs unasked, as an agent built without approval has it.
    fn default() -> Approval {
        Approval::auto()
    }
}

impl Approval {
    /// Every call runs unasked (`--approval auto`).
    pub fn auto() -> Approval {
        Approval {
            mode: ApprovalMode::Auto,
            rules: Vec::new(),
            allowed: BTreeSet::new(),
            denied: Vec::new(),
            approver: Arc::new(Nobody::new("")),
        }
    }

    /// Calls wait for a rule, an earlier answer, or `approver` (`ask`).
    pub fn ask(approver: Arc<dyn Approver>) -> Approval {
        Approval {
            mode: ApprovalMode::Ask,
            approver,
            ..Approval::auto()
        }
    }

    /// `mode`, asking `approver` when it is [`ApprovalMode::Ask`].
    pub fn new(mode: ApprovalMode, approver: Arc<dyn Approver>) -> Approval {
        match mode {
            ApprovalMode::Ask => Approval::ask(approver),
            ApprovalMode::Auto => Approval::auto(),
        }
    }

    /// Adds the rules of one server's entry: bare tool names, where `*`
    /// stands for any run of characters (`autoApprove`) \[U4\].
    pub fn with_rules(mut self, server: ServerName, patterns: Vec<String>) -> Approval {
        if !patterns.is_empty() {
            self.rules.push((server, patterns));
        }
        self
    }

    /// The mode.
    pub fn mode(&self) -> ApprovalMode {
        self.mode
    }

    /// The approver.
    pub(crate) fn approver(&self) -> &Arc<dyn Approver> {
        &self.approver
    }

    /// What is known of `owner`'s calls before anyone is asked; `None` in
    /// `auto` mode (nothing to decide, nothing to report).
    pub fn decide(&self, owner: &ToolOwner) -> Option<Standing> {
        if self.mode == ApprovalMode::Auto {
            return None;
        }
        let key = (owner.server.clone(), owner.tool.clone());
        if let Some((_, reason)) = self.denied.iter().find(|(k, _)| *k == key) {
            return Some(Standing::Denied(reason.clone()));
        }
        let by_rule = owner.server.as_ref().is_some_and(|server| {
            self.rules.iter().any(|(s, patterns)| {
                s == server && patterns.iter().any(|p| pattern_matches(p, &owner.tool))
            })
        });
        Some(if by_rule {
            Standing::Allowed(DecidedBy::Rule)
        } else if self.allowed.contains(&key) {
            Standing::Allowed(DecidedBy::Session)
        } else if self.approver.allowed_always(owner) {
            Standing::Allowed(DecidedBy::Always)
        } else {
            Standing::Ask
        })
    }

    /// Keeps what `answer` says about `owner`'s later calls in this
    /// session.
    pub fn remember(&mut self, owner: &ToolOwner, answer: &Answer) {
        let key = (owner.server.clone(), owner.tool.clone());
        match answer {
            Answer::AllowSession | Answer::AllowAlways => {
                self.allowed.insert(key);
            }
            Answer::DenySession { reason } => self.denied.push((key, reason.clone())),
            _ => {}
        }
    }
}

/// Whether bare tool name `tool` matches an `autoApprove` `pattern`: the
/// whole name, where each `*` stands for any run of characters, none
/// included \[U4\] (the gate's `--gate-tool` patterns read the same way).
pub fn pattern_matches(pattern: &str, tool: &str) -> bool {
    hooks_core::name::glob(pattern, tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(server: &str, tool: &str) -> ToolOwner {
        ToolOwner {
            server: Some(ServerName::new(server).unwrap()),
            tool: tool.into(),
        }
    }

    #[test]
    fn patterns_match_whole_names_u4() {
        let cases = [
            ("status", "status", true),
            ("status", "status2", false),
            ("status", "git_status", false),
            ("read_*", "read_file", true),
            ("read_*", "read_", true),
            ("read_*", "write_file", false),
            ("*_file", "read_file", true),
            ("*_file", "read_files", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "acb", false),
            ("ab*ba", "aba", false),
            ("*", "anything", true),
        ];
        for (pattern, tool, expected) in cases {
            assert_eq!(
                pattern_matches(pattern, tool),
                expected,
                "{pattern} ~ {tool}"
            );
        }
    }

    #[test]
    fn rules_then_session_answers_then_the_person_u4_u6() {
        let approval = Approval::ask(Arc::new(Nobody::new("")))
            .with_rules(ServerName::new("git").unwrap(), vec!["log_*".into()]);
        assert_eq!(
            approval.decide(&owner("git", "log_all")),
            Some(Standing::Allowed(DecidedBy::Rule))
        );
        assert_eq!(
            approval.decide(&owner("fs", "log_all")),
            Some(Standing::Ask),
            "a rule is its own server's"
        );
        let mut approval = approval;
        approval.remember(&owner("git", "push"), &Answer::AllowOnce);
        assert_eq!(approval.decide(&owner("git", "push")), Some(Standing::Ask));
        approval.remember(&owner("git", "push"), &Answer::AllowSession);
        assert_eq!(
            approval.decide(&owner("git", "push")),
            Some(Standing::Allowed(DecidedBy::Session))
        );
        approval.remember(
            &owner("fs", "rm"),
            &Answer::DenySession {
                reason: Some("never".into()),
            },
        );
        assert_eq!(
            approval.decide(&owner("fs", "rm")),
            Some(Standing::Denied(Some("never".into())))
        );
        assert_eq!(Approval::auto().decide(&owner("fs", "rm")), None);
    }
}
