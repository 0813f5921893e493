//! ACP's wire: one JSON-RPC message per line on stdin and on stdout.
//!
//! In: lines of stdin read with tokio-util's `LinesCodec`, at most the frame
//! cap each. A longer frame, or one that is not UTF-8, never reaches the
//! SDK: it is answered directly with a JSON-RPC error that says what was
//! wrong (the size and the limit), under the request's own id when the kept
//! start of the frame shows it (serde reads the top-level keys in order until
//! the frame is cut), else under `null` as JSON-RPC asks.
//!
//! Out: one writer task owns stdout, fed through one buffer ([`Out`]);
//! each time it runs it writes everything queued in one write, so a burst
//! of updates costs one syscall, and order is kept. It runs on the
//! runtime's thread, when the task that queued lines next waits: queuing a
//! line is a copy, never a syscall or a wake-up of another thread. Two
//! kinds of line go in: the SDK's frames (responses, errors), which are
//! never dropped (there is one per request), and our own `session/update`
//! notifications, written here directly rather than through the SDK's
//! unbounded queues. Those are bounded: while the client does not read,
//! they queue up to [`MAX_QUEUED`]; beyond it, they still queue until
//! [`STALL`] has passed since the queue went past the bound with the writer
//! taking nothing, or [`HARD_MAX`] is queued, and from then on are dropped,
//! counted, and said on stderr. (A loaded session's history is replayed
//! whole, never dropped: it is bounded by the history in memory.) The
//! SDK's frames are bounded at the other end: while [`HARD_MAX`] or more
//! waits for the client, stdin is not read ([`Out::room`]), so a client
//! that sends requests and never reads their answers stops being read
//! rather than growing the queue; what waits is then at most the bound and
//! the answers to requests already read. Once the
//! client closes stdout, the SDK's connection ends with it. An update sent
//! before a response is written before it, as both take this buffer and
//! the response passes the SDK's queues after; an update that must follow a
//! response (those held until the client knows a new or loaded session) is
//! released by the response's own frame passing ([`Out::after_response`]).
//!
//! Not here: what the messages mean (the SDK's job, and `serve`'s).

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Sink, Stream, StreamExt};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead, LinesCodec, LinesCodecError};

/// JSON-RPC's "Invalid Request" code.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "Parse error" code.
const PARSE_ERROR: i64 = -32700;

/// Bytes of updates that may wait for a client that reads slowly.
pub(crate) const MAX_QUEUED: usize = 1 << 20;
/// Bytes of updates that may wait at all: beyond them, updates are
/// dropped at once.
pub(crate) const HARD_MAX: usize = 16 << 20;
/// How long the client may read nothing, with [`MAX_QUEUED`] waiting,
/// before updates are dropped.
pub(crate) const STALL: Duration = crate::stdout::JSON_STALL_BOUND;

/// What runs once a response's frame is queued.
type Release = Box<dyn FnOnce() + Send>;

/// The bounds of an [`Out`] ([`MAX_QUEUED`], [`HARD_MAX`], [`STALL`] but
/// in tests).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    max: usize,
    hard: usize,
    stall: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max: MAX_QUEUED,
            hard: HARD_MAX,
            stall: STALL,
        }
    }
}

#[derive(Default)]
struct Queue {
    /// Whole lines not yet taken by the writer.
    bytes: Vec<u8>,
    /// Since when more than the bound has waited with nothing taken.
    behind_since: Option<Instant>,
    /// Updates dropped, not yet said.
    dropped: u64,
    /// Whether any update was ever dropped.
    lost: bool,
    /// No more lines come; the writer writes what is queued and ends.
    closed: bool,
    /// Stdout is gone (the client closed it): nothing more is written.
    broken: bool,
}

