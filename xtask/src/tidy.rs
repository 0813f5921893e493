//! Mechanical checks of the architecture invariants in `ARCHITECTURE.md`.
//!
//! Run by `cargo xtask tidy`, by `cargo xtask ci`, and as unit tests of this
//! crate, so `cargo test` alone catches a violation too. Each check returns the
//! problems it found as sentences that name the file and what to do.

use std::fs;
use std::path::{Path, PathBuf};

/// The only crates hooks-core may depend on (outside dev-dependencies).
const CORE_ALLOWED_DEPS: &[&str] = &["serde", "serde_json"];

/// Optional dependencies hooks-core may have besides, each behind exactly one
/// feature that is off by default: (dependency, feature). `testing` offers the
/// proptest strategies and the reference driver; nothing of it is in the
/// normal build.
const CORE_OPTIONAL_DEPS: &[(&str, &str)] = &[("proptest", "testing")];

/// Text that means IO, a clock, threads or async in hooks-core's sources.
const CORE_FORBIDDEN: &[&str] = &[
    "Instant::now",
    "SystemTime",
    "std::time::Instant",
    "std::thread",
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "std::io",
    "tokio",
    "rmcp",
    "futures",
    "async ",
    ".await",
    "Mutex",
    "RwLock",
    "rand::",
    "HashMap",
    "HashSet",
];

/// The crates in dependency order: each may depend only on those before it.
const LAYERS: &[&str] = &["hooks-core", "hooks-mcp", "agent-loop", "sprout-cli"];

/// Every problem found in the workspace at `root`.
pub(crate) fn check(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    core_dependencies(root, &mut problems);
    core_sources(root, &mut problems);
    layering(root, &mut problems);
    module_docs(root, &mut problems);
    env_vars_documented(root, &mut problems);
    architecture_paths(root, &mut problems);
    no_self_skipping_tests(root, &mut problems);
    problems
}

/// Every environment variable the CLI reads (`env = "NAME"` in its clap
/// definitions) is in the README.
fn env_vars_documented(root: &Path, problems: &mut Vec<String>) {
    let Some(readme) = read(&root.join("README.md"), problems) else {
        return;
    };
    for file in rust_files(&root.join("crates/sprout-cli/src")) {
        let Some(text) = read(&file, problems) else {
            continue;
        };
        for (number, line) in text.lines().enumerate() {
            let Some(rest) = line.split("env = \"").nth(1) else {
                continue;
            };
            let name: String = rest.chars().take_while(|c| *c != '"').collect();
            if !name.is_empty() && !readme.contains(&name) {
                problems.push(format!(
                    "{}:{}: the CLI reads `{name}`, which README.md does not mention: add it \
                     to the configuration table",
                    relative(root, &file),
                    number + 1
                ));
            }
        }
    }
}

/// Top-level folders a path in ARCHITECTURE.md may start with.
const PATH_ROOTS: &[&str] = &["crates/", "xtask/", "tests/", "docs/", ".ci/"];

/// Every path ARCHITECTURE.md names in backticks exists: spans with a `/`
/// that start with a top-level folder or a crate's name (`hooks-core/src/…`),
/// or end in a file extension. A bare file name (`lib.rs`) is a name, not a
/// path, and is not checked.
fn architecture_paths(root: &Path, problems: &mut Vec<String>) {
    let Some(text) = read(&root.join("ARCHITECTURE.md"), problems) else {
        return;
    };
    for (n, span) in text.split('`').enumerate() {
        // Odd pieces are inside backticks.
        if n % 2 == 0 || span.contains(char::is_whitespace) || !span.contains('/') {
            continue;
        }
        let in_crate = LAYERS.iter().any(|k| span.starts_with(&format!("{k}/")));
        let file_like = [".rs", ".md", ".toml", ".mjs", ".sh", ".json"]
            .iter()
            .any(|ext| span.ends_with(ext));
        if !(in_crate || file_like || PATH_ROOTS.iter().any(|r| span.starts_with(r))) {
            continue;
        }
        let path = if in_crate {
            root.join("crates").join(span)
        } else {
            root.join(span)
        };
        if !path.exists() {
            problems.push(format!(
                "ARCHITECTURE.md names `{span}`, which does not exist: write the path from the \
                 repository root, or update the map"
            ));
        }
    }
}

