//! The conversation: what the loop keeps and every provider renders.
//!
//! The history is a list of [`Message`]s in a provider-neutral form. Every
//! tool call an assistant message carries is followed, before the next model
//! request, by exactly one [`Message::ToolResult`] with its id; providers rely
//! on it, and the loop's property test checks it.

use hooks_core::Injection;
use serde::{Deserialize, Serialize};

/// One tool call the model made (or that the agent made for a hook \[I1\]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Unique in the session.
    pub id: String,
    /// The model-visible name, `S__T`.
    pub name: String,
    /// The arguments as JSON text, as the model wrote them.
    pub arguments: String,
}

/// One entry of the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the person (or the agent, for a compaction summary) says.
    User {
        /// The text.
        text: String,
    },
    /// What the model said, and the tools it called.
    Assistant {
        /// Its text; may be empty.
        text: String,
        /// Its tool calls, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The call's tool name (some providers want it back).
        name: String,
        /// The result text.
        content: String,
        /// Whether it is an error.
        is_error: bool,
    },
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User { text: text.into() }
    }

    /// Rough size in bytes, for the context estimate.
    pub fn byte_len(&self) -> usize {
        match self {
            Message::User { text } => text.len() + 16,
            Message::Assistant { text, tool_calls } => {
                text.len()
                    + 16
                    + tool_calls
                        .iter()
                        .map(|c| c.id.len() + c.name.len() + c.arguments.len() + 32)
                        .sum::<usize>()
            }
            Message::ToolResult {
                call_id,
                name,
                content,
                ..
            } => call_id.len() + name.len() + content.len() + 32,
        }
    }
}

/// The synthetic pair of one hook answer \[I1\]: an assistant call with `{}`
/// and its tool result holding the JSON envelope \[I2\].
pub fn injection_pair(injection: &Injection) -> [Message; 2] {
    [
        Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: injection.call_id.clone(),
                name: injection.tool_name.clone(),
                arguments: injection.arguments().to_owned(),
            }],
        },
        Message::ToolResult {
            call_id: injection.call_id.clone(),
            name: injection.tool_name.clone(),
            content: injection.content.clone(),
            is_error: false,
        },
    ]
}

/// How a history breaks the pairing rule \[I1\]: each names the call id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    /// A call was still open when the next assistant message came.
    #[error("tool call {0} has no result before the next assistant message")]
    OpenAtAssistant(String),
    /// A result for a call that is not open.
    #[error("tool result {0} answers no open call")]
    Orphan(String),
    /// A call still open at the end of the history.
    #[error("tool call {0} has no result")]
    Open(String),
}

/// Checks that every tool call in `messages` has exactly one result, after
/// it and before the next assistant message, and that no result is an
/// orphan. `Err` names the first offending call id.
pub fn check_pairing(messages: &[Message]) -> Result<(), PairingError> {
    let mut open: Vec<&str> = Vec::new();
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                if let Some(id) = open.first() {
                    return Err(PairingError::OpenAtAssistant((*id).to_owned()));
                }
                open = tool_calls.iter().map(|c| c.id.as_str()).collect();
            }
            Message::ToolResult { call_id, .. } => match open.iter().position(|id| id == call_id) {
                Some(i) => {
                    open.remove(i);
                }
                None => return Err(PairingError::Orphan(call_id.clone())),
            },
            Message::User { .. } => {}
        }
    }
    match open.first() {
        Some(id) => Err(PairingError::Open((*id).to_owned())),
        None => Ok(()),
    }
}