/// The agent's stdout: the queue, the writer's wake-up, and the releases
/// waiting for the responses they follow.
pub(crate) struct Out {
    queue: Mutex<Queue>,
    bounds: Bounds,
    queued: Notify,
    /// The writer took at least [`Bounds::hard`] bytes, or stdout is gone
    /// or closed: stdin may be read again ([`Out::room`]).
    room: Notify,
    /// (the response's id, what to run once its frame is queued). The
    /// SDK's frames are read for their id only while it holds any.
    after: Mutex<Vec<(Value, Release)>>,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Out {
    /// Stdout through `sink`, written by a task of its own.
    pub(crate) fn start(
        sink: impl tokio::io::AsyncWrite + Send + Unpin + 'static,
        bounds: Bounds,
    ) -> Arc<Out> {
        let out = Arc::new(Out {
            queue: Mutex::default(),
            bounds,
            queued: Notify::new(),
            room: Notify::new(),
            after: Mutex::new(Vec::new()),
            writer: Mutex::new(None),
        });
        let writer = tokio::spawn(write_out(out.clone(), sink));
        *super::lock(&out.writer) = Some(writer);
        out
    }

    /// Queues `line`, one of our notifications (its newline included), or
    /// drops it (counted) while the client is stalled.
    pub(crate) fn notify(&self, line: String) {
        let Bounds { max, hard, stall } = self.bounds;
        let mut queue = super::lock(&self.queue);
        if queue.closed || queue.broken {
            return;
        }
        // A line longer than the bound still goes in when nothing waits,
        // so nothing is dropped only for being long.
        if !queue.bytes.is_empty() && queue.bytes.len() + line.len() > max {
            let since = *queue.behind_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= stall || queue.bytes.len() + line.len() > hard {
                queue.dropped += 1;
                queue.lost = true;
                return;
            }
        }
        Out::append(queue, &[line.as_bytes()]);
        self.queued.notify_one();
    }

    /// Queues `line`, one of our notifications (its newline included),
    /// whatever is queued: for a loaded session's history, which is
    /// replayed at once (the writer cannot drain meanwhile) and is bounded
    /// by the history in memory.
    pub(crate) fn notify_always(&self, line: &str) {
        Out::append(super::lock(&self.queue), &[line.as_bytes()]);
        self.queued.notify_one();
    }

    /// Queues one of the SDK's frames, or a reply to a bad frame: never
    /// dropped. A release waiting for it runs right after.
    fn frame(&self, line: &str) {
        let waiting = !super::lock(&self.after).is_empty();
        let release = if waiting {
            top_level_id(line.as_bytes()).and_then(|id| self.take_release(&id))
        } else {
            None
        };
        Out::append(super::lock(&self.queue), &[line.as_bytes(), b"\n"]);
        self.queued.notify_one();
        if let Some(release) = release {
            release();
        }
    }

    /// Adds `parts` to the queue, unless no more lines are written.
    fn append(mut queue: std::sync::MutexGuard<'_, Queue>, parts: &[&[u8]]) {
        if !queue.closed && !queue.broken {
            for part in parts {
                queue.bytes.extend_from_slice(part);
            }
        }
    }

    /// The first release waiting for the response to `id`, taken out.
    fn take_release(&self, id: &Value) -> Option<Release> {
        let mut after = super::lock(&self.after);
        let found = after.iter().position(|(waited, _)| waited == id)?;
        Some(after.remove(found).1)
    }

    /// Runs `release` once the response to request `id` has been queued,
    /// so that what it sends follows the response. Call it before the
    /// response is sent.
    pub(crate) fn after_response(&self, id: Value, release: impl FnOnce() + Send + 'static) {
        super::lock(&self.after).push((id, Box::new(release)));
    }

    /// Runs now the release waiting for the response to `id`, if any:
    /// for a response that could not be sent.
    pub(crate) fn release_now(&self, id: &Value) {
        if let Some(release) = self.take_release(id) {
            release();
        }
    }

    /// Waits until less than the hard bound waits for the client (or
    /// stdout is gone, or closed): stdin's reader waits here before each
    /// frame, so that the answers to a client that does not read are
    /// bounded by not reading its requests.
    async fn room(&self) {
        loop {
            {
                let queue = super::lock(&self.queue);
                if queue.bytes.len() < self.bounds.hard || queue.broken || queue.closed {
                    return;
                }
            }
            // A permit is kept when nobody waits, so a take between the
            // check and here is not missed.
            self.room.notified().await;
        }
    }

    /// Whether the client closed stdout.
    fn broken(&self) -> bool {
        super::lock(&self.queue).broken
    }

    /// Lets the writer write what is queued and waits for it, at most
    /// `bound`; later lines are not written. Whether everything was.
    pub(crate) async fn finish(&self, bound: Duration) -> bool {
        super::lock(&self.queue).closed = true;
        self.queued.notify_one();
        self.room.notify_one();
        let writer = super::lock(&self.writer).take();
        let ended = match writer {
            Some(writer) => tokio::time::timeout(bound, writer).await.is_ok(),
            None => true,
        };
        let mut queue = super::lock(&self.queue);
        // Drops the writer did not live to say (a client that never read
        // again) are said now.
        report_dropped(std::mem::take(&mut queue.dropped), self.bounds);
        ended && !queue.broken && !queue.lost
    }

    /// An error once the client has closed stdout: the SDK's connection
    /// ends with it, as the client is gone.
    fn closed_error(&self) -> io::Result<()> {
        if self.broken() {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the client closed stdout",
            ));
        }
        Ok(())
    }

    /// The SDK's side of stdout.
    fn sdk(self: &Arc<Self>) -> SdkFrames {
        SdkFrames(self.clone())
    }
}

