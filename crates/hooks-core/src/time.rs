//! Time as a value.
//!
//! The core never reads a clock. Every input that depends on time carries a
//! [`Time`]: the time elapsed since an epoch that the driver picks once (in
//! `hooks-mcp`, the moment the session was created, read from tokio's clock so
//! that paused-time tests work). Tests simply count from [`Time::ZERO`].

use core::fmt;
use core::ops::Add;
use core::time::Duration;

/// A point in time, as the duration since the driver's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(Duration);

impl Time {
    /// The driver's epoch.
    pub const ZERO: Time = Time(Duration::ZERO);

    /// The point `since_epoch` after the driver's epoch.
    pub const fn from_epoch(since_epoch: Duration) -> Time {
        Time(since_epoch)
    }

    /// The point `ms` milliseconds after the driver's epoch.
    pub const fn from_millis(ms: u64) -> Time {
        Time(Duration::from_millis(ms))
    }

    /// The duration since the driver's epoch.
    pub const fn since_epoch(self) -> Duration {
        self.0
    }

    /// How long after `earlier` this is; zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Duration> for Time {
    type Output = Time;

    fn add(self, rhs: Duration) -> Time {
        Time(self.0.saturating_add(rhs))
    }
}

impl fmt::Display for Time {
    /// Milliseconds since the epoch, with `ms`: `t=2500ms`-style traces read well.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0.as_millis())
    }
}
