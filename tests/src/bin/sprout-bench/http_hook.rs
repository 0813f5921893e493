//! Figure 2's Streamable HTTP hook server, in a process of its own.
//!
//! `sprout-bench --http-hook-server` serves one `_Stop` hook that never
//! objects on `http://127.0.0.1:PORT/mcp`, prints that URL as its first line
//! on stdout, and serves until its stdin closes. Run out of process, the
//! round crosses a process boundary (and the two processes compete for the
//! cores) as the stdio rounds do; served in the benchmark's own runtime it
//! would not.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use hooks_mcp::server::ToolServer;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio_util::sync::CancellationToken;

/// The child's side: serves until stdin closes.
pub(crate) async fn serve() {
    let handler = ToolServer::new("bench")
        .hook(hooks_core::HookPoint::Stop, "never objects", |_| async {
            String::new()
        })
        .into_handler();
    let config = StreamableHttpServerConfig::default();
    let stop: CancellationToken = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    println!("{url}");
    // The parent closes our stdin to stop us.
    let eof = stop.clone();
    tokio::spawn(async move {
        let mut sink = Vec::new();
        let _ = tokio::io::stdin().read_to_end(&mut sink).await;
        eof.cancel();
    });
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled_owned().await })
        .await;
}

/// The parent's side: a running `--http-hook-server` child.
pub(crate) struct Child {
    /// Where it serves MCP.
    pub(crate) url: String,
    child: tokio::process::Child,
}

impl Child {
    /// Starts `bench --http-hook-server` and reads its URL.
    pub(crate) async fn start(bench: &Path) -> Result<Child, String> {
        let mut child = tokio::process::Command::new(bench)
            .arg("--http-hook-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bench.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        let mut stdout = BufReader::new(stdout);
        let read = stdout.read_line(&mut line);
        match tokio::time::timeout(std::time::Duration::from_secs(10), read).await {
            Ok(Ok(n)) if n > 0 && line.starts_with("http://") => {}
            other => return Err(format!("no URL within 10 s (read {line:?}: {other:?})")),
        }
        Ok(Child {
            url: line.trim().to_owned(),
            child,
        })
    }

    /// Closes its stdin and waits for it to exit.
    pub(crate) async fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.child.wait()).await;
    }
}
