//! End-to-end tests of the built `sprout` binary: real processes, a fake
//! OpenAI-compatible server over real HTTP on 127.0.0.1, the bundled and
//! fixture hook servers.

// Finding the binary, the fake model server, running sprout.
mod support;
// The offline demo, human and --json.
mod demo;
// `sprout run` against the fake model: objections, rules, hangs, restarts, Ctrl-C.
mod run;
// `sprout hooks list` and `sprout hooks call`.
mod hooks;
// The hook points beyond the seed's two, hook input by schema, governance.
mod hookpoints;
// Every bad input exits 2 with a message naming it.
mod errors;
// `sprout acp`: the Agent Client Protocol over the binary's stdio.
mod acp;
// Saved sessions: --continue, --resume, kills, corrupt transcripts, `sprout sessions`.
mod sessions;
// `sprout chat` in a pseudo-terminal.
mod chat;
// Project trust [U1]-[U3].
mod trust;
// The first hour: other tools' variable names, typos, lenient .mcp.json, hints.
mod first_hour;
// Required gates [F1]-[F3] and tool approval [U4]-[U7].
mod gates;
// Streamed answers: text as it arrives, once, human and --json.
mod streaming;
// Floods, deaf servers, signals and terminal escapes against the binary [issue 10].
mod hostile;
// The README's Python hook servers (official MCP SDK) against the binary;
// compiled with the `python-mcp` feature only, which `cargo xtask ci` turns on.
#[cfg(feature = "python-mcp")]
mod python;
// `sprout run` and `sprout acp` against a real model server (llama-cpp-python);
// compiled with the `real-model` feature only, which `cargo xtask ci` turns on.
#[cfg(feature = "real-model")]
mod real_model;
