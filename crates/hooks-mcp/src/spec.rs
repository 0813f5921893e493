//! Which MCP servers to connect to, and how: [`ServerSpec`].
//!
//! Specs come from the `mcpServers` JSON format that Claude Code, Claude
//! Desktop and Cursor share, parsed by [`parse_mcp_servers`] with the order of
//! the keys kept: that order is the configuration order of [I3]. Reading the
//! file is the caller's job; errors here name the key and the bad value.
//!
//! Also here: the environment a stdio child gets ([`child_environment`]),
//! which is a small fixed set of the agent's variables plus exactly what the
//! spec names, so that API keys never leak into tool servers.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use hooks_core::ServerName;
use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::Value;

/// One MCP server to connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its configuration key [N1].
    pub name: ServerName,
    /// How to reach it.
    pub transport: TransportSpec,
}

/// How to reach a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportSpec {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it on top of the small base environment.
        env: BTreeMap<String, String>,
        /// Its working directory; the agent's when `None`.
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint, `http://…` or `https://…`.
        url: String,
        /// Headers sent with every request (`Authorization`, say).
        headers: BTreeMap<String, String>,
    },
}

impl ServerSpec {
    /// A stdio server running `command` with `args`.
    pub fn stdio(name: ServerName, command: impl Into<String>, args: Vec<String>) -> ServerSpec {
        ServerSpec {
            name,
            transport: TransportSpec::Stdio {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                cwd: None,
            },
        }
    }

    /// A Streamable HTTP server at `url`.
    pub fn http(name: ServerName, url: impl Into<String>) -> ServerSpec {
        ServerSpec {
            name,
            transport: TransportSpec::Http {
                url: url.into(),
                headers: BTreeMap::new(),
            },
        }
    }
}

/// A problem in an `mcpServers` document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// Where: a JSON path such as `mcpServers.todo.args`.
    pub at: String,
    /// What is wrong, and what would be right.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.at, self.message)
        }
    }
}

impl std::error::Error for SpecError {}

fn err(at: impl Into<String>, message: impl Into<String>) -> SpecError {
    SpecError {
        at: at.into(),
        message: message.into(),
    }
}

/// The `mcpServers` object's entries, in document order.
struct OrderedEntries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for OrderedEntries {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = OrderedEntries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object mapping server names to server settings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedEntries, A::Error> {
                let mut entries: Vec<(String, Value)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    if entries.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!(
                            "server {key:?} is configured twice; names must be unique"
                        )));
                    }
                    entries.push((key, value));
                }
                Ok(OrderedEntries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

#[derive(Deserialize)]
struct Document {
    #[serde(rename = "mcpServers")]
    servers: Option<OrderedEntries>,
}

/// Parses an `mcpServers` document, keeping the servers in document order.
///
/// Stdio entries: `command` (required), `args`, `env`, `cwd`, and an optional
/// `"type": "stdio"`. HTTP entries: `"type": "http"` and `url`. Any other
/// `type`, a missing or mistyped field, or an invalid server name [N1] is an
/// error naming the key and the value. A document without `mcpServers`
/// configures no server.
pub fn parse_mcp_servers(json: &str) -> Result<Vec<ServerSpec>, SpecError> {
    let document: Document = serde_json::from_str(json)
        .map_err(|e| err("", format!("not a valid mcpServers JSON document: {e}")))?;
    let Some(OrderedEntries(entries)) = document.servers else {
        return Ok(Vec::new());
    };
    entries
        .into_iter()
        .map(|(key, value)| server_spec(&key, &value))
        .collect()
}

fn server_spec(key: &str, value: &Value) -> Result<ServerSpec, SpecError> {
    let at = format!("mcpServers.{key}");
    let name = ServerName::new(key).map_err(|e| err(&at, e.to_string()))?;
    let Some(fields) = value.as_object() else {
        return Err(err(
            &at,
            format!(
                "expected an object with \"command\" (a stdio server) or \"type\": \"http\" and \
                 \"url\", found {}",
                brief(value)
            ),
        ));
    };
    let kind = match fields.get("type") {
        None => "stdio",
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => {
            return Err(err(
                format!("{at}.type"),
                format!("expected a string, found {}", brief(other)),
            ));
        }
    };
    let transport = match kind {
        "stdio" => {
            let command = match fields.get("command") {
                Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
                Some(other) => {
                    return Err(err(
                        format!("{at}.command"),
                        format!("expected the program to run, found {}", brief(other)),
                    ));
                }
                None => {
                    return Err(err(
                        &at,
                        "a stdio server needs \"command\" (or set \"type\": \"http\" with \"url\")",
                    ));
                }
            };
            TransportSpec::Stdio {
                command,
                args: string_list(fields.get("args"), &format!("{at}.args"))?,
                env: string_map(fields.get("env"), &format!("{at}.env"))?,
                cwd: match fields.get("cwd") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(dir)) => Some(PathBuf::from(dir)),
                    Some(other) => {
                        return Err(err(
                            format!("{at}.cwd"),
                            format!("expected a directory, found {}", brief(other)),
                        ));
                    }
                },
            }
        }
        "http" => {
            let url = match fields.get("url") {
                Some(Value::String(url)) => url.clone(),
                Some(other) => {
                    return Err(err(
                        format!("{at}.url"),
                        format!("expected a URL, found {}", brief(other)),
                    ));
                }
                None => return Err(err(&at, "an http server needs \"url\"")),
            };
            if !url.starts_with("http://") && !url.starts_with("https://") {
                return Err(err(
                    format!("{at}.url"),
                    format!("{url:?} is not an http:// or https:// URL"),
                ));
            }
            let headers = string_map(fields.get("headers"), &format!("{at}.headers"))?;
            TransportSpec::Http { url, headers }
        }
        other => {
            return Err(err(
                format!("{at}.type"),
                format!("unknown server type {other:?}: expected \"stdio\" or \"http\""),
            ));
        }
    };
    Ok(ServerSpec { name, transport })
}

