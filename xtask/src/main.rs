//! `cargo xtask`: the tasks developers run by hand, and CI runs.
//!
//! `cargo xtask` alone prints the list. Each task is plain Rust calling
//! `cargo`, so it runs the same on a laptop and in CI with nothing else
//! installed.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod tidy;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const HELP: &str = "\
cargo xtask TASK

Tasks:
  ci      what CI runs: format check, clippy with warnings denied, agent-loop
          without MCP, the examples, docs with warnings denied, cargo package
          of the published crates, tidy, all tests (doctests and README
          examples too), the MCP conformance suite
  tidy    the architecture checks alone (hooks-core stays pure, module docs, ...)
  bench   the benchmarks, printed as a table; --out FILE writes them as JSON;
          --quick runs a short smoke pass on a debug build (figures not meaningful)
";

fn main() -> ExitCode {
    let task = std::env::args().nth(1);
    let result = match task.as_deref() {
        None | Some("help" | "--help" | "-h") => {
            print!("{HELP}");
            Ok(())
        }
        Some("ci") => ci(),
        Some("tidy") => tidy_task(),
        Some("bench") => bench(&std::env::args().skip(2).collect::<Vec<_>>()),
        Some(other) => Err(format!("unknown task {other:?}\n\n{HELP}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: xtask's manifest sits one level below it.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn ci() -> Result<(), String> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--locked",
        "--",
        "-D",
        "warnings",
    ])?;
    // agent-loop without MCP: it builds, lints and runs its example with
    // the `mcp` feature off, so a provider or a gateway of one's own never
    // needs rmcp.
    cargo(&[
        "clippy",
        "-p",
        "agent-loop",
        "--no-default-features",
        "--all-targets",
        "--locked",
        "--",
        "-D",
        "warnings",
    ])?;
    cargo(&[
        "run",
        "--quiet",
        "--locked",
        "-p",
        "agent-loop",
        "--no-default-features",
        "--example",
        "custom_gateway",
    ])?;
    // hooks-core's `testing` feature at work: an invariant of the example's
    // own over thousands of random sessions.
    cargo(&[
        "run",
        "--quiet",
        "--locked",
        "-p",
        "hooks-core",
        "--features",
        "testing",
        "--example",
        "check_invariant",
    ])?;
    // The API docs build without a warning, with every feature (so
    // `hooks_core::testing` too): rule ids such as \[T4\] are written
    // escaped, so they render as text, not as broken links.
    let mut doc = cargo_command(&[
        "doc",
        "--no-deps",
        "--workspace",
        "--all-features",
        "--locked",
    ]);
    doc.env("RUSTDOCFLAGS", "-D warnings");
    run(
        doc,
        "RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --workspace --all-features --locked",
    )?;
    // The published crates package, in dependency order, with their READMEs
    // and license files. `--no-verify`: verifying builds each crate again from
    // its tarball in a target directory of its own, every dependency included
    // (4 min 17 s for the four on this 2-core machine, doubling a warm CI
    // run); `cargo package` without `--no-verify` passes too. The lib targets are built and tested above anyway. `--allow-dirty`
    // so a local run on uncommitted work checks that work.
    cargo(&[
        "package",
        "--locked",
        "--no-verify",
        "--allow-dirty",
        "-p",
        "hooks-core",
        "-p",
        "hooks-mcp",
        "-p",
        "agent-loop",
        "-p",
        "sprout-cli",
    ])?;
    tidy_task()?;
    // Checks that need Node.js packages from npm: the ACP interop test (the
    // official TypeScript SDK) and the MCP conformance suite. Where npm cannot
    // install them, CI fails; SPROUT_CI_SKIP_NODE=1 skips them on purpose,
    // and the last line says so.
    let skip_node = std::env::var_os("SPROUT_CI_SKIP_NODE").is_some_and(|v| v == "1");
    let mut skipped = Vec::new();
    if skip_node {
        skipped.push("the ACP interop test with the TypeScript SDK");
        skipped.push("the MCP conformance suite");
    } else {
        npm_ci("acp-node")?;
        npm_ci("conformance")?;
    }
    // The README's hook servers on the official MCP Python SDK: a venv with
    // the pinned SDK, named to the tests by SPROUT_TEST_PYTHON. Where pip
    // cannot install it, CI fails; SPROUT_CI_SKIP_PYTHON=1 skips it on
    // purpose, and the last line says so.
    let skip_python = std::env::var_os("SPROUT_CI_SKIP_PYTHON").is_some_and(|v| v == "1");
    let python = if skip_python {
        skipped.push("the README's Python hook servers (MCP Python SDK)");
        None
    } else {
        Some(python_venv()?)
    };
    let mut features = Vec::new();
    if !skip_node {
        features.push("sprout-tests/acp-node");
    }
    if python.is_some() {
        features.push("sprout-tests/python-mcp");
    }
    let features = features.join(",");
    let mut args = vec!["test", "--workspace", "--locked"];
    if !features.is_empty() {
        args.extend(["--features", &features]);
    }
    let mut test = cargo_command(&args);
    if let Some(python) = &python {
        test.env("SPROUT_TEST_PYTHON", python);
    }
    run(test, &format!("cargo {}", args.join(" ")))?;
    if !skip_node {
        conformance()?;
    }
    if skipped.is_empty() {
        println!("xtask ci: all checks passed");
    } else {
        println!(
            "xtask ci: all checks that ran passed; NOT run (SPROUT_CI_SKIP_NODE / SPROUT_CI_SKIP_PYTHON): {}",
            skipped.join(", ")
        );
    }
    Ok(())
}

/// The MCP conformance suite's client scenarios that apply to Sprout, with
/// sprout as the client (`tests/conformance/client.sh`). Not run: the OAuth
/// (`auth/*`) and elicitation scenarios, which need features Sprout does not
/// offer yet.
const CONFORMANCE_SCENARIOS: &[&str] = &["initialize", "tools_call", "sse-retry"];

fn conformance() -> Result<(), String> {
    cargo(&["build", "--locked", "-p", "sprout-cli", "--bin", "sprout"])?;
    let dir = root().join("tests").join("conformance");
    let node = dir.join("node_modules").join(".bin").join("node");
    let suite = dir
        .join("node_modules")
        .join("@modelcontextprotocol")
        .join("conformance")
        .join("dist")
        .join("index.js");
    let sprout = target_dir().join("debug").join("sprout");
    for scenario in CONFORMANCE_SCENARIOS {
        let mut command = Command::new(&node);
        command
            .arg(&suite)
            .args(["client", "--command"])
            .arg(dir.join("client.sh"))
            .args(["--scenario", scenario])
            .env("SPROUT", &sprout)
            .current_dir(&dir);
        run(
            command,
            &format!("MCP conformance: client scenario {scenario}"),
        )?;
    }
    Ok(())
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// Builds the benchmark binaries (release, or debug for `--quick`) and runs
/// `sprout-bench` with the remaining arguments.
fn bench(args: &[String]) -> Result<(), String> {
    let quick = args.iter().any(|a| a == "--quick");
    let mut build = vec![
        "build",
        "--locked",
        "-p",
        "sprout-tests",
        "-p",
        "sprout-cli",
        "--bins",
    ];
    if !quick {
        build.push("--release");
    }
    cargo(&build)?;
    let dir = target_dir().join(if quick { "debug" } else { "release" });
    let bench = dir.join("sprout-bench");
    println!("xtask: {} {}", bench.display(), args.join(" "));
    let status = Command::new(&bench)
        .args(args)
        .arg("--fixture")
        .arg(dir.join("mcp-fixture"))
        .status()
        .map_err(|e| format!("could not run {}: {e}", bench.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("sprout-bench failed ({status})"))
    }
}

fn tidy_task() -> Result<(), String> {
    let problems = tidy::check(&root());
    if problems.is_empty() {
        println!("xtask tidy: ok");
        Ok(())
    } else {
        Err(format!(
            "tidy found {} problem(s):\n- {}",
            problems.len(),
            problems.join("\n- ")
        ))
    }
}

fn cargo(args: &[&str]) -> Result<(), String> {
    run(cargo_command(args), &format!("cargo {}", args.join(" ")))
}

fn cargo_command(args: &[&str]) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.args(args).current_dir(root());
    command
}

fn run(mut command: Command, shown: &str) -> Result<(), String> {
    println!("xtask: {shown}");
    let status = command
        .status()
        .map_err(|e| format!("could not run {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})"))
    }
}

/// Makes (once) the venv `target/python-mcp` with the packages pinned in
/// `tests/python/requirements.txt`; returns its Python.
fn python_venv() -> Result<PathBuf, String> {
    let venv = root().join("target").join("python-mcp");
    let python = venv.join("bin").join("python");
    let hint = "; set SPROUT_CI_SKIP_PYTHON=1 to run the other checks without it";
    if !python.exists() {
        let mut make = Command::new("python3");
        make.args(["-m", "venv"]).arg(&venv);
        run(make, "python3 -m venv target/python-mcp").map_err(|e| format!("{e}{hint}"))?;
    }
    let requirements = root().join("tests").join("python").join("requirements.txt");
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "-r",
    ])
    .arg(&requirements);
    run(pip, "pip install -r tests/python/requirements.txt").map_err(|e| format!("{e}{hint}"))?;
    Ok(python)
}

/// Installs the locked npm packages of `tests/DIR` (`npm ci`).
fn npm_ci(dir: &str) -> Result<(), String> {
    let path = root().join("tests").join(dir);
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(&path);
    run(npm, &format!("npm ci --prefix tests/{dir}")).map_err(|e| {
        format!("{e}; set SPROUT_CI_SKIP_NODE=1 to run the other checks without Node.js")
    })
}
