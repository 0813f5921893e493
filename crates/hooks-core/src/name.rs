//! Names: servers, hooks, and the qualified tool names the model sees.
//!
//! Rules \[N1\]-\[N3\] and \[H1\] of the contract (`docs/hooks.md`). Nothing here knows about servers
//! being up or down, or about the allowlist: that is [`crate::catalog`] and
//! [`crate::session`].

use crate::prelude::*;

use core::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Separator between server and bare tool name in a model-visible name \[N2\].
pub const SEPARATOR: &str = "__";

/// Longest model-visible tool name the model APIs accept \[N3\].
pub const MAX_MODEL_NAME_LEN: usize = 64;

/// Longest valid server name \[N1\].
pub const MAX_SERVER_NAME_LEN: usize = 32;

/// A validated server name: its configuration key \[N1\].
///
/// Valid names match `[A-Za-z0-9_-]{1,32}`, contain no `__`, and do not end in
/// `_`. The last condition is ours, not \[N1\]'s: with it, the first `__` of a
/// qualified name `S__T` is always the separator, so splitting \[N2\] is the exact
/// inverse of qualifying. Without it, server `a_` with tool `Stop` and server
/// `a` with hook `_Stop` would both be `a___Stop`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerName(
    // Invariant: satisfies `ServerName::check`.
    String,
);

/// Why a server name was refused \[N1\].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerNameError {
    /// The name as given.
    pub name: String,
    /// What is wrong with it, in words.
    pub problem: &'static str,
}

impl fmt::Display for ServerNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid MCP server name {:?}: {}; a server name is 1 to {} characters \
             from A-Z a-z 0-9 _ -, without \"__\" and not ending in \"_\"",
            self.name, self.problem, MAX_SERVER_NAME_LEN
        )
    }
}

impl core::error::Error for ServerNameError {}

impl ServerName {
    /// Validates `name` as a server name \[N1\].
    pub fn new(name: impl Into<String>) -> Result<ServerName, ServerNameError> {
        let name = name.into();
        match Self::check(&name) {
            Ok(()) => Ok(ServerName(name)),
            Err(problem) => Err(ServerNameError { name, problem }),
        }
    }

    fn check(name: &str) -> Result<(), &'static str> {
        if name.is_empty() {
            return Err("it is empty");
        }
        if name.len() > MAX_SERVER_NAME_LEN {
            return Err("it is longer than 32 characters");
        }
        if !name.bytes().all(is_name_byte) {
            return Err("it has a character outside A-Z a-z 0-9 _ -");
        }
        if name.contains(SEPARATOR) {
            return Err("it contains \"__\", which separates server from tool");
        }
        if name.ends_with('_') {
            return Err("it ends in \"_\", which would make S__T ambiguous");
        }
        Ok(())
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ServerName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Reads a name as events write it, and checks it as [`ServerName::new`]
/// does.
impl<'de> Deserialize<'de> for ServerName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        ServerName::new(name).map_err(serde::de::Error::custom)
    }
}

/// A byte allowed in server names and model-visible tool names.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether a bare tool name is a hook: it starts with `_` \[H1\].
pub fn is_hook_name(bare: &str) -> bool {
    bare.starts_with('_')
}

/// The model-visible name of tool `bare` of `server`: `S__T` \[N2\].
pub fn qualify(server: &ServerName, bare: &str) -> String {
    let mut name = String::with_capacity(server.0.len() + SEPARATOR.len() + bare.len());
    name.push_str(&server.0);
    name.push_str(SEPARATOR);
    name.push_str(bare);
    name
}

/// Splits a model-visible name at its first `__` into server and bare name
/// \[N2\]. `None` when there is no `__` or either side is empty.
pub fn split_qualified(name: &str) -> Option<(&str, &str)> {
    let (server, bare) = name.split_once(SEPARATOR)?;
    (!server.is_empty() && !bare.is_empty()).then_some((server, bare))
}

/// Why a qualified name cannot be offered to the model \[N3\].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ModelNameProblem {
    /// The bare tool name is empty.
    EmptyBareName,
    /// Longer than [`MAX_MODEL_NAME_LEN`] characters.
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Holds a character outside `[A-Za-z0-9_-]`.
    BadCharacter {
        /// The first such character.
        character: char,
    },
}

