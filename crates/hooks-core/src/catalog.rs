//! Sorting one server's tool listing into model tools and hooks.
//!
//! Rules \[N2\]-\[N4\], \[H1\]-\[H4\]. The input is the list of bare tool names a
//! server answered to `tools/list`, in its order; the output is what the model
//! may see, which hook points the server offers, and the warnings an operator
//! should read. Descriptions and schemas stay with the shell, keyed by bare
//! name: the policy never needs them.

use crate::prelude::*;

use serde::Serialize;

use crate::name::{self, HookPoint, ModelNameProblem, ServerName};

/// One tool the model may be offered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelTool {
    /// The name the server knows it by.
    pub bare: String,
    /// The name the model knows it by: `S__T` \[N2\].
    pub qualified: String,
}

/// One server's tools, sorted \[H1\].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerTools {
    /// Tools offered to the model, in listing order; never a hook \[H2\].
    pub model_tools: Vec<ModelTool>,
    /// Known hook points this server lists \[H4\].
    pub hooks: Vec<HookPoint>,
}

impl ServerTools {
    /// Sorts the listing of `server`, returning its tools and the warnings of
    /// \[N3\], \[N4\] and \[H4\], in listing order.
    pub fn sort<S: AsRef<str>>(server: &ServerName, listing: &[S]) -> (ServerTools, Vec<Warning>) {
        let mut tools = ServerTools::default();
        let mut warnings = Vec::new();
        let mut seen: Vec<&str> = Vec::with_capacity(listing.len());
        for bare in listing.iter().map(AsRef::as_ref) {
            if seen.contains(&bare) {
                warnings.push(Warning::DuplicateTool {
                    server: server.clone(),
                    tool: bare.to_owned(),
                });
                continue;
            }
            seen.push(bare);
            if name::is_hook_name(bare) {
                match HookPoint::from_tool_name(bare) {
                    Some(hook) => tools.hooks.push(hook),
                    None => warnings.push(Warning::UnknownHook {
                        server: server.clone(),
                        tool: bare.to_owned(),
                        did_you_mean: HookPoint::ALL
                            .into_iter()
                            .find(|h| h.tool_name().eq_ignore_ascii_case(bare)),
                    }),
                }
                continue;
            }
            let qualified = name::qualify(server, bare);
            match name::check_model_name(&qualified, bare) {
                Ok(()) => tools.model_tools.push(ModelTool {
                    bare: bare.to_owned(),
                    qualified,
                }),
                Err(problem) => warnings.push(Warning::ToolNotOffered {
                    server: server.clone(),
                    tool: bare.to_owned(),
                    problem,
                }),
            }
        }
        (tools, warnings)
    }

    /// Whether this server lists `hook`.
    pub fn has_hook(&self, hook: HookPoint) -> bool {
        self.hooks.contains(&hook)
    }

    /// The model tool with this bare name, if offered.
    pub fn model_tool(&self, bare: &str) -> Option<&ModelTool> {
        self.model_tools.iter().find(|t| t.bare == bare)
    }
}

/// Something an operator should know about the configuration or a listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "warning", rename_all = "snake_case")]
pub enum Warning {
    /// A tool whose qualified name model APIs would refuse; not offered \[N3\].
    ToolNotOffered {
        /// Its server.
        server: ServerName,
        /// Its bare name.
        tool: String,
        /// Why.
        problem: ModelNameProblem,
    },
    /// A server listed the same bare name twice; the second was dropped \[N4\].
    DuplicateTool {
        /// Its server.
        server: ServerName,
        /// The repeated name.
        tool: String,
    },
    /// A `_` tool that is no known hook point: hidden and never called \[H4\].
    UnknownHook {
        /// Its server.
        server: ServerName,
        /// Its bare name.
        tool: String,
        /// The hook point it differs from only in case, if any.
        did_you_mean: Option<HookPoint>,
    },
    /// An `MCP_HOOK_SERVERS` entry that names no configured server \[A3\].
    UnknownAllowlistEntry {
        /// The entry.
        name: String,
    },
}

