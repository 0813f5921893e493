//! `hooks-mcp`: the `hooks-core` policy on real MCP servers, through `rmcp`.
//!
//! - Which servers: [`ServerSpec`], from the `mcpServers` JSON format by
//!   [`parse_mcp_servers`], in order; the small environment of a stdio child
//!   ([`child_environment`]); URLs checked and shown redacted.
//! - [`Host`], the driver: connects to every server at once (stdio children
//!   in their own process groups, Streamable HTTP endpoints), each held to
//!   bounds in memory and time, sorts tools from hooks, runs hook rounds under
//!   the core's deadlines, kills wedged servers and restarts them lazily.
//! - [`server`]: building blocks for writing a hook server, and the bundled
//!   `todo` and `gate` servers.
//!
//! The modules behind these are private; what is public is re-exported here,
//! and no rmcp type is in a public signature except in [`server`], whose
//! point is to build rmcp tools.
//!
//! Nothing here decides policy: every decision is `hooks-core`'s.
//!
//! # Running a hook round
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use hooks_core::{HookConfig, ServerName, StopReason, TurnVerdict};
//! use hooks_mcp::{Host, HostOptions, ServerSpec};
//! use tokio_util::sync::CancellationToken;
//!
//! let todo = ServerSpec::stdio(ServerName::new("todo")?, "sprout", vec!["hook-server".into(), "todo".into()]);
//! let config = HookConfig::from_values(Some("*"), None, None)?;
//! let sink = Arc::new(|event: hooks_core::Event| println!("{}", serde_json::to_string(&event).unwrap()));
//! let mut host = Host::start(vec![todo], config, HostOptions::default(), sink).await?;
//!
//! host.begin_prompt()?;
//! match host.end_turn(StopReason::EndTurn, 0, "Done.", &CancellationToken::new()).await? {
//!     TurnVerdict::Continue { injections } => println!("objections: {injections:?}"),
//!     other => println!("{other:?}"),
//! }
//! host.shutdown().await;
//! # Ok(()) }
//! ```

// Every public item says what it is for: this crate is used on its own.
#![deny(missing_docs)]
#![cfg_attr(doctest, doc = include_str!("../README.md"))]

mod connection;
mod guard;
mod host;
mod process;
mod reply;
pub mod server;
mod spec;
mod stdio;

pub use connection::{ListingLimits, StartError, kill_all_now};
pub use host::{EventSink, Host, HostOptions, ModelToolDef, PreparedCall, ServerReport};
pub use reply::ToolOutput;
pub use spec::{
    INHERITED_VARIABLES, McpConfig, ServerSpec, SpecError, TransportSpec, UrlError, check_http_url,
    child_environment, looks_secret, parse_mcp_config, parse_mcp_servers, redact_url,
};
