//! What one MCP server can make the agent hold or wait for: bounded.
//!
//! [`Guarded`] wraps any rmcp client transport (our stdio pipes, Streamable
//! HTTP) and holds a server to three limits:
//!
//! - **Inbound rate.** More than [`Limits::max_inbound_per_second`] messages
//!   the server sends of its own accord (requests, notifications) within one
//!   second is a flood: rmcp spawns a task per request it answers, so an
//!   unbounded stream of `ping`s would grow our memory without end. Answers
//!   to our own requests are not counted against the rate, since a fast
//!   server answers as fast as it is asked; they are held to what was asked
//!   instead: a server that sends more answers than it got requests is lying,
//!   and is wedged.
//! - **Outbound backlog.** More than [`Limits::max_sends_in_flight`] messages
//!   waiting to be written means the server is not reading what we send.
//! - **Write stall.** One message that cannot be written within
//!   [`Limits::write_stall`] means the same, over stdio. Over Streamable HTTP
//!   a send is a POST whose answer may wait for the whole tool call, so there
//!   is no stall bound there: the tool-call and hook deadlines bound it.
//!
//! Past any limit the server is *wedged*: the [`Tripwire`] records why and
//! fires, every pending send fails at once, `receive` ends the session, and
//! the connection's watcher kills the process group and reports the reason,
//! which the core counts as a crash toward \[T4\]. Closing is bounded too:
//! [`Limits::close_grace`].
//!
//! Frame size is bounded below us: `stdio` caps one stdio line and rmcp one
//! SSE event at 16 MiB. Deciding what to do with a wedged server is not this module's
//! job; it only notices and fires.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The bounds one connection is held to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Messages a server may send us within one second.
    pub(crate) max_inbound_per_second: u32,
    /// Messages that may wait to be written to the server at once.
    pub(crate) max_sends_in_flight: usize,
    /// How long one message may take to be written; `None`: no bound.
    pub(crate) write_stall: Option<Duration>,
    /// How long closing the transport may take.
    pub(crate) close_grace: Duration,
}

impl Limits {
    /// For a child's stdin: a healthy server reads it all the time, so ten
    /// seconds without room in the pipe means it stopped.
    pub(crate) fn stdio() -> Limits {
        Limits {
            max_inbound_per_second: 2000,
            max_sends_in_flight: 64,
            write_stall: Some(Duration::from_secs(10)),
            close_grace: Duration::from_millis(500),
        }
    }

    /// For Streamable HTTP, where a send lasts as long as its POST's answer.
    pub(crate) fn http() -> Limits {
        Limits {
            write_stall: None,
            ..Limits::stdio()
        }
    }
}

/// Fires once when a connection must end now: because its server is wedged
/// (with the reason), or because we are shutting it down.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tripwire {
    fired: CancellationToken,
    /// Invariant: set at most once, before `fired` is cancelled.
    wedged: Arc<Mutex<Option<String>>>,
}

impl Tripwire {
    /// Records that the server is wedged, and why; the first reason wins.
    pub(crate) fn wedge(&self, reason: String) {
        {
            let mut wedged = self.wedged.lock().unwrap_or_else(|e| e.into_inner());
            if wedged.is_none() && !self.fired.is_cancelled() {
                tracing::warn!("MCP server wedged: {reason}");
                *wedged = Some(reason);
            }
        }
        self.fired.cancel();
    }

    /// Ends the connection's IO now without blaming the server (shutdown).
    pub(crate) fn cut(&self) {
        self.fired.cancel();
    }

    /// Why the server was found wedged, if it was.
    pub(crate) fn wedged(&self) -> Option<String> {
        self.wedged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn is_fired(&self) -> bool {
        self.fired.is_cancelled()
    }

    /// Resolves once the wire has fired.
    pub(crate) async fn fired(&self) {
        self.fired.cancelled().await;
    }
}

/// Why a guarded send failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GuardError {
    /// The transport below failed.
    #[error(transparent)]
    Transport(Box<dyn std::error::Error + Send + Sync>),
    /// The server was found wedged, for this reason.
    #[error("the server was stopped as wedged: {0}")]
    Wedged(String),
    /// The connection is being shut down.
    #[error("the connection to the server was closed")]
    Ended,
}

impl GuardError {
    fn after(wire: &Tripwire) -> GuardError {
        wire.wedged().map_or(GuardError::Ended, GuardError::Wedged)
    }
}