fn string_list(value: Option<&Value>, at: &str) -> Result<Vec<String>, SpecError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(err(
                    format!("{at}[{i}]"),
                    format!("expected a string, found {}", brief(other)),
                )),
            })
            .collect(),
        Some(other) => Err(err(
            at,
            format!("expected a list of strings, found {}", brief(other)),
        )),
    }
}

fn string_map(value: Option<&Value>, at: &str) -> Result<BTreeMap<String, String>, SpecError> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(err(
                    format!("{at}.{k}"),
                    format!("expected a string, found {}", brief(other)),
                )),
            })
            .collect(),
        Some(other) => Err(err(
            at,
            format!("expected an object of strings, found {}", brief(other)),
        )),
    }
}

/// A short rendering of a JSON value for messages.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 60 {
        return text;
    }
    let mut end = 57;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Variables of the agent's environment that every stdio child inherits:
/// enough to find programs, a home, a temp dir and the locale; nothing else.
pub const INHERITED_VARIABLES: &[&str] = &["PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TZ"];

/// The environment of a stdio child: the agent's [`INHERITED_VARIABLES`] and
/// `LC_*` locale variables, then the spec's `env` on top.
pub fn child_environment(
    agent: impl IntoIterator<Item = (String, String)>,
    spec_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = agent
        .into_iter()
        .filter(|(k, _)| INHERITED_VARIABLES.contains(&k.as_str()) || k.starts_with("LC_"))
        .collect();
    env.extend(spec_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(specs: &[ServerSpec]) -> Vec<&str> {
        specs.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn keeps_document_order_for_i3() {
        let specs = parse_mcp_servers(
            r#"{"mcpServers": {
                "zeta": {"command": "z"},
                "alpha": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"}},
                "mid": {"type": "stdio", "command": "m", "args": ["-x"], "env": {"K": "v"}, "cwd": "/tmp"}
            }, "other": 1}"#,
        )
        .unwrap();
        assert_eq!(names(&specs), ["zeta", "alpha", "mid"]);
        assert_eq!(
            specs[1].transport,
            TransportSpec::Http {
                url: "http://127.0.0.1:9/mcp".into(),
                headers: [("Authorization".to_string(), "Bearer t".to_string())].into(),
            }
        );
        let TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } = &specs[2].transport
        else {
            panic!()
        };
        assert_eq!(
            (command.as_str(), args.as_slice()),
            ("m", ["-x".to_string()].as_slice())
        );
        assert_eq!(env.get("K").map(String::as_str), Some("v"));
        assert_eq!(cwd.as_deref(), Some(std::path::Path::new("/tmp")));
        assert!(parse_mcp_servers("{}").unwrap().is_empty());
    }

    #[test]
    fn errors_name_the_key_and_value() {
        let cases = [
            (
                "not json",
                "not a valid mcpServers JSON document: expected ident at line 1 column 2",
            ),
            (
                r#"{"mcpServers": []}"#,
                "not a valid mcpServers JSON document: invalid type: sequence, expected an object mapping server names to server settings at line 1 column 15",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#,
                "not a valid mcpServers JSON document: server \"a\" is configured twice; names must be unique at line 1 column 61",
            ),
            (
                r#"{"mcpServers": {"bad name": {"command": "x"}}}"#,
                "mcpServers.bad name: invalid MCP server name \"bad name\": it has a character outside A-Z a-z 0-9 _ -; a server name is 1 to 32 characters from A-Z a-z 0-9 _ -, without \"__\" and not ending in \"_\"",
            ),
            (
                r#"{"mcpServers": {"a": "x"}}"#,
                "mcpServers.a: expected an object with \"command\" (a stdio server) or \"type\": \"http\" and \"url\", found \"x\"",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}"#,
                "mcpServers.a.type: unknown server type \"sse\": expected \"stdio\" or \"http\"",
            ),
            (
                r#"{"mcpServers": {"a": {"args": []}}}"#,
                "mcpServers.a: a stdio server needs \"command\" (or set \"type\": \"http\" with \"url\")",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "args": ["ok", 3]}}}"#,
                "mcpServers.a.args[1]: expected a string, found 3",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}"#,
                "mcpServers.a.env.K: expected a string, found 1",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "http"}}}"#,
                "mcpServers.a: an http server needs \"url\"",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "http", "url": "ftp://x"}}}"#,
                "mcpServers.a.url: \"ftp://x\" is not an http:// or https:// URL",
            ),
        ];
        for (json, expected) in cases {
            assert_eq!(
                parse_mcp_servers(json).unwrap_err().to_string(),
                expected,
                "{json}"
            );
        }
    }

    // Issue rule: API keys never reach tool servers.
    #[test]
    fn children_get_a_small_environment() {
        let agent = [
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("LC_ALL", "C.UTF-8"),
            ("OPENAI_COMPAT_API_KEY", "sk-secret"),
            ("ANTHROPIC_API_KEY", "secret"),
            ("MCP_HOOK_SERVERS", "*"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let spec: BTreeMap<String, String> = [
            ("TODO_FILE".to_string(), "/tmp/t".to_string()),
            ("PATH".to_string(), "/opt".to_string()),
        ]
        .into();
        let env = child_environment(agent, &spec);
        let keys: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(keys, ["HOME", "LC_ALL", "PATH", "TODO_FILE"]);
        assert_eq!(env["PATH"], "/opt");
    }
}
