//! Sessions that survive the process: an append-only JSON Lines transcript
//! of one session, written as it happens ([`Transcript`]), and read back
//! into a history that can be resumed ([`read`], [`SavedSession`]).
//!
//! One line is one [`Record`]: a [`Header`] first, then, in the order they
//! happened, each message appended to the history as the model sees it, a
//! compaction's fresh history (which replaces the old), the policy state a
//! resumed session restores (`_Stop` budget used, hook rounds asked), each
//! prompt's end and every event but text deltas. Records are whole lines
//! appended by `write(2)` to a file opened for appending. Each is written as
//! it happens, but for the events of a hook round that has not decided yet
//! (its start and each server's answer): those wait in the process and go
//! out with the round's decision, in the same write, so that a round costs
//! one write however many servers it asks (a round that never decides has
//! its events written with the next record, or when the session's last
//! handle goes). A crash or a kill loses at most the write in flight (one
//! record, or a round's events with its decision) and the events of a round
//! still undecided (the kernel has the rest; a power cut is another
//! matter).
//!
//! Reading is forgiving: a torn last line or a bad line ends the reading
//! there, with a [`ReadWarning`] naming the file and line, and the history
//! is rebuilt so that every tool call has one result (a call whose result
//! was never written gets an error result saying so). Nothing here panics
//! on a file's content.
//!
//! The loop reports history changes through the narrow [`SessionObserver`]
//! ([`crate::Agent::with_observer`]); the writer implements it, and
//! [`Transcript::tee`] adds the events to a [`Sink`]. The writer knows no
//! command line: where transcripts live and what ids look like is the
//! caller's business.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use hooks_core::{Carried, ServerName};
use serde::{Deserialize, Serialize};

use crate::agent::PromptOutcome;
use crate::event::{AgentEvent, Emitted, Sink};
use crate::message::{Message, ToolCall};

/// The format version a [`Header`] carries; [`read`] refuses others.
pub const FORMAT_VERSION: u32 = 1;

/// The file name ending of a transcript: `ID.jsonl`.
pub const EXTENSION: &str = "jsonl";

/// The first record of every transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT_VERSION`] when written.
    pub version: u32,
    /// The session's id, as hooks get it; the file is `ID.jsonl`.
    pub session_id: String,
    /// The working directory the session started in.
    pub cwd: String,
    /// When it started, RFC 3339 in UTC with milliseconds.
    pub started: String,
    /// The version of the agent that wrote it.
    pub sprout: String,
}

/// One line of a transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    /// The first line.
    Header(Header),
    /// The session was resumed by a later process.
    Resumed {
        /// When, as [`Header::started`].
        at: String,
        /// The version of the agent that resumed it.
        sprout: String,
        /// The session so far, as read (before the results made up for
        /// calls whose results were never written, which follow).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<Tally>,
    },
    /// A message appended to the history.
    Message {
        /// The message.
        message: Message,
    },
    /// A compaction: this history replaces the whole history so far.
    Compacted {
        /// Whether it was a summary handoff (else a truncation).
        summary: bool,
        /// The fresh history.
        history: Vec<Message>,
    },
    /// The policy state a resumed session restores (written when it
    /// changes).
    Policy {
        /// `_Stop` objections charged in the budget's scope.
        budget_used: u32,
        /// Hook rounds asked so far.
        rounds: u64,
        /// Kills, crashes and failed starts so far, by server name, for
        /// each server with any \[T4\] (absent: none, as in transcripts
        /// written before failures were saved).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        failures: BTreeMap<String, u32>,
    },
    /// The model API's last usage report: the history so far (every
    /// message before this record since the last compaction) came to
    /// `tokens`, its answer included \[V3\].
    Usage {
        /// Input plus output tokens, as the API counted them.
        tokens: u64,
    },
    /// A prompt ended.
    PromptEnded {
        /// Why, as events name it (`no_objection`, `budget_spent`, …).
        reason: String,
        /// Detail, for errors.
        detail: Option<String>,
        /// Model requests made.
        rounds: u32,
        /// The session so far, this end included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<Tally>,
    },
    /// An event of the loop, as `--json` prints it.
    Event {
        /// The event.
        event: serde_json::Value,
    },
}

/// The session so far, as the writer counted it: carried by the
/// `resumed` and `prompt_ended` records, so that [`summary`] can tell a
/// session from the end of its file without reading all of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Prompts given.
    pub prompts: u32,
    /// Messages in the history.
    pub messages: u64,
    /// When it was last started or resumed, as [`Header::started`].
    pub last_active: String,
    /// Why the last prompt ended; `None` before any, or while one runs.
    pub last_end: Option<String>,
}

impl Tally {
    /// Counts one more record of the session.
    fn count(&mut self, record: &Record) {
        match record {
            Record::Header(header) => self.last_active.clone_from(&header.started),
            Record::Resumed { at, .. } => self.last_active.clone_from(at),
            Record::Message { message } => {
                self.messages += 1;
                if matches!(message, Message::User { .. }) {
                    self.prompts += 1;
                    self.last_end = None;
                }
            }
            Record::Compacted { history, .. } => self.messages = history.len() as u64,
            Record::PromptEnded { reason, .. } => self.last_end = Some(reason.clone()),
            Record::Policy { .. } | Record::Usage { .. } | Record::Event { .. } => {}
        }
    }
}

/// What the loop tells about the history as it changes
/// ([`crate::Agent::with_observer`]): every message it appends, every
/// compaction's fresh history, the policy state when it changes and each
/// prompt's end. Calls come in the order of the changes, on the loop's task.
pub trait SessionObserver: Send {
    /// `message` was appended to the history.
    fn appended(&mut self, message: &Message);
    /// A compaction (a summary handoff when `summary`) replaced the whole
    /// history with `history`.
    fn replaced(&mut self, summary: bool, history: &[Message]);
    /// The policy state a resumed session must restore changed.
    fn carried(&mut self, carried: &Carried) {
        let _ = carried;
    }
    /// A prompt ended.
    fn prompt_ended(&mut self, outcome: &PromptOutcome) {
        let _ = outcome;
    }
    /// The model API reported that the first `messages` messages of the
    /// history came to `tokens` \[V3\]: what a resumed session's first
    /// size estimate starts from.
    fn usage(&mut self, messages: usize, tokens: u64) {
        let _ = (messages, tokens);
    }
}

