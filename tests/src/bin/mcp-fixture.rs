//! `mcp-fixture`: an MCP stdio server whose every answer is scripted, for the
//! end-to-end tests of hooks over real processes.
//!
//! ```text
//! mcp-fixture [--tools echo,read] [--hooks _Stop,_PostCompact,_stop]
//!             [--stop SCRIPT] [--post-compact SCRIPT] [--init-delay MS]
//!             [--page-size N] [--log FILE] [--grandchild] [--env-out FILE]
//!             [--cycle] [--stderr-flood BYTES] [--exit-after MS]
//!             [--tool-bytes N] [--tool-delay MS]
//!             [--script HOOK=SCRIPT]... [--schema HOOK=FIELD,FIELD]...
//!             [--strict-schema]
//! mcp-fixture --hostile MODE [--tools echo] [--log FILE] [--grandchild]
//!             [--ignore-sigterm] [--flood-when FILE]
//! ```
//!
//! `--hostile` speaks JSON-RPC by hand, to misbehave as no SDK would let it.
//! It answers `initialize` and then, by MODE:
//!
//! ```text
//! deaf           lists its tools, then never reads stdin again
//! ping-flood     lists its tools, then stops reading and sends pings nonstop
//! endless-pages  every tools/list page has a nextCursor
//! huge-listing   one tools/list page of 100000 tools
//! asks           lists its tools, then asks the client for sampling, roots,
//!                elicitation and an unknown method; logs each answer
//! ```
//!
//! `--ignore-sigterm` makes SIGTERM do nothing (only SIGKILL ends it).
//! `--flood-when FILE` holds `ping-flood`'s flood until FILE exists, so a
//! test says when it begins.
//!
//! A SCRIPT is a comma-separated list of steps; call number i of a hook runs
//! step i, and the last step repeats (with `--cycle`, the script starts over). With `--log`, calls are counted across
//! restarts through the log. Steps:
//!
//! ```text
//! empty  blank  text=WORDS  delay=MS  delay=MS=WORDS  hang  exit
//! error=TEXT  rpc  big  image  escape
//! ```
//!
//! `escape` answers text full of terminal control sequences (clear screen,
//! window title, a carriage return over the line).
//!
//! `--script HOOK=SCRIPT` scripts any hook (`_PreToolUse=text=no`), listing
//! it if `--hooks` does not. `--schema HOOK=FIELDS` gives that hook an input
//! schema whose `properties` are those fields; `--strict-schema` adds
//! `"additionalProperties": false` to every hook's schema, and then a call
//! with an argument its schema does not name is refused with a JSON-RPC
//! error, as a strict server would.
//!
//! The log gets one JSON line per start, call (with its arguments) and
//! cancellation, so tests can see what reached the server and what the agent
//! cancelled.

