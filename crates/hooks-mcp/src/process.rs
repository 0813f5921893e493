//! Process groups: how the crate ends a child together with everything it
//! started. Stdio servers (`connection`) and the gate's command
//! (`server::gate`) each run in a group of their own.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// SIGKILL to a whole process group; a group that is gone already is fine.
/// The caller must know the group's leader was not reaped yet, or the id
/// may belong to someone else.
pub(crate) fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}