/// The writer of one session's transcript: a cheap handle (clones share the
/// file). A write that fails is reported once (a `tracing` warning) and
/// the transcript stops there; the session goes on.
#[derive(Clone, Debug)]
pub struct Transcript {
    inner: Arc<Mutex<Writer>>,
    path: Arc<PathBuf>,
}

#[derive(Debug)]
struct Writer {
    /// `None` once a write failed.
    file: Option<File>,
    /// The session so far, as written.
    tally: Tally,
    /// Whole lines not written yet: the events of a hook round that has
    /// not decided, written with the next record.
    pending: Vec<u8>,
}

/// Most bytes of a round's events held back before they are written
/// anyway: a round of many servers with long answers is not held whole.
const MAX_PENDING: usize = 64 * 1024;

impl Writer {
    /// Appends `line` (a whole line, newline included) after what is
    /// pending, in one write; `hold` keeps it pending instead while there
    /// is room.
    fn append(&mut self, line: &[u8], hold: bool) -> std::io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        if hold && self.pending.len() + line.len() <= MAX_PENDING {
            self.pending.extend_from_slice(line);
            return Ok(());
        }
        let written = if self.pending.is_empty() {
            file.write_all(line)
        } else {
            self.pending.extend_from_slice(line);
            let written = file.write_all(&self.pending);
            self.pending.clear();
            written
        };
        if written.is_err() {
            self.file = None;
        }
        written
    }
}

impl Drop for Writer {
    /// What is held goes out when the session's last handle goes.
    fn drop(&mut self) {
        if let (Some(file), false) = (self.file.as_mut(), self.pending.is_empty()) {
            let _ = file.write_all(&self.pending);
        }
    }
}

impl Transcript {
    /// Starts the transcript of a new session in `dir` (created if need
    /// be, private to the user): `dir/ID.jsonl`, with its header. Fails if
    /// that file exists.
    pub fn create(
        dir: &Path,
        session_id: &str,
        cwd: &str,
        sprout: &str,
    ) -> std::io::Result<Transcript> {
        check_id(session_id)?;
        create_private_dir(dir)?;
        let path = dir.join(format!("{session_id}.{EXTENSION}"));
        let mut options = std::fs::OpenOptions::new();
        options.append(true).create_new(true);
        private_file(&mut options);
        let file = options.open(&path)?;
        let transcript = Transcript::over(file, path, Tally::default());
        transcript.try_write(&Record::Header(Header {
            version: FORMAT_VERSION,
            session_id: session_id.to_owned(),
            cwd: cwd.to_owned(),
            started: rfc3339(SystemTime::now()),
            sprout: sprout.to_owned(),
        }))?;
        Ok(transcript)
    }

    /// Goes on writing the transcript `saved` was read from: what could not
    /// be read (a torn or bad line and all after it) is moved aside to
    /// `ID.jsonl.unread-OFFSET` and cut off, a `resumed` record follows, and
    /// then the results [`read`] made up for calls whose results were never
    /// written, so that the file's history is whole again.
    pub fn resume(saved: &SavedSession, sprout: &str) -> std::io::Result<Transcript> {
        let path = saved.path.clone();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        let len = file.metadata()?.len();
        if len > saved.good_len {
            use std::io::{Seek as _, SeekFrom};
            let mut tail = Vec::new();
            file.seek(SeekFrom::Start(saved.good_len))?;
            file.read_to_end(&mut tail)?;
            let aside = unread_path(&path, saved.good_len);
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            private_file(&mut options);
            options.open(&aside)?.write_all(&tail)?;
            file.set_len(saved.good_len)?;
        }
        drop(file);
        let file = std::fs::OpenOptions::new().append(true).open(&path)?;
        let at = rfc3339(SystemTime::now());
        let tally = Tally {
            prompts: saved.prompts,
            messages: (saved.history.len() - saved.repaired.len()) as u64,
            last_active: at.clone(),
            last_end: saved.last_end.clone(),
        };
        let transcript = Transcript::over(file, path, tally.clone());
        transcript.try_write(&Record::Resumed {
            at,
            sprout: sprout.to_owned(),
            session: Some(tally),
        })?;
        for message in &saved.repaired {
            transcript.try_write(&Record::Message {
                message: message.clone(),
            })?;
        }
        Ok(transcript)
    }