#![allow(clippy::print_stderr)]

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hooks_mcp::server::{ToolServer, any_object_schema};
use rmcp::model::{CallToolResult, ContentBlock, ErrorData, Tool};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Default)]
struct Options {
    tools: Vec<String>,
    hooks: Vec<String>,
    stop: Vec<String>,
    post_compact: Vec<String>,
    init_delay: u64,
    page_size: Option<usize>,
    log: Option<PathBuf>,
    grandchild: bool,
    env_out: Option<PathBuf>,
    /// Scripts start over after their last step instead of repeating it.
    cycle: bool,
    /// Bytes written to stderr, without a newline, at start.
    stderr_flood: usize,
    /// Exit (status 4) this many ms after start.
    exit_after: Option<u64>,
    /// Plain tools answer this many bytes instead of echoing their arguments.
    tool_bytes: Option<usize>,
    /// Plain tools wait this many ms (or until cancelled) before answering.
    tool_delay: u64,
    /// A hand-written misbehaving server instead of the SDK's.
    hostile: Option<String>,
    /// SIGTERM does nothing.
    ignore_sigterm: bool,
    /// `ping-flood` waits for this file before it floods.
    flood_when: Option<PathBuf>,
    /// Scripts of other hooks, by hook name.
    scripts: Vec<(String, Vec<String>)>,
    /// Input schema properties, by hook name.
    schemas: Vec<(String, Vec<String>)>,
    /// Hooks' schemas forbid properties they do not name.
    strict_schema: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        hooks: vec!["_Stop".into(), "_PostCompact".into()],
        ..Options::default()
    };
    let list = |v: &str| {
        v.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--tools" => o.tools = list(&value()?),
            "--hooks" => o.hooks = list(&value()?),
            "--stop" => o.stop = list(&value()?),
            "--post-compact" => o.post_compact = list(&value()?),
            "--init-delay" => {
                o.init_delay = value()?.parse().map_err(|e| format!("--init-delay: {e}"))?
            }
            "--page-size" => {
                o.page_size = Some(value()?.parse().map_err(|e| format!("--page-size: {e}"))?)
            }
            "--log" => o.log = Some(PathBuf::from(value()?)),
            "--grandchild" => o.grandchild = true,
            "--cycle" => o.cycle = true,
            "--tool-delay" => {
                o.tool_delay = value()?.parse().map_err(|e| format!("--tool-delay: {e}"))?
            }
            "--tool-bytes" => {
                o.tool_bytes = Some(value()?.parse().map_err(|e| format!("--tool-bytes: {e}"))?)
            }
            "--stderr-flood" => {
                o.stderr_flood = value()?
                    .parse()
                    .map_err(|e| format!("--stderr-flood: {e}"))?
            }
            "--exit-after" => {
                o.exit_after = Some(value()?.parse().map_err(|e| format!("--exit-after: {e}"))?)
            }
            "--env-out" => o.env_out = Some(PathBuf::from(value()?)),
            "--hostile" => o.hostile = Some(value()?),
            "--ignore-sigterm" => o.ignore_sigterm = true,
            "--flood-when" => o.flood_when = Some(PathBuf::from(value()?)),
            "--strict-schema" => o.strict_schema = true,
            "--script" | "--schema" => {
                let value = value()?;
                let (hook, rest) = value
                    .split_once('=')
                    .ok_or_else(|| format!("{flag} needs HOOK=VALUE"))?;
                let entry = (hook.to_owned(), list(rest));
                if flag == "--script" {
                    o.scripts.push(entry);
                } else {
                    o.schemas.push(entry);
                }
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    for (hook, _) in &o.scripts {
        if !o.hooks.contains(hook) {
            o.hooks.push(hook.clone());
        }
    }
    Ok(o)
}

/// Appends one JSON line to the log, if there is one.
#[derive(Clone, Debug)]
struct Log(Option<PathBuf>);

impl Log {
    fn write(&self, line: serde_json::Value) {
        if let Some(path) = &self.0
            && let Ok(mut file) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = writeln!(file, "{line}");
        }
    }

    /// How many calls of `tool` the log has seen (this process and earlier
    /// ones); `None` without a log.
    fn calls(&self, tool: &str) -> Option<usize> {
        let path = self.0.as_ref()?;
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == "call" && v["tool"] == tool)
            .count()
            .into()
    }
}

fn text(t: impl Into<String>) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(t.into())]))
}

async fn run_step(
    step: &str,
    tool: &str,
    n: usize,
    log: &Log,
    cancel: CancellationToken,
) -> Result<CallToolResult, ErrorData> {
    let cancelled = |log: &Log| {
        log.write(json!({"event": "cancelled", "tool": tool, "n": n}));
        Err(ErrorData::internal_error("cancelled", None))
    };
    let (kind, rest) = step.split_once('=').unwrap_or((step, ""));
    match kind {
        "empty" => text(""),
        "blank" => text("  \n\t "),
        "text" => text(rest),
        "delay" => {
            let (ms, words) = rest.split_once('=').unwrap_or((rest, ""));
            let ms: u64 = ms.parse().unwrap_or(0);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => text(words),
                () = cancel.cancelled() => cancelled(log),
            }
        }
        "hang" => {
            cancel.cancelled().await;
            cancelled(log)
        }
        "exit" => std::process::exit(3),
        "error" => Ok(CallToolResult::error(vec![ContentBlock::text(
            rest.to_owned(),
        )])),
        "rpc" => Err(ErrorData::internal_error("scripted JSON-RPC error", None)),
        "big" => text("x".repeat(1 << 20)),
        "image" => Ok(CallToolResult::success(vec![ContentBlock::image(
            "aGk=",
            "image/png",
        )])),
        "escape" => text(ESCAPES),
        other => text(format!("mcp-fixture: unknown step {other:?}")),
    }
}

