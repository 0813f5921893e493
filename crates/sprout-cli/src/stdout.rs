//! The one writer of `sprout run`'s standard output: a thread of its own
//! behind a bounded queue, so the loop never waits on a slow terminal or a
//! pipe nobody reads beyond a bound.
//!
//! The loop's sink formats each event into a line (cheap, on the loop's own
//! task) and queues it; the writer thread takes everything that is queued at
//! once, writes it through one buffer and flushes once, so a burst of events
//! costs one `write` however many lines it holds. The spinner lives on that
//! thread too, so it is always cleared before the line that replaces it.
//!
//! The queue holds at most [`MAX_QUEUED_BYTES`]. A line that finds it full
//! waits up to the stall bound for room ([`STALL_BOUND`] for people,
//! [`JSON_STALL_BOUND`] for `--json`, whose reader is a program that may
//! pause); if none comes, the output counts as stalled for the rest of the
//! process: no line waits again (the loop, on the runtime's one thread, is
//! held at most once), and a line that finds the queue more than half full
//! is dropped, counted, and said on stderr when the writer catches up or at
//! exit. Essential lines (how a prompt ended) are never dropped and never
//! wait. A pipe that is closed (EPIPE) ends the writing quietly; the agent
//! goes on and its exit status still tells how the prompt ended.
//!
//! Not here: what a line says (`render`), and ACP's stdout, which has its own
//! batching writer (`acp::framing`).

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most bytes of output waiting to be written.
pub(crate) const MAX_QUEUED_BYTES: usize = 1 << 20;

/// Longest a line for people waits for room in a full queue before the
/// output is taken as stalled.
pub(crate) const STALL_BOUND: Duration = Duration::from_secs(2);

/// The same for `--json`: its reader is a program, which may pause longer
/// than a terminal does, and a gap in its records costs more.
pub(crate) const JSON_STALL_BOUND: Duration = Duration::from_secs(30);

/// What the writer thread is asked to do, in order.
pub(crate) enum Item {
    /// Write this text (a whole line or more, newline included), clearing
    /// the spinner first.
    Text(String),
    /// Show a spinner with this message until the next text.
    Spinner(String),
}

impl Item {
    fn bytes(&self) -> usize {
        match self {
            Item::Text(text) => text.len(),
            Item::Spinner(_) => 0,
        }
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<Item>,
    /// Invariant: the sum of `Item::bytes` over `queue`.
    queued_bytes: usize,
    /// Lines dropped since the output stalled, not yet reported.
    dropped: u64,
    /// Set when a line found no room within [`STALL_BOUND`]; cleared once
    /// the queue has drained to half.
    stalled: bool,
    /// No more items come; the thread writes what is queued and ends.
    closed: bool,
    /// The thread has written everything and ended.
    done: bool,
    /// The thread has taken a batch and not yet flushed it.
    writing: bool,
}

/// Which stream a writer writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// Standard output: the spinner is cleared before a line.
    Out,
    /// Standard error (log lines): written with the spinner hidden for the
    /// moment, and never waited for.
    Err,
}

/// Writes text somewhere else than the stream: a line editor's external
/// printer, which puts it above the input line and draws the line again.
/// `false`: it could not, and the text goes to the stream after all.
pub(crate) type Printer = Box<dyn FnMut(String) -> bool + Send>;

struct Shared {
    stream: Stream,
    /// While set, each batch of log lines goes through it (standard error
    /// only). Taken out for each batch under a short lock, so setting it
    /// never waits on a print.
    printer: Mutex<Option<Arc<Mutex<Printer>>>>,
    state: Mutex<State>,
    /// Signalled when items are queued, room is made, or the thread ends.
    changed: Condvar,
    /// Most bytes queued at once ([`MAX_QUEUED_BYTES`] but in tests).
    max_bytes: usize,
    /// How long a line waits for room ([`STALL_BOUND`] but in tests).
    stall: Duration,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The handle to the writer thread. Cloning shares it.
#[derive(Clone)]
pub(crate) struct Stdout {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Stdout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stdout").finish_non_exhaustive()
    }
}

impl Stdout {
    /// Starts the writer thread on the process's standard output.
    pub(crate) fn start(stall: Duration) -> Stdout {
        Stdout::start_on(std::io::stdout(), MAX_QUEUED_BYTES, stall)
    }

