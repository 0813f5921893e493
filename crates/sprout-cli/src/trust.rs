//! Project trust \[U1\]-\[U3\], and the tools the person allowed for good
//! \[U6\].
//!
//! A `.mcp.json` the agent finds by itself (in the working directory) is
//! the project's, not the person's: none of its servers starts until the
//! person trusted that entry. Trust is per entry: the file's absolute path,
//! the server's name and the SHA-256 of the entry in a canonical JSON form,
//! so a changed entry asks again. The ledger is one JSON file under the
//! user's configuration directory (0600 in a 0700 directory), changed
//! under a lock and replaced whole, never written in place.
//!
//! Not here: asking about a tool call (`approve`), reading the rest of the
//! configuration (`settings`).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{IsTerminal as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use hooks_mcp::{ServerSpec, TransportSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::render::one_line;

/// The ledger's name in `$XDG_CONFIG_HOME/sprout/`.
const LEDGER: &str = "trust.json";

/// What went wrong with trust: each message names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrustError {
    /// Neither `XDG_CONFIG_HOME` nor `HOME` names a directory.
    #[error(
        "cannot tell where to keep trusted MCP servers: neither XDG_CONFIG_HOME nor HOME is set to an absolute path; set one, or name your own configuration with --mcp-config FILE"
    )]
    NoConfigDir,
    /// The ledger could not be read or written.
    #[error("cannot use the trust file {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The ledger is not what this version writes.
    #[error(
        "the trust file {path} is not valid ({why}); fix it, or delete it to trust again from scratch"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Untrusted servers and nobody to ask \[U3\].
    #[error("{}", untrusted_message(.file, .entries))]
    Untrusted {
        /// The project's configuration file.
        file: PathBuf,
        /// Each untrusted entry, as shown.
        entries: Vec<String>,
    },
    /// `sprout trust` without a `.mcp.json`.
    #[error("there is no .mcp.json in {0}; nothing to trust")]
    NoProjectFile(PathBuf),
    /// `sprout trust` with nobody to ask and no `--yes`.
    #[error(
        "standard input or error is not a terminal, so nobody can be asked; pass --yes to trust the entries shown"
    )]
    NobodyToAsk,
}

/// The untrusted entries of `file`, each as `shown`, as every question
/// and message about them lists them \[U3\].
pub(crate) fn listing(file: &Path, shown: &[String]) -> String {
    let mut text = format!(
        "{} names MCP servers you have not trusted; starting one runs its command or connects to its URL:",
        one_line(&file.display().to_string())
    );
    for entry in shown {
        text.push_str("\n  ");
        text.push_str(entry);
    }
    text
}

fn untrusted_message(file: &Path, entries: &[String]) -> String {
    let mut text = listing(file, entries);
    text.push_str("\nNone of them was started.");
    let dir = file.parent().unwrap_or(Path::new("."));
    text.push_str(&format!(
        "\nTrust them with `sprout trust {}` (it shows them first, then asks), or name a configuration of your own with --mcp-config FILE.",
        dir.display()
    ));
    text
}

/// One server entry of a configuration file, as trust knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The server's name (the entry's key).
    pub(crate) name: String,
    /// SHA-256 of the entry's canonical JSON, in hex.
    pub(crate) digest: String,
}

/// A configuration file the servers came from.
#[derive(Clone, Debug)]
pub(crate) struct Source {
    /// Its absolute path.
    pub(crate) path: PathBuf,
    /// Its entries, in file order.
    pub(crate) entries: Vec<Entry>,
    /// Found by the agent itself (a project's `.mcp.json`) rather than
    /// named by the person \[U1\].
    pub(crate) project: bool,
}

impl Source {
    /// The entry of server `name`, if this file has one.
    pub(crate) fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

/// A session's servers and where they came from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Servers {
    /// The servers, in configuration order.
    pub(crate) specs: Vec<ServerSpec>,
    /// The file they were read from; `None` for none or built-in ones.
    pub(crate) source: Option<Source>,
}

impl Servers {
    /// Servers the person configured themselves (the demo's): trusted.
    pub(crate) fn own(specs: Vec<ServerSpec>) -> Servers {
        Servers {
            specs,
            source: None,
        }
    }
}

