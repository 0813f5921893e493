//! Which MCP servers to connect to, and how: [`ServerSpec`].
//!
//! Specs come from the `mcpServers` JSON format that Claude Code, Claude
//! Desktop and Cursor share, parsed by [`parse_mcp_servers`] with the order of
//! the keys kept: that order is the configuration order of \[I3\]. Reading the
//! file is the caller's job; errors here name the key and the bad value.
//!
//! Also here: the environment a stdio child gets ([`child_environment`]),
//! which is a small fixed set of the agent's variables plus exactly what the
//! spec names, so that API keys never leak into tool servers.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use hooks_core::{HookTimeout, ServerName};
use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::Value;

/// One MCP server to connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its configuration key \[N1\].
    pub name: ServerName,
    /// How to reach it.
    pub transport: TransportSpec,
    /// Its own hook deadline, `"hookTimeoutMs"` in its entry \[C4\]; the
    /// session's (`SPROUT_AGENT_HOOK_TIMEOUT_MS`) when `None`.
    pub hook_timeout: Option<HookTimeout>,
    /// The tools the person lets run unasked, `"autoApprove"` in its entry:
    /// bare tool names, each of which may hold `*` wildcards \[U4\].
    pub auto_approve: Vec<String>,
    /// `"required": true` in its entry: its hooks fail closed \[F1\].
    pub required: bool,
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
            hook_timeout: None,
            auto_approve: Vec::new(),
            required: false,
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
            hook_timeout: None,
            auto_approve: Vec::new(),
            required: false,
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
    /// VS Code's name for the same object.
    #[serde(rename = "servers")]
    vscode: Option<OrderedEntries>,
}

/// An `mcpServers` document, read: the servers to start, and what in it
/// was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpConfig {
    /// The servers, in document order, without those marked `"disabled"`.
    pub servers: Vec<ServerSpec>,
    /// What was read but not used, each naming its JSON path: a disabled
    /// server, a key no entry has. For people; none is an error.
    pub notes: Vec<String>,
}

/// The keys of a server entry that Sprout reads.
const ENTRY_KEYS: [&str; 11] = [
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "hookTimeoutMs",
    "autoApprove",
    "required",
    "disabled",
];

/// Parses an `mcpServers` document, keeping the servers in document order.
///
/// Stdio entries: `command` (required), `args`, `env`, `cwd`, and an optional
/// `"type": "stdio"`. HTTP entries: `"type": "http"` and `url`. Any other
/// `type`, a missing or mistyped field, an invalid server name \[N1\], an
/// `env` key that is no variable name, or a NUL byte in `command`, `args`
/// or an `env` value is an error naming the key and the value. Either kind
/// may carry `"autoApprove"` (tool names or patterns the person lets run
/// unasked \[U4\]) and `"required": true` (a required gate \[F1\]), and
/// `"hookTimeoutMs"`, the server's own hook deadline (1 to 600000) \[C4\]. A
/// document without `mcpServers` configures no server.
pub fn parse_mcp_servers(json: &str) -> Result<Vec<ServerSpec>, SpecError> {
    parse_mcp_config(json).map(|config| config.servers)
}