    /// The writer of the process's log lines on standard error, started on
    /// first use. A log line never waits: stderr that nobody reads (an
    /// editor that pipes it and never reads) drops lines instead of holding
    /// the runtime's one thread in `write`.
    pub(crate) fn stderr() -> &'static Stdout {
        static STDERR: std::sync::OnceLock<Stdout> = std::sync::OnceLock::new();
        STDERR.get_or_init(|| {
            Stdout::start_stream(std::io::stderr(), 256 * 1024, Duration::ZERO, Stream::Err)
        })
    }

    /// Starts the writer thread on `out`.
    fn start_on(out: impl Write + Send + 'static, max_bytes: usize, stall: Duration) -> Stdout {
        Stdout::start_stream(out, max_bytes, stall, Stream::Out)
    }

    fn start_stream(
        out: impl Write + Send + 'static,
        max_bytes: usize,
        stall: Duration,
        stream: Stream,
    ) -> Stdout {
        let shared = Arc::new(Shared {
            stream,
            printer: Mutex::new(None),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            max_bytes,
            stall,
        });
        let thread = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("sprout-stdout".into())
            .spawn(move || write_loop(&thread, out));
        if spawned.is_err() {
            // No thread: nothing will be written; the agent still runs.
            let mut state = shared.lock();
            state.closed = true;
            state.done = true;
        }
        Stdout { shared }
    }

    /// Sends the log lines written from now on through `printer`
    /// (`sprout chat`, while its input line is up, so a line that comes
    /// then does not run into what is being typed), or, with `None`, to
    /// standard error again.
    pub(crate) fn print_through(&self, printer: Option<Printer>) {
        *self
            .shared
            .printer
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = printer.map(|p| Arc::new(Mutex::new(p)));
    }

    /// Queues `item`, waiting at most the stall bound for room, once.
    pub(crate) fn push(&self, item: Item) {
        let (max_bytes, stall) = (self.shared.max_bytes, self.shared.stall);
        let size = item.bytes();
        let mut state = self.shared.lock();
        if state.closed {
            return;
        }
        if state.stalled {
            if state.queued_bytes > 0 && state.queued_bytes + size > max_bytes / 2 {
                state.dropped += 1;
                return;
            }
            state.queued_bytes += size;
            state.queue.push_back(item);
            drop(state);
            self.shared.changed.notify_all();
            return;
        }
        let until = Instant::now() + stall;
        // A line larger than the whole queue still goes in when the queue
        // is empty, so nothing is dropped only for being long.
        while state.queued_bytes > 0 && state.queued_bytes + size > max_bytes {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                state.stalled = true;
                state.dropped += 1;
                return;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if state.closed {
                return;
            }
        }
        state.queued_bytes += size;
        state.queue.push_back(item);
        drop(state);
        self.shared.changed.notify_all();
    }

    /// Queues `item` whatever the queue holds, without waiting: for the few
    /// lines that must not be lost (how a prompt ended).
    pub(crate) fn push_essential(&self, item: Item) {
        let mut state = self.shared.lock();
        if state.closed {
            return;
        }
        state.queued_bytes += item.bytes();
        state.queue.push_back(item);
        drop(state);
        self.shared.changed.notify_all();
    }

    /// Waits until everything queued so far is written, at most `bound`
    /// (before something else writes to the terminal: a line editor's
    /// prompt). Returns whether it was.
    pub(crate) fn sync(&self, bound: Duration) -> bool {
        self.wait_for(bound, |state| {
            (state.queue.is_empty() && !state.writing) || state.done
        })
    }

    /// Lets the thread write what is queued and waits for it, at most
    /// `bound`; later items are not written. Returns whether everything was.
    pub(crate) fn finish(&self, bound: Duration) -> bool {
        self.shared.lock().closed = true;
        self.shared.changed.notify_all();
        self.wait_for(bound, |state| state.done)
    }

    /// Waits at most `bound` for `reached` to hold; whether it did.
    fn wait_for(&self, bound: Duration, reached: impl Fn(&State) -> bool) -> bool {
        let until = Instant::now() + bound;
        let mut state = self.shared.lock();
        while !reached(&state) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// The thread: takes every queued item at once, writes them through one
/// buffer, flushes once.
fn write_loop(shared: &Shared, out: impl Write) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    let mut broken = false;
    loop {
        let (batch, dropped, closed) = {
            let mut state = shared.lock();
            while state.queue.is_empty() && !state.closed {
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner());
            }
            let batch = std::mem::take(&mut state.queue);
            state.queued_bytes = 0;
            state.writing = true;
            let dropped = std::mem::take(&mut state.dropped);
            (batch, dropped, state.closed)
        };
        shared.changed.notify_all();
        if dropped > 0 {
            report_dropped(dropped, shared.stall);
        }
        if shared.stream == Stream::Err {
            let printer = shared
                .printer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let printed = printer.is_some_and(|printer| {
                let text: String = batch
                    .iter()
                    .filter_map(|item| match item {
                        Item::Text(text) => Some(text.as_str()),
                        Item::Spinner(_) => None,
                    })
                    .collect();
                let mut print = printer.lock().unwrap_or_else(|e| e.into_inner());
                text.is_empty() || (*print)(text)
            });
            // Log lines: all of the batch with the spinner hidden once.
            if !broken && !printed {
                let write = |out: &mut std::io::BufWriter<_>| {
                    batch.iter().try_for_each(|item| match item {
                        Item::Text(text) => out.write_all(text.as_bytes()),
                        Item::Spinner(_) => Ok(()),
                    })?;
                    out.flush()
                };
                if crate::render::with_spinner_hidden(|| write(&mut out)).is_err() {
                    broken = true;
                }
            }
            let mut state = shared.lock();
            state.writing = false;
            let end = closed && state.queue.is_empty();
            drop(state);
            shared.changed.notify_all();
            if end {
                break;
            }
            continue;
        }
        for item in batch {
            match item {
                Item::Text(text) => {
                    crate::render::clear_spinner();
                    if !broken && out.write_all(text.as_bytes()).is_err() {
                        broken = true;
                    }
                }
                Item::Spinner(message) => {
                    // Whatever is buffered goes out before the spinner draws.
                    if !broken && out.flush().is_err() {
                        broken = true;
                    }
                    if !broken {
                        crate::render::show_spinner(message);
                    }
                }
            }
        }
        if !broken && out.flush().is_err() {
            broken = true;
        }
        let mut state = shared.lock();
        state.writing = false;
        let end = closed && state.queue.is_empty();
        drop(state);
        shared.changed.notify_all();
        if end {
            break;
        }
    }
    crate::render::clear_spinner();
    let dropped = std::mem::take(&mut shared.lock().dropped);
    if dropped > 0 {
        report_dropped(dropped, shared.stall);
    }
    shared.lock().done = true;
    shared.changed.notify_all();
}

