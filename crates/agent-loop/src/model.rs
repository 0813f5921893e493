//! The model boundary: [`Model`], its request and response, and its errors.

use std::fmt;

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

/// Why a model call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// The API answered with an error status.
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the body, for people.
        body: String,
    },
    /// The request did not get an answer (connection refused, reset, DNS).
    Transport(String),
    /// An attempt ran out its deadline; says what timed out.
    Timeout(String),
    /// The answer did not follow the API's format; says what was wrong.
    Malformed(String),
    /// The scripted model has no turn left, or its file is bad.
    Script(String),
}

impl ModelError {
    /// Whether trying again may help: 429, the 5xx that mean "busy or briefly
    /// broken" (500, 502, 503, 504, 529), and transport failures.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => {
                matches!(status, 429 | 500 | 502 | 503 | 504 | 529)
            }
            ModelError::Transport(_) | ModelError::Timeout(_) => true,
            ModelError::Malformed(_) | ModelError::Script(_) => false,
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Status { status, body } => {
                write!(f, "the model API answered HTTP {status}: {body}")
            }
            ModelError::Transport(e) => write!(f, "the model API could not be reached: {e}"),
            ModelError::Timeout(e) => write!(f, "the model API did not answer in time: {e}"),
            ModelError::Malformed(e) => write!(f, "the model API's answer was malformed: {e}"),
            ModelError::Script(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ModelError {}

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
