//! What the HTTP providers share: one POST of JSON with retries, a deadline
//! per attempt, and a cap on the answer's size. An answer that comes whole
//! goes to the provider as bytes, which it decodes as its own wire type
//! (`super::wire::decode`); a streamed one (server-sent events, read by
//! `sse_stream`) goes to the provider's [`StreamDecoder`] event by event,
//! with an idle deadline between events, and its text reaches the caller as
//! it arrives.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use sse_stream::{Sse, SseStream};
use tokio::time::Instant;

use crate::model::{ModelError, ModelResponse, TextSink};

/// How a provider talks HTTP.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    /// Deadline of one attempt: of the whole answer when it comes at once;
    /// of the answer's head and first event when it streams.
    pub timeout: Duration,
    /// Attempts after the first, on 429, 5xx and transport errors (a streamed
    /// answer only while none of its text has reached the caller).
    pub retries: u32,
    /// Wait before the first retry; doubles after each.
    pub backoff: Duration,
    /// Largest answer read, in bytes (a streamed answer's bytes counted
    /// together).
    pub max_response_bytes: usize,
    /// Whether to ask for the answer as a stream of events, so its text
    /// arrives as the model writes it (on by default). A server that refuses
    /// is asked again for the whole answer, and the provider asks that one
    /// for whole answers from then on. Off, every answer comes at once.
    pub stream: bool,
    /// The longest wait between two events of a streamed answer.
    pub idle_timeout: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            timeout: Duration::from_secs(300),
            retries: 3,
            backoff: Duration::from_millis(500),
            max_response_bytes: 16 * 1024 * 1024,
            stream: true,
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// The longest wait a `Retry-After` header may ask for before we give up
/// instead of waiting.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The most [`retry_after`] returns. A server's number can be anything (1e300
/// ms, twenty digits of seconds, a date in the year 9999), so every longer
/// wait is clamped to this one, which is still "longer than we would wait":
/// the caller needs no more than that to give up, and no arithmetic or
/// `Duration` constructor ever sees the raw number.
const RETRY_AFTER_CLAMP: Duration = MAX_RETRY_AFTER.saturating_add(Duration::from_secs(1));

/// The retry rule of both paths: what may pass is tried again, up to
/// `retries` times, with backoff or the wait the server asked for.
#[derive(Debug, Default)]
struct Retries {
    attempt: u32,
    timed_out: bool,
}

impl Retries {
    /// How long to wait before trying again after `e`, or `None` to give up.
    fn wait(
        &mut self,
        e: &ModelError,
        retry_after: Option<Duration>,
        settings: &HttpSettings,
    ) -> Option<Duration> {
        // An attempt that ran out its deadline is tried once more at most: a
        // hung endpoint must not cost `retries` full deadlines.
        let timeout = matches!(e, ModelError::Timeout(_));
        let again = !(timeout && self.timed_out);
        self.timed_out |= timeout;
        // A server that asks for a longer wait than we would sit through
        // gets its error now rather than a retry that comes too early.
        if !(e.is_retryable()
            && self.attempt < settings.retries
            && again
            && retry_after.is_none_or(|wait| wait <= MAX_RETRY_AFTER))
        {
            return None;
        }
        // A kept-alive connection the server had closed as the request went
        // out (hyper's "connection closed before message completed"; seen
        // after llama-cpp-python ends a stream early) is no sign of trouble:
        // the first retry of it goes at once, on a new connection.
        if self.attempt == 0 && is_stale_connection(e) {
            tracing::debug!("model request met a closed kept-alive connection, retrying: {e}");
            self.attempt += 1;
            return Some(Duration::ZERO);
        }
        // Saturating: `retries` and `backoff` are settings, and a large pair
        // must not overflow into a panic.
        let wait = retry_after.unwrap_or_else(|| {
            settings
                .backoff
                .saturating_mul(2u32.saturating_pow(self.attempt))
        });
        // One short line: the whole body is in the error if the retries
        // run out.
        let said = e.to_string();
        let mut why: String = said
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        if why.len() < said.len() {
            why.push('…');
        }
        tracing::warn!(
            "model request failed (attempt {}), retrying in {} ms: {why}",
            self.attempt + 1,
            wait.as_millis()
        );
        self.attempt += 1;
        Some(wait)
    }
}