fn report_dropped(dropped: u64, stall: Duration) {
    if stall.is_zero() {
        let _ = writeln!(
            std::io::stderr(),
            "sprout: {dropped} log line(s) were not shown: standard error was not read"
        );
        return;
    }
    let _ = writeln!(
        std::io::stderr(),
        "sprout: {dropped} line(s) of output were not shown: standard output was not read for {} ms",
        stall.as_millis()
    );
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    /// An output that records its bytes and counts its `write` calls, and can be
    /// held shut (a reader that does not read).
    #[derive(Clone, Default)]
    struct Recorder {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<AtomicUsize>,
        held: Arc<AtomicBool>,
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            while self.held.load(Ordering::SeqCst) {
                std::thread::park_timeout(Duration::from_millis(5));
            }
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn text(s: &str) -> Item {
        Item::Text(s.to_owned())
    }

    /// Waits, with a bound, until the writer has taken everything queued.
    fn taken(stdout: &Stdout) {
        let begun = Instant::now();
        while !stdout.shared.lock().queue.is_empty() {
            assert!(
                begun.elapsed() < Duration::from_secs(10),
                "the writer never took the queue"
            );
            std::thread::yield_now();
        }
    }

    /// A writer of a 64-byte queue on a held output, stalled: "taken" is
    /// being written (the writer blocks on it), 60 bytes of `q` are queued,
    /// and a line after them found no room within `stall` and was dropped.
    fn stalled(stall: Duration) -> (Recorder, Stdout) {
        let out = Recorder::default();
        out.held.store(true, Ordering::SeqCst);
        let stdout = Stdout::start_on(out.clone(), 64, stall);
        stdout.push(text("taken\n"));
        taken(&stdout);
        stdout.push(text(&format!("{}\n", "q".repeat(59))));
        stdout.push(text("dropped\n"));
        assert!(stdout.shared.lock().stalled);
        (out, stdout)
    }

    // Every line arrives, in order, and a burst queued while the writer was
    // busy costs one write, not one per line.
    #[test]
    fn lines_arrive_in_order_and_a_burst_is_one_write() {
        let out = Recorder::default();
        out.held.store(true, Ordering::SeqCst);
        let stdout = Stdout::start_on(out.clone(), MAX_QUEUED_BYTES, STALL_BOUND);
        stdout.push(text("first\n"));
        // The writer takes the first line and blocks on the held output, so
        // the next hundred queue up behind it.
        taken(&stdout);
        for i in 0..100 {
            stdout.push(text(&format!("line {i}\n")));
        }
        out.held.store(false, Ordering::SeqCst);
        assert!(stdout.finish(Duration::from_secs(10)));
        let written = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        let expected: String = std::iter::once("first\n".to_owned())
            .chain((0..100).map(|i| format!("line {i}\n")))
            .collect();
        assert_eq!(written, expected);
        // The first line in one write; the hundred behind it in one more.
        assert_eq!(out.writes.load(Ordering::SeqCst), 2);
    }

    // A reader that never reads holds the pusher for at most the stall
    // bound, once; after that lines are dropped at once and counted, and
    // finishing returns within its own bound.
    #[test]
    fn a_stalled_output_costs_one_bound_then_nothing() {
        let out = Recorder::default();
        out.held.store(true, Ordering::SeqCst);
        let stall = Duration::from_millis(200);
        let stdout = Stdout::start_on(out.clone(), 64, stall);
        stdout.push(text("taken by the writer, which then blocks\n"));
        taken(&stdout);
        stdout.push(text(&"a".repeat(60)));
        let waited = Instant::now();
        stdout.push(text(&"b".repeat(60)));
        assert!(waited.elapsed() >= stall, "a full queue waits for room");
        assert!(stdout.shared.lock().stalled);
        let dropped_at = Instant::now();
        for _ in 0..1000 {
            stdout.push(text("c\n"));
        }
        // No wait once stalled: a thousand lines in far less than one bound.
        assert!(dropped_at.elapsed() < stall);
        assert_eq!(stdout.shared.lock().dropped, 1001);
        assert!(!stdout.finish(Duration::from_millis(50)));
        out.held.store(false, Ordering::SeqCst);
    }

    // Once the reader reads again, lines go through again (without waiting:
    // a stalled output never holds the loop twice): what was queued and
    // what comes after is written, what was dropped is not.
    #[test]
    fn after_a_stall_lines_go_through_when_there_is_room() {
        let stall = Duration::from_millis(100);
        let (out, stdout) = stalled(stall);
        out.held.store(false, Ordering::SeqCst);
        taken(&stdout);
        let pushed = Instant::now();
        stdout.push(text("shown\n"));
        assert!(pushed.elapsed() < stall, "no wait once stalled");
        assert!(stdout.shared.lock().stalled, "stalled for good");
        assert!(stdout.finish(Duration::from_secs(10)));
        let written = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        assert_eq!(written, format!("taken\n{}\nshown\n", "q".repeat(59)));
    }

    // An essential line goes in however full the queue is, and never
    // waits, stalled or not.
    #[test]
    fn essential_lines_are_never_dropped() {
        let stall = Duration::from_millis(100);
        let (out, stdout) = stalled(stall);
        let pushed = Instant::now();
        stdout.push_essential(text("the end\n"));
        assert!(pushed.elapsed() < stall);
        out.held.store(false, Ordering::SeqCst);
        assert!(stdout.finish(Duration::from_secs(10)));
        let written = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        assert_eq!(written, format!("taken\n{}\nthe end\n", "q".repeat(59)));
    }

    // `sync` returns once what was queued is written, not before, and the
    // writer goes on taking lines afterwards.
    #[test]
    fn sync_waits_for_what_was_queued() {
        let out = Recorder::default();
        out.held.store(true, Ordering::SeqCst);
        let stdout = Stdout::start_on(out.clone(), MAX_QUEUED_BYTES, STALL_BOUND);
        stdout.push(text("before the prompt\n"));
        assert!(
            !stdout.sync(Duration::from_millis(50)),
            "held: not written yet"
        );
        out.held.store(false, Ordering::SeqCst);
        assert!(stdout.sync(Duration::from_secs(10)));
        assert_eq!(&*out.bytes.lock().unwrap(), b"before the prompt\n");
        stdout.push(text("after\n"));
        assert!(stdout.finish(Duration::from_secs(10)));
        assert_eq!(&*out.bytes.lock().unwrap(), b"before the prompt\nafter\n");
    }

    // Log lines never wait: a stderr nobody reads drops them at once, and
    // they still arrive in order once it is read.
    #[test]
    fn log_lines_never_wait() {
        let out = Recorder::default();
        out.held.store(true, Ordering::SeqCst);
        let stderr = Stdout::start_stream(out.clone(), 64, Duration::ZERO, Stream::Err);
        stderr.push(text("first\n"));
        taken(&stderr);
        let pushed = Instant::now();
        for i in 0..1000 {
            stderr.push(text(&format!("line {i}\n")));
        }
        assert!(
            pushed.elapsed() < Duration::from_secs(1),
            "no wait: {:?}",
            pushed.elapsed()
        );
        assert!(stderr.shared.lock().dropped > 0);
        out.held.store(false, Ordering::SeqCst);
        assert!(stderr.finish(Duration::from_secs(10)));
        let written = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        assert!(written.starts_with("first\nline 0\n"), "{written}");
    }

    // A closed pipe ends the writing; pushing and finishing still return.
    #[test]
    fn a_closed_pipe_is_not_an_error() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
        }
        let stdout = Stdout::start_on(Closed, 64, Duration::from_millis(100));
        for i in 0..100 {
            stdout.push(text(&format!("{i}\n")));
        }
        assert!(stdout.finish(Duration::from_secs(10)));
    }
}