    fn over(file: File, path: PathBuf, tally: Tally) -> Transcript {
        Transcript {
            inner: Arc::new(Mutex::new(Writer {
                file: Some(file),
                tally,
                pending: Vec::new(),
            })),
            path: Arc::new(path),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as one write of a whole line. A failure is
    /// reported once; later records are not written.
    pub fn write(&self, record: &Record) {
        if let Err(e) = self.try_write(record) {
            self.failed(&e);
        }
    }

    /// Says once that the transcript stops at `e` (later writes are
    /// skipped, so they say nothing).
    fn failed(&self, e: &std::io::Error) {
        tracing::warn!(
            "cannot write the session transcript {}: {e}; the rest of this session is not saved",
            self.path.display()
        );
    }

    fn try_write(&self, record: &Record) -> std::io::Result<()> {
        let mut writer = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        writer.tally.count(record);
        // A prompt's end carries the session so far, for `summary`.
        let ended;
        let record = match record {
            Record::PromptEnded {
                reason,
                detail,
                rounds,
                session: None,
            } => {
                ended = Record::PromptEnded {
                    reason: reason.clone(),
                    detail: detail.clone(),
                    rounds: *rounds,
                    session: Some(writer.tally.clone()),
                };
                &ended
            }
            record => record,
        };
        if writer.file.is_none() {
            return Ok(());
        }
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        writer.append(&line, false)
    }

    /// Appends `event`, unless it is a piece of streamed text (the whole
    /// text follows as its own event). A hook round's start and answers
    /// wait for its decision and go out with it.
    pub fn event(&self, event: &AgentEvent) {
        self.emitted(&Emitted::new(event));
    }

    /// As [`Transcript::event`], with the event's JSON made once for every
    /// sink it passes through.
    fn emitted(&self, event: &Emitted<'_>) {
        if matches!(event.event(), AgentEvent::TextDelta { .. }) {
            return;
        }
        let mut writer = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if writer.file.is_none() {
            return;
        }
        let json = match event.json() {
            Ok(json) => json.get(),
            Err(e) => {
                tracing::warn!("cannot save an event: {e}");
                return;
            }
        };
        // [`Record::Event`], with the event's JSON as it already is.
        const START: &str = r#"{"record":"event","event":"#;
        let mut line = Vec::with_capacity(START.len() + json.len() + 2);
        line.extend_from_slice(START.as_bytes());
        line.extend_from_slice(json.as_bytes());
        line.extend_from_slice(b"}\n");
        let hold = matches!(
            event.event(),
            AgentEvent::Hook(
                hooks_core::Event::RoundStarted { .. } | hooks_core::Event::HookCalled { .. }
            )
        );
        if let Err(e) = writer.append(&line, hold) {
            drop(writer);
            self.failed(&e);
        }
    }

    /// A sink that passes every event to `sink` and appends it here; the
    /// event's JSON is made once for both.
    pub fn tee(&self, sink: Sink) -> Sink {
        let transcript = self.clone();
        Arc::new(move |event: &Emitted<'_>| {
            sink(event);
            transcript.emitted(event);
        })
    }
}

impl SessionObserver for Transcript {
    fn appended(&mut self, message: &Message) {
        self.write(&Record::Message {
            message: message.clone(),
        });
    }

    fn replaced(&mut self, summary: bool, history: &[Message]) {
        self.write(&Record::Compacted {
            summary,
            history: history.to_vec(),
        });
    }

    fn carried(&mut self, carried: &Carried) {
        self.write(&Record::Policy {
            budget_used: carried.budget_used,
            rounds: carried.rounds,
            failures: carried
                .failures
                .iter()
                .map(|(name, n)| (name.as_str().to_owned(), *n))
                .collect(),
        });
    }

    fn usage(&mut self, messages: usize, tokens: u64) {
        // The reader counts the messages itself: they are the ones before.
        let _ = messages;
        self.write(&Record::Usage { tokens });
    }

    fn prompt_ended(&mut self, outcome: &PromptOutcome) {
        self.write(&Record::PromptEnded {
            reason: outcome.reason.as_str().to_owned(),
            detail: outcome.detail.clone(),
            rounds: outcome.rounds,
            session: None,
        });
    }
}

/// Where [`Transcript::resume`] moves what could not be read.
fn unread_path(path: &Path, offset: u64) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".unread-{offset}"));
    path.with_file_name(name)
}

/// A session id must be a plain file name.
fn check_id(id: &str) -> std::io::Result<()> {
    if valid_id(id) {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{id:?} is not a session id (letters, digits, '-', '_' and '.' only)"),
        ))
    }
}

/// Whether `id` can name a transcript: a plain file name of letters,
/// digits, `-`, `_` and `.`, not starting with a dot.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir)
}

fn private_file(options: &mut std::fs::OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = options;
}

/// `time` as RFC 3339 in UTC with milliseconds (`2025-03-01T10:15:02.123Z`):
/// fixed width, so the text sorts as the time does.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Invariant: 1 <= day <= 31 and 1 <= month <= 12.
    (year, month as u32, day as u32)
}

/// A session read back from its transcript.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedSession {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: Header,
    /// The history as the model saw it last, every tool call paired with
    /// one result.
    pub history: Vec<Message>,
    /// The session's first prompt (compaction keeps it).
    pub original_task: Option<String>,
    /// Summary handoffs so far.
    pub summaries: u32,
    /// The model API's last usage report since the last compaction: how
    /// many messages of `history` it covered, and their tokens \[V3\].
    pub usage: Option<(usize, u64)>,
    /// The policy state to restore.
    pub carried: Carried,
    /// Prompts given.
    pub prompts: u32,
    /// Why the last prompt ended; `None` if it never ended (the process
    /// died) or there was none.
    pub last_end: Option<String>,
    /// When it was last started or resumed, as [`Header::started`].
    pub last_active: String,
    /// The results made up for calls whose results were never written, at
    /// the end of `history` ([`Transcript::resume`] writes them).
    pub repaired: Vec<Message>,
    /// What was wrong with the file, if anything.
    pub warnings: Vec<ReadWarning>,
    /// The bytes of the file read as good records.
    pub good_len: u64,
}

/// Why a transcript could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("cannot read the session transcript {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Its first line is not a header.
    #[error("{} is not a session transcript: its first line is not a header", path.display())]
    NoHeader {
        /// The file.
        path: PathBuf,
    },
    /// A format this version does not read.
    #[error("{} is a session transcript of format {version}; this sprout reads format {FORMAT_VERSION}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// Its format.
        version: u32,
    },
}

/// Something wrong in a transcript that was read past or repaired.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: line {line}: {problem}", path.display())]
pub struct ReadWarning {
    /// The file.
    pub path: PathBuf,
    /// The line, from 1.
    pub line: usize,
    /// What is wrong.
    pub problem: ReadProblem,
}

/// What a [`ReadWarning`] is about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadProblem {
    /// The last line has no end: the write in flight when the process died.
    #[error("the last line is cut short (the process died writing it); read up to the line before")]
    Torn,
    /// A line that is not a record.
    #[error("not a valid record ({why}); read up to the line before, {ignored} line(s) ignored")]
    Bad {
        /// Why.
        why: String,
        /// Lines not read, this one included.
        ignored: usize,
    },
    /// Tool calls whose results were never written: each got an error
    /// result.
    #[error("no result was saved for tool call(s) {}: each gets an error result saying so", calls.join(", "))]
    Unanswered {
        /// Their ids.
        calls: Vec<String>,
    },
    /// A result for no open call: dropped.
    #[error("a result for tool call {call_id}, which is not open: dropped")]
    Orphan {
        /// Its call id.
        call_id: String,
    },
}

