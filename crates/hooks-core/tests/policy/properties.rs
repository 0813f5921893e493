//! Property tests over random sessions.
//!
//! A random world (servers with random listings and start behaviour, a random
//! allowlist, budget and deadline, a random stream of hook behaviours) meets a
//! random sequence of loop operations. A virtual-time driver plays the shell:
//! it answers calls after their delay, completes starts, jumps to the next
//! deadline, and fails on livelock instead of hanging. Invariants are checked
//! after every step; each is stated in words above the code that checks it.

use std::collections::BTreeMap;
use std::time::Duration;

use hooks_core::*;
use proptest::prelude::*;

/// How a server answers one hook call.
#[derive(Clone, Debug)]
enum Behaviour {
    /// Non-empty text after this many ms.
    Object(u16),
    /// Empty text after this many ms.
    Empty(u16),
    /// Whitespace only.
    Blank,
    /// `isError: true`.
    ErrorResult,
    /// A JSON-RPC error.
    Rpc,
    /// The transport fails.
    Transport,
    /// The process dies during the call.
    Crash,
    /// Never answers.
    Hang,
}

#[derive(Clone, Debug)]
struct ServerSpec {
    listing: Vec<String>,
    /// Whether start attempt N succeeds, cycled.
    starts: Vec<bool>,
    start_delay: u16,
}

#[derive(Clone, Debug)]
struct World {
    servers: Vec<ServerSpec>,
    allow: Option<String>,
    budget: u32,
    timeout_ms: u64,
    /// Behaviour of call #N is `behaviours[N % len]`.
    behaviours: Vec<Behaviour>,
}

/// One thing the loop or the world does.
#[derive(Clone, Debug)]
enum Op {
    /// The model ends its turn; the person may cancel after some ms.
    EndTurn { cancel_after: Option<u16> },
    /// The model asks for tools.
    Tools(usize),
    /// The model stops for a non-gated reason.
    OtherStop(u8),
    /// Compaction removed this many messages.
    Compact {
        removed: usize,
        cancel_after: Option<u16>,
    },
    /// The loop gives up on the prompt.
    Abort(u8),
    /// Time passes.
    Advance(u16),
    /// A tool call wants server N.
    Want(usize),
    /// Server N dies on its own.
    Exit(usize),
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        4 => (0u16..400).prop_map(Behaviour::Object),
        4 => (0u16..400).prop_map(Behaviour::Empty),
        1 => Just(Behaviour::Blank),
        1 => Just(Behaviour::ErrorResult),
        1 => Just(Behaviour::Rpc),
        1 => Just(Behaviour::Transport),
        1 => Just(Behaviour::Crash),
        2 => Just(Behaviour::Hang),
    ]
}

const TOOL_NAMES: [&str; 7] = [
    "_Stop",
    "_PostCompact",
    "read",
    "write",
    "_stop",
    "_Other",
    "a__b",
];

fn server_spec() -> impl Strategy<Value = ServerSpec> {
    (
        proptest::sample::subsequence(TOOL_NAMES.to_vec(), 0..=TOOL_NAMES.len()),
        proptest::collection::vec(prop_oneof![5 => Just(true), 1 => Just(false)], 1..4),
        0u16..50,
    )
        .prop_map(|(listing, starts, start_delay)| ServerSpec {
            listing: listing.into_iter().map(str::to_owned).collect(),
            starts,
            start_delay,
        })
}

