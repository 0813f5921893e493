//! The environment as the person set it: variables under names other tools
//! use (`OPENAI_API_KEY`), names that look like ours but are not (a typo:
//! `MCP_HOOK_SERVER`), values that are not text, and which variable a
//! refused API key came from.
//!
//! Every name comes from the command tree (`cli`), where each flag names
//! its variable once, plus the few read without a flag.

use std::sync::Arc;

use agent_loop::{Model, ModelError, ModelRequest, ModelResponse, TextSink};
use async_trait::async_trait;

/// Variables read without a flag of their own.
const READ_DIRECTLY: [&str; 1] = ["SPROUT_SESSIONS"];

/// The beginnings of names that are ours: a variable that starts so and
/// is not one we read is most likely a typo of one.
const OUR_PREFIXES: [&str; 6] = [
    "SPROUT_AGENT_",
    "SPROUT_ACP_",
    "SPROUT_GATE_",
    "SPROUT_SESSION",
    "OPENAI_COMPAT_",
    "MCP_HOOK",
];

/// The standard names other tools read, each beside ours: used when ours
/// is not set.
pub(crate) const STANDARD_NAMES: [(&str, &str); 3] = [
    ("OPENAI_COMPAT_API_KEY", "OPENAI_API_KEY"),
    ("OPENAI_COMPAT_BASE_URL", "OPENAI_BASE_URL"),
    ("OPENAI_COMPAT_MODEL", "OPENAI_MODEL"),
];

/// Every variable of `command` and its subcommands, and those read
/// without a flag.
pub(crate) fn known_variables(command: &clap::Command) -> Vec<String> {
    fn walk(command: &clap::Command, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            if let Some(name) = arg.get_env() {
                out.push(name.to_string_lossy().into_owned());
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut names: Vec<String> = READ_DIRECTLY.iter().map(|s| (*s).to_owned()).collect();
    walk(command, &mut names);
    names.sort();
    names.dedup();
    names
}

/// The first of `names` that is set to something that is not UTF-8.
pub(crate) fn not_text(names: &[String]) -> Option<&str> {
    names
        .iter()
        .find(|name| std::env::var_os(name).is_some_and(|v| v.to_str().is_none()))
        .map(String::as_str)
}

/// A warning for each variable of `set` that looks like ours but is not
/// one of `known`, with the nearest known name when one is close.
pub(crate) fn unknown_variables(set: &[String], known: &[String]) -> Vec<String> {
    set.iter()
        .filter(|name| OUR_PREFIXES.iter().any(|p| name.starts_with(p)))
        .filter(|name| !known.contains(name))
        .map(|name| {
            let nearest = known
                .iter()
                .map(|k| (distance(name, k), k))
                .min()
                .filter(|(d, _)| *d <= 3);
            match nearest {
                Some((_, k)) => format!("{name} is not a variable sprout reads; did you mean {k}?"),
                None => format!(
                    "{name} is not a variable sprout reads (`sprout run --help` lists them)"
                ),
            }
        })
        .collect()
}

/// The edit distance between two names (insertions, deletions and
/// substitutions of one character).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(here)
            };
            previous = here;
        }
    }
    row[b.len()]
}

/// `value` (of our variable or flag), else the standard variable beside
/// `ours` in [`STANDARD_NAMES`], with the name the value came from.
pub(crate) fn or_standard(value: Option<&str>, ours: &str) -> (Option<String>, String) {
    if let Some(value) = value {
        return (Some(value.to_owned()), ours.to_owned());
    }
    let standard = STANDARD_NAMES
        .iter()
        .find(|(o, _)| *o == ours)
        .map(|(_, s)| *s);
    match standard.and_then(|s| std::env::var(s).ok().map(|v| (v, s))) {
        Some((value, name)) => (Some(value), name.to_owned()),
        None => (None, ours.to_owned()),
    }
}

/// A model whose "not allowed" answers (HTTP 401 and 403) say where its
/// key came from, or that none was sent, and what to set.
pub(crate) struct KeyHinted {
    inner: Arc<dyn Model>,
    hint: String,
}

impl KeyHinted {
    /// `inner`, whose 401 and 403 answers get `hint` after them.
    pub(crate) fn new(inner: Arc<dyn Model>, hint: String) -> KeyHinted {
        KeyHinted { inner, hint }
    }

    fn hinted(&self, error: ModelError) -> ModelError {
        match error {
            ModelError::Status {
                status: status @ (401 | 403),
                body,
            } => ModelError::Status {
                status,
                body: format!("{body} ({})", self.hint),
            },
            other => other,
        }
    }
}

#[async_trait]
impl Model for KeyHinted {
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.inner
            .complete(request)
            .await
            .map_err(|e| self.hinted(e))
    }

    async fn complete_streaming(
        &self,
        request: ModelRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        self.inner
            .complete_streaming(request, on_text)
            .await
            .map_err(|e| self.hinted(e))
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// The hint for a refused key: where the key came from (`source`), or
/// which variables would give one.
pub(crate) fn key_hint(source: Option<&str>, ours: &str, flag: &str) -> String {
    match source {
        Some(source) => format!("the API key from {source} was refused: check it"),
        None => {
            let standard = STANDARD_NAMES
                .iter()
                .find(|(o, _)| *o == ours)
                .map(|(_, s)| format!(" or {s}"))
                .unwrap_or_default();
            format!("no API key was sent: set {ours}{standard}, or pass {flag}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_name_is_suggested() {
        let known: Vec<String> = ["MCP_HOOK_SERVERS", "SPROUT_AGENT_MAX_ROUNDS"]
            .map(String::from)
            .to_vec();
        let set: Vec<String> = [
            "MCP_HOOK_SERVER",
            "SPROUT_AGENT_MAX_ROUND",
            "SPROUT_AGENT_NOTHING_LIKE_IT_AT_ALL",
            "MCP_HOOK_SERVERS",
            "PATH",
        ]
        .map(String::from)
        .to_vec();
        let warnings = unknown_variables(&set, &known);
        assert_eq!(
            warnings,
            [
                "MCP_HOOK_SERVER is not a variable sprout reads; did you mean MCP_HOOK_SERVERS?",
                "SPROUT_AGENT_MAX_ROUND is not a variable sprout reads; did you mean SPROUT_AGENT_MAX_ROUNDS?",
                "SPROUT_AGENT_NOTHING_LIKE_IT_AT_ALL is not a variable sprout reads (`sprout run --help` lists them)",
            ]
        );
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }

    #[test]
    fn a_refused_key_says_where_it_came_from() {
        assert_eq!(
            key_hint(None, "OPENAI_COMPAT_API_KEY", "--openai-api-key"),
            "no API key was sent: set OPENAI_COMPAT_API_KEY or OPENAI_API_KEY, or pass --openai-api-key"
        );
        assert_eq!(
            key_hint(
                Some("ANTHROPIC_API_KEY"),
                "ANTHROPIC_API_KEY",
                "--anthropic-api-key"
            ),
            "the API key from ANTHROPIC_API_KEY was refused: check it"
        );
    }
}