/// The entries of an `mcpServers` document whose text parsed already
/// (`hooks_mcp::parse_mcp_servers`), each with its digest.
pub(crate) fn entries(text: &str) -> Vec<Entry> {
    let Ok(Value::Object(document)) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let Some(Value::Object(servers)) = document
        .get("mcpServers")
        .or_else(|| document.get("servers"))
    else {
        return Vec::new();
    };
    servers
        .iter()
        .map(|(name, entry)| Entry {
            name: name.clone(),
            digest: digest(entry),
        })
        .collect()
}

/// SHA-256 of `value`'s canonical JSON, in hex: object keys sorted by
/// their UTF-8 bytes, no white space, strings and numbers as serde_json
/// writes them. Two entries that parse to the same value have one digest
/// however they are spaced or ordered \[U2\].
pub(crate) fn digest(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// How a server entry is shown to the person: its full command line (with
/// the variables it sets first, as a shell writes them) or URL, secrets
/// hidden, control characters escaped \[U3\].
pub(crate) fn shown(spec: &ServerSpec) -> String {
    let text = match &spec.transport {
        TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut words: Vec<String> = env
                .iter()
                .map(|(k, v)| match hooks_mcp::looks_secret(k) {
                    true => format!("{k}=***"),
                    false => format!("{k}={}", quoted(v)),
                })
                .collect();
            words.push(quoted(command));
            words.extend(args.iter().map(|a| quoted(a)));
            let mut line = words.join(" ");
            if let Some(dir) = cwd {
                line.push_str(&format!(" (in {})", dir.display()));
            }
            line
        }
        TransportSpec::Http { url, headers } => {
            let mut line = hooks_mcp::redact_url(url);
            if !headers.is_empty() {
                let names: Vec<&str> = headers.keys().map(String::as_str).collect();
                line.push_str(&format!(" (headers: {})", names.join(", ")));
            }
            line
        }
    };
    // Every field that changes what the entry may do is shown with it.
    let mut extra = Vec::new();
    if !spec.auto_approve.is_empty() {
        extra.push(format!(
            "its tools {} run without asking",
            spec.auto_approve.join(", ")
        ));
    }
    if spec.required {
        extra.push("a required gate".to_owned());
    }
    if let Some(timeout) = spec.hook_timeout {
        extra.push(format!(
            "hook deadline {} ms",
            timeout.duration().as_millis()
        ));
    }
    let text = if extra.is_empty() {
        text
    } else {
        format!("{text} [{}]", extra.join("; "))
    };
    format!("{}: {}", spec.name, one_line(&text))
}

/// A word as a POSIX shell would need it written.
fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// One trusted entry in the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trusted {
    /// The configuration file's absolute path.
    file: PathBuf,
    /// The server's name.
    server: String,
    /// The entry's digest when it was trusted.
    digest: String,
}

/// One tool the person allowed for good \[U6\]: for the server entry as it
/// was then (its digest), so a changed entry forgets it. Apart from trust:
/// allowing a tool never trusts an entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Always {
    file: PathBuf,
    server: String,
    digest: String,
    tool: String,
}

/// The ledger's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Ledger {
    #[serde(default)]
    trusted: Vec<Trusted>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    always: Vec<Always>,
}

/// Whether an entry is trusted, as the ledger has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    Trusted,
    /// Never trusted.
    New,
    /// Trusted once, and changed since.
    Changed,
}

/// What stands for the entry of a server the file has no entry for (it
/// cannot happen for a file that parsed; if it did, the server would be
/// asked about every time and never trusted).
const NO_DIGEST: &str = "";

impl Ledger {
    fn find(&self, file: &Path, server: &str) -> Option<&Trusted> {
        self.trusted
            .iter()
            .find(|t| t.file == file && t.server == server)
    }

    /// Whether `entry` of `file` is trusted as it is now \[U2\].
    pub(crate) fn standing(&self, file: &Path, entry: &Entry) -> Standing {
        match self.find(file, &entry.name) {
            _ if entry.digest == NO_DIGEST => Standing::New,
            Some(t) if t.digest == entry.digest => Standing::Trusted,
            Some(_) => Standing::Changed,
            None => Standing::New,
        }
    }

