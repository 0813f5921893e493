//! Sorting one server's tool listing into model tools and hooks.
//!
//! Rules \[N2\]-\[N4\], \[H1\]-\[H4\], \[K4\]. The input is the list of tools a
//! server answered to `tools/list`, in its order, with the property names of
//! their input schemas; the output is what the model may see, which hook points
//! the server offers and what input each asked for \[K1\], and the warnings an
//! operator should read. Descriptions and whole schemas stay with the shell,
//! keyed by bare name: the policy never needs them.

use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::event::RoundId;
use crate::input::{HookInput, ListedTool};
use crate::name::{self, HookPoint, ModelNameProblem, ServerName};

/// One tool the model may be offered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelTool {
    /// The name the server knows it by.
    pub bare: String,
    /// The name the model knows it by: `S__T` \[N2\].
    pub qualified: String,
}

/// One hook a server lists, with what its schema asked for \[K1\].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedHook {
    /// The hook point.
    pub point: HookPoint,
    /// The input fields it gets.
    pub input: HookInput,
}

/// One server's tools, sorted \[H1\].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerTools {
    /// Tools offered to the model, in listing order; never a hook \[H2\].
    pub model_tools: Vec<ModelTool>,
    /// Known hook points this server lists, in listing order \[H4\]; each
    /// point at most once \[N4\].
    pub hooks: Vec<ListedHook>,
}

impl ServerTools {
    /// Sorts the listing of `server`, returning its tools and the warnings of
    /// \[N3\], \[N4\], \[H4\] and \[K4\], in listing order.
    pub fn sort(server: &ServerName, listing: &[ListedTool]) -> (ServerTools, Vec<Warning>) {
        let mut tools = ServerTools::default();
        let mut warnings = Vec::new();
        let mut seen: Vec<&str> = Vec::with_capacity(listing.len());
        for listed in listing {
            let bare = listed.name.as_str();
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
                    Some(point) => {
                        let (input, unfillable) = HookInput::read(point, listed);
                        warnings.extend(unfillable.into_iter().map(|property| {
                            Warning::UnfillableInput {
                                server: server.clone(),
                                hook: point,
                                property,
                            }
                        }));
                        tools.hooks.push(ListedHook { point, input });
                    }
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
        self.hook(hook).is_some()
    }

    /// The hook points this server lists, in listing order.
    pub fn hook_points(&self) -> impl Iterator<Item = HookPoint> + '_ {
        self.hooks.iter().map(|h| h.point)
    }

    /// What this server's `hook` asked for, if it lists it \[K1\].
    pub fn hook(&self, hook: HookPoint) -> Option<&ListedHook> {
        self.hooks.iter().find(|h| h.point == hook)
    }

    /// The model tool with this bare name, if offered.
    pub fn model_tool(&self, bare: &str) -> Option<&ModelTool> {
        self.model_tools.iter().find(|t| t.bare == bare)
    }
}

/// Something an operator should know about the configuration or a listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A server marked `required` that the allowlist does not let hook:
    /// `required` has no effect \[F3\].
    RequiredNotAllowlisted {
        /// The server.
        server: ServerName,
    },
    /// A hook's schema requires a property the agent cannot fill at that
    /// hook point; the hook is still called, without it \[K4\].
    UnfillableInput {
        /// Its server.
        server: ServerName,
        /// The hook point.
        hook: HookPoint,
        /// The required property.
        property: String,
    },
    /// A round's answers passed the 64 KiB cap: this server's answer was
    /// dropped \[R5\].
    InjectionDropped {
        /// The round.
        round: RoundId,
        /// Its hook point.
        hook: HookPoint,
        /// The server whose answer was dropped.
        server: ServerName,
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
                     model, but is no hook point Sprout calls ("
                )?;
                for (i, hook) in HookPoint::ALL.into_iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{hook}")?;
                }
                f.write_str(")")?;
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
            Warning::RequiredNotAllowlisted { server } => write!(
                f,
                "server {server} is marked \"required\", but MCP_HOOK_SERVERS does not let it \
                 hook, so \"required\" has no effect (add it to MCP_HOOK_SERVERS, or drop \"required\")"
            ),
            Warning::UnfillableInput {
                server,
                hook,
                property,
            } => write!(
                f,
                "{hook} of server {server} requires input property {property:?}, which Sprout \
                 cannot fill at {hook}; it is called without it"
            ),
            Warning::InjectionDropped {
                round,
                hook,
                server,
            } => write!(
                f,
                "the answer of server {server} to {hook} (round {round}) was dropped: the round's \
                 answers passed the 64 KiB cap"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sort(listing: &[&str]) -> (ServerTools, Vec<String>) {
        let server = ServerName::new("s").unwrap();
        let listing: Vec<ListedTool> = listing.iter().map(|&t| t.into()).collect();
        let (tools, warnings) = ServerTools::sort(&server, &listing);
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
        let points: Vec<_> = tools.hook_points().collect();
        assert_eq!(points, [HookPoint::Stop, HookPoint::PostCompact]);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    // [H4]: unknown `_` names are hidden, never hooks, and warned about.
    #[test]
    fn unknown_underscore_names_warn_h4() {
        let (tools, warnings) = sort(&["_stop", "_SubagentStart", "_"]);
        assert!(tools.model_tools.is_empty());
        assert!(tools.hooks.is_empty());
        assert_eq!(warnings.len(), 3);
        assert!(
            warnings[0].ends_with("did you mean _Stop?"),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[1].contains("\"_SubagentStart\""),
            "{}",
            warnings[1]
        );
        assert!(
            warnings[1].contains("(_SessionStart, _UserPromptSubmit, _PreToolUse, _PostToolUse, _Stop, _PreCompact, _PostCompact, _SessionEnd)"),
            "{}",
            warnings[1]
        );
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
        assert_eq!(tools.hook_points().collect::<Vec<_>>(), [HookPoint::Stop]);
        assert_eq!(
            warnings,
            [
                "server s lists tool \"read\" twice; the second is ignored",
                "server s lists tool \"_Stop\" twice; the second is ignored",
            ]
        );
    }

    // [K1], [K4]: a hook's schema decides its input; an unfillable required
    // property is a warning naming server, hook and property.
    #[test]
    fn hook_schemas_give_inputs_and_warnings_k1_k4() {
        let server = ServerName::new("s").unwrap();
        let schema = serde_json::json!({
            "properties": {"prompt": {}, "attempt": {}},
            "required": ["prompt"],
        });
        let listing = [
            ListedTool::from_schema("_Stop", schema.as_object().unwrap()),
            ListedTool::from_schema("_UserPromptSubmit", schema.as_object().unwrap()),
        ];
        let (tools, warnings) = ServerTools::sort(&server, &listing);
        let stop = tools.hook(HookPoint::Stop).unwrap();
        assert_eq!(stop.input.fields(), [crate::input::InputField::Attempt]);
        let submit = tools.hook(HookPoint::UserPromptSubmit).unwrap();
        assert_eq!(submit.input.fields(), [crate::input::InputField::Prompt]);
        let warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                "_Stop of server s requires input property \"prompt\", which Sprout cannot fill at _Stop; it is called without it"
            ]
        );
    }
}