/// A client transport held to [`Limits`]; see the module docs.
pub(crate) struct Guarded<T> {
    inner: T,
    limits: Limits,
    wire: Tripwire,
    in_flight: Arc<AtomicUsize>,
    /// Requests sent so far (counted before they are written, so an answer
    /// can never arrive ahead of its count).
    asked: Arc<AtomicU64>,
    /// Answers (results and errors) received so far.
    answered: u64,
    /// Start of the current one-second window, and unsolicited messages
    /// seen in it.
    window: (Instant, u32),
}

impl<T> Guarded<T> {
    pub(crate) fn new(inner: T, limits: Limits, wire: Tripwire) -> Self {
        Guarded {
            inner,
            limits,
            wire,
            in_flight: Arc::new(AtomicUsize::new(0)),
            asked: Arc::new(AtomicU64::new(0)),
            answered: 0,
            window: (Instant::now(), 0),
        }
    }

    /// Counts one inbound message; why it breaks a limit, if it does.
    fn admit(&mut self, message: &RxJsonRpcMessage<RoleClient>) -> Result<(), String> {
        // An error without an id answers no request of ours (a parse error,
        // or a sloppy reply to one of our notifications): it counts against
        // the rate like anything else unasked, never as an answer.
        let answer = match message {
            JsonRpcMessage::Response(_) => true,
            JsonRpcMessage::Error(error) => error.id.is_some(),
            _ => false,
        };
        if answer {
            self.answered += 1;
            let asked = self.asked.load(Ordering::SeqCst);
            return if self.answered <= asked {
                Ok(())
            } else {
                Err(format!(
                    "it sent {} answers to {asked} requests",
                    self.answered
                ))
            };
        }
        let now = Instant::now();
        let (start, count) = &mut self.window;
        if now.duration_since(*start) >= Duration::from_secs(1) {
            *start = now;
            *count = 0;
        }
        *count = count.saturating_add(1);
        if *count <= self.limits.max_inbound_per_second {
            Ok(())
        } else {
            Err(format!(
                "it sent more than {} unasked messages within one second",
                self.limits.max_inbound_per_second
            ))
        }
    }
}