    /// Trusts `entry` of `file` as it is now.
    pub(crate) fn trust(&mut self, file: &Path, entry: &Entry) {
        if entry.digest == NO_DIGEST {
            return;
        }
        self.trusted
            .retain(|t| !(t.file == file && t.server == entry.name));
        self.trusted.push(Trusted {
            file: file.to_path_buf(),
            server: entry.name.clone(),
            digest: entry.digest.clone(),
        });
    }

    /// Forgets every entry of `file`, and the tools allowed for good in
    /// them; returns the servers forgotten.
    pub(crate) fn revoke(&mut self, file: &Path) -> Vec<String> {
        let mut gone: Vec<String> = self
            .trusted
            .iter()
            .map(|t| (&t.file, &t.server))
            .chain(self.always.iter().map(|a| (&a.file, &a.server)))
            .filter(|(f, _)| *f == file)
            .map(|(_, s)| s.clone())
            .collect();
        gone.sort();
        gone.dedup();
        self.trusted.retain(|t| t.file != file);
        self.always.retain(|a| a.file != file);
        gone
    }

    /// Whether the person allowed `tool` of `entry` (as it is now) for
    /// good \[U6\].
    pub(crate) fn always(&self, file: &Path, entry: &Entry, tool: &str) -> bool {
        entry.digest != NO_DIGEST
            && self.always.iter().any(|a| {
                a.file == file
                    && a.server == entry.name
                    && a.digest == entry.digest
                    && a.tool == tool
            })
    }

    /// Allows `tool` of `entry`, as it is now, for good. Trusts nothing.
    pub(crate) fn allow_always(&mut self, file: &Path, entry: &Entry, tool: &str) {
        if entry.digest == NO_DIGEST || self.always(file, entry, tool) {
            return;
        }
        self.always.push(Always {
            file: file.to_path_buf(),
            server: entry.name.clone(),
            digest: entry.digest.clone(),
            tool: tool.to_owned(),
        });
    }

    /// Every trusted entry and every tool allowed for good, as `sprout
    /// trust --list` shows them.
    fn lines(&self) -> Vec<String> {
        let short = |digest: &str| digest.chars().take(12).collect::<String>();
        let trusted = self.trusted.iter().map(|t| {
            format!(
                "{}: {} (sha256 {})",
                t.file.display(),
                t.server,
                short(&t.digest)
            )
        });
        let always = self.always.iter().map(|a| {
            format!(
                "{}: {}: tool {} always allowed (sha256 {})",
                a.file.display(),
                a.server,
                a.tool,
                short(&a.digest)
            )
        });
        trusted.chain(always).map(|line| one_line(&line)).collect()
    }
}

