//! Saved sessions on the command line: which one `--continue` or
//! `--resume ID` picks up, the transcript a `sprout run` or `sprout chat`
//! writes, and `sprout sessions`.
//!
//! The transcript format and its reading are `agent_loop::transcript`'s;
//! here are only where transcripts live (`settings::sessions_dir`), the ids
//! of new sessions, and what a person is told.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_loop::transcript::{self, SavedSession, Summary, Transcript};
use agent_loop::{Agent, Gateway, Sink};
use hooks_core::HookContext;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::cli::ResumeArgs;
use crate::settings::ConfigProblem;
use crate::{EXIT_FAILURE, EXIT_OK, print_out, render, report_error, working_directory};

/// The version transcripts say wrote them.
const SPROUT: &str = env!("CARGO_PKG_VERSION");

/// How long taking a session's lock waits for a holder that lets go at
/// once (`sprout sessions` looks with a shared lock held for a moment).
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// How often a lock held by someone else is tried again within
/// [`LOCK_WAIT`].
const LOCK_RETRY: Duration = Duration::from_millis(10);

/// A session open in this process: an exclusive `flock(2)` on its
/// transcript, held as long as the session is open. A second process that
/// resumes the session (or a second open of it in this one: flock locks
/// belong to one open of the file) cannot take it, so two processes never
/// append to one transcript. Dropping it lets go; so does the kernel when
/// the process dies, however it dies, so a crash leaves no stale lock.
pub(crate) struct SessionLock {
    held: Option<Flock<File>>,
}

impl std::fmt::Debug for SessionLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionLock")
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        unlock(self.held.take());
    }
}

/// Lets go of `held`. nix's own drop panics if the unlock fails (it cannot
/// on an open descriptor); then the descriptor is left open instead, and
/// the kernel lets go at exit.
fn unlock(held: Option<Flock<File>>) {
    if let Some(held) = held
        && let Err((held, _)) = held.unlock()
    {
        std::mem::forget(held);
    }
}

/// Why a session's lock was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// Another process (or another open in this one) holds it.
    #[error("another sprout process has it open")]
    InUse,
    /// The transcript cannot be opened or locked.
    #[error(transparent)]
    Io(std::io::Error),
}

impl SessionLock {
    /// One try at the lock of the transcript at `path`, without waiting.
    pub(crate) fn try_take(path: &Path) -> Result<SessionLock, LockError> {
        let file = File::open(path).map_err(LockError::Io)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => Ok(SessionLock { held: Some(held) }),
            Err((_, Errno::EWOULDBLOCK)) => Err(LockError::InUse),
            Err((_, e)) => Err(LockError::Io(e.into())),
        }
    }

    /// Takes the lock, trying again for at most [`LOCK_WAIT`] while it is
    /// held (by a `sprout sessions` looking, say); then `InUse`.
    pub(crate) fn take(path: &Path) -> Result<SessionLock, LockError> {
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match SessionLock::try_take(path) {
                Err(LockError::InUse) if Instant::now() < deadline => {
                    std::thread::sleep(LOCK_RETRY);
                }
                taken => return taken,
            }
        }
    }

    /// As [`SessionLock::take`], without holding up the runtime's thread.
    pub(crate) async fn take_async(path: &Path) -> Result<SessionLock, LockError> {
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        loop {
            match SessionLock::try_take(path) {
                Err(LockError::InUse) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(LOCK_RETRY).await;
                }
                taken => return taken,
            }
        }
    }
}

/// Whether some process has the session of the transcript at `path` open:
/// a shared lock for a moment, which fails while the session's exclusive
/// one is held.
pub(crate) fn in_use(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(held) => {
            unlock(Some(held));
            false
        }
        Err((_, e)) => e == Errno::EWOULDBLOCK,
    }
}

/// The lock of session `id`, for `flag` (`--resume`, `--continue`).
fn lock_for(flag: &'static str, id: &str, path: &Path) -> Result<SessionLock, ConfigProblem> {
    SessionLock::take(path).map_err(|e| match e {
        LockError::InUse => ConfigProblem::SessionInUse {
            flag,
            id: id.to_owned(),
        },
        LockError::Io(source) => ConfigProblem::LockSession {
            id: id.to_owned(),
            path: path.to_owned(),
            source,
        },
    })
}

