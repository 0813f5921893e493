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
  ci      what CI runs: format check, clippy with warnings denied, tidy, all tests
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
        "--locked",
        "--",
        "-D",
        "warnings",
    ])?;
    tidy_task()?;
    // The ACP interop test drives `sprout acp` with the official TypeScript
    // SDK; it runs where npm can install that SDK.
    let node = acp_node_client();
    let mut test = cargo_command(&["test", "--workspace", "--locked"]);
    if node {
        test.env("SPROUT_TEST_ACP_NODE", "1");
    }
    run(test, "cargo test --workspace --locked")?;
    println!("xtask ci: all checks passed");
    Ok(())
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
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let dir = target.join(if quick { "debug" } else { "release" });
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

/// Installs the TypeScript ACP SDK for the interop test (`npm ci`); false,
/// with a notice, where there is no npm.
fn acp_node_client() -> bool {
    let dir = root().join("tests").join("acp-node");
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir);
    match npm.status() {
        Ok(status) if status.success() => true,
        Ok(status) => {
            println!(
                "xtask: npm ci failed ({status}); the ACP interop test with the TypeScript SDK does not run"
            );
            false
        }
        Err(_) => {
            println!(
                "xtask: no npm here; the ACP interop test with the TypeScript SDK does not run"
            );
            false
        }
    }
}
