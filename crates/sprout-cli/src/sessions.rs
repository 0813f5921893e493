//! Saved sessions on the command line: which one `--continue` or
//! `--resume ID` picks up, the transcript a `sprout run` or `sprout chat`
//! writes, and `sprout sessions`.
//!
//! The transcript format and its reading are `agent_loop::transcript`'s;
//! here are only where transcripts live (`settings::sessions_dir`), the ids
//! of new sessions, and what a person is told.

use std::path::{Path, PathBuf};

use agent_loop::transcript::{self, SavedSession, Transcript};
use agent_loop::{Agent, Gateway, Sink};
use hooks_core::HookContext;

use crate::cli::ResumeArgs;
use crate::settings::ConfigProblem;
use crate::{EXIT_FAILURE, EXIT_OK, print_out, render, report_error, working_directory};

/// The version transcripts say wrote them.
const SPROUT: &str = env!("CARGO_PKG_VERSION");

/// What a session does about saving: where it is saved (`None`: it is
/// not), and the saved session it continues, if any.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) save_in: Option<PathBuf>,
    pub(crate) resumed: Option<SavedSession>,
}

impl Plan {
    /// The plan for these flags: finds the session to pick up (in `dir`,
    /// the sessions directory), telling the person what was wrong with its
    /// file.
    pub(crate) fn new(
        save_in: Option<PathBuf>,
        dir: impl FnOnce() -> Result<PathBuf, ConfigProblem>,
        resume: &ResumeArgs,
    ) -> Result<Plan, ConfigProblem> {
        let resumed = if let Some(id) = &resume.resume {
            Some(find_id(&dir()?, id)?)
        } else if resume.continue_last {
            Some(find_here(&dir()?, &working_directory())?)
        } else {
            None
        };
        if let Some(saved) = &resumed {
            for warning in &saved.warnings {
                report_error(&format!(
                    "sprout: warning: {}",
                    render::printable(&warning.to_string())
                ));
            }
        }
        Ok(Plan { save_in, resumed })
    }

    /// Starts the session's transcript, if it is saved (a transcript that
    /// cannot be written is a warning: the session goes on unsaved), and
    /// gives the hooks' context (a resumed session keeps its id) and the
    /// sink that also writes each event to the transcript.
    pub(crate) fn begin(&self, sink: Sink) -> (HookContext, Sink, Option<Transcript>) {
        let cwd = working_directory();
        let session_id = match &self.resumed {
            Some(saved) => saved.header.session_id.clone(),
            None => new_id(),
        };
        let context = HookContext {
            session_id: session_id.clone(),
            cwd: cwd.clone(),
        };
        let Some(dir) = &self.save_in else {
            return (context, sink, None);
        };
        let opened = match &self.resumed {
            Some(saved) => Transcript::resume(saved, SPROUT),
            None => Transcript::create(dir, &session_id, &cwd, SPROUT),
        };
        match opened {
            Ok(transcript) => {
                let sink = transcript.tee(sink);
                (context, sink, Some(transcript))
            }
            Err(e) => {
                report_error(&format!(
                    "sprout: warning: this session is not saved: cannot write its transcript in {}: {e}",
                    dir.display()
                ));
                (context, sink, None)
            }
        }
    }

    /// What the session's policy starts from: the saved session's state
    /// (its `_Stop` budget used, its servers' failures), or nothing new
    /// \[S3\], \[T4\].
    pub(crate) fn carried(&self) -> hooks_core::Carried {
        self.resumed
            .as_ref()
            .map(|saved| saved.carried.clone())
            .unwrap_or_default()
    }

    /// Hands the agent its transcript and the session it continues. `Err`
    /// is the exit status (the policy refused the saved state: a bug).
    pub(crate) fn attach<G: Gateway>(
        &self,
        agent: Agent<G>,
        transcript: Option<Transcript>,
    ) -> Result<Agent<G>, i32> {
        let mut agent = match transcript {
            Some(transcript) => agent.with_observer(transcript),
            None => agent,
        };
        if let Some(saved) = &self.resumed
            && let Err(e) = agent.resume(saved)
        {
            report_error(&format!(
                "sprout: cannot resume session {}: {e}",
                saved.header.session_id
            ));
            return Err(EXIT_FAILURE);
        }
        Ok(agent)
    }

    /// Tells the person how to pick the session up again (on stderr).
    pub(crate) fn farewell(&self, context: &HookContext, saved: bool) {
        if saved {
            report_error(&format!(
                "sprout: session {} saved; pick it up with `sprout run --continue PROMPT` here, or `--resume {}`",
                context.session_id, context.session_id
            ));
        }
    }
}