impl fmt::Display for ModelNameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelNameProblem::EmptyBareName => f.write_str("the tool name is empty"),
            ModelNameProblem::TooLong { len } => write!(
                f,
                "the qualified name is {len} characters, model APIs accept at most {MAX_MODEL_NAME_LEN}"
            ),
            ModelNameProblem::BadCharacter { character } => write!(
                f,
                "the qualified name contains {character:?}, model APIs accept only A-Z a-z 0-9 _ -"
            ),
        }
    }
}

/// Checks that `qualified` (made by [`qualify`]) is acceptable to model APIs \[N3\].
pub fn check_model_name(qualified: &str, bare: &str) -> Result<(), ModelNameProblem> {
    if bare.is_empty() {
        return Err(ModelNameProblem::EmptyBareName);
    }
    if let Some(character) = qualified
        .chars()
        .find(|&c| !c.is_ascii() || !is_name_byte(c as u8))
    {
        return Err(ModelNameProblem::BadCharacter { character });
    }
    if qualified.len() > MAX_MODEL_NAME_LEN {
        return Err(ModelNameProblem::TooLong {
            len: qualified.len(),
        });
    }
    Ok(())
}

/// A hook point the agent calls \[H4\], \[E1\]-\[E6\].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookPoint {
    /// `_SessionStart`: a session begins (or resumes) \[E1\].
    SessionStart,
    /// `_UserPromptSubmit`: a prompt arrived \[E2\].
    UserPromptSubmit,
    /// `_PreToolUse`: the model asked for a tool call \[E3\].
    PreToolUse,
    /// `_PostToolUse`: a tool call ran \[E4\].
    PostToolUse,
    /// `_Stop`: the model wants to end its turn.
    Stop,
    /// `_PreCompact`: the context is about to be compacted \[E5\].
    PreCompact,
    /// `_PostCompact`: the context was compacted.
    PostCompact,
    /// `_SessionEnd`: the session ends \[E6\].
    SessionEnd,
}

impl HookPoint {
    /// Every hook point, in the order of a session's life.
    pub const ALL: [HookPoint; 8] = [
        HookPoint::SessionStart,
        HookPoint::UserPromptSubmit,
        HookPoint::PreToolUse,
        HookPoint::PostToolUse,
        HookPoint::Stop,
        HookPoint::PreCompact,
        HookPoint::PostCompact,
        HookPoint::SessionEnd,
    ];

    /// The bare tool name: `_Stop`, `_PostCompact`, ….
    pub const fn tool_name(self) -> &'static str {
        match self {
            HookPoint::SessionStart => "_SessionStart",
            HookPoint::UserPromptSubmit => "_UserPromptSubmit",
            HookPoint::PreToolUse => "_PreToolUse",
            HookPoint::PostToolUse => "_PostToolUse",
            HookPoint::Stop => "_Stop",
            HookPoint::PreCompact => "_PreCompact",
            HookPoint::PostCompact => "_PostCompact",
            HookPoint::SessionEnd => "_SessionEnd",
        }
    }

    /// The hook point a bare tool name names, if it names a known one. Exact
    /// and case-sensitive: `_stop` is not `_Stop`.
    pub fn from_tool_name(bare: &str) -> Option<HookPoint> {
        HookPoint::ALL.into_iter().find(|h| h.tool_name() == bare)
    }
}

impl fmt::Display for HookPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.tool_name())
    }
}

impl Serialize for HookPoint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.tool_name())
    }
}