/// Whether `e` is a request that went out on a kept-alive connection the
/// server had just closed or reset: hyper says "connection closed before
/// message completed" (its `IncompleteMessage`) or passes on the reset, and
/// reqwest exposes no kind for either.
fn is_stale_connection(e: &ModelError) -> bool {
    let ModelError::Transport(text) = e else {
        return false;
    };
    let text = text.to_ascii_lowercase();
    text.contains("connection closed before message completed") || text.contains("connection reset")
}

fn encode(body: &impl serde::Serialize) -> Result<Vec<u8>, ModelError> {
    serde_json::to_vec(body).map_err(ModelError::Encode)
}

/// POSTs `body` as JSON to `url` and returns the successful answer's bytes,
/// retrying what may pass.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &impl serde::Serialize,
    settings: &HttpSettings,
) -> Result<Vec<u8>, ModelError> {
    let body = encode(body)?;
    let mut retries = Retries::default();
    loop {
        let (result, retry_after) =
            attempt_once(client, url, headers.clone(), body.clone(), settings).await;
        match result {
            Err(e) => match retries.wait(&e, retry_after, settings) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Err(e),
            },
            ok => return ok,
        }
    }
}

async fn attempt_once(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: Vec<u8>,
    settings: &HttpSettings,
) -> (Result<Vec<u8>, ModelError>, Option<Duration>) {
    let sent = client
        .post(url)
        .headers(headers)
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .timeout(settings.timeout)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => return (Err(reqwest_error(&e, ModelError::Transport)), None),
    };
    let status = response.status();
    let retry_after = retry_after(response.headers(), SystemTime::now());
    let bytes = match read_capped(response, settings.max_response_bytes).await {
        Ok(bytes) => bytes,
        Err(e) => return (Err(e), None),
    };
    if !status.is_success() {
        return (Err(status_error(status.as_u16(), &bytes, url)), retry_after);
    }
    (Ok(bytes), None)
}

/// The whole body, or an error once it passes `max` bytes.
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, ModelError> {
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len().saturating_add(chunk.len()) > max {
                    return Err(ModelError::TooLarge { max });
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(bytes),
            Err(e) => return Err(reqwest_error(&e, ModelError::Interrupted)),
        }
    }
}

/// An error status with the start of its body: a context overflow when
/// the body says so \[V3\]. A 404 names the URL asked (its query left
/// out), and says when the base URL may lack the `/v1` that
/// OpenAI-compatible servers serve their API under.
fn status_error(status: u16, bytes: &[u8], url: &str) -> ModelError {
    let text = String::from_utf8_lossy(bytes);
    let mut body: String = text.chars().take(EXCERPT_CHARS).collect();
    if status == 404 {
        let asked = url.split(['?', '#']).next().unwrap_or_default();
        body.push_str(&format!(" (no such path: {asked}"));
        if !asked.contains("/v1/") {
            body.push_str("; OpenAI-compatible servers serve their API under /v1, so the base URL may need to end in /v1");
        }
        body.push(')');
    }
    status_with(status, body)
}

/// The error for an error `status` whose body (or error event) says
/// `body`: [`ModelError::ContextOverflow`] when it says the request is too
/// long for the model \[V3\], else [`ModelError::Status`].
pub(crate) fn status_with(status: u16, body: String) -> ModelError {
    if says_too_long(status, &body) {
        ModelError::ContextOverflow { status, body }
    } else {
        ModelError::Status { status, body }
    }
}

/// Whether an error answer says the request does not fit the model's
/// context window. The APIs agree on no code: OpenAI and vLLM say
/// `context_length_exceeded` / "maximum context length", Anthropic "prompt
/// is too long", llama-cpp-python "exceed context window", llama.cpp's own
/// server "exceeds the available context size", and others "context
/// length" or "too many tokens". Only a 4xx that is not about the key, the
/// path or the rate counts, so a server that is down is never "too long".
fn says_too_long(status: u16, body: &str) -> bool {
    const PHRASES: [&str; 9] = [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "context size",
        "prompt is too long",
        "too many tokens",
        "input is too long",
        "exceed_context_size",
    ];
    let body = body.to_ascii_lowercase();
    (400..500).contains(&status)
        && !matches!(status, 401 | 403 | 404 | 408 | 429)
        && PHRASES.iter().any(|phrase| body.contains(phrase))
}

/// What a provider does with the events of one streamed answer.
pub(crate) trait StreamDecoder: Default + Send {
    /// Reads one event; `on_text` gets each piece of text it carries. An
    /// error in what the event says is [`ModelError::Malformed`] (the
    /// caller adds which event it was), or what an error event reported.
    fn event(&mut self, event: Sse, on_text: &mut dyn FnMut(&str)) -> Result<Flow, ModelError>;

