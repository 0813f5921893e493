//! `hooks-mcp`: the `hooks-core` policy on real MCP servers.
//!
//! Not built yet. This crate will connect to MCP servers through `rmcp` (stdio
//! child processes in their own process groups, Streamable HTTP endpoints), list
//! their tools, split hooks from model tools with `hooks-core`'s rules, and drive
//! hook rounds: it turns the core's outputs (calls, cancellations, kills,
//! restarts) into rmcp requests and feeds the answers back in. It will also hold
//! the pieces a hook server author needs, and the bundled `todo` and `gate`
//! servers.
//!
//! Today it holds nothing that pretends to work.
