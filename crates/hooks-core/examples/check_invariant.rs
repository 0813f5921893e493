//! An invariant of your own, checked over thousands of random sessions with
//! the `testing` feature's strategies and reference driver.
//!
//! ```text
//! cargo run -p hooks-core --features testing --example check_invariant
//! ```
//!
//! The invariant here: a server the policy retires for the session \[T4\] is
//! never started again, and no hook call goes to it afterwards. The driver
//! checks the policy's own invariants after every step as well; a failing
//! case is shrunk to a small one and printed.

#![allow(clippy::print_stdout)]

use std::cell::Cell;
use std::collections::BTreeSet;
use std::process::ExitCode;

use hooks_core::testing::{Driver, schedule, world};
use hooks_core::{Event, Output, ServerName};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const CASES: u32 = 3000;

/// Checks the invariant over everything the session has output so far, and
/// counts the retirements it saw.
fn no_start_after_retirement(driver: &Driver) -> Result<usize, TestCaseError> {
    let mut retired: BTreeSet<ServerName> = BTreeSet::new();
    for (at, output) in driver.outputs() {
        match output {
            Output::Event(Event::ServerDown {
                server,
                retry_at: None,
                ..
            }) => {
                retired.insert(server.clone());
            }
            Output::StartServer { server } | Output::CallHook { server, .. } => {
                let name = driver.session().server_name(*server);
                prop_assert!(
                    !retired.contains(name),
                    "at {}: {:?} for {}, which was retired for the session",
                    at,
                    output,
                    name
                );
            }
            _ => {}
        }
    }
    Ok(retired.len())
}

fn main() -> ExitCode {
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        // A failure is printed here; no regression file beside the example.
        failure_persistence: None,
        ..Config::default()
    });
    // The test closure is `Fn`: the counts live in cells.
    let sessions_with_retirement = Cell::new(0);
    let retirements = Cell::new(0);
    let result = runner.run(&(world(), schedule(1..60)), |(world, ops)| {
        let mut driver = Driver::new(world);
        for op in &ops {
            driver.apply(op);
            no_start_after_retirement(&driver)?;
        }
        driver.end_session();
        let retired = no_start_after_retirement(&driver)?;
        if retired > 0 {
            sessions_with_retirement.set(sessions_with_retirement.get() + 1);
            retirements.set(retirements.get() + retired);
        }
        Ok(())
    });
    match result {
        Ok(()) => {
            println!(
                "ok: {CASES} random sessions; {} retired a server ({} retirements), and no \
                 retired server was started or called again",
                sessions_with_retirement.get(),
                retirements.get()
            );
            ExitCode::SUCCESS
        }
        Err(failure) => {
            println!("the invariant failed: {failure}");
            ExitCode::FAILURE
        }
    }
}