    /// The answer once the stream has ended, `at_end` telling whether it
    /// ended with its end marker ([`Flow::Done`]) or just stopped; or what
    /// it lacks. A stream cut before the answer's end is an error, never a
    /// shorter answer.
    fn finish(self, at_end: bool) -> Result<ModelResponse, ModelError>;

    /// Reads an answer that came whole.
    fn whole(body: &[u8]) -> Result<ModelResponse, ModelError>;
}

/// Whether a stream goes on after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    /// More events are to come.
    More,
    /// That was the stream's end marker.
    Done,
}

/// Where and how a provider asks.
#[derive(Debug)]
pub(crate) struct Endpoint<'a> {
    pub(crate) client: &'a reqwest::Client,
    pub(crate) url: &'a str,
    pub(crate) headers: HeaderMap,
    pub(crate) settings: &'a HttpSettings,
    /// Set once the server refused a stream: later requests go whole.
    pub(crate) refused: &'a AtomicBool,
}

/// Asks for an answer: as a stream (`streamed`, the request with its
/// streaming fields) if the settings say so and the server has not refused
/// one, else whole (`whole`). Each piece of a streamed answer's text goes to
/// `on_text` as it arrives; the answer is the one `D::whole` reads from the
/// same answer sent whole.
///
/// Retries follow [`post_json`]'s rule, but a streamed attempt that failed
/// after any of its text reached `on_text` is never tried again: the person
/// has seen that text. Without `on_text` (nobody sees the pieces: a
/// summary request), a stream cut midway is retried like any other failure.
/// A server that refuses the stream (a 4xx that names streaming, see
/// [`refuses_streaming`]) is asked once more for the whole answer; an answer
/// that is not an event stream is read as a whole one.
pub(crate) async fn ask<D: StreamDecoder>(
    endpoint: &Endpoint<'_>,
    streamed: &(impl serde::Serialize + Sync),
    whole: &(impl serde::Serialize + Sync),
    on_text: Option<&TextSink<'_>>,
) -> Result<ModelResponse, ModelError> {
    let seen = on_text.is_some();
    let on_text: &TextSink<'_> = on_text.unwrap_or(&|_| {});
    let Endpoint {
        client,
        url,
        settings,
        ..
    } = *endpoint;
    let ask_whole = || async {
        let bytes = post_json(client, url, endpoint.headers.clone(), whole, settings).await?;
        D::whole(&bytes)
    };
    if !settings.stream || endpoint.refused.load(Ordering::Relaxed) {
        return ask_whole().await;
    }
    let body = encode(streamed)?;
    let mut retries = Retries::default();
    let mut progress = Progress::default();
    loop {
        let (result, retry_after) =
            stream_once::<D>(endpoint, body.clone(), on_text, &mut progress).await;
        let e = match result {
            Ok(answer) => return Ok(answer),
            Err(e) => e,
        };
        // What llama-cpp-python sends when the model picks a tool while
        // streaming: a 200 whose stream ends with no answer in it. The
        // same request asked whole works, so that is what is asked now.
        if progress.ended_incomplete && !progress.delivered {
            tracing::info!(
                "the model API's event stream ended with no whole answer in it ({e}); asking for the whole answer"
            );
            return ask_whole().await;
        }
        if let ModelError::Status { status, body } = &e
            && refuses_streaming(*status, body)
        {
            tracing::info!("the model API refused to stream ({e}); asking for the whole answer");
            let answer = ask_whole().await?;
            endpoint.refused.store(true, Ordering::Relaxed);
            return Ok(answer);
        }
        if progress.delivered && seen {
            return Err(e);
        }
        progress = Progress::default();
        match retries.wait(&e, retry_after, settings) {
            Some(wait) => tokio::time::sleep(wait).await,
            None => return Err(e),
        }
    }
}

/// Whether an error status says the server does not stream: a 4xx (but
/// not one about the key, the path, the clock or the rate) whose body
/// names streaming (`stream`, `stream_options`) together with a word of
/// refusal ("not supported", "unrecognized", "extra inputs are not
/// permitted", …). Guessed from the text, since the APIs have no code for
/// it; a wrong guess costs one request without streaming.
fn refuses_streaming(status: u16, body: &str) -> bool {
    const REFUSALS: [&str; 10] = [
        "support",
        "allowed",
        "available",
        "disabled",
        "enabled",
        "unrecognized",
        "unknown",
        "implemented",
        "permitted",
        "extra",
    ];
    let body = body.to_ascii_lowercase();
    (400..500).contains(&status)
        && !matches!(status, 401 | 403 | 404 | 408 | 429)
        && body.contains("stream")
        && REFUSALS.iter().any(|word| body.contains(word))
}