/// Takes one off the in-flight count when a send ends, however it ends.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<T> Transport<RoleClient> for Guarded<T>
where
    T: Transport<RoleClient>,
{
    type Error = GuardError;

    fn name() -> std::borrow::Cow<'static, str> {
        "MCP".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), GuardError>> + Send + 'static {
        if matches!(item, JsonRpcMessage::Request(_)) {
            self.asked.fetch_add(1, Ordering::SeqCst);
        }
        let waiting = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        let slot = InFlight(self.in_flight.clone());
        let wire = self.wire.clone();
        let limits = self.limits;
        let backlog = waiting > limits.max_sends_in_flight;
        // Not built at all past the backlog limit: the message is dropped
        // here rather than held.
        let send = (!backlog && !wire.is_fired()).then(|| self.inner.send(item));
        async move {
            let _slot = slot;
            let Some(send) = send else {
                if backlog {
                    wire.wedge(format!(
                        "it is not reading what the agent sends: more than {} messages were waiting to be written",
                        limits.max_sends_in_flight
                    ));
                }
                return Err(GuardError::after(&wire));
            };
            let stall = async {
                match limits.write_stall {
                    Some(bound) => tokio::time::sleep(bound).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = wire.fired() => Err(GuardError::after(&wire)),
                sent = send => sent.map_err(|e| GuardError::Transport(Box::new(e))),
                () = stall => {
                    wire.wedge(format!(
                        "it is not reading what the agent sends: a message could not be written within {} ms",
                        limits.write_stall.unwrap_or_default().as_millis()
                    ));
                    Err(GuardError::after(&wire))
                }
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let wire = self.wire.clone();
        let message = tokio::select! {
            biased;
            () = wire.fired() => None,
            message = self.inner.receive() => message,
        }?;
        match self.admit(&message) {
            Ok(()) => Some(message),
            Err(reason) => {
                wire.wedge(reason);
                None
            }
        }
    }

    async fn close(&mut self) -> Result<(), GuardError> {
        // A server that never reads can hold a flush forever.
        match tokio::time::timeout(self.limits.close_grace, self.inner.close()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(GuardError::Transport(Box::new(e))),
            Err(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use rmcp::model::{
        ClientRequest, NumberOrString, PingRequest, ServerJsonRpcMessage, ServerRequest,
        ServerResult,
    };

    use super::*;

    /// A transport whose server has already sent `inbound`, in order.
    struct Scripted {
        inbound: VecDeque<ServerJsonRpcMessage>,
    }

    impl Transport<RoleClient> for Scripted {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), std::io::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            self.inbound.pop_front()
        }

        async fn close(&mut self) -> Result<(), std::io::Error> {
            Ok(())
        }
    }

    fn answer(id: i64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(ServerResult::empty(()), NumberOrString::Number(id))
    }

    fn ping(id: i64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::request(
            ServerRequest::PingRequest(PingRequest::default()),
            NumberOrString::Number(id),
        )
    }

    fn guarded(inbound: Vec<ServerJsonRpcMessage>) -> (Guarded<Scripted>, Tripwire) {
        let wire = Tripwire::default();
        let inner = Scripted {
            inbound: inbound.into(),
        };
        (Guarded::new(inner, Limits::stdio(), wire.clone()), wire)
    }

    /// Sends `n` requests of ours.
    async fn ask(guarded: &mut Guarded<Scripted>, n: i64) {
        for id in 0..n {
            let request = TxJsonRpcMessage::<RoleClient>::request(
                ClientRequest::PingRequest(PingRequest::default()),
                NumberOrString::Number(id),
            );
            guarded.send(request).await.expect("sent");
        }
    }

    /// Receives until the transport ends; how many messages came through.
    async fn drain(guarded: &mut Guarded<Scripted>) -> usize {
        let mut received = 0;
        while guarded.receive().await.is_some() {
            received += 1;
        }
        received
    }

    // A fast server answers far more than the unsolicited rate within one
    // second: answers to our own requests are not a flood.
    #[tokio::test(start_paused = true)]
    async fn answers_to_our_requests_are_not_a_flood() {
        let n = i64::from(Limits::stdio().max_inbound_per_second) * 5;
        let (mut guarded, wire) = guarded((0..n).map(answer).collect());
        ask(&mut guarded, n).await;
        assert_eq!(drain(&mut guarded).await, n as usize);
        assert_eq!(wire.wedged(), None);
    }

    // An error without an id (a reply to one of our notifications, say) is
    // not an answer: an honest but sloppy server is not wedged by it.
    #[tokio::test(start_paused = true)]
    async fn errors_without_an_id_are_not_answers() {
        let anonymous = ServerJsonRpcMessage::Error(rmcp::model::JsonRpcError {
            jsonrpc: rmcp::model::JsonRpcVersion2_0,
            id: None,
            error: rmcp::model::ErrorData::method_not_found::<
                rmcp::model::InitializedNotificationMethod,
            >(),
        });
        let (mut guarded, wire) = guarded(vec![answer(0), anonymous.clone(), anonymous]);
        ask(&mut guarded, 1).await;
        assert_eq!(drain(&mut guarded).await, 3);
        assert_eq!(wire.wedged(), None);
    }

    // More answers than requests is a lie: the connection ends at the first
    // answer too many, and says why.
    #[tokio::test(start_paused = true)]
    async fn more_answers_than_requests_wedge_the_server() {
        let (mut guarded, wire) = guarded((0..4).map(answer).collect());
        ask(&mut guarded, 3).await;
        assert_eq!(drain(&mut guarded).await, 3);
        assert_eq!(
            wire.wedged().as_deref(),
            Some("it sent 4 answers to 3 requests")
        );
        assert!(wire.is_fired());
    }

    // Requests of the server's own beyond the rate within one second are a
    // flood, whatever answers came with them.
    #[tokio::test(start_paused = true)]
    async fn unasked_messages_beyond_the_rate_are_a_flood() {
        let rate = i64::from(Limits::stdio().max_inbound_per_second);
        let mut inbound: Vec<_> = (0..10).map(answer).collect();
        inbound.extend((0..rate + 1).map(ping));
        let (mut guarded, wire) = guarded(inbound);
        ask(&mut guarded, 10).await;
        assert_eq!(drain(&mut guarded).await, 10 + rate as usize);
        let reason = wire.wedged().expect("wedged");
        assert!(
            reason.contains("unasked messages within one second"),
            "{reason}"
        );
    }

    // The rate is per second: the same number of pings spread over two
    // seconds is no flood.
    #[tokio::test(start_paused = true)]
    async fn the_rate_window_moves_on() {
        let rate = i64::from(Limits::stdio().max_inbound_per_second);
        let (mut guarded, wire) = guarded((0..rate).map(ping).collect());
        assert_eq!(drain(&mut guarded).await, rate as usize);
        tokio::time::advance(Duration::from_secs(1)).await;
        guarded.inner.inbound = (0..rate).map(ping).collect();
        assert_eq!(drain(&mut guarded).await, rate as usize);
        assert_eq!(wire.wedged(), None);
    }
}
