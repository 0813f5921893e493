//! `hooks-mcp`: the `hooks-core` policy on real MCP servers, through `rmcp`.
//!
//! - [`spec`]: which servers, from the `mcpServers` JSON format, in order.
//! - [`host`]: [`Host`], the driver: connects to every server at once
//!   (stdio children in their own process groups, Streamable HTTP
//!   endpoints), sorts tools from hooks, runs hook rounds under the core's
//!   deadlines, kills wedged servers and restarts them lazily.
//! - [`reply`]: rmcp results read into the core's terms and into tool output.
//! - [`server`]: building blocks for writing a hook server, and the bundled
//!   `todo` and `gate` servers.
//!
//! Nothing here decides policy: every decision is `hooks-core`'s.
//!
//! # Running a hook round
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use hooks_core::{Decision, HookConfig, Input, ServerName, StopReason};
//! use hooks_mcp::{Host, HostOptions, ServerSpec};
//! use tokio_util::sync::CancellationToken;
//!
//! let todo = ServerSpec::stdio(ServerName::new("todo")?, "sprout", vec!["hook-server".into(), "todo".into()]);
//! let config = HookConfig::from_values(Some("*"), None, None)?;
//! let sink = Arc::new(|event: &hooks_core::Event| println!("{}", serde_json::to_string(event).unwrap()));
//! let mut host = Host::start(vec![todo], config, HostOptions::default(), sink).await?;
//!
//! host.begin_prompt()?;
//! let ended = Input::ModelResponded { stop: StopReason::EndTurn, tool_calls: 0 };
//! match host.decide(ended, &CancellationToken::new()).await? {
//!     Decision::Continue { injections } => println!("objections: {injections:?}"),
//!     other => println!("{other:?}"),
//! }
//! host.shutdown().await;
//! # Ok(()) }
//! ```

mod connection;
mod guard;
pub mod host;
pub mod reply;
pub mod server;
pub mod spec;

pub use connection::{ListingLimits, StartError, kill_all_now};
pub use host::{EventSink, Host, HostOptions, ModelToolDef, PreparedCall, ServerReport};
pub use reply::ToolOutput;
pub use spec::{
    ServerSpec, SpecError, TransportSpec, check_http_url, parse_mcp_servers, redact_url,
};