/// The text of a result made up for a call whose result was never written.
pub const UNSAVED_RESULT: &str = "no result was saved for this tool call: the session stopped before it finished (it may have run)";

/// Reads the transcript at `path` up to its last whole good record.
pub fn read(path: &Path) -> Result<SavedSession, ReadError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    read_bytes(path, &bytes)
}

/// Reads only the header of the transcript at `path` (cheap, for finding a
/// session).
pub fn read_header(path: &Path) -> Result<Header, ReadError> {
    use std::io::BufRead as _;
    let file = File::open(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut line = Vec::new();
    std::io::BufReader::new(file.take(1 << 20))
        .read_until(b'\n', &mut line)
        .map_err(|source| ReadError::Io {
            path: path.to_owned(),
            source,
        })?;
    header_of(path, &line)
}

fn header_of(path: &Path, line: &[u8]) -> Result<Header, ReadError> {
    if !line.ends_with(b"\n") {
        return Err(ReadError::NoHeader {
            path: path.to_owned(),
        });
    }
    match serde_json::from_slice::<Record>(line) {
        Ok(Record::Header(header)) if header.version == FORMAT_VERSION => Ok(header),
        Ok(Record::Header(header)) => Err(ReadError::Version {
            path: path.to_owned(),
            version: header.version,
        }),
        _ => Err(ReadError::NoHeader {
            path: path.to_owned(),
        }),
    }
}

/// Reads a transcript's bytes (`path` names it in warnings).
pub fn read_bytes(path: &Path, bytes: &[u8]) -> Result<SavedSession, ReadError> {
    let mut lines = bytes.split_inclusive(|b| *b == b'\n');
    let first = lines.next().unwrap_or_default();
    let header = header_of(path, first)?;
    let mut saved = SavedSession {
        path: path.to_owned(),
        last_active: header.started.clone(),
        header,
        history: Vec::new(),
        original_task: None,
        summaries: 0,
        usage: None,
        carried: Carried::default(),
        prompts: 0,
        last_end: None,
        repaired: Vec::new(),
        warnings: Vec::new(),
        good_len: first.len() as u64,
    };
    let mut rebuild = Rebuild::default();
    let rest: Vec<&[u8]> = lines.collect();
    for (index, line) in rest.iter().enumerate() {
        let number = index + 2;
        let warn = |problem| ReadWarning {
            path: path.to_owned(),
            line: number,
            problem,
        };
        if !line.ends_with(b"\n") {
            saved.warnings.push(warn(ReadProblem::Torn));
            break;
        }
        let record = match serde_json::from_slice::<Record>(line) {
            Ok(Record::Header(_)) => Err("a second header".to_owned()),
            Ok(record) => Ok(record),
            Err(e) => Err(e.to_string()),
        };
        let record = match record {
            Ok(record) => record,
            Err(why) => {
                let ignored = rest.len() - index;
                saved.warnings.push(warn(ReadProblem::Bad { why, ignored }));
                break;
            }
        };
        saved.good_len += line.len() as u64;
        match record {
            Record::Header(_) | Record::Event { .. } => {}
            Record::Resumed { at, .. } => saved.last_active = at,
            Record::Message { message } => {
                if let Message::User { text } = &message {
                    saved.prompts += 1;
                    saved.last_end = None;
                    saved.original_task.get_or_insert_with(|| text.clone());
                }
                rebuild.add(message, &mut |p| saved.warnings.push(warn(p)));
            }
            Record::Usage { tokens } => saved.usage = Some((rebuild.history.len(), tokens)),
            Record::Compacted { summary, history } => {
                saved.summaries += u32::from(summary);
                saved.usage = None;
                rebuild = Rebuild::default();
                for message in history {
                    rebuild.add(message, &mut |p| saved.warnings.push(warn(p)));
                }
            }
            Record::Policy {
                budget_used,
                rounds,
                failures,
            } => {
                saved.carried = Carried {
                    budget_used,
                    rounds,
                    // A name that is no server name names no server here.
                    failures: failures
                        .into_iter()
                        .filter_map(|(name, n)| Some((ServerName::new(name).ok()?, n)))
                        .collect(),
                };
            }
            Record::PromptEnded { reason, .. } => saved.last_end = Some(reason),
        }
    }
    let line = saved.warnings.last().map_or(rest.len() + 1, |w| w.line);
    let before = rebuild.history.len();
    rebuild.close(&mut |p| {
        saved.warnings.push(ReadWarning {
            path: path.to_owned(),
            line,
            problem: p,
        });
    });
    saved.repaired = rebuild.history[before..].to_vec();
    saved.history = rebuild.history;
    Ok(saved)
}

/// The history being rebuilt, with the calls of the last assistant message
/// that have no result yet.
#[derive(Default)]
struct Rebuild {
    history: Vec<Message>,
    open: Vec<ToolCall>,
}

impl Rebuild {
    fn add(&mut self, message: Message, warn: &mut dyn FnMut(ReadProblem)) {
        match &message {
            Message::User { .. } => self.close(warn),
            Message::Assistant { tool_calls, .. } => {
                self.close(warn);
                self.open = tool_calls.clone();
            }
            Message::ToolResult { call_id, .. } => {
                match self.open.iter().position(|c| &c.id == call_id) {
                    Some(i) => {
                        self.open.remove(i);
                    }
                    None => {
                        warn(ReadProblem::Orphan {
                            call_id: call_id.clone(),
                        });
                        return;
                    }
                }
            }
        }
        self.history.push(message);
    }

    /// Gives every open call an error result.
    fn close(&mut self, warn: &mut dyn FnMut(ReadProblem)) {
        if self.open.is_empty() {
            return;
        }
        let open = std::mem::take(&mut self.open);
        warn(ReadProblem::Unanswered {
            calls: open.iter().map(|c| c.id.clone()).collect(),
        });
        for call in open {
            self.history.push(Message::ToolResult {
                call_id: call.id,
                name: call.name,
                content: UNSAVED_RESULT.to_owned(),
                is_error: true,
            });
        }
    }
}

/// Every transcript in `dir` (files `*.jsonl`), read; those that cannot be
/// read at all come back as errors. A missing `dir` has none.
pub fn list(dir: &Path) -> std::io::Result<Vec<Result<SavedSession, ReadError>>> {
    Ok(transcript_paths(dir)?.iter().map(|p| read(p)).collect())
}

/// How much of a transcript's start [`summary`] reads for its header, and
/// of its end for the session so far.
pub const SUMMARY_HEAD_BYTES: u64 = 64 * 1024;

/// See [`SUMMARY_HEAD_BYTES`].
pub const SUMMARY_TAIL_BYTES: u64 = 64 * 1024;

/// A session as a listing shows it, told by [`summary`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: Header,
    /// Prompts given, how many messages the history has, when it was last
    /// started or resumed and why its last prompt ended.
    pub tally: Tally,
    /// What was wrong with the file, if anything.
    pub warnings: Vec<ReadWarning>,
}