/// Text that would clear the screen, retitle the window, ring the bell and
/// overwrite the current line, were it written raw to a terminal.
const ESCAPES: &str = "\u{1b}[2J\u{1b}]0;pwned\u{7}\rSTOPPED: all done\u{9b}31m";

/// Writes one JSON-RPC message as a line; exits when the agent is gone.
fn send(out: &mut impl std::io::Write, message: &serde_json::Value) {
    if writeln!(out, "{message}")
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

fn tool_json(name: &str) -> serde_json::Value {
    json!({"name": name, "description": "hostile fixture tool", "inputSchema": {"type": "object"}})
}

/// The `--hostile MODE` server (see the module docs). Blocks this thread.
fn hostile(mode: &str, options: &Options, log: &Log) {
    use std::io::BufRead as _;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut pages = 0u64;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let id = message.get("id").cloned();
        let method = message["method"].as_str().unwrap_or_default();
        let Some(id) = id else { continue };
        if method.is_empty() {
            // An answer to one of our own requests (`asks`).
            log.write(json!({"event": "answer", "id": id, "error": message.get("error")}));
            continue;
        }
        let result = match method {
            "initialize" => json!({
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-fixture-hostile", "version": "0"}
            }),
            "tools/list" => match mode {
                "endless-pages" => {
                    pages += 1;
                    json!({"tools": [tool_json(&format!("t{pages}"))], "nextCursor": format!("page-{pages}")})
                }
                "huge-listing" => {
                    let tools: Vec<_> = (0..100_000)
                        .map(|i| tool_json(&format!("tool{i}")))
                        .collect();
                    json!({"tools": tools})
                }
                _ => {
                    let mut tools: Vec<_> = options.tools.iter().map(|t| tool_json(t)).collect();
                    tools.push(tool_json("_Stop"));
                    json!({"tools": tools})
                }
            },
            _ => {
                send(
                    &mut out,
                    &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}),
                );
                continue;
            }
        };
        send(
            &mut out,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
        if method == "tools/list" {
            match mode {
                "deaf" => loop {
                    // Never reads stdin again: whatever the agent writes
                    // piles up in the pipe until it is full.
                    std::thread::park();
                },
                "asks" => {
                    for (n, method) in [
                        "sampling/createMessage",
                        "roots/list",
                        "elicitation/create",
                        "x/unknown",
                    ]
                    .iter()
                    .enumerate()
                    {
                        let params = match *method {
                            "sampling/createMessage" => json!({"messages": [], "maxTokens": 1}),
                            "elicitation/create" => {
                                json!({"message": "?", "requestedSchema": {"type": "object", "properties": {}}})
                            }
                            _ => json!({}),
                        };
                        send(
                            &mut out,
                            &json!({"jsonrpc": "2.0", "id": format!("ask-{n}"), "method": method, "params": params}),
                        );
                    }
                }
                "ping-flood" => {
                    if let Some(trigger) = &options.flood_when {
                        while !trigger.exists() {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                    for n in 0u64.. {
                        send(
                            &mut out,
                            &json!({"jsonrpc": "2.0", "id": format!("ping-{n}"), "method": "ping"}),
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mcp-fixture: {e}");
            std::process::exit(2);
        }
    };
    let log = Log(options.log.clone());
    log.write(json!({"event": "start", "pid": std::process::id()}));
    if let Some(path) = &options.env_out {
        let env: serde_json::Map<String, serde_json::Value> =
            std::env::vars().map(|(k, v)| (k, v.into())).collect();
        let _ = std::fs::write(path, serde_json::Value::Object(env).to_string());
    }
    if options.grandchild {
        // A helper that would outlive us unless our whole process group dies.
        match std::process::Command::new("sleep").arg("1000").spawn() {
            Ok(child) => log.write(json!({"event": "grandchild", "pid": child.id()})),
            Err(e) => eprintln!("mcp-fixture: cannot spawn the grandchild: {e}"),
        }
    }
    // Registering a handler is what keeps SIGTERM from ending us; it is
    // never read.
    let _sigterm = options.ignore_sigterm.then(|| {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler can be registered")
    });
    if let Some(mode) = options.hostile.clone() {
        hostile(&mode, &options, &log);
        return;
    }
    if options.stderr_flood > 0 {
        let _ = std::io::stderr().write_all(&vec![b'e'; options.stderr_flood]);
    }
    if let Some(ms) = options.exit_after {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            std::process::exit(4);
        });
    }
    if options.init_delay > 0 {
        tokio::time::sleep(Duration::from_millis(options.init_delay)).await;
    }
    let mut server = ToolServer::new("mcp-fixture");
    if let Some(size) = options.page_size {
        server = server.page_size(size);
    }
    for name in &options.tools {
        let tool = Tool::new(
            name.clone(),
            format!("fixture tool {name}: echoes its arguments"),
            any_object_schema(),
        );
        let (bytes, delay) = (options.tool_bytes, options.tool_delay);
        server = server.tool(tool, move |args, cancel| async move {
            if delay > 0 {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(delay)) => {}
                    () = cancel.cancelled() => return Err(ErrorData::internal_error("cancelled", None)),
                }
            }
            match bytes {
                Some(n) => text("r".repeat(n)),
                None => text(serde_json::Value::Object(args).to_string()),
            }
        });
    }
    for hook in &options.hooks {
        let script = Arc::new(match hook.as_str() {
            "_Stop" => options.stop.clone(),
            "_PostCompact" => options.post_compact.clone(),
            other => options
                .scripts
                .iter()
                .find(|(h, _)| h == other)
                .map(|(_, script)| script.clone())
                .unwrap_or_default(),
        });
        let name = hook.clone();
        let log = log.clone();
        let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let cycle = options.cycle;
        let mut schema = any_object_schema();
        let fields: Vec<String> = options
            .schemas
            .iter()
            .find(|(h, _)| h == hook)
            .map(|(_, fields)| fields.clone())
            .unwrap_or_default();
        if !fields.is_empty() {
            let properties: serde_json::Map<String, serde_json::Value> =
                fields.iter().map(|f| (f.clone(), json!({}))).collect();
            schema.insert("properties".into(), properties.into());
        }
        let strict = options.strict_schema;
        if strict {
            schema.insert("additionalProperties".into(), false.into());
        }
        let tool = Tool::new(hook.clone(), "scripted hook", schema);
        server = server.tool(tool, move |args, cancel| {
            let (script, name, log) = (script.clone(), name.clone(), log.clone());
            let here = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let unknown: Vec<String> = args
                .keys()
                .filter(|k| !fields.contains(k))
                .cloned()
                .collect();
            async move {
                let n = log.calls(&name).unwrap_or(here);
                log.write(json!({
                    "event": "call",
                    "tool": name,
                    "n": n,
                    "pid": std::process::id(),
                    "arguments": args,
                }));
                if strict && !unknown.is_empty() {
                    return Err(ErrorData::invalid_params(
                        format!("unknown arguments: {unknown:?}"),
                        None,
                    ));
                }
                let index = if cycle && !script.is_empty() {
                    n % script.len()
                } else {
                    n
                };
                let step = script
                    .get(index)
                    .or(script.last())
                    .map_or("empty", String::as_str);
                run_step(step, &name, n, &log, cancel).await
            }
        });
    }
    if let Err(e) = server.serve_stdio().await {
        eprintln!("mcp-fixture: {e}");
        std::process::exit(1);
    }
}