/// Says on stderr that `dropped` updates were not sent, if any were.
fn report_dropped(dropped: u64, bounds: Bounds) {
    if dropped > 0 {
        tracing::warn!(
            "{dropped} session update(s) were not sent: the client was not reading \
             stdout ({} MiB were waiting, or nothing was read for {} s)",
            bounds.hard >> 20,
            bounds.stall.as_secs()
        );
    }
}

/// The writer: takes everything queued at once and writes it in one go.
async fn write_out(out: Arc<Out>, mut sink: impl tokio::io::AsyncWrite + Unpin) {
    let mut batch = Vec::new();
    loop {
        let (dropped, closed) = {
            let mut queue = super::lock(&out.queue);
            std::mem::swap(&mut batch, &mut queue.bytes);
            queue.behind_since = None;
            (std::mem::take(&mut queue.dropped), queue.closed)
        };
        // Bytes only grow between takes, so stdin's reader, if it waits,
        // saw at least this much.
        if batch.len() >= out.bounds.hard {
            out.room.notify_one();
        }
        report_dropped(dropped, out.bounds);
        if batch.is_empty() {
            if closed {
                return;
            }
            out.queued.notified().await;
            continue;
        }
        let written = sink.write_all(&batch).await;
        let written = match written {
            Ok(()) => sink.flush().await,
            Err(e) => Err(e),
        };
        batch.clear();
        // A burst's memory is not kept for good.
        if batch.capacity() > out.bounds.max {
            batch = Vec::new();
        }
        if written.is_err() {
            // The client closed stdout: nothing more can reach it.
            let mut queue = super::lock(&out.queue);
            queue.broken = true;
            queue.bytes = Vec::new();
            out.room.notify_one();
            return;
        }
    }
}

/// The SDK's frames into [`Out`]: always ready, since they never wait.
struct SdkFrames(Arc<Out>);

impl Sink<String> for SdkFrames {
    type Error = io::Error;

    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.0.closed_error())
    }

    fn start_send(self: Pin<&mut Self>, line: String) -> io::Result<()> {
        self.0.closed_error()?;
        self.0.frame(&line);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The two halves of the wire, for the SDK: frames out, frames in; and
/// [`Out`], for our own notifications and for the end (call
/// [`Out::finish`] before exiting, or the last frames are lost).
pub(crate) fn stdio(
    max_frame: usize,
) -> (
    impl Sink<String, Error = io::Error> + Send + Unpin + 'static,
    impl Stream<Item = io::Result<String>> + Send + Unpin + 'static,
    Arc<Out>,
) {
    // When stdin and stdout are pipes (an editor spawned us), rmcp reopens
    // them as non-blocking pipes of our own, read and written by the
    // runtime's IO driver; tokio's own stdio would hand every read and write
    // to a blocking thread and back. A terminal or a file falls back to
    // tokio's stdio.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let out = Out::start(stdout, Bounds::default());
    let incoming = read_frames(stdin, max_frame, out.clone());
    (out.sdk(), incoming, out)
}

/// One line of input, as [`Frames`] reads it.
enum Frame {
    /// A line within the cap.
    Line(String),
    /// A line over the cap, dropped; the id its start shows, if any.
    TooLong(Option<Value>),
    /// A line that is not UTF-8, dropped.
    NotUtf8,
}

/// `LinesCodec` with its errors turned into items, so that a bad frame
/// neither ends the stream nor leaves later frames waiting in the buffer
/// (a decoding error pauses tokio-util's reader until more input comes).
struct Frames {
    lines: LinesCodec,
    max: usize,
}

impl Frames {
    fn read(
        &mut self,
        buf: &mut BytesMut,
        decoded: Result<Option<String>, LinesCodecError>,
    ) -> io::Result<Option<Frame>> {
        match decoded {
            Ok(line) => Ok(line.map(Frame::Line)),
            // The codec drops the line from here on; its start is still
            // in the buffer.
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                Ok(Some(Frame::TooLong(id_in(&buf[..self.max.min(buf.len())]))))
            }
            Err(LinesCodecError::Io(e)) if e.kind() == io::ErrorKind::InvalidData => {
                Ok(Some(Frame::NotUtf8))
            }
            Err(LinesCodecError::Io(e)) => Err(e),
        }
    }
}

