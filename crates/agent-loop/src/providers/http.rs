//! What the HTTP providers share: one POST of JSON with retries, a deadline
//! per attempt, and a cap on the answer's size.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};

use crate::model::ModelError;

/// How a provider talks HTTP.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    /// Deadline of one attempt.
    pub timeout: Duration,
    /// Attempts after the first, on 429, 5xx and transport errors.
    pub retries: u32,
    /// Wait before the first retry; doubles after each.
    pub backoff: Duration,
    /// Largest answer read, in bytes.
    pub max_response_bytes: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            timeout: Duration::from_secs(300),
            retries: 3,
            backoff: Duration::from_millis(500),
            max_response_bytes: 16 * 1024 * 1024,
        }
    }
}

/// The longest wait a `Retry-After` header may ask for before we give up
/// instead of waiting.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// POSTs `body` to `url` and parses the JSON answer, retrying what may pass.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &serde_json::Value,
    settings: &HttpSettings,
) -> Result<serde_json::Value, ModelError> {
    let body = serde_json::to_vec(body)
        .map_err(|e| ModelError::Malformed(format!("cannot encode the request: {e}")))?;
    let mut attempt = 0;
    let mut timed_out = false;
    loop {
        let (result, retry_after) =
            attempt_once(client, url, headers.clone(), body.clone(), settings).await;
        // An attempt that ran out its whole deadline is tried once more at
        // most: a hung endpoint must not cost `retries` full deadlines.
        let timeout = matches!(&result, Err(ModelError::Transport(e)) if e.ends_with(TIMED_OUT));
        let again = !(timeout && timed_out);
        timed_out |= timeout;
        match result {
            // A server that asks for a longer wait than we would sit through
            // gets its error now rather than a retry that comes too early.
            Err(e)
                if e.is_retryable()
                    && attempt < settings.retries
                    && again
                    && retry_after.is_none_or(|wait| wait <= MAX_RETRY_AFTER) =>
            {
                let wait = retry_after.unwrap_or(settings.backoff * 2u32.saturating_pow(attempt));
                tracing::warn!(
                    attempt = attempt + 1,
                    "model request failed, retrying in {wait:?}: {e}"
                );
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn attempt_once(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: Vec<u8>,
    settings: &HttpSettings,
) -> (Result<serde_json::Value, ModelError>, Option<Duration>) {
    let sent = client
        .post(url)
        .headers(headers)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .timeout(settings.timeout)
        .send()
        .await;
    let mut response = match sent {
        Ok(response) => response,
        Err(e) => return (Err(ModelError::Transport(describe(&e))), None),
    };
    let status = response.status();
    let retry_after = retry_after(response.headers());
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > settings.max_response_bytes {
                    let e = format!(
                        "the answer is larger than {} bytes",
                        settings.max_response_bytes
                    );
                    return (Err(ModelError::Malformed(e)), None);
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return (Err(ModelError::Transport(describe(&e))), None),
        }
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes);
        let body: String = text.chars().take(500).collect();
        return (
            Err(ModelError::Status {
                status: status.as_u16(),
                body,
            }),
            retry_after,
        );
    }
    match serde_json::from_slice(&bytes) {
        Ok(value) => (Ok(value), None),
        Err(e) => {
            let start: String = String::from_utf8_lossy(&bytes).chars().take(120).collect();
            (
                Err(ModelError::Malformed(format!(
                    "the body is not JSON ({e}): {start:?}"
                ))),
                None,
            )
        }
    }
}

/// The wait a response asks for: `retry-after-ms`, or `Retry-After` as
/// seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// How a transport error that was a timeout ends.
const TIMED_OUT: &str = " (the request timed out)";

/// A reqwest error with its causes, which name the real problem.
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if e.is_timeout() {
        text.push_str(TIMED_OUT);
    }
    text
}

/// Fetches `obj[key]` as a string, or says it was missing.
pub(crate) fn field_str<'a>(
    value: &'a serde_json::Value,
    key: &str,
    at: &str,
) -> Result<&'a str, ModelError> {
    value
        .get(key)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| ModelError::Malformed(format!("{at}.{key} is missing or not a string")))
}
