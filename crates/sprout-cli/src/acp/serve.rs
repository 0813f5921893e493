//! Serving: the SDK's connection on our wire, and one handler per method.
//!
//! Each handler reads its request (the prompt's text from its content
//! blocks, say), hands the work to the session table and answers: at once
//! for what needs no waiting (`initialize`, a refused prompt), from the
//! table's task for what does (`session/new`, a prompt's end,
//! `session/close`). When the client closes stdin or a signal arrives, the
//! table is ended and the writer drained.
//!
//! Not here: the sessions and their prompts (`session`), what the client is
//! told of them (`updates`), the bytes on stdio (`framing`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::{ConnectionTo, Responder, schema as s};
use agent_client_protocol::{
    self as acp, Agent, Client, on_receive_notification, on_receive_request,
};
use hooks_core::SessionEndReason;
use tokio_util::sync::CancellationToken;

use super::session::{SessionError, Sessions};
use super::updates::{UpdateSink, prompt_response};
use super::{AcpConfig, AcpError, framing};

/// How long the end waits for queued frames to reach stdout.
const WRITER_DRAIN: Duration = Duration::from_secs(2);

/// Serves ACP on stdin/stdout until the client closes stdin or `stop` is
/// cancelled (a signal), then cancels what runs and stops every session's
/// servers.
pub(crate) async fn serve(config: AcpConfig, stop: CancellationToken) -> Result<(), AcpError> {
    let (outgoing, incoming, out) = framing::stdio(config.max_frame_bytes);
    let sessions = Sessions::new(config, out.clone());
    let transport = acp::Lines::new(outgoing, incoming);
    let builder = {
        let (new, load, prompt, close, cancel) = (
            sessions.clone(),
            sessions.clone(),
            sessions.clone(),
            sessions.clone(),
            sessions.clone(),
        );
        Agent
            .v1()
            .name("sprout")
            .on_receive_request(
                async move |_request: s::InitializeRequest, responder, _cx| initialize(responder),
                on_receive_request!(),
            )
            .on_receive_request(
                async move |request: s::NewSessionRequest, responder, cx: ConnectionTo<Client>| {
                    new_session(&new, request, responder, cx)
                },
                on_receive_request!(),
            )
            .on_receive_request(
                async move |request: s::LoadSessionRequest, responder, cx: ConnectionTo<Client>| {
                    load_session(&load, request, responder, cx)
                },
                on_receive_request!(),
            )
            .on_receive_request(
                async move |request: s::PromptRequest, responder, _cx: ConnectionTo<Client>| {
                    run_prompt(&prompt, request, responder)
                },
                on_receive_request!(),
            )
            .on_receive_request(
                async move |request: s::CloseSessionRequest,
                            responder,
                            _cx: ConnectionTo<Client>| {
                    close_session(&close, request, responder)
                },
                on_receive_request!(),
            )
            .on_receive_notification(
                async move |notification: s::CancelNotification, _cx: ConnectionTo<Client>| {
                    cancel.cancel(&notification.session_id.0);
                    Ok(())
                },
                on_receive_notification!(),
            )
    };
    let (result, reason) = tokio::select! {
        result = builder.connect_to(transport) => {
            (result.map_err(AcpError::Connection), SessionEndReason::Disconnected)
        }
        () = stop.cancelled() => (Ok(()), SessionEndReason::Signal),
    };
    // The client is gone: cancel every prompt, let them end, tell
    // _SessionEnd why [E6], stop every server.
    sessions.end(reason).await;
    // The transport is gone with the connection: the writer ends once what
    // is queued is written (bounded: a client that stopped reading does not
    // hold the exit).
    out.finish(WRITER_DRAIN).await;
    result
}

/// `initialize`: what Sprout can do.
fn initialize(responder: Responder<s::InitializeResponse>) -> Result<(), acp::Error> {
    let sessions = s::SessionCapabilities::new().close(s::SessionCloseCapabilities::new());
    let capabilities = s::AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(s::PromptCapabilities::new().embedded_context(true))
        .mcp_capabilities(s::McpCapabilities::new().http(true))
        .session_capabilities(sessions);
    responder.respond(
        s::InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(s::Implementation::new("sprout", env!("CARGO_PKG_VERSION"))),
    )
}