impl Decoder for Frames {
    type Item = Frame;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        let decoded = self.lines.decode(buf);
        self.read(buf, decoded)
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        let decoded = self.lines.decode_eof(buf);
        self.read(buf, decoded)
    }
}

/// The frames of `input` for the SDK: non-blank lines of at most `max`
/// bytes, each read once `out` has room. Bad frames are answered on `out`
/// and skipped.
fn read_frames(
    input: impl tokio::io::AsyncRead + Send + Unpin + 'static,
    max: usize,
    out: Arc<Out>,
) -> impl Stream<Item = io::Result<String>> + Send + Unpin + 'static {
    let frames = FramedRead::new(
        input,
        Frames {
            lines: LinesCodec::new_with_max_length(max),
            max,
        },
    );
    futures::stream::unfold((frames, out), move |(mut frames, out)| async move {
        loop {
            out.room().await;
            let answer = match frames.next().await? {
                Ok(Frame::Line(line)) if line.trim().is_empty() => continue,
                Ok(Frame::Line(line)) => return Some((Ok(line), (frames, out))),
                Ok(Frame::TooLong(id)) => error_frame(
                    id,
                    INVALID_REQUEST,
                    &format!(
                        "the frame is over the {max}-byte limit (--max-frame-bytes) and was dropped"
                    ),
                ),
                Ok(Frame::NotUtf8) => {
                    error_frame(None, PARSE_ERROR, "the frame is not UTF-8 and was dropped")
                }
                Err(e) => return Some((Err(e), (frames, out))),
            };
            out.frame(&answer);
        }
    })
    .boxed()
}

fn error_frame(id: Option<Value>, code: i64, message: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    })
    .to_string()
}

/// The top-level `"id"` of a JSON object (a number or a string), read from
/// `start`, a frame that may be cut anywhere: serde reads the object's keys
/// in order and stops at `id` or where the text ends.
fn top_level_id(start: &[u8]) -> Option<Value> {
    struct TopLevelId<'a>(&'a mut Option<Value>);

    impl<'de> DeserializeSeed<'de> for TopLevelId<'_> {
        type Value = ();

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for TopLevelId<'_> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON-RPC message")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == "id" {
                    *self.0 = Some(map.next_value()?);
                    return Ok(());
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }

    let mut found = None;
    let mut reader = serde_json::Deserializer::from_slice(start);
    // A cut frame ends in an error; what was read before it stands.
    let _ = TopLevelId(&mut found).deserialize(&mut reader);
    found
}

