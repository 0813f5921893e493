//! SIGINT, SIGTERM and SIGHUP: the first one cancels what runs, so the agent
//! stops its servers in order (each process group gets SIGTERM, then SIGKILL,
//! within a fixed bound) and exits with the signal's status; a second one
//! exits at once, after a SIGKILL to every server's process group.
//!
//! Exit statuses follow the shell's convention, 128 + the signal number: 130
//! for SIGINT, 143 for SIGTERM, 129 for SIGHUP.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Exit status after SIGINT (Ctrl-C).
pub(crate) const EXIT_SIGINT: i32 = 130;
/// Exit status after SIGTERM.
pub(crate) const EXIT_SIGTERM: i32 = 143;
/// Exit status after SIGHUP.
pub(crate) const EXIT_SIGHUP: i32 = 129;

/// The signals of one command: a token cancelled by the first, and which
/// one it was.
#[derive(Clone, Debug)]
pub(crate) struct Signals {
    cancel: CancellationToken,
    /// Invariant: 0 until the first signal, then its exit status.
    first: Arc<AtomicI32>,
}

impl Signals {
    /// Starts listening. A signal that cannot be listened for (no such
    /// facility here) is logged and keeps its default action.
    pub(crate) fn install() -> Signals {
        Signals::install_for(&[
            (SignalKind::interrupt(), EXIT_SIGINT),
            (SignalKind::terminate(), EXIT_SIGTERM),
            (SignalKind::hangup(), EXIT_SIGHUP),
        ])
    }

    /// As [`Signals::install`], for SIGTERM and SIGHUP only: `sprout chat`
    /// handles SIGINT itself (it cancels one prompt, not the session).
    pub(crate) fn install_without_interrupt() -> Signals {
        Signals::install_for(&[
            (SignalKind::terminate(), EXIT_SIGTERM),
            (SignalKind::hangup(), EXIT_SIGHUP),
        ])
    }

    fn install_for(kinds: &[(SignalKind, i32)]) -> Signals {
        let signals = Signals {
            cancel: CancellationToken::new(),
            first: Arc::new(AtomicI32::new(0)),
        };
        for &(kind, status) in kinds {
            let mut stream = match signal(kind) {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!("cannot listen for signal {}: {e}", kind.as_raw_value());
                    continue;
                }
            };
            let signals = signals.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    signals.received(status);
                }
            });
        }
        signals
    }

    /// As if SIGINT had come (for a command that listens for it itself):
    /// the first cancels, a second exits at once.
    pub(crate) fn interrupt(&self) {
        self.received(EXIT_SIGINT);
    }

    fn received(&self, status: i32) {
        if self
            .first
            .compare_exchange(0, status, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.cancel.cancel();
        } else {
            // The second signal: the person (or the supervisor) will not
            // wait for an orderly stop.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "sprout: a second signal: stopping every server now and exiting"
            );
            hooks_mcp::kill_all_now();
            std::process::exit(status);
        }
    }

    /// Cancelled by the first signal.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The exit status the first signal calls for, if one came.
    pub(crate) fn exit_status(&self) -> Option<i32> {
        match self.first.load(Ordering::SeqCst) {
            0 => None,
            status => Some(status),
        }
    }
}