/// No test returns early to skip itself (it would pass without running);
/// a test that needs something optional is compiled only with a feature.
fn no_self_skipping_tests(root: &Path, problems: &mut Vec<String>) {
    let mut dirs: Vec<PathBuf> = LAYERS.iter().map(|k| root.join("crates").join(k)).collect();
    dirs.push(root.join("tests"));
    for dir in dirs {
        for file in rust_files(&dir) {
            let Some(text) = read(&file, problems) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let skips = (line.contains("env::var_os(") || line.contains("env::var("))
                    && (line.contains("is_none()") || line.contains("is_err()"))
                    && lines[i..lines.len().min(i + 3)]
                        .iter()
                        .any(|l| l.trim_start().starts_with("return"));
                if skips {
                    problems.push(format!(
                        "{}:{}: a test returns early when a variable is unset, and so passes \
                         without running; gate it with a cargo feature instead",
                        relative(root, &file),
                        i + 1
                    ));
                }
            }
        }
    }
}

fn read(path: &Path, problems: &mut Vec<String>) -> Option<String> {
    match fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) => {
            problems.push(format!("{}: cannot read it: {e}", path.display()));
            None
        }
    }
}

fn manifest(root: &Path, krate: &str, problems: &mut Vec<String>) -> Option<toml::Table> {
    let path = root.join("crates").join(krate).join("Cargo.toml");
    let text = read(&path, problems)?;
    match text.parse::<toml::Table>() {
        Ok(table) => Some(table),
        Err(e) => {
            problems.push(format!("{}: not valid TOML: {e}", path.display()));
            None
        }
    }
}

/// Names of the normal (not dev, not build) dependencies of a manifest,
/// target-specific ones included.
fn normal_dependencies(manifest: &toml::Table) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |table: Option<&toml::Value>| {
        if let Some(deps) = table.and_then(toml::Value::as_table) {
            names.extend(deps.keys().cloned());
        }
    };
    add(manifest.get("dependencies"));
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        for target in targets.values() {
            add(target.get("dependencies"));
        }
    }
    names
}