/// [`top_level_id`], when it is one a reply can carry: a number or a
/// string.
fn id_in(start: &[u8]) -> Option<Value> {
    top_level_id(start).filter(|id| id.is_number() || id.is_string())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::super::lock;
    use super::*;

    #[test]
    fn finds_the_top_level_id_of_a_cut_frame() {
        let cases: [(&str, Option<Value>); 6] = [
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"pad":"xxxx"#,
                Some(json!(7)),
            ),
            (
                r#"{"method":"x","params":{"id":1,"a":"b"},"id":"req-2","more"#,
                Some(json!("req-2")),
            ),
            (
                r#"{"params":{"text":"a \"id\": 3 inside"},"id":4,"#,
                Some(json!(4)),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"x","params":{"pad":"xxxxx"#,
                None,
            ),
            (r#"{"id":"unterminated"#, None),
            ("not json at all", None),
        ];
        for (start, expected) in cases {
            assert_eq!(id_in(start.as_bytes()), expected, "{start}");
        }
    }

    // Bad frames are answered through the reply and never reach the SDK;
    // good ones pass in order, blank lines are skipped.
    #[tokio::test]
    async fn bad_frames_are_answered_and_skipped() {
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"id\":1}\n\n");
        input.extend_from_slice(
            format!("{{\"id\":9,\"pad\":\"{}\"}}\n", "x".repeat(100)).as_bytes(),
        );
        input.extend_from_slice(b"\xff\xfe\n");
        input.extend_from_slice(b"{\"id\":2}\n");
        let (stdout, replies) = tokio::io::duplex(1 << 16);
        let out = Out::start(stdout, Bounds::default());
        // A live pipe, as stdin is: the input does not end with the data.
        let (mut writer, reader) = tokio::io::duplex(1 << 16);
        tokio::io::AsyncWriteExt::write_all(&mut writer, &input)
            .await
            .unwrap();
        let frames: Vec<String> = read_frames(reader, 32, out.clone())
            .take(2)
            .map(|f| f.unwrap())
            .collect()
            .await;
        drop(writer);
        assert_eq!(frames, ["{\"id\":1}", "{\"id\":2}"]);
        assert!(out.finish(Duration::from_secs(10)).await);
        drop(out);
        let replies: Vec<Value> = all_of(replies)
            .await
            .lines()
            .map(|r| serde_json::from_str(r).unwrap())
            .collect();
        let [too_big, not_utf8] = &replies[..] else {
            panic!("two replies, not {replies:?}");
        };
        assert_eq!(too_big["id"], 9);
        assert_eq!(too_big["error"]["code"], INVALID_REQUEST);
        assert!(
            too_big["error"]["message"]
                .as_str()
                .unwrap()
                .contains("over the 32-byte limit")
        );
        assert_eq!(not_utf8["id"], Value::Null);
        assert_eq!(not_utf8["error"]["code"], PARSE_ERROR);
    }

    /// Bounds small enough for a test to pass them in a few lines.
    const SMALL: Bounds = Bounds {
        max: 100,
        hard: 300,
        stall: Duration::from_secs(30),
    };

    /// Everything `reader` gives until it ends.
    async fn all_of(mut reader: tokio::io::DuplexStream) -> String {
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut reader, &mut text)
            .await
            .unwrap();
        text
    }

    // The SDK's frames and our notifications leave in the order they were
    // queued, each a line; a release waits for its response's frame (not
    // another's), and what it sends follows that frame.
    #[tokio::test]
    async fn order_is_kept_and_a_release_follows_its_response() {
        let (stdout, reader) = tokio::io::duplex(1 << 16);
        let out = Out::start(stdout, Bounds::default());
        let released = out.clone();
        out.after_response(json!("new-1"), move || {
            released.notify("{\"released\":true}\n".into());
        });
        out.notify("{\"n\":0}\n".into());
        out.frame(r#"{"jsonrpc":"2.0","id":"new-2","result":{}}"#);
        out.frame(r#"{"jsonrpc":"2.0","id":7,"result":{"x":"new-1"}}"#);
        out.notify("{\"n\":1}\n".into());
        out.frame(r#"{"jsonrpc":"2.0","id":"new-1","result":{}}"#);
        out.frame(r#"{"jsonrpc":"2.0","id":"new-1","result":{}}"#);
        assert!(out.finish(Duration::from_secs(10)).await);
        drop(out);
        let text = all_of(reader).await;
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "{\"n\":0}",
                r#"{"jsonrpc":"2.0","id":"new-2","result":{}}"#,
                r#"{"jsonrpc":"2.0","id":7,"result":{"x":"new-1"}}"#,
                "{\"n\":1}",
                r#"{"jsonrpc":"2.0","id":"new-1","result":{}}"#,
                "{\"released\":true}",
                r#"{"jsonrpc":"2.0","id":"new-1","result":{}}"#,
            ],
            "released once, right after its response"
        );
    }

    // A client that reads nothing: updates queue up to the bound and past
    // it until the stall bound has passed (or the hard bound is reached),
    // then are dropped; the SDK's frames are never dropped; once the
    // client reads again, everything queued arrives in order.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_reads_nothing_holds_a_bounded_queue() {
        let bounds = SMALL;
        // A pipe of 16 bytes: the writer's first write blocks at once.
        let (stdout, reader) = tokio::io::duplex(16);
        let out = Out::start(stdout, bounds);
        let line = |n: usize| format!("{{\"n\":{n:02},\"pad\":\"{}\"}}\n", "x".repeat(30));
        out.notify(line(0));
        // The writer takes line 0 and blocks writing it.
        tokio::task::yield_now().await;
        for n in 1..=4 {
            out.notify(line(n));
        }
        assert_eq!(
            lock(&out.queue).bytes.len(),
            4 * line(0).len(),
            "past the bound, not stalled yet"
        );
        tokio::time::advance(Duration::from_secs(31)).await;
        out.notify(line(5));
        out.frame("{\"id\":1,\"result\":{}}");
        // A loaded session's history is replayed whole.
        out.notify_always(&line(6));
        assert_eq!(lock(&out.queue).dropped, 1);
        // Below the stall bound, the hard bound drops too.
        let (fresh_stdout, _unread) = tokio::io::duplex(16);
        let fresh = Out::start(fresh_stdout, bounds);
        fresh.notify(line(0));
        tokio::task::yield_now().await;
        for n in 1..=9 {
            fresh.notify(line(n));
        }
        assert!(lock(&fresh.queue).bytes.len() <= 300);
        assert!(lock(&fresh.queue).dropped > 0);
        // Its end says so (and says it on stderr), even though its client
        // never read again.
        assert!(!fresh.finish(Duration::from_secs(1)).await);
        assert_eq!(lock(&fresh.queue).dropped, 0, "said at the end");
        // The client reads again: all that was queued, in order.
        let reading = tokio::spawn(all_of(reader));
        // Everything queued is written; the end still says one was dropped.
        assert!(!out.finish(Duration::from_secs(60)).await);
        drop(out);
        let text = reading.await.unwrap();
        let expected: String =
            (0..=4).map(line).collect::<String>() + "{\"id\":1,\"result\":{}}\n" + &line(6);
        assert_eq!(text, expected);
    }

    // A client that sends requests and reads none of their answers: once
    // the hard bound waits for it, its requests are no longer read, so
    // what waits stays within the bound and one answer; once it reads
    // again, the rest of its requests are read and every answer arrives,
    // in order.
    #[tokio::test]
    async fn a_client_that_reads_no_answers_is_not_read_either() {
        let bounds = SMALL;
        let (stdout, reader) = tokio::io::duplex(16);
        let out = Out::start(stdout, bounds);
        let (mut client, stdin) = tokio::io::duplex(1 << 16);
        let requests: String = (0..40).map(|n| format!("{{\"id\":{n}}}\n")).collect();
        AsyncWriteExt::write_all(&mut client, requests.as_bytes())
            .await
            .unwrap();
        let answer = |n: usize| format!("{{\"id\":{n:02},\"result\":\"{}\"}}", "x".repeat(80));
        // The SDK's part: each request read is answered at once.
        let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let sdk = {
            let (out, answered) = (out.clone(), answered.clone());
            tokio::spawn(async move {
                let mut frames = read_frames(stdin, 1024, out.clone());
                while let Some(Ok(_)) = frames.next().await {
                    let n = answered.fetch_add(1, Ordering::SeqCst);
                    out.frame(&answer(n));
                    if n == 39 {
                        break;
                    }
                }
            })
        };
        for _ in 0..1000 {
            tokio::task::yield_now().await;
        }
        let held = answered.load(Ordering::SeqCst);
        assert!(held < 10, "{held} requests read while nothing was");
        assert!(lock(&out.queue).bytes.len() < 300 + answer(0).len() + 1);
        // The client reads again.
        let reading = tokio::spawn(all_of(reader));
        sdk.await.unwrap();
        assert!(out.finish(Duration::from_secs(10)).await);
        drop(out);
        let expected: String = (0..40).map(|n| answer(n) + "\n").collect();
        assert_eq!(reading.await.unwrap(), expected);
    }

    // A release also waits for a null id; one whose response could not be
    // sent runs at once, and only once.
    #[tokio::test]
    async fn releases_for_null_ids_and_unsent_responses() {
        let (stdout, reader) = tokio::io::duplex(1 << 16);
        let out = Out::start(stdout, Bounds::default());
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for id in [json!(null), json!(5)] {
            let runs = runs.clone();
            out.after_response(id, move || {
                runs.fetch_add(1, Ordering::SeqCst);
            });
        }
        out.frame(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        out.release_now(&json!(5));
        out.release_now(&json!(5));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert!(lock(&out.after).is_empty(), "nothing is left waiting");
        assert!(out.finish(Duration::from_secs(10)).await);
        drop(out);
        assert_eq!(all_of(reader).await.lines().count(), 1);
    }

    // Once the client has closed stdout, the SDK's side fails, so its
    // connection ends (the client is gone), and the end says not all was
    // written.
    #[tokio::test]
    async fn a_closed_stdout_ends_the_sdks_side() {
        use futures::SinkExt;
        let (stdout, reader) = tokio::io::duplex(64);
        drop(reader);
        let out = Out::start(stdout, Bounds::default());
        let mut sdk = out.sdk();
        sdk.send("{\"id\":1,\"result\":{}}".to_owned())
            .await
            .unwrap();
        for _ in 0..10_000 {
            if out.broken() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(out.broken(), "the writer saw the closed pipe");
        let refused = sdk.send("{\"id\":2,\"result\":{}}".to_owned()).await;
        assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
        assert!(!out.finish(Duration::from_secs(10)).await);
    }
}
