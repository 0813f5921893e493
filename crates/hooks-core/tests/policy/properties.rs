//! Property tests over random sessions.
//!
//! The worlds, schedules and the virtual-time driver are the public ones of
//! `hooks_core::testing` (the `testing` feature), as a user of the crate
//! would use them: random servers with random listings of every hook point
//! and start behaviour, a random allowlist, budget, stop governance
//! \[G1\]-\[G2\], deadline and per-server deadlines \[C4\], a random
//! stream of hook behaviours, and a random sequence of loop operations asking
//! every question the core has. The driver checks its invariants after every
//! step (each stated in words above the code that checks it, in
//! `crates/hooks-core/src/testing.rs`); the properties here add their own.

use hooks_core::testing::{Answer, Driver, Question, World, gate_world, schedule, world};
use hooks_core::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    /// Whatever the world and the loop do, after every step: the budget is
    /// never exceeded; no hook is offered or resolvable; a call goes only to
    /// a server that is up, with the configured deadline; every round is
    /// decided within the hook timeout; a server is killed only on its second
    /// consecutive timeout; every question gets exactly one answer and a
    /// cancellation answers at once; objections are injected in configuration
    /// order and never twice without a tool call between; and the driver never
    /// livelocks.
    #[test]
    fn invariants_hold_after_every_step(world in world(), ops in schedule(1..60)) {
        let mut driver = Driver::new(world);
        for op in &ops {
            driver.apply(op);
        }
        driver.end_session();
        prop_assert_eq!(driver.answers().len(), driver.questions());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// The same inputs give the same outputs: two runs of one world and one
    /// operation sequence produce identical traces, times included.
    #[test]
    fn same_inputs_same_outputs(world in world(), ops in schedule(1..40)) {
        let mut first = Driver::new(world.clone());
        let mut second = Driver::new(world);
        for op in &ops {
            first.apply(op);
            second.apply(op);
        }
        prop_assert_eq!(first.trace(), second.trace());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2500, ..ProptestConfig::default() })]

    /// Sovereignty \[S6\], under every \[G1\] x \[G2\] combination and with
    /// every hook point in play: whatever the hooks answer, however slowly, a
    /// model that keeps ending its turn ends every prompt after at most two
    /// end-of-turns in a row with the decline rule on, at most `budget + 1`
    /// with it off; a prompt makes at most `budget` objection-driven
    /// continuations (and a session too, with the budget per session); and
    /// every question is answered (the driver fails on livelock).
    #[test]
    fn hooks_cannot_trap_the_agent(world in world(), prompts in prompts()) {
        no_trap(world, prompts, |_| Ok(()))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// No hook is ever offered to the model \[H2\]: for any listing of any
    /// names, every offered tool's bare name is not a hook, every offered
    /// name is a valid model name \[N3\], and every `_` name resolves to
    /// nothing \[H3\].
    #[test]
    fn no_hook_is_ever_offered(listing in proptest::collection::vec("[_a-zA-Z.]{0,3}(_?Stop|_PostCompact|[a-z_]{0,40})", 0..12), allow in prop_oneof![Just(None), Just(Some("*"))]) {
        let config = HookConfig::from_values(allow, None, None).unwrap();
        let server = ServerName::new("srv").unwrap();
        let mut session = Session::new(config, vec![server]).unwrap();
        let tools = listing.iter().map(|t| ListedTool::named(t.as_str())).collect();
        session.handle(Time::ZERO, Input::ServerStarted { server: ServerId(0), tools }).unwrap();
        for (_, tool) in session.model_tools() {
            prop_assert!(!tool.bare.starts_with('_'));
            prop_assert!(tool.qualified.len() <= 64);
            prop_assert!(tool.qualified.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
        }
        for name in listing.iter().filter(|n| n.starts_with('_')) {
            let qualified = format!("srv__{name}");
            prop_assert_eq!(session.resolve(&qualified), None);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// A session continued from what another carried \[T4\], \[S3\]: whatever
    /// the first one went through, the continuation (built with
    /// `Session::resume` on the same settings and servers) carries exactly
    /// the same on; every server the first retired is retired from the
    /// start, never started and reported once; every other server is
    /// started once, with its failures counted, so it has only what is left
    /// of the limit.
    #[test]
    fn a_resumed_session_carries_on_the_failure_counts(world in world(), ops in schedule(1..60)) {
        let mut driver = Driver::new(world.clone());
        for op in &ops {
            driver.apply(op);
        }
        let carried = driver.session().carried();
        let first: Vec<ServerState> = (0..world.servers.len())
            .map(|i| driver.session().server_state(ServerId(i)))
            .collect();
        let mut config = HookConfig::from_values(
            world.allow.as_deref(),
            Some(&world.timeout_ms.to_string()),
            Some(&world.budget.to_string()),
        )
        .unwrap();
        config.stop_budget_scope = world.scope;
        config.stop_decline_rule = world.decline;
        let names: Vec<ServerName> = (0..world.servers.len())
            .map(|i| ServerName::new(format!("s{i}")).unwrap())
            .collect();
        let mut resumed = Session::resume(config, names.clone(), &carried).unwrap();
        prop_assert_eq!(resumed.carried(), carried.clone());
        let mut started = Vec::new();
        let mut reported = Vec::new();
        while let Some(output) = resumed.poll_output() {
            match output {
                Output::StartServer { server } => started.push(server.0),
                Output::Event(Event::ServerDown { server, cause: DownCause::BeforeResume, failures, retry_at: None }) => {
                    prop_assert_eq!(failures, session::FAILURE_LIMIT);
                    reported.push(names.iter().position(|n| *n == server).unwrap());
                }
                _ => {}
            }
        }
        for (i, state) in first.iter().enumerate() {
            let retired = *state == ServerState::Retired;
            prop_assert_eq!(resumed.server_state(ServerId(i)) == ServerState::Retired, retired);
            prop_assert_eq!(started.contains(&i), !retired, "server s{} started: {:?}", i, started);
            prop_assert_eq!(reported.contains(&i), retired);
        }
        prop_assert_eq!(started.len() + reported.len(), first.len());
    }
}

/// `works` per prompt: after the i-th continuation, does the model run a
/// tool round (and compact) before ending again?
fn prompts() -> impl Strategy<Value = Vec<Vec<bool>>> {
    proptest::collection::vec(proptest::collection::vec(any::<bool>(), 1..30), 1..5)
}

/// The body of the sovereignty property \[S6\]: prompts of a model that keeps
/// ending its turn, each checked against the budget and the decline rule;
/// `ended` sees how each prompt ended.
fn no_trap(
    world: World,
    prompts: Vec<Vec<bool>>,
    ended: impl Fn(&EndReason) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let budget = world.budget;
    let scope = world.scope;
    let decline = world.decline;
    let mut driver = Driver::new(world);
    let mut continues_total = 0;
    for (p, works) in prompts.into_iter().enumerate() {
        driver.ensure_prompt();
        if p == 0 {
            driver.ask(Question::SessionStart, None);
        }
        driver.ask(Question::Submit, None);
        let mut continues_in_prompt = 0;
        // `works[i]`: after the i-th continuation, does the model run a
        // tool round (and compact) before ending again?
        let mut ends = 0;
        let mut i = 0;
        loop {
            let answer = driver.ask(
                Question::EndTurn {
                    stop: StopReason::EndTurn,
                    tool_calls: 0,
                },
                None,
            );
            ends += 1;
            match answer {
                Answer::Turn(TurnVerdict::Continue { .. }) => {
                    continues_total += 1;
                    continues_in_prompt += 1;
                    if works.get(i).copied().unwrap_or(false) {
                        driver.tool_round(1 + i % 3, None);
                        if i % 2 == 1 {
                            driver.ask(Question::PreCompact, None);
                            driver.ask(Question::Compacted(3), None);
                        }
                        ends = 0;
                    }
                    i += 1;
                }
                Answer::Turn(TurnVerdict::End { reason }) => {
                    ended(&reason)?;
                    break;
                }
                other => panic!("unexpected answer {other:?}"),
            }
            let max_ends = match decline {
                DeclineRule::On => 2,
                DeclineRule::Off => budget + 1,
            };
            prop_assert!(
                ends <= max_ends,
                "the model ended {} times in a row without stopping",
                ends
            );
            prop_assert!(
                continues_in_prompt <= budget,
                "more continuations in a prompt than the budget"
            );
            if scope == BudgetScope::Session {
                prop_assert!(
                    continues_total <= budget,
                    "more continuations in a session than the budget"
                );
            }
        }
        prop_assert!(!driver.session().in_prompt());
    }
    driver.end_session();
    prop_assert_eq!(driver.answers().len(), driver.questions());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// \[F4\]: sovereignty \[S6\] holds with a required gate that never
    /// answers (it hangs, crashes, errs on every call, or never starts
    /// \[F1\]): the budget, the decline rule and the round limit still end
    /// every prompt, and since every `_Stop` round it is in objects, no
    /// prompt ends because nobody objected or nobody lists `_Stop`.
    #[test]
    fn f4_a_gate_that_never_answers_cannot_trap_the_agent(world in gate_world(), prompts in prompts()) {
        no_trap(world, prompts, |reason| {
            prop_assert!(
                matches!(reason, EndReason::BudgetSpent | EndReason::Declined),
                "a prompt ended with {:?} past a required gate that never answers",
                reason
            );
            Ok(())
        })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// \[F4\]: every invariant of the driver, \[F1\] and \[F2\] included, holds
    /// after every step of random schedules with a required gate that never
    /// answers, and the round limit (an abort) still ends a prompt whose tool
    /// calls it refuses.
    #[test]
    fn f4_invariants_hold_with_a_gate_that_never_answers(world in gate_world(), ops in schedule(1..60)) {
        let mut driver = Driver::new(world);
        for op in &ops {
            driver.apply(op);
        }
        driver.ensure_prompt();
        driver.tool_round(2, None);
        let end = driver.ask(Question::Abort(AbortReason::MaxRounds), None);
        prop_assert_eq!(end, Answer::Ended(EndReason::MaxRounds));
        prop_assert!(!driver.session().in_prompt());
        driver.end_session();
        prop_assert_eq!(driver.answers().len(), driver.questions());
    }
}
