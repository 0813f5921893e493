//! The model boundary: [`Model`], its request and response, and its errors.

use async_trait::async_trait;
use hooks_core::StopReason;

use crate::gateway::ToolDef;
use crate::message::{Message, ToolCall};

/// One request to the model.
#[derive(Clone, Copy, Debug)]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The history.
    pub messages: &'a [Message],
    /// Tools the model may call; never a hook \[H2\].
    pub tools: &'a [ToolDef],
}

/// Where a streaming model sends each piece of text as it arrives
/// ([`Model::complete_streaming`]).
pub type TextSink<'a> = dyn Fn(&str) + Send + Sync + 'a;

/// Token counts as the provider reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Tokens in the request.
    pub input_tokens: u64,
    /// Tokens in the answer.
    pub output_tokens: u64,
}

/// The model's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelResponse {
    /// Its text; may be empty.
    pub text: String,
    /// Tools it called, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped, mapped explicitly per provider \[S1\].
    pub stop: StopReason,
    /// Token counts, if reported.
    pub usage: Option<Usage>,
}

/// Why a model call failed. Its `Display` is the message a person reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The API answered with an error status.
    #[error("the model API answered HTTP {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the body, for people.
        body: String,
    },
    /// The request did not get an answer (connection refused, reset, DNS).
    #[error("the model API could not be reached: {0}")]
    Transport(String),
    /// The server was reached, but its answer broke off before it was
    /// complete (the connection closed, or a stream ended early).
    #[error("the model API's answer broke off: {0}")]
    Interrupted(String),
    /// The API said the request is longer than the model's context window:
    /// OpenAI's `context_length_exceeded`, Anthropic's `prompt is too
    /// long`, or the same words from another server \[V3\]. Not a failure
    /// of the prompt: the loop compacts and asks again, once per request.
    #[error("the request is too long for the model's context window (HTTP {status}): {body}")]
    ContextOverflow {
        /// The HTTP status (mostly 400).
        status: u16,
        /// The start of the body, for people.
        body: String,
    },
    /// An attempt ran out its deadline; says what timed out.
    #[error("the model API did not answer in time: {0}")]
    Timeout(String),
    /// The answer did not follow the API's format; says what was wrong.
    #[error("the model API's answer was malformed: {0}")]
    Malformed(String),
    /// The answer passed the size cap (`HttpSettings::max_response_bytes`),
    /// whole or streamed.
    #[error("the model API's answer is larger than {max} bytes")]
    TooLarge {
        /// The cap, in bytes.
        max: usize,
    },
    /// The API key cannot be sent: it holds a character that an HTTP header
    /// cannot carry. The key itself is never shown.
    #[error(
        "the API key cannot be sent: it holds a character an HTTP header cannot carry (a line break?)"
    )]
    InvalidApiKey,
    /// The request could not be encoded as JSON.
    #[error("cannot encode the request to the model API: {0}")]
    Encode(#[source] serde_json::Error),
    /// A failure of a model of one's own (a [`Model`] outside this crate, or
    /// the scripted model's [`ScriptError`](crate::providers::ScriptError)):
    /// shown as its own message, and reachable typed through
    /// [`std::error::Error::source`] or a downcast of the box. Build it with
    /// [`ModelError::other`].
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl ModelError {
    /// A failure of a model of one's own, from its error type or a message:
    /// `ModelError::other(MyBackendError::Busy)`, `ModelError::other("the
    /// local model is not loaded")`.
    pub fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ModelError {
        ModelError::Other(error.into())
    }

    /// Whether trying again may help: 429, the 5xx that mean "busy or briefly
    /// broken" (500, 502, 503, 504, 529), and transport failures and
    /// timeouts. The HTTP providers retry by this rule; a model of one's own
    /// retries as it likes before it answers ([`ModelError::Other`] is never
    /// retryable here).
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => {
                matches!(status, 429 | 500 | 502 | 503 | 504 | 529)
            }
            ModelError::Transport(_) | ModelError::Interrupted(_) | ModelError::Timeout(_) => true,
            ModelError::ContextOverflow { .. }
            | ModelError::Malformed(_)
            | ModelError::TooLarge { .. }
            | ModelError::InvalidApiKey
            | ModelError::Encode(_)
            | ModelError::Other(_) => false,
        }
    }
}

/// A model the loop can ask.
#[async_trait]
pub trait Model: Send + Sync {
    /// Asks the model once (the implementation may retry on its own).
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError>;

    /// Asks the model once as [`Model::complete`] does, and calls `on_text`
    /// with each piece of the answer's text as it arrives. The pieces, in
    /// order, make the returned [`ModelResponse::text`]; the response is the
    /// one `complete` returns for the same answer. A model that does not
    /// stream (the default) calls `on_text` never: the caller has the text
    /// in the response.
    async fn complete_streaming(
        &self,
        request: ModelRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let _ = on_text;
        self.complete(request).await
    }

    /// A short description for people: provider and model name.
    fn describe(&self) -> String;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the local model is not loaded")]
    struct NotLoaded;

    // A model of one's own reports its failure as its own message, kept
    // typed, and the HTTP retry rule leaves it alone.
    #[test]
    fn a_custom_models_error_is_shown_as_its_own_and_kept_typed() {
        let err = ModelError::other(NotLoaded);
        assert_eq!(err.to_string(), "the local model is not loaded");
        assert!(!err.is_retryable());
        let ModelError::Other(inner) = &err else {
            panic!("{err:?}");
        };
        assert!(inner.downcast_ref::<NotLoaded>().is_some());
        let text = ModelError::other("the GPU is busy");
        assert_eq!(text.to_string(), "the GPU is busy");
    }

    #[test]
    fn which_failures_are_retried() {
        let status = |status| ModelError::Status {
            status,
            body: String::new(),
        };
        for retried in [status(429), status(503), status(529)] {
            assert!(retried.is_retryable(), "{retried}");
        }
        assert!(ModelError::Timeout("x".into()).is_retryable());
        assert!(ModelError::Transport("x".into()).is_retryable());
        for kept in [
            status(400),
            ModelError::Malformed("x".into()),
            ModelError::TooLarge { max: 1 },
            ModelError::InvalidApiKey,
        ] {
            assert!(!kept.is_retryable(), "{kept}");
        }
    }
}