/// `now + wait`, or a far deadline when that does not fit an `Instant`.
fn deadline_after(wait: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

/// A body error of the stream, carried through `sse_stream` to be ours again.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ReadError(pub(crate) ModelError);

/// How far one streamed attempt got.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Some of the answer's text reached `on_text`.
    pub(crate) delivered: bool,
    /// The stream ended (closed, or sent its end marker) without a whole
    /// answer in it.
    pub(crate) ended_incomplete: bool,
}

/// One attempt at a streamed answer, recording in `progress` how far it
/// got.
async fn stream_once<D: StreamDecoder>(
    endpoint: &Endpoint<'_>,
    body: Vec<u8>,
    on_text: &TextSink<'_>,
    progress: &mut Progress,
) -> (Result<ModelResponse, ModelError>, Option<Duration>) {
    let settings = endpoint.settings;
    // The head and the first event come within the attempt's deadline, as a
    // whole answer would: the server may think long before it writes.
    let first = deadline_after(settings.timeout);
    let no_answer = || {
        ModelError::Timeout(format!(
            "no answer within the deadline of {} ms",
            settings.timeout.as_millis()
        ))
    };
    let sent = endpoint
        .client
        .post(endpoint.url)
        .headers(endpoint.headers.clone())
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .send();
    let response = match tokio::time::timeout_at(first, sent).await {
        Err(_) => return (Err(no_answer()), None),
        Ok(Err(e)) => return (Err(reqwest_error(&e, ModelError::Transport)), None),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let max = settings.max_response_bytes;
    let event_stream = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
    if !status.is_success() || !event_stream {
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let bytes = match tokio::time::timeout_at(first, read_capped(response, max)).await {
            Err(_) => return (Err(no_answer()), None),
            Ok(Err(e)) => return (Err(e), None),
            Ok(Ok(bytes)) => bytes,
        };
        if !status.is_success() {
            return (
                Err(status_error(status.as_u16(), &bytes, endpoint.url)),
                retry_after,
            );
        }
        // A server that answers a streaming request at once.
        return (D::whole(&bytes), None);
    }
    // The body's bytes, counted against the cap before the parser buffers
    // them: one endless line must not grow without bound.
    let chunks = futures::stream::unfold(Some((response, 0usize)), move |state| async move {
        let (mut response, total) = state?;
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let total = total.saturating_add(chunk.len());
                if total > max {
                    return Some((Err(ReadError(ModelError::TooLarge { max })), None));
                }
                Some((Ok(chunk), Some((response, total))))
            }
            Ok(None) => None,
            Err(e) => Some((
                Err(ReadError(reqwest_error(&e, ModelError::Interrupted))),
                None,
            )),
        }
    });
    let answer = read_events::<D, _, _>(chunks, first, settings, on_text, progress).await;
    (answer, None)
}