/// What a session does about saving: where it is saved (`None`: it is
/// not), the saved session it continues, if any, and the lock that keeps
/// the session open here alone.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) save_in: Option<PathBuf>,
    pub(crate) resumed: Option<SavedSession>,
    lock: Option<SessionLock>,
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
        // The lock comes first: what is read under it is what this
        // process goes on writing after.
        let (flag, found) = if let Some(id) = &resume.resume {
            ("--resume", Some(find_id(&dir()?, id)?))
        } else if resume.continue_last {
            (
                "--continue",
                Some(find_here(&dir()?, &working_directory())?),
            )
        } else {
            ("", None)
        };
        let (resumed, lock) = match found {
            Some((id, path)) => {
                let lock = lock_for(flag, &id, &path)?;
                let saved = transcript::read(&path).map_err(ConfigProblem::Transcript)?;
                (Some(saved), Some(lock))
            }
            None => (None, None),
        };
        if let Some(saved) = &resumed {
            // Which session this is, before anything of it happens.
            let task: String = saved
                .original_task
                .as_deref()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(60)
                .collect();
            report_error(&format!(
                "sprout: continuing session {} ({} prompt(s) since {}, last: {}): {}",
                saved.header.session_id,
                saved.prompts,
                saved.header.started,
                saved.last_end.as_deref().unwrap_or("none ended"),
                render::one_line(&task)
            ));
            for warning in &saved.warnings {
                report_error(&format!(
                    "sprout: warning: {}",
                    render::printable(&warning.to_string())
                ));
            }
        }
        Ok(Plan {
            save_in,
            resumed,
            lock,
        })
    }

    /// Starts the session's transcript, if it is saved (a transcript that
    /// cannot be written is a warning: the session goes on unsaved), and
    /// gives the hooks' context (a resumed session keeps its id) and the
    /// sink that also writes each event to the transcript.
    pub(crate) fn begin(&mut self, sink: Sink) -> (HookContext, Sink, Option<Transcript>) {
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
                if self.lock.is_none() {
                    // A new session: nobody else knows its id yet.
                    match SessionLock::take(transcript.path()) {
                        Ok(lock) => self.lock = Some(lock),
                        Err(e) => report_error(&format!(
                            "sprout: warning: cannot lock session {session_id}: {e}; another process could resume it while this one runs"
                        )),
                    }
                }
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

/// The saved session `id` in `dir`: its id and transcript.
fn find_id(dir: &Path, id: &str) -> Result<(String, PathBuf), ConfigProblem> {
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
    Ok((id.to_owned(), path))
}

/// The newest saved session (by its last start or resumption) started in
/// `cwd`: its id and transcript. One in use is picked all the same (and
/// then refused by its lock): `--continue` means the latest conversation
/// here, and an older one in its place would surprise.
fn find_here(dir: &Path, cwd: &str) -> Result<(String, PathBuf), ConfigProblem> {
    let read = transcript::list_summaries(dir).map_err(|source| ConfigProblem::ListSessions {
        dir: dir.to_owned(),
        source,
    })?;
    read.into_iter()
        .filter_map(Result::ok)
        .filter(|s| s.header.cwd == cwd)
        .max_by(|a, b| a.tally.last_active.cmp(&b.tally.last_active))
        .map(|s| (s.header.session_id, s.path))
        .ok_or_else(|| ConfigProblem::NoSessionHere {
            cwd: cwd.to_owned(),
            dir: dir.to_owned(),
        })
}

/// Why a session's last prompt stopped, in one word: `running` if it has
/// not ended and the session is in use, `interrupted` if it never ended
/// (the process died), `-` before any prompt.
fn last_stop(summary: &Summary, in_use: bool) -> &str {
    match (&summary.tally.last_end, summary.tally.prompts) {
        (Some(reason), _) => reason,
        (None, 0) => "-",
        (None, _) if in_use => "running",
        (None, _) => "interrupted",
    }
}

/// `sprout sessions`: every saved session in `dir`, newest first, each
/// read from its first line and its end ([`transcript::summary`]), and
/// marked when some process has it open.
pub(crate) fn list_command(dir: &Path, json: bool) -> i32 {
    let read = match transcript::list_summaries(dir) {
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
    sessions.sort_by(|a, b| b.tally.last_active.cmp(&a.tally.last_active));
    let sessions: Vec<(Summary, bool)> = sessions
        .into_iter()
        .map(|s| {
            let used = in_use(&s.path);
            (s, used)
        })
        .collect();
    if json {
        let list: Vec<serde_json::Value> = sessions
            .iter()
            .map(|(s, used)| {
                serde_json::json!({
                    "id": s.header.session_id,
                    "cwd": s.header.cwd,
                    "started": s.header.started,
                    "last_active": s.tally.last_active,
                    "prompts": s.tally.prompts,
                    "last_stop": s.tally.last_end,
                    "messages": s.tally.messages,
                    "in_use": used,
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
        .map(|(s, _)| s.header.session_id.len())
        .max()
        .unwrap_or(0)
        .max(2);
    let stop_width = sessions
        .iter()
        .map(|(s, used)| last_stop(s, *used).len())
        .max()
        .unwrap_or(0)
        .max(9);
    let mut out = format!(
        "{:id_width$}  {:24}  {:>7}  {:stop_width$}  {:6}  DIRECTORY\n",
        "ID", "STARTED", "PROMPTS", "LAST STOP", "IN USE"
    );
    for (s, used) in &sessions {
        out.push_str(&format!(
            "{:id_width$}  {:24}  {:>7}  {:stop_width$}  {:6}  {}\n",
            render::printable(&s.header.session_id),
            render::printable(&s.header.started),
            s.tally.prompts,
            render::printable(last_stop(s, *used)),
            if *used { "yes" } else { "no" },
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
