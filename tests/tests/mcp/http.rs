//! A hook round against a Streamable HTTP server on 127.0.0.1.

use std::sync::Arc;

use axum::response::IntoResponse;

use hooks_core::{EndReason, HookPoint, ServerName, TurnVerdict};
use hooks_mcp::ServerSpec;
use hooks_mcp::server::ToolServer;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::support::rig;

#[tokio::test]
async fn stop_round_over_streamable_http() {
    let objections = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let server = ToolServer::new("http-hooks").hook(HookPoint::Stop, "objects once", move |_| {
        let left = objections.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            if left > 0 {
                "remote says: not yet".to_owned()
            } else {
                String::new()
            }
        }
    });
    let handler = server.into_handler();
    let config = StreamableHttpServerConfig::default();
    let stop = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    // The endpoint wants the header the spec names.
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            async |request: axum::extract::Request, next: axum::middleware::Next| {
                let authorized = request
                    .headers()
                    .get("authorization")
                    .is_some_and(|v| v == "Bearer sesame");
                if authorized {
                    next.run(request).await
                } else {
                    axum::http::StatusCode::UNAUTHORIZED.into_response()
                }
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let shutdown = stop.clone();
    let serving = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
            .await
    });

    let mut spec = ServerSpec::http(ServerName::new("remote").unwrap(), url);
    if let hooks_mcp::TransportSpec::Http { headers, .. } = &mut spec.transport {
        headers.insert("Authorization".into(), "Bearer sesame".into());
    }
    let mut rig = rig(vec![spec], Some("*"), 5000, 3).await;
    let TurnVerdict::Continue { injections } = rig.end_turn().await else {
        panic!("expected an objection over HTTP")
    };
    assert_eq!(
        injections[0].content,
        r#"{"hook":"_Stop","server":"remote","text":"remote says: not yet"}"#
    );
    rig.used_tools().await;
    assert_eq!(
        rig.end_turn().await,
        TurnVerdict::End {
            reason: EndReason::NoObjection
        }
    );
    rig.host.shutdown().await;
    stop.cancel();
    serving.await.unwrap().unwrap();
}