/// Where the ledger lives.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    /// `$XDG_CONFIG_HOME/sprout/`, else `~/.config/sprout/` \[U2\].
    pub(crate) fn locate() -> Result<Store, TrustError> {
        crate::settings::base_dir(
            std::env::var_os("XDG_CONFIG_HOME"),
            std::env::var_os("HOME"),
            &[".config"],
        )
        .map(|config| Store {
            dir: config.join("sprout"),
        })
        .ok_or(TrustError::NoConfigDir)
    }

    fn file(&self) -> PathBuf {
        self.dir.join(LEDGER)
    }

    /// The ledger; empty if there is none yet.
    pub(crate) fn read(&self) -> Result<Ledger, TrustError> {
        let path = self.file();
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| TrustError::Corrupt {
                path,
                why: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ledger::default()),
            Err(source) => Err(TrustError::Io { path, source }),
        }
    }

    /// Changes the ledger under an exclusive lock (another sprout may be
    /// changing it too), and replaces it whole: written to a file of its
    /// own, 0600, then renamed over it, so a crash leaves the old or the
    /// new one, never half of one.
    pub(crate) fn change<T>(&self, f: impl FnOnce(&mut Ledger) -> T) -> Result<T, TrustError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TrustError::Io { path, source }
        };
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io(&self.dir))?;
        // A directory made before, by hand or by another tool: the person's
        // alone, as a new one is.
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io(&self.dir))?;
        let lock_path = self.dir.join("trust.lock");
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        // Held by another sprout for a moment at most: waited for within
        // the bound a session's lock is, never for ever.
        let _held = crate::sessions::SessionLock::take(&lock_path).map_err(|e| match e {
            crate::sessions::LockError::Io(source) => TrustError::Io {
                path: lock_path.clone(),
                source,
            },
            busy => TrustError::Io {
                path: lock_path.clone(),
                source: std::io::Error::other(format!("{busy}; try again")),
            },
        })?;
        let mut ledger = self.read()?;
        let answer = f(&mut ledger);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let fresh = self
            .dir
            .join(format!("{LEDGER}.{}.{nanos}", std::process::id()));
        let text = match serde_json::to_string_pretty(&ledger) {
            Ok(text) => text + "\n",
            Err(e) => {
                return Err(TrustError::Corrupt {
                    path: self.file(),
                    why: e.to_string(),
                });
            }
        };
        let path = self.file();
        let written = (|| {
            // A new file of our own: never one planted there, nor a link.
            let mut file = OpenOptions::new()
                .create_new(true)
                .write(true)
                .mode(0o600)
                .open(&fresh)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&fresh, &path)?;
            File::open(&self.dir)?.sync_all()
        })();
        if let Err(source) = written {
            let _ = std::fs::remove_file(&fresh);
            return Err(TrustError::Io { path, source });
        }
        Ok(answer)
    }
}

/// Whether a person can be asked: standard input and error both a
/// terminal \[U3\].
pub(crate) fn person_present() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The untrusted entries of `servers`' project file, each with its spec
/// and standing; empty when all are trusted or the file is the person's.
fn untrusted<'a>(servers: &'a Servers, ledger: &Ledger) -> Vec<(&'a ServerSpec, Entry, Standing)> {
    let Some(source) = servers.source.as_ref().filter(|s| s.project) else {
        return Vec::new();
    };
    servers
        .specs
        .iter()
        .filter_map(|spec| {
            // A server with no entry of its own is never taken as trusted.
            let entry = source.entry(spec.name.as_str()).cloned().unwrap_or(Entry {
                name: spec.name.as_str().to_owned(),
                digest: NO_DIGEST.to_owned(),
            });
            match ledger.standing(&source.path, &entry) {
                Standing::Trusted => None,
                standing => Some((spec, entry, standing)),
            }
        })
        .collect()
}

fn described(spec: &ServerSpec, standing: Standing) -> String {
    match standing {
        Standing::Changed => format!("{} (changed since you trusted it)", shown(spec)),
        _ => shown(spec),
    }
}

/// The entries of a project file that wait for the person's trust \[U2\].
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The project's file.
    pub(crate) file: PathBuf,
    /// The untrusted entries, in file order.
    entries: Vec<Entry>,
    /// Each, as the person is shown it.
    pub(crate) shown: Vec<String>,
}