/// `session/load`: answered from a task once the servers have started and
/// the history has been replayed.
fn load_session(
    sessions: &Arc<Sessions>,
    request: s::LoadSessionRequest,
    responder: Responder<s::LoadSessionResponse>,
    client: ConnectionTo<Client>,
) -> Result<(), acp::Error> {
    let table = sessions.clone();
    answer_when_started(sessions, responder, async move {
        table.load(request, client).await
    });
    Ok(())
}

/// `session/new`: answered from a task once the servers have started.
fn new_session(
    sessions: &Arc<Sessions>,
    request: s::NewSessionRequest,
    responder: Responder<s::NewSessionResponse>,
    client: ConnectionTo<Client>,
) -> Result<(), acp::Error> {
    let table = sessions.clone();
    answer_when_started(sessions, responder, async move {
        table.open(request, client).await
    });
    Ok(())
}

/// Runs `start` (a session's servers starting) as one of the table's tasks
/// and answers with what it gives; the session's held updates (start-up
/// events) go out right after the answer's frame, once the client knows
/// the session.
fn answer_when_started<T: acp::JsonRpcResponse>(
    sessions: &Sessions,
    responder: Responder<T>,
    start: impl Future<Output = Result<(T, Arc<UpdateSink>), SessionError>> + Send + 'static,
) {
    let out = sessions.out().clone();
    sessions.spawn(async move {
        match start.await {
            Ok((response, sink)) => {
                let id = serde_json::to_value(responder.raw_id()).unwrap_or_default();
                out.after_response(id.clone(), move || sink.release());
                if responder.respond(response).is_err() {
                    // No answer goes out to release them after.
                    out.release_now(&id);
                }
            }
            Err(e) => {
                let _ = responder.respond_with_error(e.into());
            }
        }
    });
}

/// `session/prompt`: refused at once, or answered when the prompt ends.
fn run_prompt(
    sessions: &Sessions,
    request: s::PromptRequest,
    responder: Responder<s::PromptResponse>,
) -> Result<(), acp::Error> {
    let text = prompt_text(&request.prompt);
    let prompt = match sessions.prompt(&request.session_id.0, text) {
        Ok(prompt) => prompt,
        Err(e) => return responder.respond_with_error(e.into()),
    };
    // `$/cancel_request` for this prompt cancels it too.
    let cancellation = responder.cancellation();
    sessions.spawn(async move {
        let outcome = prompt
            .run(async move { cancellation.cancelled().await })
            .await;
        let _ = responder.respond_with_result(prompt_response(&outcome));
    });
    Ok(())
}

/// `session/close`: answered once the session's servers are stopped.
fn close_session(
    sessions: &Sessions,
    request: s::CloseSessionRequest,
    responder: Responder<s::CloseSessionResponse>,
) -> Result<(), acp::Error> {
    let close = match sessions.remove(&request.session_id.0) {
        Ok(close) => close,
        Err(e) => return responder.respond_with_error(e.into()),
    };
    sessions.spawn(async move {
        close.await;
        let _ = responder.respond(s::CloseSessionResponse::new());
    });
    Ok(())
}

/// The text of a prompt: its text blocks and embedded text resources.
fn prompt_text(blocks: &[s::ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            s::ContentBlock::Text(text) => parts.push(text.text.clone()),
            s::ContentBlock::Resource(resource) => {
                if let s::EmbeddedResourceResource::TextResourceContents(contents) =
                    &resource.resource
                {
                    parts.push(format!("[{}]\n{}", contents.uri, contents.text));
                }
            }
            s::ContentBlock::ResourceLink(link) => parts.push(format!("[{}]", link.uri)),
            _ => {}
        }
    }
    parts.join("\n\n")
}