/// Reads a stream's events from its body's `chunks` with `D`: the first
/// by `first`, each next within the idle deadline.
pub(crate) async fn read_events<D, S, B>(
    chunks: S,
    first: Instant,
    settings: &HttpSettings,
    on_text: &TextSink<'_>,
    progress: &mut Progress,
) -> Result<ModelResponse, ModelError>
where
    D: StreamDecoder,
    S: futures::Stream<Item = Result<B, ReadError>>,
    B: bytes::Buf,
{
    let mut events = pin!(SseStream::from_bytes_stream(chunks));
    let mut decoder = D::default();
    let mut deadline = first;
    let mut count = 0usize;
    loop {
        let next = match tokio::time::timeout_at(deadline, events.next()).await {
            Err(_) if count == 0 => {
                return Err(ModelError::Timeout(format!(
                    "no answer within the deadline of {} ms",
                    settings.timeout.as_millis()
                )));
            }
            Err(_) => {
                return Err(ModelError::Timeout(format!(
                    "the stream stalled: no event within the idle deadline of {} ms",
                    settings.idle_timeout.as_millis()
                )));
            }
            Ok(next) => next,
        };
        let event = match next {
            None => {
                let answer = decoder.finish(false);
                progress.ended_incomplete = answer.is_err();
                return answer;
            }
            Some(Ok(event)) => event,
            Some(Err(sse_stream::Error::Body(e))) => {
                return Err(match e.downcast::<ReadError>() {
                    Ok(e) => e.0,
                    Err(e) => ModelError::Transport(e.to_string()),
                });
            }
            Some(Err(e)) => {
                let e = format!("the event stream broke the SSE format: {e}");
                return Err(ModelError::Malformed(e));
            }
        };
        count += 1;
        deadline = deadline_after(settings.idle_timeout);
        let mut deliver = |text: &str| {
            if !text.is_empty() {
                progress.delivered = true;
                on_text(text);
            }
        };
        match decoder.event(event, &mut deliver) {
            Ok(Flow::More) => {}
            Ok(Flow::Done) => {
                let answer = decoder.finish(true);
                progress.ended_incomplete = answer.is_err();
                return answer;
            }
            Err(ModelError::Malformed(e)) => {
                return Err(ModelError::Malformed(format!("stream event {count}: {e}")));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Reads `text`, an event stream, with `D`, its bytes cut at `cuts` (byte
/// offsets, ascending) as a server's writes might cut them; with the pieces
/// of text it delivered.
#[cfg(test)]
pub(crate) async fn read_cut<D: StreamDecoder>(
    text: &str,
    cuts: &[usize],
) -> (Result<ModelResponse, ModelError>, Vec<String>) {
    let raw = text.as_bytes();
    let mut chunks = Vec::new();
    let mut from = 0;
    for &cut in cuts {
        chunks.push(raw[from..cut].to_vec());
        from = cut;
    }
    chunks.push(raw[from..].to_vec());
    let pieces = std::sync::Mutex::new(Vec::new());
    let on_text = |text: &str| pieces.lock().unwrap().push(text.to_owned());
    let chunks = futures::stream::iter(
        chunks
            .into_iter()
            .map(|chunk| Ok::<_, ReadError>(bytes::Bytes::from(chunk))),
    );
    let settings = HttpSettings::default();
    let first = deadline_after(settings.timeout);
    let mut progress = Progress::default();
    let answer = read_events::<D, _, _>(chunks, first, &settings, &on_text, &mut progress).await;
    assert_eq!(progress.delivered, !pieces.lock().unwrap().is_empty());
    (answer, pieces.into_inner().unwrap())
}

/// Checks that `text`, an event stream, reads as `whole` wherever the
/// server's writes cut it (at every byte, once, and at all bytes), and that
/// the pieces delivered make its text: `pieces` when every byte came alone.
#[cfg(test)]
pub(crate) async fn assert_reads_whole_wherever_cut<D: StreamDecoder>(
    text: &str,
    whole: &ModelResponse,
    pieces: &[&str],
) {
    for cut in 0..=text.len() {
        let (answer, delivered) = read_cut::<D>(text, &[cut]).await;
        assert_eq!(
            answer.as_ref().ok(),
            Some(whole),
            "cut at {cut}: {answer:?}"
        );
        assert_eq!(delivered.concat(), whole.text, "cut at {cut}");
    }
    let every_byte: Vec<usize> = (1..text.len()).collect();
    let (answer, delivered) = read_cut::<D>(text, &every_byte).await;
    assert_eq!(answer.as_ref().ok(), Some(whole), "{answer:?}");
    assert_eq!(delivered, pieces);
}

/// The error a stream's end reports when the answer was not whole: the
/// server was reached, and closed early.
pub(crate) fn cut_short(what: &str) -> ModelError {
    ModelError::Interrupted(format!(
        "the stream ended before the answer was complete ({what})"
    ))
}

/// The HTTP client for an endpoint at `base_url`. A plain `http://`
/// endpoint (a model server on this machine or the LAN) gets a client
/// without the platform's TLS roots: loading and parsing that store costs
/// milliseconds at every start, for a connection that never does TLS. Any
/// other URL gets the platform's verifier.
pub(crate) fn client(base_url: &str) -> reqwest::Client {
    let is_https = |url: &str| {
        url.get(..8)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
    };
    let plain = base_url
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
        // A proxy reached over TLS needs the roots after all.
        && !["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .any(|name| std::env::var(name).is_ok_and(|v| is_https(&v)));
    let builder = reqwest::Client::builder();
    let builder = if plain {
        // Without roots, a redirect to https could only fail with a TLS
        // error; say what to do instead.
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            if attempt.url().scheme() == "https" {
                attempt.error(
                    "the endpoint redirected to https: give its https:// URL as the base URL",
                )
            } else if attempt.previous().len() >= 10 {
                attempt.error("more than 10 redirects")
            } else {
                attempt.follow()
            }
        });
        builder.tls_certs_only([]).redirect(redirects)
    } else {
        builder
    };
    // Building fails only without a usable TLS backend, which the default
    // client would meet the same way.
    builder.build().unwrap_or_default()
}

/// The wait a response asks for: `retry-after-ms` (a number of milliseconds,
/// possibly fractional), or `Retry-After` as whole seconds or as an HTTP date
/// (a date in the past asks for no wait). `now` reads the date form.
///
/// Every value comes from the network, so none is trusted: a wait longer than
/// [`RETRY_AFTER_CLAMP`] (huge numbers, infinity, far dates) is returned as
/// that clamp, and a value that is no number or date (negative, NaN, text,
/// bytes that are not ASCII) is ignored as if the header were absent. Never
/// panics; never returns more than the clamp.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    // f64 parsing accepts "1e300", "inf" and "NaN"; NaN and negatives are
    // garbage, and +inf is clamped like any other wait too long.
    if let Some(ms) = text("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|ms| *ms >= 0.0)
    {
        // Clamping the float first keeps the conversion in range; the
        // fallback only matters if that reasoning were ever wrong.
        let clamp_ms = RETRY_AFTER_CLAMP.as_secs_f64() * 1000.0;
        return Some(
            Duration::try_from_secs_f64(ms.min(clamp_ms) / 1000.0)
                .map_or(RETRY_AFTER_CLAMP, |wait| wait.min(RETRY_AFTER_CLAMP)),
        );
    }
    let value = text(RETRY_AFTER.as_str())?;
    // The seconds form is `1*DIGIT` (RFC 9110); more digits than a u64 holds
    // is still a number of seconds, and far too long.
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        let wait = value
            .parse::<u64>()
            .map_or(RETRY_AFTER_CLAMP, Duration::from_secs);
        return Some(wait.min(RETRY_AFTER_CLAMP));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(now)
            .map_or(Duration::ZERO, |wait| wait.min(RETRY_AFTER_CLAMP)),
    )
}

/// A reqwest error as ours, with the causes, which name the real problem:
/// a timeout is [`ModelError::Timeout`], anything else `otherwise`
/// ([`ModelError::Transport`] before an answer came,
/// [`ModelError::Interrupted`] while its body was read).
fn reqwest_error(e: &reqwest::Error, otherwise: fn(String) -> ModelError) -> ModelError {
    let text = with_causes(e);
    if e.is_timeout() {
        ModelError::Timeout(text)
    } else {
        otherwise(text)
    }
}

/// `e` and each of its causes, joined by `: `.
fn with_causes(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Why a URL cannot be a provider's base URL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BaseUrlError {
    /// It does not parse.
    #[error("not a URL ({0})")]
    Invalid(String),
    /// Its scheme is neither `http` nor `https`.
    #[error("the scheme is {0:?}, not http or https")]
    Scheme(String),
    /// It names no host.
    #[error("it names no host")]
    NoHost,
    /// It has a query or a fragment.
    #[error("it has a query or fragment, to which no path can be appended")]
    QueryOrFragment,
}

/// Why `url` cannot be a provider's base URL, if it cannot: it must parse,
/// be `http` or `https`, name a host, and carry no query or fragment (the
/// providers append their path to it as text).
pub fn check_base_url(url: &str) -> Result<(), BaseUrlError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| BaseUrlError::Invalid(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(BaseUrlError::Scheme(parsed.scheme().to_owned()));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(BaseUrlError::NoHost);
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(BaseUrlError::QueryOrFragment);
    }
    Ok(())
}

/// How many characters of a server's text an error message quotes.
const EXCERPT_CHARS: usize = 500;

/// The start of a JSON value from the server, for an error message: the
/// answer may be megabytes, and an error quoting all of it would carry them
/// into every log line and event.
pub(crate) fn excerpt(value: &serde_json::Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((end, _)) => format!("{}… ({} bytes in all)", &text[..end], text.len()),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use reqwest::header::HeaderValue;

    // A request that met a kept-alive connection the server had closed is
    // tried again at once, the first time only; a refused connection (a
    // server that is down) waits its backoff as before.
    #[test]
    fn a_closed_kept_alive_connection_is_retried_at_once_once() {
        let settings = HttpSettings::default();
        let stale = ModelError::Transport(
            "error sending request: client error (SendRequest): connection closed before message completed".into(),
        );
        let mut retries = Retries::default();
        assert_eq!(retries.wait(&stale, None, &settings), Some(Duration::ZERO));
        assert_eq!(
            retries.wait(&stale, None, &settings),
            Some(settings.backoff.saturating_mul(2))
        );
        let refused = ModelError::Transport("tcp connect error: Connection refused".into());
        let mut retries = Retries::default();
        assert_eq!(
            retries.wait(&refused, None, &settings),
            Some(settings.backoff)
        );
        let reset = ModelError::Transport("connection error: Connection reset by peer".into());
        assert_eq!(
            Retries::default().wait(&reset, None, &settings),
            Some(Duration::ZERO)
        );
    }

    /// A fixed "now" for the date form: 2024-01-01T00:00:00Z.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_704_067_200)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn wait(pairs: &[(&'static str, &str)]) -> Option<Duration> {
        retry_after(&headers(pairs), now())
    }

    #[test]
    fn milliseconds_are_read_and_clamped() {
        let ms = |v: &str| wait(&[("retry-after-ms", v)]);
        assert_eq!(ms("1500"), Some(Duration::from_millis(1500)));
        assert_eq!(ms(" 0.5 "), Some(Duration::from_micros(500)));
        assert_eq!(ms("0"), Some(Duration::ZERO));
        assert_eq!(ms("-0"), Some(Duration::ZERO));
        // This one made `sprout run` panic in Duration::from_secs_f64.
        assert_eq!(ms("1e300"), Some(RETRY_AFTER_CLAMP));
        assert_eq!(ms("1.8e19"), Some(RETRY_AFTER_CLAMP));
        assert_eq!(ms("inf"), Some(RETRY_AFTER_CLAMP));
        assert_eq!(ms("600000"), Some(RETRY_AFTER_CLAMP));
        for garbage in ["-1", "NaN", "-inf", "soon", "", "0x10"] {
            assert_eq!(ms(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn milliseconds_win_and_garbage_falls_back_to_retry_after() {
        let both = |ms: &str, s: &str| wait(&[("retry-after-ms", ms), ("retry-after", s)]);
        assert_eq!(both("250", "30"), Some(Duration::from_millis(250)));
        assert_eq!(both("NaN", "30"), Some(Duration::from_secs(30)));
        assert_eq!(both("-5", "garbage"), None);
    }

    #[test]
    fn seconds_are_read_and_clamped() {
        let s = |v: &str| wait(&[("retry-after", v)]);
        assert_eq!(s("7"), Some(Duration::from_secs(7)));
        assert_eq!(s("0"), Some(Duration::ZERO));
        assert_eq!(s("60"), Some(MAX_RETRY_AFTER));
        assert_eq!(s("3600"), Some(RETRY_AFTER_CLAMP));
        assert_eq!(s(&u64::MAX.to_string()), Some(RETRY_AFTER_CLAMP));
        // More digits than a u64 holds: still a number, still too long.
        assert_eq!(s("99999999999999999999"), Some(RETRY_AFTER_CLAMP));
        assert_eq!(s(&"9".repeat(4000)), Some(RETRY_AFTER_CLAMP));
        // Not `1*DIGIT`: neither seconds nor a date.
        for garbage in ["1.5", "-1", "+5", "1e3", "NaN", "inf", "", "soon"] {
            assert_eq!(s(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn dates_are_read_against_now_and_clamped() {
        let s = |v: &str| wait(&[("retry-after", v)]);
        let at = |secs: u64| httpdate::fmt_http_date(now() + Duration::from_secs(secs));
        assert_eq!(s(&at(30)), Some(Duration::from_secs(30)));
        assert_eq!(s(&at(7200)), Some(RETRY_AFTER_CLAMP));
        assert_eq!(s("Fri, 31 Dec 9999 23:59:59 GMT"), Some(RETRY_AFTER_CLAMP));
        // A date in the past asks for no wait.
        assert_eq!(s("Thu, 01 Jan 1970 00:00:00 GMT"), Some(Duration::ZERO));
        assert_eq!(s(&httpdate::fmt_http_date(now())), Some(Duration::ZERO));
        assert_eq!(s("Mon, 32 Foo 2024 99:99:99 GMT"), None);
    }

    #[test]
    fn base_urls_are_checked() {
        for good in [
            "https://api.openai.com/v1",
            "http://localhost:11434/v1/",
            "http://127.0.0.1:8080",
            "http://[::1]:8080/v1",
        ] {
            assert_eq!(check_base_url(good), Ok(()), "{good}");
        }
        let bad = |url: &str| check_base_url(url).unwrap_err().to_string();
        assert!(bad("").starts_with("not a URL"), "{}", bad(""));
        assert!(
            bad("localhost:11434").contains("scheme"),
            "{}",
            bad("localhost:11434")
        );
        assert!(bad("api.openai.com/v1").starts_with("not a URL"));
        assert!(bad("ftp://example.com").contains("\"ftp\""));
        assert!(bad("file:///etc/passwd").contains("\"file\""));
        assert!(
            bad("http://").starts_with("not a URL"),
            "{}",
            bad("http://")
        );
        assert!(
            bad("http://:80/v1").starts_with("not a URL"),
            "{}",
            bad("http://:80/v1")
        );
        assert!(bad("https://exa mple.com").starts_with("not a URL"));
        assert!(bad("http://h/v1?key=x").contains("query"));
        assert!(bad("http://h/v1#top").contains("fragment"));
    }

    // Cut at a char boundary (a byte index into multi-byte text would panic)
    // and short whatever the value's size.
    #[test]
    fn excerpts_are_short_and_cut_between_chars() {
        let small = serde_json::json!({"a": 1});
        assert_eq!(excerpt(&small), r#"{"a":1}"#);
        let big = serde_json::Value::String("é".repeat(100_000));
        let cut = excerpt(&big);
        assert!(cut.starts_with("\"é"), "{cut}");
        assert!(cut.ends_with("… (200002 bytes in all)"), "{cut}");
        assert_eq!(cut.chars().filter(|c| *c == 'é').count(), EXCERPT_CHARS - 1);
    }

    #[test]
    fn no_header_or_non_ascii_bytes_ask_for_nothing() {
        assert_eq!(wait(&[]), None);
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_bytes(b"\xff\xfe 12").unwrap(),
        );
        h.insert("retry-after-ms", HeaderValue::from_bytes(b"1\xe9").unwrap());
        assert_eq!(retry_after(&h, now()), None);
    }

    /// Any header value a server can send: bytes a `HeaderValue` accepts,
    /// numbers of every magnitude and sign as text, and dates.
    fn header_value() -> impl Strategy<Value = HeaderValue> {
        let text = prop_oneof![
            any::<f64>().prop_map(|f| f.to_string()),
            any::<f64>().prop_map(|f| format!("{f:e}")),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u128>().prop_map(|n| n.to_string()),
            "[0-9]{1,60}",
            "[-+]?[0-9]{0,30}(\\.[0-9]{0,30})?([eE][-+]?[0-9]{1,4})?",
            Just("inf".to_owned()),
            Just("-inf".to_owned()),
            Just("NaN".to_owned()),
            (0u64..=253_402_300_799).prop_map(|secs| httpdate::fmt_http_date(
                SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
            )),
            "\\PC{0,40}",
        ]
        .prop_filter_map("not a header value", |t| HeaderValue::from_str(&t).ok());
        let bytes = proptest::collection::vec(any::<u8>(), 0..40)
            .prop_filter_map("not a header value", |b| HeaderValue::from_bytes(&b).ok());
        prop_oneof![3 => text, 1 => bytes]
    }

    proptest! {
        // Whatever a server puts in `retry-after-ms` and `Retry-After`, and
        // whatever the clock says, reading the wait never panics, and a wait
        // it returns is at most RETRY_AFTER_CLAMP: no server can make the
        // agent sleep for longer than it would choose to, or crash it with a
        // number that does not fit a Duration.
        #[test]
        fn any_header_reads_without_panic_and_within_the_clamp(
            ms in proptest::option::of(header_value()),
            seconds in proptest::option::of(header_value()),
            now_secs in 0u64..=253_402_300_799,
        ) {
            let mut headers = HeaderMap::new();
            if let Some(ms) = ms {
                headers.insert("retry-after-ms", ms);
            }
            if let Some(seconds) = seconds {
                headers.insert(RETRY_AFTER, seconds);
            }
            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(now_secs);
            if let Some(wait) = retry_after(&headers, now) {
                prop_assert!(wait <= RETRY_AFTER_CLAMP, "{wait:?} from {headers:?}");
            }
        }
    }
}
