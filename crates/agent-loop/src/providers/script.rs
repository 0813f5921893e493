//! The scripted model: a JSON Lines file of model turns, for offline runs and
//! tests.
//!
//! Each line is one turn; each model request (a summary request included)
//! takes the next one:
//!
//! ```json
//! {"text": "Let me plan.", "tool_calls": [{"name": "todo__todo", "arguments": {"items": []}}], "stop": "tool_use", "usage": {"input_tokens": 900, "output_tokens": 40}}
//! ```
//!
//! `stop` is `end_turn` (the default without tool calls), `tool_use` (the
//! default with), `max_tokens`, `refusal`, `content_filter`, or any other
//! word. A file that cannot be read, or a line that is not a turn, is a
//! [`ScriptError`] when the script is loaded; running past the last line is
//! one too ([`ScriptError::NoTurnLeft`], as [`ModelError::Other`]), naming
//! the script.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use hooks_core::StopReason;
use serde::Deserialize;

use crate::message::ToolCall;
use crate::model::{Model, ModelError, ModelRequest, ModelResponse, Usage};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
    stop: Option<String>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    name: String,
    #[serde(default)]
    arguments: serde_json::Value,
    id: Option<String>,
}

/// Why a script cannot be loaded, or cannot answer.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read the model script {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a turn.
    #[error("model script {script}, line {line}: {source}")]
    BadLine {
        /// The script, as named to [`ScriptModel::parse`].
        script: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        #[source]
        source: serde_json::Error,
    },
    /// The agent asked for a turn past the script's last (the model's
    /// answer is then [`ModelError::Other`] with this inside).
    #[error(
        "the model script {script} has {turns} turn(s) and the agent asked for turn {asked}: a \
         tool call, and a hook's objection to the end of a turn, are each answered by asking the \
         model again, so the script needs a turn for each"
    )]
    NoTurnLeft {
        /// The script.
        script: String,
        /// How many turns it has.
        turns: usize,
        /// The turn asked for, from 1.
        asked: usize,
    },
}

/// A model that replays a script.
#[derive(Debug)]
pub struct ScriptModel {
    source: String,
    turns: Vec<ModelResponse>,
    /// Invariant: at most `turns.len()`.
    next: Mutex<usize>,
}

impl ScriptModel {
    /// Reads a script file.
    pub fn from_file(path: &Path) -> Result<ScriptModel, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Unreadable {
            path: path.to_owned(),
            source,
        })?;
        ScriptModel::parse(&path.display().to_string(), &text)
    }

    /// Parses a script; `source` names it in errors.
    pub fn parse(source: &str, text: &str) -> Result<ScriptModel, ScriptError> {
        let mut turns = Vec::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with("//") {
                continue;
            }
            let turn: Turn = serde_json::from_str(line).map_err(|e| ScriptError::BadLine {
                script: source.to_owned(),
                line: number + 1,
                source: e,
            })?;
            let tool_calls: Vec<ToolCall> = turn
                .tool_calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: c
                        .id
                        .unwrap_or_else(|| format!("script-{}-{i}", turns.len() + 1)),
                    name: c.name,
                    arguments: match c.arguments {
                        serde_json::Value::Null => "{}".to_owned(),
                        other => other.to_string(),
                    },
                })
                .collect();
            let stop = match turn.stop.as_deref() {
                None if tool_calls.is_empty() => StopReason::EndTurn,
                None => StopReason::ToolUse,
                Some(word) => StopReason::from_word(word),
            };
            turns.push(ModelResponse {
                text: turn.text,
                tool_calls,
                stop,
                usage: turn.usage,
            });
        }
        Ok(ScriptModel {
            source: source.to_owned(),
            turns,
            next: Mutex::new(0),
        })
    }

    /// How many turns the script has.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether the script has no turn.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

#[async_trait]
impl Model for ScriptModel {
    async fn complete(&self, _request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let turn = self.turns.get(*next).cloned().ok_or_else(|| {
            ModelError::other(ScriptError::NoTurnLeft {
                script: self.source.clone(),
                turns: self.turns.len(),
                asked: *next + 1,
            })
        })?;
        *next += 1;
        Ok(turn)
    }

    fn describe(&self) -> String {
        format!("script {}", self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn replays_turns_then_says_it_ran_out() {
        let script = ScriptModel::parse(
            "demo.jsonl",
            r#"{"text": "plan", "tool_calls": [{"name": "todo__todo", "arguments": {"items": []}}]}

// a comment
{"text": "done", "usage": {"input_tokens": 5, "output_tokens": 1}}
{"stop": "max_tokens"}"#,
        )
        .unwrap();
        assert_eq!(script.len(), 3);
        let request = ModelRequest {
            system: "",
            messages: &[],
            tools: &[],
        };
        let first = script.complete(request).await.unwrap();
        assert_eq!(first.stop, StopReason::ToolUse);
        assert_eq!(first.tool_calls[0].arguments, r#"{"items":[]}"#);
        assert_eq!(first.tool_calls[0].id, "script-1-0");
        let second = script.complete(request).await.unwrap();
        assert_eq!(
            (second.stop, second.usage.unwrap().input_tokens),
            (StopReason::EndTurn, 5)
        );
        assert_eq!(
            script.complete(request).await.unwrap().stop,
            StopReason::MaxTokens
        );
        let past = script.complete(request).await.unwrap_err();
        // Typed inside the model's error, for a caller who wants to know.
        let ModelError::Other(inner) = &past else {
            panic!("{past:?}");
        };
        assert!(
            matches!(
                inner.downcast_ref::<ScriptError>(),
                Some(ScriptError::NoTurnLeft {
                    turns: 3,
                    asked: 4,
                    ..
                })
            ),
            "{inner:?}"
        );
        assert_eq!(
            past.to_string(),
            "the model script demo.jsonl has 3 turn(s) and the agent asked for turn 4: a tool call, and a hook's objection to the end of a turn, are each answered by asking the model again, so the script needs a turn for each"
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = ScriptModel::parse("s.jsonl", "{\"text\": 1}").unwrap_err();
        assert!(
            matches!(&err, ScriptError::BadLine { script, line: 1, .. } if script == "s.jsonl"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("model script s.jsonl, line 1: invalid type"),
            "{err}"
        );
        let err = ScriptModel::parse("s.jsonl", "{\"txt\": \"x\"}").unwrap_err();
        assert!(err.to_string().contains("unknown field `txt`"), "{err}");
        let err = ScriptModel::parse("s.jsonl", "\n\n{").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("model script s.jsonl, line 3: "),
            "{err}"
        );
    }

    #[test]
    fn an_unreadable_file_is_named() {
        let path = Path::new("/nonexistent/sprout-script.jsonl");
        let err = ScriptModel::from_file(path).unwrap_err();
        let ScriptError::Unreadable {
            path: named,
            source,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(named, path);
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert!(
            err.to_string()
                .starts_with("cannot read the model script /nonexistent/sprout-script.jsonl: "),
            "{err}"
        );
    }
}