impl From<SavedSession> for Summary {
    fn from(saved: SavedSession) -> Summary {
        Summary {
            tally: Tally {
                prompts: saved.prompts,
                messages: saved.history.len() as u64,
                last_active: saved.last_active,
                last_end: saved.last_end,
            },
            path: saved.path,
            header: saved.header,
            warnings: saved.warnings,
        }
    }
}

/// What a listing needs of the transcript at `path`, read cheaply: its
/// first line (the header) and at most [`SUMMARY_TAIL_BYTES`] of its end,
/// where the last `prompt_ended` or `resumed` record tells the session so
/// far and the records after it the rest. A file that is small, whose end
/// is torn or bad, or whose end holds no such record (one written before
/// they carried it, or a prompt whose records fill the tail) is read whole
/// instead ([`read`]), so the summary is the one `read` gives, warnings
/// and all. What the cheap reading does not see: a bad line in the middle
/// of a long file, and tool calls whose results were never written (the
/// history counts the messages written); the resume, which reads the file
/// whole, finds and repairs them.
pub fn summary(path: &Path) -> Result<Summary, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    match summary_of(path, &mut file, len).map_err(io)? {
        Some(summary) => Ok(summary),
        None => read(path).map(Summary::from),
    }
}

/// The cheap reading of [`summary`], from `file` of `len` bytes; `None`
/// when the file must be read whole.
fn summary_of(
    path: &Path,
    file: &mut (impl std::io::Read + std::io::Seek),
    len: u64,
) -> std::io::Result<Option<Summary>> {
    use std::io::SeekFrom;
    if len <= SUMMARY_HEAD_BYTES + SUMMARY_TAIL_BYTES {
        return Ok(None);
    }
    let mut head = Vec::new();
    file.by_ref()
        .take(SUMMARY_HEAD_BYTES)
        .read_to_end(&mut head)?;
    let Some(end) = head.iter().position(|b| *b == b'\n') else {
        return Ok(None);
    };
    let Ok(header) = header_of(path, &head[..=end]) else {
        return Ok(None);
    };
    let mut tail = Vec::new();
    file.seek(SeekFrom::Start(len - SUMMARY_TAIL_BYTES))?;
    file.take(SUMMARY_TAIL_BYTES).read_to_end(&mut tail)?;
    if !tail.ends_with(b"\n") {
        return Ok(None);
    }
    // The tail's first line is most likely a piece of one.
    let Some(start) = tail.iter().position(|b| *b == b'\n') else {
        return Ok(None);
    };
    let mut records = Vec::new();
    for line in tail[start + 1..].split_inclusive(|b| *b == b'\n') {
        match serde_json::from_slice::<Record>(line) {
            Ok(Record::Header(_)) | Err(_) => return Ok(None),
            Ok(record) => records.push(record),
        }
    }
    let told = records.iter().rposition(|r| {
        matches!(
            r,
            Record::PromptEnded {
                session: Some(_),
                ..
            } | Record::Resumed {
                session: Some(_),
                ..
            }
        )
    });
    let Some(told) = told else {
        return Ok(None);
    };
    let mut tally = match &records[told] {
        Record::PromptEnded {
            session: Some(tally),
            ..
        }
        | Record::Resumed {
            session: Some(tally),
            ..
        } => tally.clone(),
        _ => return Ok(None),
    };
    for record in &records[told + 1..] {
        tally.count(record);
    }
    Ok(Some(Summary {
        path: path.to_owned(),
        header,
        tally,
        warnings: Vec::new(),
    }))
}

/// Every transcript in `dir` (files `*.jsonl`), summed up by [`summary`];
/// those that cannot be read at all come back as errors. A missing `dir`
/// has none.
pub fn list_summaries(dir: &Path) -> std::io::Result<Vec<Result<Summary, ReadError>>> {
    Ok(transcript_paths(dir)?.iter().map(|p| summary(p)).collect())
}