/// hooks-core depends on serde and serde_json only, and on proptest only as
/// an optional dependency that the `testing` feature alone enables.
fn core_dependencies(root: &Path, problems: &mut Vec<String>) {
    let Some(manifest) = manifest(root, "hooks-core", problems) else {
        return;
    };
    for dep in normal_dependencies(&manifest) {
        if CORE_ALLOWED_DEPS.contains(&dep.as_str()) {
            continue;
        }
        match CORE_OPTIONAL_DEPS.iter().find(|(name, _)| *name == dep) {
            Some((_, feature)) => {
                if let Err(why) = behind_feature_only(&manifest, &dep, feature) {
                    problems.push(format!(
                        "crates/hooks-core/Cargo.toml: `{dep}` {why}; hooks-core may depend on \
                         it only as `optional = true`, enabled by the `{feature}` feature alone, \
                         which is off by default"
                    ));
                }
            }
            None => problems.push(format!(
                "crates/hooks-core/Cargo.toml depends on `{dep}`; hooks-core may depend on {} only \
                 (no IO, no clock, no async), and on {} behind its feature: move that work to \
                 hooks-mcp",
                CORE_ALLOWED_DEPS.join(" and "),
                CORE_OPTIONAL_DEPS
                    .iter()
                    .map(|(name, feature)| format!("{name} (`{feature}`)"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// Whether `dep` is optional in every table that names it, and enabled by
/// `feature` and by no other feature (so not by default either).
fn behind_feature_only(manifest: &toml::Table, dep: &str, feature: &str) -> Result<(), String> {
    let mut tables = vec![manifest.get("dependencies")];
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        tables.extend(targets.values().map(|t| t.get("dependencies")));
    }
    for spec in tables.into_iter().flatten().filter_map(|t| t.get(dep)) {
        let optional = spec
            .get("optional")
            .and_then(toml::Value::as_bool)
            .unwrap_or(false);
        if !optional {
            return Err("is not optional".to_owned());
        }
    }
    let features = manifest.get("features").and_then(toml::Value::as_table);
    let enables = |values: &toml::Value| {
        values.as_array().is_some_and(|list| {
            list.iter().filter_map(toml::Value::as_str).any(|v| {
                v == dep
                    || v == format!("dep:{dep}")
                    || v.starts_with(&format!("{dep}/"))
                    || v.starts_with(&format!("{dep}?/"))
            })
        })
    };
    let mut by_feature = false;
    for (name, values) in features.into_iter().flatten() {
        if name == feature {
            by_feature = enables(values);
        } else if enables(values) {
            return Err(format!("is enabled by the `{name}` feature"));
        }
    }
    if !by_feature {
        return Err(format!("is not enabled by a `{feature}` feature"));
    }
    // The features `default` turns on, through other features too.
    let mut on = vec!["default".to_owned()];
    let mut i = 0;
    while let Some(name) = on.get(i).cloned() {
        i += 1;
        let listed = features
            .and_then(|f| f.get(&name))
            .and_then(toml::Value::as_array);
        for next in listed.into_iter().flatten().filter_map(toml::Value::as_str) {
            if !on.iter().any(|n| n == next) {
                on.push(next.to_owned());
            }
        }
    }
    if on.iter().any(|n| n == feature) {
        return Err(format!("is on by default (`default` reaches `{feature}`)"));
    }
    Ok(())
}

/// hooks-core's sources name no clock, IO, thread, async or hash-ordered map.
fn core_sources(root: &Path, problems: &mut Vec<String>) {
    for file in rust_files(&root.join("crates/hooks-core/src")) {
        let Some(text) = read(&file, problems) else {
            continue;
        };
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in CORE_FORBIDDEN.iter().filter(|w| code.contains(**w)) {
                problems.push(format!(
                    "{}:{}: hooks-core uses `{word}`; the core takes time and answers as inputs, \
                     does no IO, and keeps deterministic order (BTreeMap, Vec)",
                    relative(root, &file),
                    number + 1
                ));
            }
        }
    }
}

/// Dependencies point one way: core <- mcp <- loop <- cli.
fn layering(root: &Path, problems: &mut Vec<String>) {
    for (level, krate) in LAYERS.iter().enumerate() {
        let Some(manifest) = manifest(root, krate, problems) else {
            continue;
        };
        for dep in normal_dependencies(&manifest) {
            if let Some(dep_level) = LAYERS.iter().position(|l| *l == dep)
                && dep_level >= level
            {
                problems.push(format!(
                    "crates/{krate}/Cargo.toml depends on `{dep}`, but dependencies point one \
                         way: {}",
                    LAYERS.join(" <- ")
                ));
            }
        }
    }
}

/// Every Rust file of every crate opens with a `//!` module doc, or (a crate
/// root) with its README as the doc: `#![doc = include_str!("../README.md")]`.
fn module_docs(root: &Path, problems: &mut Vec<String>) {
    let mut dirs: Vec<PathBuf> = LAYERS.iter().map(|k| root.join("crates").join(k)).collect();
    dirs.push(root.join("xtask"));
    dirs.push(root.join("tests"));
    for dir in dirs {
        for file in rust_files(&dir) {
            let Some(text) = read(&file, problems) else {
                continue;
            };
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let readme = first.trim() == r#"#![doc = include_str!("../README.md")]"#;
            if !first.starts_with("//!") && !readme {
                problems.push(format!(
                    "{}: does not open with a `//!` doc saying what the module is for",
                    relative(root, &file)
                ));
            }
        }
    }
}

/// All `.rs` files below `dir`, sorted, skipping `target`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf()
    }

    #[test]
    fn the_workspace_is_tidy() {
        let problems = check(&root());
        assert!(
            problems.is_empty(),
            "tidy problems:\n- {}",
            problems.join("\n- ")
        );
    }

    /// The checks themselves catch what they claim to, on a scratch copy.
    #[test]
    fn tidy_catches_what_it_claims_to() {
        let scratch = std::env::temp_dir().join(format!("sprout-tidy-{}", std::process::id()));
        let core = scratch.join("crates/hooks-core");
        fs::create_dir_all(core.join("src")).unwrap();
        fs::write(
            core.join("Cargo.toml"),
            "[package]\nname = \"hooks-core\"\n[dependencies]\nserde = \"1\"\ntokio = \"1\"\n\
             [dev-dependencies]\nproptest = \"1\"\n",
        )
        .unwrap();
        fs::write(
            core.join("src/lib.rs"),
            "fn f() { let _ = std::time::Instant::now(); }\n",
        )
        .unwrap();
        fs::create_dir_all(scratch.join("crates/sprout-cli/src")).unwrap();
        fs::write(
            scratch.join("crates/sprout-cli/src/cli.rs"),
            "//! cli\n#[arg(long, env = \"SPROUT_UNDOCUMENTED\")]\n",
        )
        .unwrap();
        fs::write(scratch.join("README.md"), "# nothing here\n").unwrap();
        fs::write(
            scratch.join("ARCHITECTURE.md"),
            "See `crates/hooks-core/src/lib.rs` and `tests/nowhere.rs`.\n",
        )
        .unwrap();
        fs::create_dir_all(scratch.join("tests/tests")).unwrap();
        fs::write(
            scratch.join("tests/tests/skip.rs"),
            "//! t\n#[test]\nfn t() {\n    if std::env::var_os(\"X\").is_none() {\n        return;\n    }\n}\n",
        )
        .unwrap();
        let mut problems = Vec::new();
        core_dependencies(&scratch, &mut problems);
        core_sources(&scratch, &mut problems);
        module_docs(&scratch, &mut problems);
        env_vars_documented(&scratch, &mut problems);
        architecture_paths(&scratch, &mut problems);
        no_self_skipping_tests(&scratch, &mut problems);
        fs::remove_dir_all(&scratch).unwrap();
        let text = problems.join("\n");
        assert_eq!(problems.len(), 7, "{text}");
        assert!(text.contains("reads `SPROUT_UNDOCUMENTED`"), "{text}");
        assert!(text.contains("names `tests/nowhere.rs`"), "{text}");
        assert!(
            !text.contains("names `crates/hooks-core/src/lib.rs`"),
            "{text}"
        );
        assert!(text.contains("returns early"), "{text}");
        assert!(text.contains("depends on `tokio`"), "{text}");
        assert!(
            !text.contains("`proptest`"),
            "dev-dependencies are allowed: {text}"
        );
        assert!(text.contains("uses `Instant::now`"), "{text}");
        assert!(text.contains("uses `std::time::Instant`"), "{text}");
        assert!(text.contains("does not open with a `//!` doc"), "{text}");
    }

    /// hooks-core may have proptest as an optional dependency behind
    /// `testing` alone, and nothing else; a README as the crate doc counts as
    /// the crate root's module doc.
    #[test]
    fn core_allows_proptest_behind_testing_only() {
        let scratch = std::env::temp_dir().join(format!("sprout-tidy-deps-{}", std::process::id()));
        let core = scratch.join("crates/hooks-core");
        fs::create_dir_all(core.join("src")).unwrap();
        fs::write(
            core.join("src/lib.rs"),
            "#![doc = include_str!(\"../README.md\")]\n#![no_std]\n",
        )
        .unwrap();
        let base = "[package]\nname = \"hooks-core\"\n[dependencies]\nserde = \"1\"\n";
        let cases: &[(&str, &str)] = &[
            // Allowed: optional, enabled by `testing` alone, off by default.
            (
                "proptest = { version = \"1\", optional = true }\n\
                 [features]\ntesting = [\"dep:proptest\"]\n",
                "",
            ),
            ("proptest = \"1\"\n", "`proptest` is not optional"),
            (
                "proptest = { version = \"1\", optional = true }\n",
                "not enabled by a `testing` feature",
            ),
            (
                "proptest = { version = \"1\", optional = true }\n\
                 [features]\ntesting = [\"dep:proptest\"]\nfuzz = [\"proptest/std\"]\n",
                "enabled by the `fuzz` feature",
            ),
            (
                "proptest = { version = \"1\", optional = true }\n\
                 [features]\ndefault = [\"all\"]\nall = [\"testing\"]\n\
                 testing = [\"dep:proptest\"]\n",
                "on by default",
            ),
            (
                "tokio = { version = \"1\", optional = true }\n\
                 [features]\ntesting = [\"dep:tokio\"]\n",
                "depends on `tokio`",
            ),
        ];
        for (deps, expected) in cases {
            fs::write(core.join("Cargo.toml"), format!("{base}{deps}")).unwrap();
            let mut problems = Vec::new();
            core_dependencies(&scratch, &mut problems);
            let text = problems.join("\n");
            if expected.is_empty() {
                assert!(problems.is_empty(), "{deps}: {text}");
            } else {
                assert_eq!(problems.len(), 1, "{deps}: {text}");
                assert!(text.contains(expected), "{deps}: {text}");
            }
        }
        let mut problems = Vec::new();
        module_docs(&scratch, &mut problems);
        fs::remove_dir_all(&scratch).unwrap();
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