/// Reads the tool name events write (`"_Stop"`); any other is an error.
impl<'de> Deserialize<'de> for HookPoint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        HookPoint::from_tool_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("{name:?} is not a hook point")))
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters
/// (none included) and every other character itself.
pub fn glob(pattern: &str, name: &str) -> bool {
    let (pattern, name): (Vec<char>, Vec<char>) =
        (pattern.chars().collect(), name.chars().collect());
    let (mut p, mut n) = (0, 0);
    // Where the last `*` was, and where in `name` it is matched up to.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, n));
            p += 1;
        } else if p < pattern.len() && pattern[p] == name[n] {
            p += 1;
            n += 1;
        } else if let Some((sp, sn)) = star {
            // Let the last `*` take one more character, and try again.
            star = Some((sp, sn + 1));
            p = sp + 1;
            n = sn + 1;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_error(name: &str) -> Option<&'static str> {
        ServerName::new(name).err().map(|e| e.problem)
    }

    // [N1]
    #[test]
    fn server_names_follow_n1() {
        for ok in [
            "a",
            "todo",
            "my-server",
            "a_b",
            "_lead",
            "A9-z",
            &"x".repeat(32),
        ] {
            assert_eq!(name_error(ok), None, "{ok:?} should be valid");
        }
        assert_eq!(name_error(""), Some("it is empty"));
        assert_eq!(
            name_error(&"x".repeat(33)),
            Some("it is longer than 32 characters")
        );
        assert_eq!(
            name_error("a.b"),
            Some("it has a character outside A-Z a-z 0-9 _ -")
        );
        assert_eq!(
            name_error("é"),
            Some("it has a character outside A-Z a-z 0-9 _ -")
        );
        assert_eq!(
            name_error("a__b"),
            Some("it contains \"__\", which separates server from tool")
        );
        assert_eq!(
            name_error("a_"),
            Some("it ends in \"_\", which would make S__T ambiguous")
        );
    }

    #[test]
    fn server_name_error_names_the_value() {
        let err = ServerName::new("bad name").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid MCP server name \"bad name\": ")
        );
    }

    // [N2]: split at the first `__`; the bare name may contain `__`; splitting
    // inverts qualifying for every valid server name.
    #[test]
    fn qualify_and_split_n2() {
        let s = ServerName::new("srv").unwrap();
        assert_eq!(qualify(&s, "read"), "srv__read");
        assert_eq!(qualify(&s, "_Stop"), "srv___Stop");
        assert_eq!(split_qualified("srv__a__b"), Some(("srv", "a__b")));
        assert_eq!(split_qualified("srv___Stop"), Some(("srv", "_Stop")));
        assert_eq!(split_qualified("srv"), None);
        assert_eq!(split_qualified("__x"), None);
        assert_eq!(split_qualified("x__"), None);
        let lead = ServerName::new("_x").unwrap();
        assert_eq!(split_qualified(&qualify(&lead, "t")), Some(("_x", "t")));
    }

    // [N3]
    #[test]
    fn model_names_follow_n3() {
        let s = ServerName::new("srv").unwrap();
        let ok = qualify(&s, &"t".repeat(59));
        assert_eq!(ok.len(), 64);
        assert_eq!(check_model_name(&ok, "t"), Ok(()));
        let long = qualify(&s, &"t".repeat(60));
        assert_eq!(
            check_model_name(&long, "t"),
            Err(ModelNameProblem::TooLong { len: 65 })
        );
        assert_eq!(
            check_model_name("srv__a.b", "a.b"),
            Err(ModelNameProblem::BadCharacter { character: '.' })
        );
        assert_eq!(
            check_model_name("srv__ü", "ü"),
            Err(ModelNameProblem::BadCharacter { character: 'ü' })
        );
        assert_eq!(
            check_model_name("srv__", ""),
            Err(ModelNameProblem::EmptyBareName)
        );
    }

    // [H1], [H4]
    #[test]
    fn hooks_are_underscore_names_and_points_are_exact() {
        assert!(is_hook_name("_Stop"));
        assert!(is_hook_name("_"));
        assert!(!is_hook_name("Stop"));
        assert_eq!(HookPoint::from_tool_name("_Stop"), Some(HookPoint::Stop));
        assert_eq!(
            HookPoint::from_tool_name("_PostCompact"),
            Some(HookPoint::PostCompact)
        );
        assert_eq!(HookPoint::from_tool_name("_stop"), None);
        assert_eq!(
            HookPoint::from_tool_name("_PreToolUse"),
            Some(HookPoint::PreToolUse)
        );
        assert_eq!(HookPoint::from_tool_name("_SubagentStart"), None);
        for hook in HookPoint::ALL {
            assert_eq!(HookPoint::from_tool_name(hook.tool_name()), Some(hook));
        }
    }
}