impl Pending {
    /// The untrusted entries of `servers`' project file; none when the
    /// file is the person's own or every entry is trusted.
    pub(crate) fn of(servers: &Servers) -> Result<Pending, TrustError> {
        let Some(source) = servers.source.as_ref().filter(|s| s.project) else {
            return Ok(Pending::default());
        };
        let ledger = Store::locate()?.read()?;
        let waiting = untrusted(servers, &ledger);
        Ok(Pending {
            file: source.path.clone(),
            shown: waiting
                .iter()
                .map(|(spec, _, standing)| described(spec, *standing))
                .collect(),
            entries: waiting.into_iter().map(|(_, e, _)| e).collect(),
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The untrusted servers' names.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.name.as_str()).collect()
    }

    /// Records that the person trusts them all, as they are now.
    pub(crate) fn trust(&self) -> Result<(), TrustError> {
        if self.is_empty() {
            return Ok(());
        }
        Store::locate()?.change(|ledger| {
            for entry in &self.entries {
                ledger.trust(&self.file, entry);
            }
        })
    }

    /// Takes the untrusted servers out of `servers`: they do not start.
    pub(crate) fn withhold(&self, servers: &mut Servers) {
        let names = self.names();
        servers
            .specs
            .retain(|spec| !names.contains(&spec.name.as_str()));
    }
}

/// The servers that may start: all of them when none is from an untrusted
/// project entry \[U2\]; else, with a person at the terminal (`ask`), those
/// the person lets start (yes trusts them all, recorded; no starts none of
/// the untrusted ones, and says so) \[U3\]; with nobody to ask,
/// [`TrustError::Untrusted`], before anything started.
pub(crate) fn admit(mut servers: Servers, ask: bool) -> Result<Servers, TrustError> {
    let pending = Pending::of(&servers)?;
    if pending.is_empty() {
        return Ok(servers);
    }
    if !ask {
        return Err(TrustError::Untrusted {
            file: pending.file,
            entries: pending.shown,
        });
    }
    let mut question = format!("sprout: {}", listing(&pending.file, &pending.shown));
    question.push_str("\nStart them, and trust them from now on? [y/N] ");
    if ask_yes_no(&question) {
        pending.trust()?;
        return Ok(servers);
    }
    crate::report_error(&format!(
        "sprout: not starting {}; the session goes on without them (`sprout trust` trusts them later)",
        pending.names().join(", ")
    ));
    pending.withhold(&mut servers);
    Ok(servers)
}

/// Writes `question` to stderr and reads one line from stdin: yes only for
/// `y` or `yes`. A closed or failed input is no.
fn ask_yes_no(question: &str) -> bool {
    let mut stderr = std::io::stderr();
    let _ = stderr.write_all(question.as_bytes());
    let _ = stderr.flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// What `sprout trust` was asked to do.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TrustAction {
    /// Show the entries and trust them (asking, unless `yes`).
    Trust { yes: bool },
    /// Show every trusted entry.
    List,
    /// Forget the directory's entries.
    Revoke,
}

/// `sprout trust [DIR]`: shows `DIR/.mcp.json`'s entries and trusts them,
/// lists the ledger, or forgets the directory's entries \[U3\].
pub(crate) fn trust_command(
    dir: &Path,
    action: TrustAction,
) -> Result<String, crate::settings::ConfigProblem> {
    let store = Store::locate()?;
    if let TrustAction::List = action {
        let lines = store.read()?.lines();
        if lines.is_empty() {
            return Ok("no MCP server entries are trusted\n".to_owned());
        }
        return Ok(lines.join("\n") + "\n");
    }
    if let TrustAction::Revoke = action {
        // Without reading the file: one that is gone or broken can be
        // forgotten too.
        let file = absolute(&dir.join(".mcp.json"));
        let gone = store.change(|ledger| ledger.revoke(&file))?;
        return Ok(if gone.is_empty() {
            format!("nothing of {} was trusted\n", file.display())
        } else {
            format!(
                "no longer trusted in {}: {}\n",
                file.display(),
                gone.join(", ")
            )
        });
    }
    let servers = crate::settings::servers_in(dir)?;
    let Some(source) = servers.source.clone() else {
        return Err(TrustError::NoProjectFile(absolute(dir)).into());
    };
    let pending = Pending::of(&servers)?;
    if pending.is_empty() {
        return Ok(format!(
            "every server of {} is trusted already ({})\n",
            source.path.display(),
            servers.specs.len()
        ));
    }
    let mut listing = listing(&source.path, &pending.shown);
    let TrustAction::Trust { yes } = action else {
        return Ok(String::new());
    };
    if yes {
        listing.push('\n');
    } else {
        if !person_present() {
            crate::report_error(&listing);
            return Err(TrustError::NobodyToAsk.into());
        }
        if !ask_yes_no(&format!("{listing}\nTrust them? [y/N] ")) {
            return Ok("nothing was trusted\n".to_owned());
        }
        listing.clear();
    }
    pending.trust()?;
    Ok(format!(
        "{listing}trusted: {}\n",
        pending.names().join(", ")
    ))
}

/// `path` made absolute: its directory resolved (symbolic links
/// followed), its own name kept as it is, so a `.mcp.json` that is a link
/// to another project's file is a file of its own, trusted on its own.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    let name = path.file_name().map(PathBuf::from);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|cwd| cwd.join(&dir))
            .unwrap_or(dir)
    });
    match name {
        Some(name) => dir.join(name),
        None => dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, digest: &str) -> Entry {
        Entry {
            name: name.into(),
            digest: digest.into(),
        }
    }

    #[test]
    fn a_digest_ignores_spacing_and_key_order_but_not_values_u2() {
        let a = entries(r#"{"mcpServers": {"s": {"command": "x", "args": ["1", "2"]}}}"#);
        let b = entries(
            r#"{"mcpServers": {
                "s": { "args" : ["1","2"],
                       "command":"x" }}}"#,
        );
        assert_eq!(a, b);
        let changed = entries(r#"{"mcpServers": {"s": {"command": "x", "args": ["2", "1"]}}}"#);
        assert_ne!(a, changed, "argument order is part of the command");
        let more = entries(
            r#"{"mcpServers": {"s": {"command": "x", "args": ["1", "2"], "required": true}}}"#,
        );
        assert_ne!(a, more, "every field counts");
        assert_eq!(a[0].digest.len(), 64);
    }

    #[test]
    fn the_canonical_form_sorts_keys_at_every_depth() {
        let value: Value =
            serde_json::from_str(r#"{"b": {"z": 1, "a": [true, null]}, "a": "é\n"}"#).unwrap();
        let mut text = String::new();
        canonical(&value, &mut text);
        assert_eq!(text, r#"{"a":"é\n","b":{"a":[true,null],"z":1}}"#);
    }

    #[test]
    fn the_ledger_knows_new_changed_and_trusted_entries_u2() {
        let file = Path::new("/p/.mcp.json");
        let mut ledger = Ledger::default();
        assert_eq!(ledger.standing(file, &entry("s", "1")), Standing::New);
        ledger.trust(file, &entry("s", "1"));
        assert_eq!(ledger.standing(file, &entry("s", "1")), Standing::Trusted);
        assert_eq!(ledger.standing(file, &entry("s", "2")), Standing::Changed);
        assert_eq!(
            ledger.standing(Path::new("/q/.mcp.json"), &entry("s", "1")),
            Standing::New,
            "trust is per file"
        );
        ledger.allow_always(file, &entry("t", "9"), "push");
        assert_eq!(
            ledger.standing(file, &entry("t", "9")),
            Standing::New,
            "allowing a tool trusts nothing"
        );
        ledger.allow_always(file, &entry("s", "1"), "push");
        assert!(ledger.always(file, &entry("s", "1"), "push"));
        assert!(!ledger.always(file, &entry("s", "1"), "pull"));
        assert!(
            !ledger.always(file, &entry("s", "2"), "push"),
            "not for a changed entry"
        );
        ledger.trust(file, &entry("s", "2"));
        assert!(
            !ledger.always(file, &entry("s", "2"), "push"),
            "re-trusting forgets always"
        );
        assert_eq!(
            ledger.revoke(file),
            ["s", "t"],
            "trust and tools allowed for good"
        );
        assert_eq!(ledger.standing(file, &entry("s", "2")), Standing::New);
    }

    #[test]
    fn an_entry_is_shown_as_its_command_line_with_secrets_hidden_u3() {
        let specs = hooks_mcp::parse_mcp_servers(
            r#"{"mcpServers": {
                "git": {"command": "npx", "args": ["-y", "a b", "it's"], "env": {"API_KEY": "sk-1", "MODE": "x"}, "cwd": "/w"},
                "web": {"type": "http", "url": "https://h.example/mcp?api_key=sk-2", "headers": {"Authorization": "Bearer sk-3"}},
                "esc": {"command": "a\u001b[2Jb"}
            }}"#,
        )
        .unwrap();
        assert_eq!(
            shown(&specs[0]),
            r#"git: API_KEY=*** MODE=x npx -y 'a b' 'it'\''s' (in /w)"#
        );
        assert_eq!(
            shown(&specs[1]),
            "web: https://h.example/mcp?api_key=*** (headers: Authorization)"
        );
        assert!(!shown(&specs[2]).contains('\u{1b}'), "{}", shown(&specs[2]));
    }
}
