//! `sprout-tests`: workspace-level end-to-end tests over real processes.
//!
//! Empty for now. The tests that run the built `sprout` binary against fixture
//! MCP servers (real child processes) and a fake model server (real HTTP on
//! 127.0.0.1) arrive with the `hooks-mcp` and command-line work. The policy's
//! own scenario and property tests live with `hooks-core`.