fn world() -> impl Strategy<Value = World> {
    (
        proptest::collection::vec(server_spec(), 1..=4),
        prop_oneof![
            Just(None),
            Just(Some("*".to_owned())),
            Just(Some(" , ".to_owned())),
            "[s0-4,x ]{1,8}".prop_map(Some)
        ],
        0u32..=4,
        1u64..=300,
        proptest::collection::vec(behaviour(), 1..16),
    )
        .prop_map(|(servers, allow, budget, timeout_ms, behaviours)| {
            // Names like "s0,s3,x" mix listed, unlisted and unknown servers.
            let allow = allow.map(|a| {
                if a.contains('*') {
                    a
                } else {
                    a.replace(' ', ",")
                }
            });
            World {
                servers,
                allow,
                budget,
                timeout_ms,
                behaviours,
            }
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::option::weighted(0.15, 0u16..400).prop_map(|cancel_after| Op::EndTurn { cancel_after }),
        5 => (1usize..3).prop_map(Op::Tools),
        1 => (0u8..4).prop_map(Op::OtherStop),
        2 => (0usize..5, proptest::option::weighted(0.15, 0u16..400))
            .prop_map(|(removed, cancel_after)| Op::Compact { removed, cancel_after }),
        1 => (0u8..3).prop_map(Op::Abort),
        3 => (0u16..600).prop_map(Op::Advance),
        1 => (0usize..4).prop_map(Op::Want),
        1 => (0usize..4).prop_map(Op::Exit),
    ]
}

/// Something the simulated world will deliver at a time.
#[derive(Clone, Debug)]
enum Pending {
    Reply {
        call: CallId,
        server: ServerId,
        reply: HookReply,
    },
    Started {
        server: ServerId,
        ok: bool,
    },
}

/// A question the loop asks the core.
#[derive(Clone, Debug)]
enum Question {
    EndTurn { stop: StopReason, tool_calls: usize },
    Compacted(usize),
    Abort(AbortReason),
}

/// The answer a question got, whichever of the core's typed answers it was.
#[derive(Clone, Debug, PartialEq)]
enum Answer {
    Turn(TurnVerdict),
    Reinject(Vec<Injection>),
    Ended(EndReason),
}

/// The shell, simulated, with the invariant checks.
struct Driver {
    world: World,
    session: Session,
    now: Time,
    /// Ordered by (time, sequence) so that equal times keep their order.
    pending: BTreeMap<(Time, u64), Pending>,
    seq: u64,
    start_attempts: Vec<usize>,
    /// Every output with its time, for the determinism property.
    trace: Vec<String>,
    answers: Vec<(Time, Answer)>,
    questions: usize,
    /// Round id -> start time, until its decision.
    open_rounds: BTreeMap<u64, Time>,
    /// Consecutive hook timeouts per server, as the events tell them.
    timeouts: Vec<u32>,
    continues_in_prompt: u32,
    tools_since_continue: bool,
    /// How many model end-of-turns this prompt has had.
    end_turns_in_prompt: u32,
}

impl Driver {
    fn new(world: World) -> Driver {
        let config = HookConfig::from_values(
            world.allow.as_deref(),
            Some(&world.timeout_ms.to_string()),
            Some(&world.budget.to_string()),
        )
        .expect("generated configuration is valid");
        let names = (0..world.servers.len())
            .map(|i| ServerName::new(format!("s{i}")).unwrap())
            .collect();
        let session = Session::new(config, names).unwrap();
        let n = world.servers.len();
        let mut driver = Driver {
            world,
            session,
            now: Time::ZERO,
            pending: BTreeMap::new(),
            seq: 0,
            start_attempts: vec![0; n],
            trace: Vec::new(),
            answers: Vec::new(),
            questions: 0,
            open_rounds: BTreeMap::new(),
            timeouts: vec![0; n],
            continues_in_prompt: 0,
            tools_since_continue: false,
            end_turns_in_prompt: 0,
        };
        driver.drain();
        driver
    }

    fn schedule(&mut self, at: Time, what: Pending) {
        self.seq += 1;
        self.pending.insert((at, self.seq), what);
    }

    fn handle(&mut self, input: Input) {
        self.session
            .handle(self.now, input)
            .expect("the driver only sends valid inputs");
        self.drain();
    }

    /// Drains and checks every output.
    fn drain(&mut self) {
        while let Some(output) = self.session.poll_output() {
            self.trace.push(format!("{} {output:?}", self.now));
            match output {
                Output::CallHook {
                    call,
                    server,
                    hook: _,
                    deadline,
                } => {
                    // A call goes only to a server that is up, with the
                    // configured deadline from now [T1].
                    assert_eq!(self.session.server_state(server), ServerState::Up);
                    assert_eq!(
                        deadline,
                        self.now + Duration::from_millis(self.world.timeout_ms)
                    );
                    let b = &self.world.behaviours[call.0 as usize % self.world.behaviours.len()];
                    let (delay, reply) = match b {
                        Behaviour::Object(d) => (
                            *d,
                            Some(HookReply::Result(vec![ReplyPart::Text(format!(
                                "objection {}",
                                call.0
                            ))])),
                        ),
                        Behaviour::Empty(d) => (*d, Some(HookReply::Result(vec![]))),
                        Behaviour::Blank => (
                            1,
                            Some(HookReply::Result(vec![ReplyPart::Text(" \n".into())])),
                        ),
                        Behaviour::ErrorResult => (
                            2,
                            Some(HookReply::ErrorResult(vec![ReplyPart::Text("no".into())])),
                        ),
                        Behaviour::Rpc => (
                            3,
                            Some(HookReply::RpcError {
                                code: -1,
                                message: "x".into(),
                            }),
                        ),
                        Behaviour::Transport => {
                            (4, Some(HookReply::TransportFailed("pipe".into())))
                        }
                        Behaviour::Crash => (5, Some(HookReply::Crashed)),
                        Behaviour::Hang => (0, None),
                    };
                    if let Some(reply) = reply {
                        let at = self.now + Duration::from_millis(u64::from(delay));
                        self.schedule(
                            at,
                            Pending::Reply {
                                call,
                                server,
                                reply,
                            },
                        );
                    }
                }
                // A cancelled call may still answer late: the core must
                // discard it [T2], so the reply stays scheduled.
                Output::CancelCall { .. } => {}
                Output::KillServer { server } => {
                    // A killed process answers nothing more.
                    self.pending.retain(
                        |_, p| !matches!(p, Pending::Reply { server: s, .. } if *s == server),
                    );
                }
                Output::StartServer { server } => {
                    let spec = &self.world.servers[server.0];
                    let attempt = self.start_attempts[server.0];
                    self.start_attempts[server.0] += 1;
                    let ok = spec.starts[attempt % spec.starts.len()];
                    let at = self.now + Duration::from_millis(u64::from(spec.start_delay));
                    self.schedule(at, Pending::Started { server, ok });
                }
                Output::Event(event) => self.check_event(&event),
            }
        }
        if let Some(verdict) = self.session.take_verdict() {
            self.check_answer(Answer::Turn(verdict));
        }
        if let Some(injections) = self.session.take_reinjections() {
            self.check_answer(Answer::Reinject(injections));
        }
        // The budget is never exceeded [S3].
        assert!(self.session.budget_used() <= self.world.budget);
        // No hook is ever offered to the model [H2], and no hook name resolves
        // to a tool [H3].
        for (server, tool) in self.session.model_tools() {
            assert!(
                !tool.bare.starts_with('_'),
                "hook {} offered",
                tool.qualified
            );
            assert_eq!(
                self.session.resolve(&tool.qualified),
                Some((server, tool.bare.as_str()))
            );
        }
        for i in 0..self.world.servers.len() {
            for name in &self.world.servers[i].listing {
                if name.starts_with('_') {
                    assert_eq!(self.session.resolve(&format!("s{i}__{name}")), None);
                }
            }
        }
    }

    fn check_event(&mut self, event: &Event) {
        match event {
            Event::RoundStarted {
                round, deadline, ..
            } => {
                assert_eq!(
                    *deadline,
                    self.now + Duration::from_millis(self.world.timeout_ms)
                );
                assert!(
                    self.open_rounds.insert(round.0, self.now).is_none(),
                    "round id reused"
                );
            }
            Event::HookCalled {
                server, outcome, ..
            } => {
                let i: usize = server.as_str()[1..].parse().unwrap();
                // A server is killed only on its second consecutive timeout,
                // and a first timeout only counts [T3].
                match outcome {
                    Outcome::Timeout => {
                        assert_eq!(
                            self.timeouts[i], 0,
                            "timeout counted past one without a kill"
                        );
                        self.timeouts[i] = 1;
                    }
                    Outcome::Killed => {
                        assert_eq!(self.timeouts[i], 1, "killed without a previous timeout");
                        self.timeouts[i] = 0;
                    }
                    o if o.completed() => self.timeouts[i] = 0,
                    _ => {}
                }
            }
            Event::Decided {
                round: Some(round), ..
            } => {
                // Each round lasts at most the hook timeout [S6], [T1]; in
                // virtual time there is no scheduling slack.
                let started = self
                    .open_rounds
                    .remove(&round.0)
                    .expect("decision for an open round");
                assert!(
                    self.now.saturating_since(started)
                        <= Duration::from_millis(self.world.timeout_ms)
                );
            }
            Event::ServerUp { server, .. } | Event::ServerDown { server, .. } => {
                let i: usize = server.as_str()[1..].parse().unwrap();
                self.timeouts[i] = 0;
            }
            _ => {}
        }
    }

    fn check_answer(&mut self, answer: Answer) {
        match &answer {
            Answer::Turn(TurnVerdict::Continue { injections }) => {
                // Objections are charged at most `budget` times in a session,
                // and never twice in a row without a tool call [S2], [S3].
                assert!(
                    self.continues_in_prompt == 0 || self.tools_since_continue,
                    "two objections without a tool call between"
                );
                self.continues_in_prompt += 1;
                self.tools_since_continue = false;
                assert!(!injections.is_empty());
                // Injections come in configuration order [I3], as _Stop pairs.
                let order: Vec<&str> = injections.iter().map(|i| i.server.as_str()).collect();
                let mut sorted = order.clone();
                sorted.sort_by_key(|s| s[1..].parse::<usize>().unwrap());
                assert_eq!(order, sorted);
                assert!(injections.iter().all(|i| i.hook == HookPoint::Stop));
            }
            Answer::Reinject(injections) => {
                assert!(injections.iter().all(|i| i.hook == HookPoint::PostCompact));
            }
            Answer::Turn(TurnVerdict::RunTools) => self.tools_since_continue = true,
            Answer::Turn(TurnVerdict::End { reason }) => {
                // Only an abort ends a prompt as cancelled [S5].
                assert_ne!(*reason, EndReason::Cancelled);
                self.continues_in_prompt = 0;
                self.end_turns_in_prompt = 0;
            }
            Answer::Ended(_) => {
                self.continues_in_prompt = 0;
                self.end_turns_in_prompt = 0;
            }
        }
        self.answers.push((self.now, answer));
        // Every question gets exactly one answer, never more.
        assert!(
            self.answers.len() <= self.questions,
            "an answer nobody asked for"
        );
    }

    /// Delivers everything due up to `to`, then sets the clock there.
    fn advance_to(&mut self, to: Time) {
        loop {
            let next_pending = self.pending.keys().next().map(|(t, _)| *t);
            let next_deadline = self.session.poll_timeout();
            let next = [next_pending, next_deadline].into_iter().flatten().min();
            match next {
                Some(t) if t <= to => self.step_to(t),
                _ => break,
            }
        }
        self.now = self.now.max(to);
        self.session.handle_timeout(self.now);
        self.drain();
    }

    /// Delivers what is due at `t`: pending deliveries first, then deadlines.
    fn step_to(&mut self, t: Time) {
        self.now = self.now.max(t);
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            match entry.remove() {
                Pending::Reply { call, reply, .. } => {
                    self.handle(Input::HookReplied { call, reply })
                }
                Pending::Started { server, ok } => {
                    let input = if ok {
                        Input::ServerStarted {
                            server,
                            tools: self.world.servers[server.0].listing.clone(),
                        }
                    } else {
                        Input::ServerStartFailed {
                            server,
                            reason: "refused".into(),
                        }
                    };
                    self.handle(input);
                }
            }
        }
        self.session.handle_timeout(self.now);
        self.drain();
    }

    /// Asks a question and runs virtual time until its answer; a
    /// cancellation may interrupt. Fails on livelock.
    fn ask(&mut self, question: Question, cancel_after: Option<u16>) -> Answer {
        self.questions += 1;
        let asked_at = self.now;
        let cancel_at = cancel_after.map(|ms| asked_at + Duration::from_millis(u64::from(ms)));
        match question {
            Question::EndTurn { stop, tool_calls } => {
                let asked = self.session.end_turn(self.now, stop, tool_calls);
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::Compacted(removed) => {
                let asked = self.session.compacted(self.now, removed);
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::Abort(reason) => {
                let end = self.session.abort(self.now, reason).expect("a prompt runs");
                self.drain();
                self.check_answer(Answer::Ended(end));
            }
        }
        self.drain();
        for _ in 0..10_000 {
            if self.answers.len() == self.questions {
                return self.answers.last().unwrap().1.clone();
            }
            let next_pending = self.pending.keys().next().map(|(t, _)| *t);
            let deadline = self.session.poll_timeout();
            let next = [next_pending, deadline].into_iter().flatten().min();
            if let Some(cancel_at) = cancel_at
                && next.is_none_or(|t| t >= cancel_at)
            {
                self.now = self.now.max(cancel_at);
                let end = self
                    .session
                    .abort(self.now, AbortReason::Cancelled)
                    .expect("a prompt runs while its question is open");
                self.drain();
                self.check_answer(Answer::Ended(end));
                // Cancellation wins at once [T5]: the answer is out, at the
                // time of the cancel, and the round's own answer never comes.
                let (at, answer) = self.answers.last().cloned().expect("cancel answered");
                assert_eq!(self.answers.len(), self.questions);
                assert_eq!(answer, Answer::Ended(EndReason::Cancelled));
                assert_eq!(at, self.now);
                return answer;
            }
            let Some(next) = next else {
                panic!("livelock: no answer and nothing left to wait for");
            };
            self.step_to(next);
        }
        panic!("livelock: no answer after 10000 steps");
    }

    fn ensure_prompt(&mut self) {
        if !self.session.in_prompt() {
            self.session.begin_prompt(self.now).unwrap();
            self.drain();
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::EndTurn { cancel_after } => {
                self.ensure_prompt();
                self.end_turns_in_prompt += 1;
                let question = Question::EndTurn {
                    stop: StopReason::EndTurn,
                    tool_calls: 0,
                };
                self.ask(question, cancel_after);
            }
            Op::Tools(n) => {
                self.ensure_prompt();
                self.ask(
                    Question::EndTurn {
                        stop: StopReason::ToolUse,
                        tool_calls: n,
                    },
                    None,
                );
            }
            Op::OtherStop(k) => {
                self.ensure_prompt();
                let stop = [
                    StopReason::MaxTokens,
                    StopReason::Refusal,
                    StopReason::ContentFilter,
                    StopReason::Other("x".into()),
                ][usize::from(k)]
                .clone();
                let answer = self.ask(
                    Question::EndTurn {
                        stop: stop.clone(),
                        tool_calls: 0,
                    },
                    None,
                );
                // Non-gated stop reasons are never gated [S1].
                assert_eq!(
                    answer,
                    Answer::Turn(TurnVerdict::End {
                        reason: EndReason::Model(stop)
                    })
                );
            }
            Op::Compact {
                removed,
                cancel_after,
            } => {
                self.ensure_prompt();
                let answer = self.ask(Question::Compacted(removed), cancel_after);
                // [P1]: no round, no injection, when nothing was removed.
                if removed == 0 {
                    assert_eq!(answer, Answer::Reinject(vec![]));
                }
            }
            Op::Abort(k) => {
                self.ensure_prompt();
                let reason = [
                    AbortReason::Cancelled,
                    AbortReason::MaxRounds,
                    AbortReason::Failed,
                ][usize::from(k)];
                self.ask(Question::Abort(reason), None);
            }
            Op::Advance(ms) => {
                let to = self.now + Duration::from_millis(u64::from(ms));
                self.advance_to(to);
            }
            Op::Want(i) => {
                if i < self.world.servers.len() {
                    self.handle(Input::ServerWanted {
                        server: ServerId(i),
                    });
                }
            }
            Op::Exit(i) => {
                if i < self.world.servers.len()
                    && self.session.server_state(ServerId(i)) == ServerState::Up
                {
                    let server = ServerId(i);
                    self.pending.retain(
                        |_, p| !matches!(p, Pending::Reply { server: s, .. } if *s == server),
                    );
                    self.handle(Input::ServerExited {
                        server,
                        reason: "gone".into(),
                    });
                }
            }
        }
    }
}

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
    fn invariants_hold_after_every_step(world in world(), ops in proptest::collection::vec(op(), 1..60)) {
        let mut driver = Driver::new(world);
        for op in &ops {
            driver.apply(op);
        }
        prop_assert_eq!(driver.answers.len(), driver.questions);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// The same inputs give the same outputs: two runs of one world and one
    /// operation sequence produce identical traces, times included.
    #[test]
    fn same_inputs_same_outputs(world in world(), ops in proptest::collection::vec(op(), 1..40)) {
        let mut first = Driver::new(world.clone());
        let mut second = Driver::new(world);
        for op in &ops {
            first.apply(op);
            second.apply(op);
        }
        prop_assert_eq!(first.trace, second.trace);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2500, ..ProptestConfig::default() })]

    /// Sovereignty \[S6\]: whatever the hooks answer, however slowly, a model
    /// that keeps ending its turn ends every prompt after at most two
    /// end-of-turns, and a prompt in which the model keeps working makes at
    /// most `budget` objection-driven continuations.
    #[test]
    fn hooks_cannot_trap_the_agent(world in world(), prompts in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 1..30), 1..5)) {
        let budget = world.budget;
        let mut driver = Driver::new(world);
        let mut continues_total = 0;
        for works in prompts {
            driver.ensure_prompt();
            // `works[i]`: after the i-th continuation, does the model call a
            // tool before ending again?
            let mut ends = 0;
            let mut i = 0;
            loop {
                let answer = driver.ask(Question::EndTurn { stop: StopReason::EndTurn, tool_calls: 0 }, None);
                ends += 1;
                match answer {
                    Answer::Turn(TurnVerdict::Continue { .. }) => {
                        continues_total += 1;
                        if works.get(i).copied().unwrap_or(false) {
                            driver.ask(Question::EndTurn { stop: StopReason::ToolUse, tool_calls: 1 }, None);
                            ends = 0;
                        }
                        i += 1;
                    }
                    Answer::Turn(TurnVerdict::End { .. }) => break,
                    other => panic!("unexpected answer {other:?}"),
                }
                prop_assert!(ends <= 2, "the model ended three times in a row without stopping");
                prop_assert!(continues_total <= budget, "more continuations than the budget");
            }
            prop_assert!(!driver.session.in_prompt());
        }
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
        session.handle(Time::ZERO, Input::ServerStarted { server: ServerId(0), tools: listing.clone() }).unwrap();
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