/// As [`parse_mcp_servers`], with the notes on what was not used: a
/// server marked `"disabled": true` (Claude Desktop's and Cline's key) is
/// not among the servers, and a key of an entry that Sprout does not read
/// is named. VS Code's `"servers"` is read as `"mcpServers"`; both in one
/// document is an error.
pub fn parse_mcp_config(json: &str) -> Result<McpConfig, SpecError> {
    let not_json =
        |e: serde_json::Error| err("", format!("not a valid mcpServers JSON document: {e}"));
    serde_json::from_str::<de::IgnoredAny>(json).map_err(not_json)?;
    // serde reads a struct from an array too; a configuration is an object.
    if !json.trim_start().starts_with('{') {
        return Err(err(
            "",
            "expected a JSON object such as {\"mcpServers\": {…}}, found something else",
        ));
    }
    let document: Document = serde_json::from_str(json).map_err(not_json)?;
    let (top, entries) = match (document.servers, document.vscode) {
        (Some(_), Some(_)) => {
            return Err(err(
                "",
                "both \"mcpServers\" and \"servers\" (VS Code's name for it) are given; keep one",
            ));
        }
        (Some(OrderedEntries(entries)), None) => ("mcpServers", entries),
        (None, Some(OrderedEntries(entries))) => ("servers", entries),
        (None, None) => ("mcpServers", Vec::new()),
    };
    let mut config = McpConfig {
        servers: Vec::new(),
        notes: Vec::new(),
    };
    for (key, value) in entries {
        let spec = server_spec(&key, &value).map_err(|e| SpecError {
            at: e.at.replacen("mcpServers", top, 1),
            ..e
        })?;
        let fields = value.as_object();
        for unknown in fields
            .into_iter()
            .flat_map(|f| f.keys())
            .filter(|k| !ENTRY_KEYS.contains(&k.as_str()))
        {
            config.notes.push(format!(
                "{top}.{key}.{unknown} is not a key Sprout reads; it is ignored"
            ));
        }
        match fields.and_then(|f| f.get("disabled")) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => config.servers.push(spec),
            Some(Value::Bool(true)) => config.notes.push(format!(
                "{top}.{key} is disabled (\"disabled\": true); it is not started"
            )),
            Some(other) => {
                return Err(err(
                    format!("{top}.{key}.disabled"),
                    format!("expected true or false, found {}", brief(other)),
                ));
            }
        }
    }
    Ok(config)
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
                Some(Value::String(c)) if c.contains('\0') => {
                    return Err(err(format!("{at}.command"), NUL_BYTE));
                }
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
            let args = string_list(fields.get("args"), &format!("{at}.args"))?;
            if let Some(i) = args.iter().position(|a| a.contains('\0')) {
                return Err(err(format!("{at}.args[{i}]"), NUL_BYTE));
            }
            let env = string_map(fields.get("env"), &format!("{at}.env"))?;
            for (key, value) in &env {
                if let Some(why) = not_a_variable_name(key) {
                    return Err(err(
                        format!("{at}.env"),
                        format!("{key:?} is not an environment variable name: {why}"),
                    ));
                }
                if value.contains('\0') {
                    return Err(err(format!("{at}.env.{key}"), NUL_BYTE));
                }
            }
            TransportSpec::Stdio {
                command,
                args,
                env,
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
            check_http_url(&url).map_err(|problem| {
                err(
                    format!("{at}.url"),
                    format!("{:?} {problem}", redact_url(&url)),
                )
            })?;
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
    let hook_timeout = match fields.get("hookTimeoutMs") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .and_then(HookTimeout::from_millis)
                .ok_or_else(|| {
                    err(
                        format!("{at}.hookTimeoutMs"),
                        format!(
                            "expected a whole number of milliseconds from 1 to 600000, found {}",
                            brief(value)
                        ),
                    )
                })?,
        ),
    };
    let auto_approve = string_list(fields.get("autoApprove"), &format!("{at}.autoApprove"))?;
    if let Some(i) = auto_approve.iter().position(|p| p.trim().is_empty()) {
        return Err(err(
            format!("{at}.autoApprove[{i}]"),
            "expected a tool name or a pattern such as \"read_*\", found an empty string",
        ));
    }
    let required = match fields.get("required") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(required)) => *required,
        Some(other) => {
            return Err(err(
                format!("{at}.required"),
                format!("expected true or false, found {}", brief(other)),
            ));
        }
    };
    Ok(ServerSpec {
        name,
        transport,
        hook_timeout,
        auto_approve,
        required,
    })
}

/// The message for a string a program cannot be given.
const NUL_BYTE: &str = "contains a NUL byte, which no program can be given; remove it";

/// Why `name` cannot be an environment variable's name, if it cannot: the
/// system's own rule (not empty, no `=`, no NUL), which also refuses names
/// that only some shells could not use.
fn not_a_variable_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.contains('=') {
        Some("it contains '=', which ends a name")
    } else if name.contains('\0') {
        Some("it contains a NUL byte")
    } else {
        None
    }
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

/// Why a URL cannot be a Streamable HTTP endpoint: a phrase that follows
/// the URL ("is not a valid URL (…)", "has no host").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// It does not parse.
    #[error("is not a valid URL ({0})")]
    Invalid(String),
    /// Its scheme is neither `http` nor `https`.
    #[error("is not an http:// or https:// URL")]
    Scheme,
    /// It names no host.
    #[error("has no host")]
    NoHost,
}

/// Why `url` cannot be a Streamable HTTP endpoint, if it cannot.
pub fn check_http_url(url: &str) -> Result<(), UrlError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| UrlError::Invalid(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(UrlError::Scheme);
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(UrlError::NoHost);
    }
    Ok(())
}