impl core::fmt::Display for Warning {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Warning::ToolNotOffered {
                server,
                tool,
                problem,
            } => {
                write!(
                    f,
                    "tool {tool:?} of server {server} is not offered to the model: {problem}"
                )
            }
            Warning::DuplicateTool { server, tool } => {
                write!(
                    f,
                    "server {server} lists tool {tool:?} twice; the second is ignored"
                )
            }
            Warning::UnknownHook {
                server,
                tool,
                did_you_mean,
            } => {
                write!(
                    f,
                    "server {server} lists {tool:?}, which starts with \"_\" and so is hidden from the \
                     model, but is no hook point Sprout calls (_Stop, _PostCompact)"
                )?;
                match did_you_mean {
                    Some(hook) => write!(f, "; did you mean {hook}?"),
                    None => f.write_str(
                        "; rename it without the leading \"_\" if the model should see it",
                    ),
                }
            }
            Warning::UnknownAllowlistEntry { name } => write!(
                f,
                "MCP_HOOK_SERVERS names {name:?}, but no configured MCP server has that name, so it \
                 cannot hook"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sort(listing: &[&str]) -> (ServerTools, Vec<String>) {
        let server = ServerName::new("s").unwrap();
        let (tools, warnings) = ServerTools::sort(&server, listing);
        (tools, warnings.iter().map(ToString::to_string).collect())
    }

    // [H1], [H2]: `_` names never become model tools; known ones become hooks.
    #[test]
    fn hooks_are_split_from_model_tools_h1_h2() {
        let (tools, warnings) = sort(&["read", "_Stop", "write", "_PostCompact"]);
        let offered: Vec<_> = tools
            .model_tools
            .iter()
            .map(|t| t.qualified.as_str())
            .collect();
        assert_eq!(offered, ["s__read", "s__write"]);
        assert_eq!(tools.hooks, [HookPoint::Stop, HookPoint::PostCompact]);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    // [H4]: unknown `_` names are hidden, never hooks, and warned about.
    #[test]
    fn unknown_underscore_names_warn_h4() {
        let (tools, warnings) = sort(&["_stop", "_PreToolUse", "_"]);
        assert!(tools.model_tools.is_empty());
        assert!(tools.hooks.is_empty());
        assert_eq!(warnings.len(), 3);
        assert!(
            warnings[0].ends_with("did you mean _Stop?"),
            "{}",
            warnings[0]
        );
        assert!(warnings[1].contains("\"_PreToolUse\""), "{}", warnings[1]);
        assert!(
            warnings[1].ends_with("if the model should see it"),
            "{}",
            warnings[1]
        );
    }

    // [N3]
    #[test]
    fn unofferable_names_are_reported_n3() {
        let long = "t".repeat(62);
        let (tools, warnings) = sort(&["ok", "has space", &long, ""]);
        assert_eq!(tools.model_tools.len(), 1);
        assert_eq!(
            warnings,
            [
                "tool \"has space\" of server s is not offered to the model: the qualified name contains ' ', model APIs accept only A-Z a-z 0-9 _ -",
                "tool \"tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt\" of server s is not offered to the model: the qualified name is 65 characters, model APIs accept at most 64",
                "tool \"\" of server s is not offered to the model: the tool name is empty",
            ]
        );
    }

    // [N4]: the second listing of a bare name is dropped, hooks included.
    #[test]
    fn duplicates_are_dropped_n4() {
        let (tools, warnings) = sort(&["read", "_Stop", "read", "_Stop"]);
        assert_eq!(tools.model_tools.len(), 1);
        assert_eq!(tools.hooks, [HookPoint::Stop]);
        assert_eq!(
            warnings,
            [
                "server s lists tool \"read\" twice; the second is ignored",
                "server s lists tool \"_Stop\" twice; the second is ignored",
            ]
        );
    }
}
