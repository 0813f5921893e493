//! `sprout-tests`: workspace-level end-to-end tests over real processes.
//!
//! The package holds the `mcp-fixture` binary (a scripted MCP stdio server)
//! and the integration tests in `tests/`, which run it as real child
//! processes and serve MCP over real HTTP on 127.0.0.1.
