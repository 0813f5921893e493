//! ACP's wire: one JSON-RPC message per line on stdin and on stdout.
//!
//! In: lines of stdin read with tokio-util's `LinesCodec`, at most the frame
//! cap each. A longer frame, or one that is not UTF-8, never reaches the
//! SDK: it is answered directly with a JSON-RPC error that says what was
//! wrong (the size and the limit), under the request's own id when the kept
//! start of the frame shows it (serde reads the top-level keys in order until
//! the frame is cut), else under `null` as JSON-RPC asks.
//!
//! Out: one writer task owns stdout, fed through a bounded queue; it writes
//! every line that is ready in one write, so a burst of updates costs one
//! syscall, and order is kept.
//!
//! Not here: what the messages mean (the SDK's job, and `serve`'s).

use std::fmt;
use std::io;

use futures::{Sink, SinkExt, Stream, StreamExt};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::PollSender;

/// Frames that may wait for the writer.
const OUTGOING_QUEUE: usize = 256;

/// Most bytes the writer gathers into one write.
const BATCH_BYTES: usize = 1 << 20;

/// JSON-RPC's "Invalid Request" code.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "Parse error" code.
const PARSE_ERROR: i64 = -32700;

/// The two halves of the wire, for the SDK: frames out, frames in; and the
/// writer task, which ends once both halves are dropped and every queued
/// frame is written (await it before exiting, or the last frames are lost).
pub(crate) fn stdio(
    max_frame: usize,
) -> (
    impl Sink<String, Error = io::Error> + Send + Unpin + 'static,
    impl Stream<Item = io::Result<String>> + Send + Unpin + 'static,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = mpsc::channel::<String>(OUTGOING_QUEUE);
    // When stdin and stdout are pipes (an editor spawned us), rmcp reopens
    // them as non-blocking pipes of our own, read and written by the
    // runtime's IO driver; tokio's own stdio would hand every read and write
    // to a blocking thread and back. A terminal or a file falls back to
    // tokio's stdio.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let writer = tokio::spawn(write_lines(stdout, rx));
    let outgoing = PollSender::new(tx.clone())
        .sink_map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed"));
    let incoming = read_frames(stdin, max_frame, tx);
    (outgoing, incoming, writer)
}

/// Writes each frame as a line, gathering whatever is queued into one write.
async fn write_lines(mut out: impl tokio::io::AsyncWrite + Unpin, mut rx: mpsc::Receiver<String>) {
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.clear();
        batch.extend_from_slice(first.as_bytes());
        batch.push(b'\n');
        while batch.len() < BATCH_BYTES {
            let Ok(next) = rx.try_recv() else { break };
            batch.extend_from_slice(next.as_bytes());
            batch.push(b'\n');
        }
        if out.write_all(&batch).await.is_err() || out.flush().await.is_err() {
            return;
        }
    }
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
/// bytes. Bad frames are answered on `replies` and skipped.
fn read_frames(
    input: impl tokio::io::AsyncRead + Send + Unpin + 'static,
    max: usize,
    replies: mpsc::Sender<String>,
) -> impl Stream<Item = io::Result<String>> + Send + Unpin + 'static {
    let frames = FramedRead::new(
        input,
        Frames {
            lines: LinesCodec::new_with_max_length(max),
            max,
        },
    );
    futures::stream::unfold((frames, replies), move |(mut frames, replies)| async move {
        loop {
            let answer = match frames.next().await? {
                Ok(Frame::Line(line)) if line.trim().is_empty() => continue,
                Ok(Frame::Line(line)) => return Some((Ok(line), (frames, replies))),
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
                Err(e) => return Some((Err(e), (frames, replies))),
            };
            if replies.send(answer).await.is_err() {
                return None;
            }
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
fn id_in(start: &[u8]) -> Option<Value> {
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
    found.filter(|id| id.is_number() || id.is_string())
}

#[cfg(test)]
mod tests {
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

    // Bad frames are answered on the reply queue and never reach the SDK;
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
        let (tx, mut rx) = mpsc::channel(8);
        // A live pipe, as stdin is: the input does not end with the data.
        let (mut writer, reader) = tokio::io::duplex(1 << 16);
        writer.write_all(&input).await.unwrap();
        let frames: Vec<String> = read_frames(reader, 32, tx)
            .take(2)
            .map(|f| f.unwrap())
            .collect()
            .await;
        drop(writer);
        assert_eq!(frames, ["{\"id\":1}", "{\"id\":2}"]);
        let too_big: Value = serde_json::from_str(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(too_big["id"], 9);
        assert_eq!(too_big["error"]["code"], INVALID_REQUEST);
        assert!(
            too_big["error"]["message"]
                .as_str()
                .unwrap()
                .contains("over the 32-byte limit")
        );
        let not_utf8: Value = serde_json::from_str(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(not_utf8["id"], Value::Null);
        assert_eq!(not_utf8["error"]["code"], PARSE_ERROR);
    }

    // Queued frames leave in order, each on a line of its own.
    #[tokio::test]
    async fn the_writer_keeps_order_and_lines() {
        let (tx, rx) = mpsc::channel(8);
        for n in 0..3 {
            tx.send(format!("{{\"n\":{n}}}")).await.unwrap();
        }
        drop(tx);
        let mut out = Vec::new();
        write_lines(&mut out, rx).await;
        assert_eq!(out, b"{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
    }
}