/// A new session's id: its start in UTC and this process,
/// `YYYYMMDD-HHMMSS-PID`, a plain file name that sorts by time.
pub(crate) fn new_id() -> String {
    let now = transcript::rfc3339(std::time::SystemTime::now());
    // "2025-03-01T10:15:02.123Z" -> "20250301-101502"
    let digits: String = now[..19].chars().filter(char::is_ascii_digit).collect();
    format!("{}-{}-{}", &digits[..8], &digits[8..], std::process::id())
}

/// The saved session `id` in `dir`.
fn find_id(dir: &Path, id: &str) -> Result<SavedSession, ConfigProblem> {
    let missing = || ConfigProblem::NoSuchSession {
        id: id.to_owned(),
        dir: dir.to_owned(),
    };
    if !transcript::valid_id(id) {
        return Err(missing());
    }
    let path = dir.join(format!("{id}.{}", transcript::EXTENSION));
    if !path.is_file() {
        return Err(missing());
    }
    transcript::read(&path).map_err(ConfigProblem::Transcript)
}

/// The newest saved session (by its last start or resumption) started in
/// `cwd`.
fn find_here(dir: &Path, cwd: &str) -> Result<SavedSession, ConfigProblem> {
    let read = transcript::list(dir).map_err(|source| ConfigProblem::ListSessions {
        dir: dir.to_owned(),
        source,
    })?;
    read.into_iter()
        .filter_map(Result::ok)
        .filter(|s| s.header.cwd == cwd)
        .max_by(|a, b| a.last_active.cmp(&b.last_active))
        .ok_or_else(|| ConfigProblem::NoSessionHere {
            cwd: cwd.to_owned(),
            dir: dir.to_owned(),
        })
}

/// Why a session's last prompt stopped, in one word: `interrupted` if it
/// never ended (the process died), `-` before any prompt.
fn last_stop(saved: &SavedSession) -> &str {
    match (&saved.last_end, saved.prompts) {
        (Some(reason), _) => reason,
        (None, 0) => "-",
        (None, _) => "interrupted",
    }
}

/// `sprout sessions`: every saved session in `dir`, newest first.
pub(crate) fn list_command(dir: &Path, json: bool) -> i32 {
    let read = match transcript::list(dir) {
        Ok(read) => read,
        Err(e) => {
            report_error(&format!(
                "sprout: cannot list the saved sessions in {}: {e}",
                dir.display()
            ));
            return EXIT_FAILURE;
        }
    };
    let mut sessions = Vec::new();
    for result in read {
        match result {
            Ok(saved) => {
                for warning in &saved.warnings {
                    report_error(&format!(
                        "sprout: warning: {}",
                        render::printable(&warning.to_string())
                    ));
                }
                sessions.push(saved);
            }
            Err(e) => report_error(&format!(
                "sprout: warning: {}",
                render::printable(&e.to_string())
            )),
        }
    }
    sessions.sort_by(|a, b| b.last_active.cmp(&a.last_active));
    if json {
        let list: Vec<serde_json::Value> = sessions
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.header.session_id,
                    "cwd": s.header.cwd,
                    "started": s.header.started,
                    "last_active": s.last_active,
                    "prompts": s.prompts,
                    "last_stop": s.last_end,
                    "messages": s.history.len(),
                    "file": s.path.display().to_string(),
                })
            })
            .collect();
        print_out(&format!(
            "{}\n",
            serde_json::json!({"dir": dir.display().to_string(), "sessions": list})
        ));
        return EXIT_OK;
    }
    if sessions.is_empty() {
        print_out(&format!("no saved sessions in {}\n", dir.display()));
        return EXIT_OK;
    }
    let id_width = sessions
        .iter()
        .map(|s| s.header.session_id.len())
        .max()
        .unwrap_or(0)
        .max(2);
    let stop_width = sessions
        .iter()
        .map(|s| last_stop(s).len())
        .max()
        .unwrap_or(0)
        .max(9);
    let mut out = format!(
        "{:id_width$}  {:24}  {:>7}  {:stop_width$}  DIRECTORY\n",
        "ID", "STARTED", "PROMPTS", "LAST STOP"
    );
    for s in &sessions {
        out.push_str(&format!(
            "{:id_width$}  {:24}  {:>7}  {:stop_width$}  {}\n",
            render::printable(&s.header.session_id),
            render::printable(&s.header.started),
            s.prompts,
            render::printable(last_stop(s)),
            render::printable(&s.header.cwd),
        ));
    }
    print_out(&out);
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_plain_file_names_that_sort_by_time() {
        let id = new_id();
        assert!(transcript::valid_id(&id), "{id}");
        let (date, rest) = id.split_once('-').unwrap();
        assert_eq!(date.len(), 8);
        assert_eq!(rest.split_once('-').unwrap().0.len(), 6);
    }
}