/// Query parameters whose values are hidden wherever a URL is shown:
/// matched case-insensitively, as the whole name or its last `_`/`-` part.
const SECRET_PARAMETERS: &[&str] = &[
    "key",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "sig",
    "signature",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "session",
    "code",
];

/// `url` as it may be shown to a person or written to a log: user-info and
/// the values of query parameters that look like secrets
/// (`api_key`, `access_token`, `sig`, `password`, …) become `***`.
/// Text that is not a URL is shown as it is, unless it has a `@`, `?` or
/// `#` (where a secret could hide): then as `<invalid URL>`.
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        if url.contains(['@', '?', '#']) {
            return "<invalid URL>".to_owned();
        }
        return url.to_owned();
    };
    if !parsed.username().is_empty() {
        let _ = parsed.set_username("***");
    }
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("***"));
    }
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let value = if looks_secret(&k) {
                    "***".to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

/// Whether a name (of a query parameter, a header or an environment
/// variable) looks like it holds a secret (`api_key`, `TOKEN`, `auth`, …),
/// so that its value is never shown.
pub fn looks_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let last = name.rsplit(['_', '-', '.']).next().unwrap_or(&name);
    SECRET_PARAMETERS
        .iter()
        .any(|secret| name == *secret || last == *secret || name.replace(['_', '-'], "") == *secret)
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
/// enough to find programs, a home, a temp dir and the character locale;
/// nothing else (no other `LC_*`, no `TZ`: a server that needs one names it
/// in its entry's `env`).
pub const INHERITED_VARIABLES: &[&str] = &["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE"];

/// The environment of a stdio child: the agent's [`INHERITED_VARIABLES`],
/// then the spec's `env` on top.
pub fn child_environment(
    agent: impl IntoIterator<Item = (String, String)>,
    spec_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = agent
        .into_iter()
        .filter(|(k, _)| INHERITED_VARIABLES.contains(&k.as_str()))
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
    fn reads_auto_approve_and_required_u4_f1() {
        let specs = parse_mcp_servers(
            r#"{"mcpServers": {
                "git": {"command": "g", "autoApprove": ["status", "log_*"], "required": true},
                "web": {"type": "http", "url": "http://127.0.0.1:9/mcp"}
            }}"#,
        )
        .unwrap();
        assert_eq!(specs[0].auto_approve, ["status", "log_*"]);
        assert!(specs[0].required);
        assert!(specs[1].auto_approve.is_empty());
        assert!(!specs[1].required);
        for (entry, at) in [
            (
                r#"{"command": "g", "required": "yes"}"#,
                "mcpServers.s.required",
            ),
            (
                r#"{"command": "g", "autoApprove": "all"}"#,
                "mcpServers.s.autoApprove",
            ),
            (
                r#"{"command": "g", "autoApprove": [""]}"#,
                "mcpServers.s.autoApprove[0]",
            ),
        ] {
            let e =
                parse_mcp_servers(&format!(r#"{{"mcpServers": {{"s": {entry}}}}}"#)).unwrap_err();
            assert_eq!(e.at, at, "{entry}: {e}");
        }
    }

    #[test]
    fn refuses_what_no_program_can_be_given() {
        for (entry, at, says) in [
            (
                r#"{"command": "a\u0000b"}"#,
                "mcpServers.s.command",
                "NUL byte",
            ),
            (
                r#"{"command": "a", "args": ["x", "y\u0000"]}"#,
                "mcpServers.s.args[1]",
                "NUL byte",
            ),
            (
                r#"{"command": "a", "env": {"K": "v\u0000"}}"#,
                "mcpServers.s.env.K",
                "NUL byte",
            ),
            (
                r#"{"command": "a", "env": {"A=B": "v"}}"#,
                "mcpServers.s.env",
                "\"A=B\" is not an environment variable name: it contains '='",
            ),
            (
                r#"{"command": "a", "env": {"": "v"}}"#,
                "mcpServers.s.env",
                "it is empty",
            ),
        ] {
            let e =
                parse_mcp_servers(&format!(r#"{{"mcpServers": {{"s": {entry}}}}}"#)).unwrap_err();
            assert_eq!(e.at, at, "{entry}: {e}");
            assert!(e.message.contains(says), "{entry}: {e}");
        }
    }

    #[test]
    fn disabled_servers_unknown_keys_and_vscodes_name_are_said() {
        let config = parse_mcp_config(
            r#"{"servers": {
                "on": {"command": "a", "description": "x"},
                "off": {"command": "b", "disabled": true}
            }}"#,
        )
        .unwrap();
        assert_eq!(names(&config.servers), ["on"]);
        assert_eq!(
            config.notes,
            [
                "servers.on.description is not a key Sprout reads; it is ignored",
                "servers.off is disabled (\"disabled\": true); it is not started",
            ]
        );
        let e = parse_mcp_config(r#"{"servers": {"x": {"command": 1}}}"#).unwrap_err();
        assert_eq!(e.at, "servers.x.command");
        let e = parse_mcp_config(r#"[{"x": {"command": "a"}}]"#).unwrap_err();
        assert!(e.message.contains("expected a JSON object"), "{e}");
        let e = parse_mcp_config(r#"{"servers": {}, "mcpServers": {}}"#).unwrap_err();
        assert!(e.message.contains("keep one"), "{e}");
        let e = parse_mcp_config(r#"{"mcpServers": {"x": {"command": "a", "disabled": "yes"}}}"#)
            .unwrap_err();
        assert_eq!(e.at, "mcpServers.x.disabled");
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
                "mcpServers.a.url: \"ftp://x/\" is not an http:// or https:// URL",
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

    // [C4]: a server's own hook deadline, in the range of [C1]; a bad one
    // names the server and the key.
    #[test]
    fn hook_timeout_per_server_c4() {
        let specs = parse_mcp_servers(
            r#"{"mcpServers": {
                "gate": {"command": "g", "hookTimeoutMs": 120000},
                "todo": {"command": "t"},
                "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "hookTimeoutMs": 1}
            }}"#,
        )
        .unwrap();
        let timeouts: Vec<Option<u64>> = specs
            .iter()
            .map(|s| s.hook_timeout.map(|t| t.duration().as_millis() as u64))
            .collect();
        assert_eq!(timeouts, [Some(120_000), None, Some(1)]);
        for bad in ["0", "600001", "1.5", "\"100\"", "-3", "true"] {
            let json = format!(
                r#"{{"mcpServers": {{"gate": {{"command": "g", "hookTimeoutMs": {bad}}}}}}}"#
            );
            assert_eq!(
                parse_mcp_servers(&json).unwrap_err().to_string(),
                format!(
                    "mcpServers.gate.hookTimeoutMs: expected a whole number of milliseconds from 1 to 600000, found {bad}"
                ),
                "{json}"
            );
        }
    }

    // Issue 10: credentials in server URLs are never shown.
    #[test]
    fn urls_are_shown_without_credentials() {
        for (url, shown) in [
            ("http://127.0.0.1:9/mcp", "http://127.0.0.1:9/mcp"),
            (
                "https://user:hunter2@example.com/mcp",
                "https://***:***@example.com/mcp",
            ),
            (
                "https://example.com/mcp?api_key=s3cret&region=eu&X-Amz-Signature=abc&access_token=t",
                "https://example.com/mcp?api_key=***&region=eu&X-Amz-Signature=***&access_token=***",
            ),
            (
                "https://example.com/mcp?sig=1&page=2",
                "https://example.com/mcp?sig=***&page=2",
            ),
            ("not a url?token=x", "<invalid URL>"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    // Issue 10: a bad URL is refused when the file is read, with the
    // credentials hidden in the message.
    #[test]
    fn bad_urls_are_refused_at_load() {
        for (url, message) in [
            ("http://", "\"http://\" is not a valid URL (empty host)"),
            (
                "http://exa mple.com/",
                "\"http://exa mple.com/\" is not a valid URL (invalid international domain name)",
            ),
            (
                "mailto:a@b.c",
                "\"mailto:a@b.c\" is not an http:// or https:// URL",
            ),
            (
                "https://u:p@[::1/mcp",
                "\"<invalid URL>\" is not a valid URL (invalid IPv6 address)",
            ),
        ] {
            let doc = serde_json::json!({"mcpServers": {"a": {"type": "http", "url": url}}});
            let error = parse_mcp_servers(&doc.to_string()).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("mcpServers.a.url: {message}"),
                "{url}"
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
            ("LC_CTYPE", "C.UTF-8"),
            ("LC_TIME", "de_DE.UTF-8"),
            ("LANGUAGE", "de"),
            ("TZ", "Europe/Berlin"),
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
        assert_eq!(keys, ["HOME", "LC_ALL", "LC_CTYPE", "PATH", "TODO_FILE"]);
        assert_eq!(env["PATH"], "/opt");
    }
}