/// The transcripts in `dir`, sorted; none for a missing `dir`.
fn transcript_paths(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == EXTENSION) && p.is_file())
        .collect();
    paths.sort();
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn header() -> String {
        r#"{"record":"header","version":1,"session_id":"s1","cwd":"/w","started":"2025-03-01T10:15:02.123Z","sprout":"0.1.0"}"#.to_owned() + "\n"
    }

    fn line(record: &Record) -> String {
        serde_json::to_string(record).unwrap() + "\n"
    }

    fn message(m: Message) -> String {
        line(&Record::Message { message: m })
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t__x".into(),
            arguments: "{}".into(),
        }
    }

    fn result(id: &str) -> Message {
        Message::ToolResult {
            call_id: id.into(),
            name: "t__x".into(),
            content: "ok".into(),
            is_error: false,
        }
    }

    fn assistant(calls: &[&str]) -> Message {
        Message::Assistant {
            text: String::new(),
            tool_calls: calls.iter().map(|c| call(c)).collect(),
        }
    }

    fn read_text(text: &str) -> SavedSession {
        read_bytes(Path::new("/s/s1.jsonl"), text.as_bytes()).unwrap()
    }

    fn whole() -> String {
        [
            header(),
            message(Message::user("fix it")),
            message(assistant(&["c1"])),
            message(result("c1")),
            line(&Record::Policy {
                budget_used: 1,
                rounds: 2,
                failures: BTreeMap::from([("gate".to_owned(), 2)]),
            }),
            line(&Record::Event {
                event: serde_json::json!({"event": "assistant_text", "text": "done"}),
            }),
            message(Message::Assistant {
                text: "done".into(),
                tool_calls: vec![],
            }),
            line(&Record::PromptEnded {
                reason: "no_objection".into(),
                detail: None,
                rounds: 2,
                session: None,
            }),
        ]
        .concat()
    }

    #[test]
    fn a_whole_transcript_reads_back_as_written() {
        let text = whole();
        let saved = read_text(&text);
        assert_eq!(saved.warnings, []);
        assert_eq!(saved.history.len(), 4);
        assert_eq!(saved.header.session_id, "s1");
        assert_eq!(saved.original_task.as_deref(), Some("fix it"));
        assert_eq!(
            saved.carried,
            Carried {
                budget_used: 1,
                rounds: 2,
                failures: vec![(ServerName::new("gate").unwrap(), 2)],
            }
        );
        assert_eq!(
            (saved.prompts, saved.last_end.as_deref()),
            (1, Some("no_objection"))
        );
        assert_eq!(saved.good_len, text.len() as u64);
        crate::check_pairing(&saved.history).unwrap();
    }

    #[test]
    fn a_torn_last_line_is_left_out_with_a_warning_naming_file_and_line() {
        let good = whole();
        let torn = format!("{good}{}", &message(Message::user("next"))[..20]);
        let saved = read_text(&torn);
        assert_eq!(saved.history.len(), 4);
        assert_eq!(saved.good_len, good.len() as u64);
        assert_eq!(saved.warnings.len(), 1);
        assert_eq!(saved.warnings[0].line, 9);
        assert_eq!(
            saved.warnings[0].to_string(),
            "/s/s1.jsonl: line 9: the last line is cut short (the process died writing it); read up to the line before"
        );
    }

    #[test]
    fn a_bad_line_ends_the_reading_there() {
        let text = [
            header(),
            message(Message::user("fix it")),
            "{\"record\":\"message\",\"message\":{\"role\":\"nobody\"}}\n".to_owned(),
            message(Message::user("lost")),
        ]
        .concat();
        let saved = read_text(&text);
        assert_eq!(saved.history, [Message::user("fix it")]);
        assert_eq!(saved.warnings.len(), 1);
        let w = &saved.warnings[0];
        assert_eq!(w.line, 3);
        assert!(
            matches!(&w.problem, ReadProblem::Bad { ignored: 2, .. }),
            "{w}"
        );
        // Not even JSON, or not UTF-8: the same.
        for bad in ["{{{\n", "\u{1}\n"] {
            let text = [header(), bad.to_owned()].concat();
            assert_eq!(read_text(&text).warnings[0].line, 2);
        }
        let mut bytes = header().into_bytes();
        bytes.extend_from_slice(b"\xff\xfe\n");
        let saved = read_bytes(Path::new("x"), &bytes).unwrap();
        assert!(matches!(saved.warnings[0].problem, ReadProblem::Bad { .. }));
    }

    #[test]
    fn an_unanswered_call_at_the_end_gets_an_error_result_and_a_warning() {
        let text = [
            header(),
            message(Message::user("fix it")),
            message(assistant(&["c1", "c2", "c3"])),
            message(result("c2")),
        ]
        .concat();
        let saved = read_text(&text);
        crate::check_pairing(&saved.history).unwrap();
        assert_eq!(saved.history.len(), 5);
        assert_eq!(saved.repaired.len(), 2);
        for (m, id) in saved.repaired.iter().zip(["c1", "c3"]) {
            let Message::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } = m
            else {
                panic!("{m:?}")
            };
            assert_eq!(
                (call_id.as_str(), content.as_str(), *is_error),
                (id, UNSAVED_RESULT, true)
            );
        }
        assert_eq!(
            saved.warnings[0].problem,
            ReadProblem::Unanswered {
                calls: vec!["c1".into(), "c3".into()]
            }
        );
        assert_eq!(saved.last_end, None, "the prompt never ended");
    }

    #[test]
    fn unanswered_calls_mid_file_and_orphans_are_repaired_too() {
        let text = [
            header(),
            message(Message::user("a")),
            message(assistant(&["c1"])),
            message(Message::user("b")),
            message(result("c9")),
        ]
        .concat();
        let saved = read_text(&text);
        crate::check_pairing(&saved.history).unwrap();
        assert_eq!(saved.history.len(), 4);
        assert!(
            saved.repaired.is_empty(),
            "mid-file repairs are not rewritten"
        );
        assert_eq!(saved.warnings.len(), 2);
        assert_eq!(saved.warnings[0].line, 4);
        assert_eq!(
            saved.warnings[1].problem,
            ReadProblem::Orphan {
                call_id: "c9".into()
            }
        );
    }

    #[test]
    fn a_compaction_replaces_the_history() {
        let text = [
            whole(),
            line(&Record::Compacted {
                summary: true,
                history: vec![Message::user("summary"), Message::user("fix it")],
            }),
            message(Message::user("next")),
        ]
        .concat();
        let saved = read_text(&text);
        assert_eq!(saved.history.len(), 3);
        assert_eq!(saved.summaries, 1);
        assert_eq!(saved.prompts, 2, "a compaction's messages are not prompts");
        assert_eq!(saved.original_task.as_deref(), Some("fix it"));
    }

    // [V3]: the last usage report survives a resume, counting the messages
    // before it; a compaction after it leaves none.
    #[test]
    fn the_last_usage_report_is_read_back_until_a_compaction() {
        let reported = [
            header(),
            message(Message::user("a")),
            message(Message::Assistant {
                text: "b".into(),
                tool_calls: Vec::new(),
            }),
            line(&Record::Usage { tokens: 900 }),
            message(Message::user("c")),
        ]
        .concat();
        assert_eq!(read_text(&reported).usage, Some((2, 900)));
        let compacted = [
            reported,
            line(&Record::Compacted {
                summary: false,
                history: vec![Message::user("c")],
            }),
        ]
        .concat();
        assert_eq!(read_text(&compacted).usage, None);
    }

    #[test]
    fn no_header_or_another_format_is_refused() {
        for text in ["", "{}\n", &message(Message::user("x")), &header()[..30]] {
            assert!(matches!(
                read_bytes(Path::new("x"), text.as_bytes()),
                Err(ReadError::NoHeader { .. })
            ));
        }
        let v2 = header().replace("\"version\":1", "\"version\":2");
        assert!(matches!(
            read_bytes(Path::new("x"), v2.as_bytes()),
            Err(ReadError::Version { version: 2, .. })
        ));
    }

    #[test]
    fn rfc3339_is_utc_with_millis() {
        let at = |ms: u64| rfc3339(SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_740_824_102_123), "2025-03-01T10:15:02.123Z");
    }

    #[test]
    fn ids_are_plain_file_names() {
        assert!(valid_id("20250301-101502-4242"));
        for bad in ["", ".", "..", "a/b", "../x", ".hidden", "a b"] {
            assert!(!valid_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn written_and_resumed_on_disk() {
        let dir =
            std::env::temp_dir().join(format!("agent-loop-transcript-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut t = Transcript::create(&dir, "s1", "/w", "0.1.0").unwrap();
        assert!(
            Transcript::create(&dir, "s1", "/w", "0.1.0").is_err(),
            "never overwritten"
        );
        t.appended(&Message::user("fix it"));
        t.appended(&assistant(&["c1"]));
        t.event(&AgentEvent::TextDelta { text: "x".into() });
        t.event(&AgentEvent::AssistantText { text: "x".into() });
        // A torn line, as a kill mid-write leaves it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(t.path())
            .unwrap()
            .write_all(b"{\"record\":\"mess")
            .unwrap();
        let saved = read(t.path()).unwrap();
        assert_eq!(saved.history.len(), 3);
        assert_eq!(saved.warnings.len(), 2, "{:?}", saved.warnings);
        let mut resumed = Transcript::resume(&saved, "0.1.1").unwrap();
        assert!(unread_path(t.path(), saved.good_len).exists());
        resumed.appended(&Message::user("go on"));
        let again = read(t.path()).unwrap();
        assert_eq!(again.warnings, [], "the file is whole again");
        assert_eq!(again.history.len(), 4);
        assert_eq!(again.prompts, 2);
        let text = std::fs::read_to_string(t.path()).unwrap();
        assert_eq!(text.matches("text_delta").count(), 0);
        assert_eq!(text.matches("assistant_text").count(), 1);
        assert_eq!(
            list(&dir).unwrap().len(),
            1,
            "the unread tail is not a session"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    // A hook round's start and answers wait for its decision and go out
    // with it, in order and as the event records `read` knows; what is
    // still held when the last handle goes is written then.
    #[test]
    fn a_rounds_events_go_out_with_its_decision() {
        use hooks_core::{Event, HookPoint, Outcome, PolicyDecision, RoundId, Time};
        let dir = std::env::temp_dir().join(format!("agent-loop-rounds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let t = Transcript::create(&dir, "s1", "/w", "0.1.0").unwrap();
        let server = ServerName::new("a").unwrap();
        let started = |round| {
            AgentEvent::Hook(Event::RoundStarted {
                round: RoundId(round),
                hook: HookPoint::Stop,
                servers: vec![server.clone()],
                left_out: Vec::new(),
                deadline: Time::from_millis(5),
            })
        };
        let called = AgentEvent::Hook(Event::HookCalled {
            round: RoundId(1),
            hook: HookPoint::Stop,
            server: server.clone(),
            outcome: Outcome::Empty,
            latency: std::time::Duration::from_millis(1),
        });
        let on_disk = || std::fs::read_to_string(t.path()).unwrap();
        let before = on_disk();
        t.event(&started(1));
        t.event(&called);
        assert_eq!(on_disk(), before, "held until the round decides");
        let decided = AgentEvent::Hook(Event::Decided {
            round: Some(RoundId(1)),
            decision: PolicyDecision::PromptEnded {
                reason: hooks_core::EndReason::NoObjection,
            },
        });
        t.event(&decided);
        let events: Vec<AgentEvent> = on_disk()[before.len()..]
            .lines()
            .map(|line| match serde_json::from_str::<Record>(line).unwrap() {
                Record::Event { event } => serde_json::from_value(event).unwrap(),
                other => panic!("not an event: {other:?}"),
            })
            .collect();
        assert_eq!(events, [started(1), called, decided]);
        // Another record takes what is held with it; so does the end.
        t.event(&started(2));
        let mut observer = t.clone();
        observer.appended(&Message::user("x"));
        let text = on_disk();
        assert!(text.find("\"round\":2").unwrap() < text.find("\"message\"").unwrap());
        t.event(&started(3));
        assert!(!on_disk().contains("\"round\":3"));
        drop((t, observer));
        let text = std::fs::read_to_string(dir.join("s1.jsonl")).unwrap();
        assert!(text.contains("\"round\":3"), "written at the end");
        assert_eq!(read(&dir.join("s1.jsonl")).unwrap().warnings, []);
        let _ = std::fs::remove_dir_all(&dir);
    }

    // An event's JSON is made once for the transcript and the sink it tees
    // into (one serialisation in all), the sink is handed the event's own
    // text, and the line is the event record `read` knows, reading back as
    // the event [O2].
    #[test]
    fn a_teed_sink_shares_the_events_json() {
        let dir = std::env::temp_dir().join(format!("agent-loop-tee-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let t = Transcript::create(&dir, "s1", "/w", "0.1.0").unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        let sink = t.tee(Arc::new(move |e: &Emitted<'_>| {
            let json = e.json().unwrap();
            kept.lock()
                .unwrap()
                .push((json.get().as_ptr() as usize, json.get().to_owned()));
        }));
        let event = AgentEvent::ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: r#"{"path":"a \"b\""}"#.into(),
        };
        let emitted = Emitted::new(&event);
        let before = std::fs::read_to_string(t.path()).unwrap();
        let made_before = crate::event::MADE.with(std::cell::Cell::get);
        sink(&emitted);
        let made = crate::event::MADE.with(std::cell::Cell::get) - made_before;
        assert_eq!(
            made, 1,
            "the sink and the transcript share one serialisation"
        );
        let (shared, text) = seen.lock().unwrap()[0].clone();
        let json = emitted.json().unwrap().get().as_ptr() as usize;
        assert_eq!(shared, json, "the sink was handed the event's own JSON");
        let line = std::fs::read_to_string(t.path()).unwrap()[before.len()..].to_owned();
        assert_eq!(line, format!("{{\"record\":\"event\",\"event\":{text}}}\n"));
        match serde_json::from_str::<Record>(line.trim_end()).unwrap() {
            Record::Event { event: read } => {
                assert_eq!(serde_json::from_value::<AgentEvent>(read).unwrap(), event);
            }
            other => panic!("not an event: {other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A reader that counts the bytes read from it.
    struct Counted<R> {
        inner: R,
        read: u64,
    }

    impl<R: std::io::Read> std::io::Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }

    impl<R: std::io::Seek> std::io::Seek for Counted<R> {
        fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    /// A session of `prompts` prompts whose tool results are `bytes` long
    /// each, written by the writer in `dir`.
    fn big_session(dir: &Path, id: &str, prompts: usize, bytes: usize) -> Transcript {
        let mut t = Transcript::create(dir, id, "/w", "0.1.0").unwrap();
        for p in 0..prompts {
            t.appended(&Message::user(format!("prompt {p}")));
            t.appended(&assistant(&[&format!("c{p}")]));
            let output = "x".repeat(bytes);
            t.event(&AgentEvent::AssistantText {
                text: output.clone(),
            });
            t.appended(&Message::ToolResult {
                call_id: format!("c{p}"),
                name: "t__x".into(),
                content: output,
                is_error: false,
            });
            t.appended(&Message::Assistant {
                text: "done".into(),
                tool_calls: vec![],
            });
            t.prompt_ended(&PromptOutcome {
                reason: hooks_core::EndReason::NoObjection,
                detail: None,
                text: "done".into(),
                rounds: 2,
            });
        }
        t
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "agent-loop-transcript-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    // A listing of a large transcript reads its first line and its last
    // SUMMARY_TAIL_BYTES only, and says what reading it whole says: after
    // its prompts, after a resume, and with a prompt under way.
    #[test]
    fn a_large_transcript_is_summed_up_from_its_ends() {
        let dir = temp_dir("summary");
        let t = big_session(&dir, "s1", 40, 20_000);
        let path = t.path().to_owned();
        let check = |what: &str| {
            let whole = Summary::from(read(&path).unwrap());
            let bytes = std::fs::read(&path).unwrap();
            let len = bytes.len() as u64;
            assert!(
                len > 10 * (SUMMARY_HEAD_BYTES + SUMMARY_TAIL_BYTES),
                "{len}"
            );
            let mut counted = Counted {
                inner: std::io::Cursor::new(bytes),
                read: 0,
            };
            let cheap = summary_of(&path, &mut counted, len)
                .unwrap()
                .unwrap_or_else(|| panic!("{what}: read whole"));
            assert_eq!(cheap, whole, "{what}");
            assert!(
                counted.read <= SUMMARY_HEAD_BYTES + SUMMARY_TAIL_BYTES,
                "{what}: {} bytes read",
                counted.read
            );
            assert_eq!(summary(&path).unwrap(), whole, "{what}");
        };
        check("written");
        let whole = read(&path).unwrap();
        assert_eq!((whole.prompts, whole.history.len()), (40, 160));
        drop(t);
        let mut resumed = Transcript::resume(&whole, "0.1.1").unwrap();
        check("resumed");
        resumed.appended(&Message::user("one more"));
        resumed.appended(&Message::Assistant {
            text: "working on it".into(),
            tool_calls: vec![],
        });
        check("a prompt under way");
        let cheap = summary(&path).unwrap();
        assert_eq!(cheap.tally.prompts, 41);
        assert_eq!(cheap.tally.last_end, None);
        assert_ne!(cheap.tally.last_active, whole.header.started);
        let _ = std::fs::remove_dir_all(&dir);
    }

    // A large transcript whose end is torn, or holds no record that tells
    // the session so far (written before they did), is read whole: the
    // same summary, and the warning names the line.
    #[test]
    fn a_large_transcript_with_a_bad_end_is_read_whole() {
        let dir = temp_dir("summary-bad");
        let t = big_session(&dir, "s1", 20, 20_000);
        let path = t.path().to_owned();
        drop(t);
        let good = std::fs::read_to_string(&path).unwrap();
        let lines = good.lines().count();
        std::fs::write(&path, format!("{good}{{\"record\":\"mess")).unwrap();
        let cheap = summary(&path).unwrap();
        assert_eq!(cheap, Summary::from(read(&path).unwrap()));
        assert_eq!(cheap.tally.prompts, 20);
        assert_eq!(cheap.warnings.len(), 1);
        assert_eq!(cheap.warnings[0].line, lines + 1);
        // As an older sprout wrote it: no tallies at all.
        let old: String = good
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("session");
                v.to_string() + "\n"
            })
            .collect();
        std::fs::write(&path, &old).unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(
            summary_of(&path, &mut file, old.len() as u64).unwrap(),
            None
        );
        let cheap = summary(&path).unwrap();
        assert_eq!((cheap.tally.prompts, cheap.tally.messages), (20, 80));
        assert_eq!(cheap.tally.last_end.as_deref(), Some("no_objection"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
