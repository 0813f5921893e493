//! Property-testing the policy in virtual time: random worlds, random
//! schedules, and a reference driver that checks the policy's invariants
//! after every step. Behind the `testing` feature (off by default; it adds
//! `proptest`).
//!
//! - **Inputs and server behaviours**: [`world()`] draws a [`World`]: one to
//!   four servers ([`server_spec()`]), each with a random listing of every hook
//!   point (and of names that are not hooks, [`TOOL_NAMES`]), its own hook
//!   timeout \[C4\] or none, `required` or not \[F1\], one behaviour for
//!   every call or none, and start attempts that succeed or fail after a
//!   delay ([`gate_world()`]: with a required gate that never answers
//!   \[F4\]); a random allowlist, budget, stop governance \[G1\]-\[G2\]
//!   ([`governance()`]) and deadline; and a stream of hook behaviours
//!   ([`behaviour()`]): objecting or empty after a delay, blank, an error
//!   result, a JSON-RPC error, a transport failure, a crash, a hang.
//! - **Schedules**: [`op()`] draws one thing the loop or the world does (an
//!   [`Op`]: end a turn, ask for tools, compact, abort, let time pass, a
//!   server exiting, every hook point's question, a cancellation mid-round);
//!   [`schedule()`] a sequence of them.
//! - **The reference driver**, [`Driver`], plays the shell in virtual time:
//!   it answers each call after its behaviour's delay, completes starts,
//!   jumps to the next deadline, and fails on livelock instead of hanging.
//!   After every step it checks, and panics (so proptest shrinks) when one
//!   fails: the budget is never exceeded \[S3\]; no hook is offered or
//!   resolvable \[H2\], \[H3\]; a call goes only to a server that is up, with
//!   the configured deadline \[T1\], \[C4\], \[E6\], and only with the input
//!   fields its schema named \[K1\]; every round has someone to call \[E7\]
//!   (or a required gate to answer for \[F1\]) and is decided within the
//!   hook timeout \[S6\]; a server is killed only
//!   on its second consecutive timeout \[T3\]; every question gets exactly
//!   one answer and a cancellation answers at once \[T5\]; objections are
//!   injected in configuration order \[I3\] and, with the decline rule on,
//!   never twice without a tool call between \[S2\]; one gate per asked call
//!   \[E3\] and one list of notes per call that ran \[E4\]; a required gate
//!   that failed in a round, or could not be called, answered it (objected,
//!   refused, added text) \[F1\]; a required gate's `guard_down` follows
//!   each of its `server_down` at once, and `guard_up` its next `server_up`,
//!   and no other server has either \[F2\].
//!
//! Every output the session gave is kept with its time ([`Driver::outputs`]),
//! and every answer ([`Driver::answers`]), so an invariant of one's own is a
//! few lines over them; `examples/check_invariant.rs` checks one over
//! thousands of cases.
//!
//! ```
//! use hooks_core::testing::{Driver, schedule, world};
//! use proptest::prelude::*;
//! use proptest::test_runner::{Config, TestRunner};
//!
//! let mut runner = TestRunner::new(Config { cases: 64, ..Config::default() });
//! runner
//!     .run(&(world(), schedule(1..30)), |(world, ops)| {
//!         let mut driver = Driver::new(world);
//!         for op in &ops {
//!             driver.apply(op);
//!             // An invariant of one's own, checked after every operation.
//!             prop_assert!(driver.session().budget_used() <= driver.world().budget);
//!         }
//!         driver.end_session();
//!         prop_assert_eq!(driver.answers().len(), driver.questions());
//!         Ok(())
//!     })
//!     .unwrap();
//! ```

use alloc::collections::BTreeMap;
use alloc::string::ToString;
use core::time::Duration;

use proptest::collection::SizeRange;
use proptest::prelude::*;

use crate::prelude::*;
use crate::*;

/// How a server answers one hook call.
#[derive(Clone, Debug)]
pub enum Behaviour {
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

/// One simulated server: what it lists, how it starts and, if it has one
/// behaviour for every call, how it answers.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    /// Its tools, in order: `name`, or `name(p1,p2)` for a tool whose input
    /// schema names the properties `p1` and `p2`.
    pub listing: Vec<String>,
    /// Its own hook timeout \[C4\], if any.
    pub hook_timeout_ms: Option<u64>,
    /// Whether its entry says `required` \[F1\] (a required gate if the
    /// allowlist lets it hook, else a warning \[F3\]).
    pub required: bool,
    /// How every hook call to it behaves, overriding [`World::behaviours`]:
    /// a server that never answers ([`Behaviour::Hang`]), always crashes,
    /// always errs.
    pub always: Option<Behaviour>,
    /// Whether start attempt N succeeds, cycled.
    pub starts: Vec<bool>,
    /// How long each start attempt takes, in ms.
    pub start_delay: u16,
}

/// Everything about a session that is not the loop: the servers, the
/// settings and how hooks answer.
#[derive(Clone, Debug)]
pub struct World {
    /// The servers in configuration order, named `s0`, `s1`, ….
    pub servers: Vec<ServerSpec>,
    /// `MCP_HOOK_SERVERS` as written, or unset \[A1\].
    pub allow: Option<String>,
    /// The objection budget \[S3\].
    pub budget: u32,
    /// Whether the budget counts per session or per prompt \[G1\].
    pub scope: BudgetScope,
    /// Whether "the model declined twice" ends the prompt \[G2\].
    pub decline: DeclineRule,
    /// The hook timeout of servers without their own, in ms \[C1\].
    pub timeout_ms: u64,
    /// Behaviour of call #N is `behaviours[N % len]`.
    pub behaviours: Vec<Behaviour>,
}

/// One thing the loop or the world does.
#[derive(Clone, Debug)]
pub enum Op {
    /// The model ends its turn; the person may cancel after some ms.
    EndTurn {
        /// Cancel this many ms after asking, if the round still runs.
        cancel_after: Option<u16>,
    },
    /// The model asks for tools.
    Tools(usize),
    /// The model stops for a non-gated reason.
    OtherStop(u8),
    /// Compaction removed this many messages.
    Compact {
        /// How many messages compaction removed.
        removed: usize,
        /// Cancel this many ms after asking, if the round still runs.
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
    /// The session starts (_SessionStart).
    SessionStart,
    /// A prompt's text arrives (_UserPromptSubmit).
    Submit,
    /// The model asks for N tool calls, asked about (_PreToolUse), and
    /// those let through run (_PostToolUse).
    ToolRound {
        /// How many tool calls the model asked for.
        calls: usize,
        /// Cancel the `_PreToolUse` round this many ms after asking.
        cancel_after: Option<u16>,
    },
    /// Compaction is about to run (_PreCompact).
    PreCompact,
}

/// One hook call's behaviour, weighted toward answers (objecting or empty
/// within 400 ms), with every failure and hangs among them.
pub fn behaviour() -> impl Strategy<Value = Behaviour> {
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

/// The names a random listing draws from: every hook point (some with input
/// schema properties), model tools, and names that look like hooks but are
/// not (`_stop`, `_Other`) or are not valid (`a__b`).
pub const TOOL_NAMES: [&str; 13] = [
    "_Stop",
    "_PostCompact",
    "_SessionStart",
    "_UserPromptSubmit",
    "_PreToolUse",
    "_PostToolUse(tool,arguments,output)",
    "_PreCompact(reason)",
    "_SessionEnd(reason,session_id)",
    "read",
    "write",
    "_stop",
    "_Other",
    "a__b",
];

/// A server listing any subsequence of [`TOOL_NAMES`], starting within 50 ms,
/// most start attempts succeeding, three in ten with a hook timeout of their
/// own (1 to 1500 ms), one in four `required` \[F1\], one in seven with one
/// behaviour for every call.
pub fn server_spec() -> impl Strategy<Value = ServerSpec> {
    (
        proptest::sample::subsequence(TOOL_NAMES.to_vec(), 0..=TOOL_NAMES.len()),
        proptest::collection::vec(prop_oneof![5 => Just(true), 1 => Just(false)], 1..4),
        0u16..50,
        proptest::option::weighted(0.3, 1u64..=1500),
        proptest::bool::weighted(0.25),
        proptest::option::weighted(0.15, behaviour()),
    )
        .prop_map(
            |(listing, starts, start_delay, hook_timeout_ms, required, always)| ServerSpec {
                listing: listing.into_iter().map(str::to_owned).collect(),
                hook_timeout_ms,
                required,
                always,
                starts,
                start_delay,
            },
        )
}

/// How a required gate of [`gate_world()`] fails on every call, or never
/// comes up.
pub fn gate_failure() -> impl Strategy<Value = (Option<Behaviour>, Vec<bool>)> {
    let always = |b: Behaviour| (Some(b), vec![true]);
    prop_oneof![
        3 => Just(always(Behaviour::Hang)),
        1 => Just(always(Behaviour::Crash)),
        1 => Just(always(Behaviour::ErrorResult)),
        1 => Just(always(Behaviour::Rpc)),
        1 => Just(always(Behaviour::Transport)),
        // Never up: every start fails, so it is retired after three.
        1 => Just((None, vec![false])),
        // Up once, then it never answers.
        1 => Just((Some(Behaviour::Hang), vec![true, false])),
    ]
}

/// A [`world()`] whose first server, `s0`, is a required gate that never
/// answers \[F1\], \[F4\]: it hangs, crashes, errs on every call, or
/// never starts ([`gate_failure()`]); it lists `_Stop` and `_PreToolUse`
/// (beside what it drew), and the allowlist is `*`.
pub fn gate_world() -> impl Strategy<Value = World> {
    (world(), gate_failure()).prop_map(|(mut world, (always, starts))| {
        let gate = &mut world.servers[0];
        gate.required = true;
        gate.always = always;
        gate.starts = starts;
        for hook in ["_PreToolUse", "_Stop"] {
            if !gate.listing.iter().any(|t| t == hook) {
                gate.listing.insert(0, hook.to_owned());
            }
        }
        world.allow = Some("*".to_owned());
        world
    })
}

/// A world of one to four servers; an allowlist that is unset, `*`, empty or
/// a mix of listed, unlisted and unknown names; a budget of 0 to 4; any stop
/// governance; a timeout of 1 to 300 ms; 1 to 15 behaviours.
pub fn world() -> impl Strategy<Value = World> {
    (
        proptest::collection::vec(server_spec(), 1..=4),
        prop_oneof![
            Just(None),
            Just(Some("*".to_owned())),
            Just(Some(" , ".to_owned())),
            "[s0-4,x ]{1,8}".prop_map(Some)
        ],
        0u32..=4,
        governance(),
        1u64..=300,
        proptest::collection::vec(behaviour(), 1..16),
    )
        .prop_map(
            |(servers, allow, budget, (scope, decline), timeout_ms, behaviours)| {
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
                    scope,
                    decline,
                    timeout_ms,
                    behaviours,
                }
            },
        )
}

/// Every combination of \[G1\] and \[G2\].
pub fn governance() -> impl Strategy<Value = (BudgetScope, DeclineRule)> {
    (
        prop_oneof![Just(BudgetScope::Session), Just(BudgetScope::Prompt)],
        prop_oneof![Just(DeclineRule::On), Just(DeclineRule::Off)],
    )
}

/// A sequence of `len` [`op()`]s: a schedule for [`Driver::apply`].
pub fn schedule(len: impl Into<SizeRange>) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), len)
}

/// One thing the loop or the world does, weighted toward ending turns and
/// tool rounds.
pub fn op() -> impl Strategy<Value = Op> {
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
        1 => Just(Op::SessionStart),
        1 => Just(Op::Submit),
        3 => (0usize..4, proptest::option::weighted(0.1, 0u16..400))
            .prop_map(|(calls, cancel_after)| Op::ToolRound { calls, cancel_after }),
        1 => Just(Op::PreCompact),
    ]
}

/// Where a server stands toward its next kill, by the events \[T3\].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Wedge {
    Clear,
    TimedOut(RoundId),
    Killed(RoundId),
}

/// What a round in flight has seen of required gates \[F1\].
#[derive(Clone, Debug)]
struct GateRound {
    round: RoundId,
    hook: HookPoint,
    /// Left out, failing closed: they answer every subject.
    unreachable: Vec<usize>,
    /// With at least one failed call: they answer at least its subject.
    failed: Vec<usize>,
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
pub enum Question {
    /// The model ended its turn ([`Session::end_turn`]).
    EndTurn {
        /// Why it stopped.
        stop: StopReason,
        /// How many tool calls it asked for.
        tool_calls: usize,
    },
    /// Compaction removed this many messages ([`Session::compacted`]).
    Compacted(usize),
    /// The loop gives up on the prompt ([`Session::abort`]).
    Abort(AbortReason),
    /// The session starts ([`Session::session_start`]).
    SessionStart,
    /// A prompt was submitted ([`Session::prompt_submitted`]).
    Submit,
    /// These tool calls are about to run ([`Session::tools_requested`]).
    PreTool(Vec<ToolUse>),
    /// These tool calls ran ([`Session::tools_ran`]).
    PostTool(Vec<ToolRun>),
    /// Compaction is about to run ([`Session::compacting`]).
    PreCompact,
    /// The session ends ([`Session::session_end`]).
    SessionEnd,
}

/// The answer a question got, whichever of the core's typed answers it was.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The verdict on an end of turn.
    Turn(TurnVerdict),
    /// The pairs to re-inject after compaction.
    Reinject(Vec<Injection>),
    /// The prompt ended at once: an abort, or a cancellation mid-round.
    Ended(EndReason),
    /// `_SessionStart`, `_UserPromptSubmit` or `_PreCompact` pairs.
    Pairs(HookPoint, Vec<Injection>),
    /// One gate per tool call asked about.
    Gates(Vec<ToolGate>),
    /// Per tool call that ran, the texts to append to its result.
    Notes(Vec<Vec<HookText>>),
    /// `_SessionEnd` was told.
    SessionEnded,
}

/// The shell, simulated in virtual time, with the invariant checks: a
/// reference for a driver of one's own, and the harness for invariants over
/// random [`World`]s and schedules. It panics when an invariant fails or it
/// would livelock, so inside a proptest the failing case shrinks.
#[derive(Debug)]
pub struct Driver {
    world: World,
    session: Session,
    now: Time,
    /// Ordered by (time, sequence) so that equal times keep their order.
    pending: BTreeMap<(Time, u64), Pending>,
    seq: u64,
    start_attempts: Vec<usize>,
    /// Every output with its time, for the determinism property.
    trace: Vec<String>,
    /// Every output with its time, typed.
    outputs: Vec<(Time, Output)>,
    answers: Vec<(Time, Answer)>,
    questions: usize,
    /// Round id -> start time, until its decision.
    open_rounds: BTreeMap<u64, Time>,
    /// Per server, as the events tell them: no timeout pending, or the round
    /// of its last timeout or kill \[T3\].
    timeouts: Vec<Wedge>,
    continues_in_prompt: u32,
    tools_since_continue: bool,
    /// How many model end-of-turns this prompt has had.
    end_turns_in_prompt: u32,
    /// How many calls the open tool question asked about.
    asked_calls: usize,
    /// Per server, whether it ever came up and listed its tools.
    listed: Vec<bool>,
    /// The round in flight, its hook point, and the required gates whose
    /// answer in it is one the agent writes, so far \[F1\]: those that could
    /// not be called, and those with a failed call.
    gate_round: Option<GateRound>,
    /// Per server, whether its last guard event was a `guard_down` \[F2\].
    guard_down: Vec<bool>,
    /// The guard event that must come next \[F2\].
    expect_guard: Option<Event>,
}

impl Driver {
    /// A session on `world`'s settings and servers at time zero, with the
    /// starts it asks for already scheduled.
    ///
    /// # Panics
    ///
    /// If `world`'s settings are not valid (those [`world()`] draws are).
    pub fn new(world: World) -> Driver {
        let mut config = HookConfig::from_values(
            world.allow.as_deref(),
            Some(&world.timeout_ms.to_string()),
            Some(&world.budget.to_string()),
        )
        .expect("generated configuration is valid");
        config.stop_budget_scope = world.scope;
        config.stop_decline_rule = world.decline;
        let names: Vec<ServerSetup> = (0..world.servers.len())
            .map(|i| ServerSetup {
                name: ServerName::new(format!("s{i}")).unwrap(),
                hook_timeout: world.servers[i]
                    .hook_timeout_ms
                    .and_then(HookTimeout::from_millis),
                required: world.servers[i].required,
            })
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
            outputs: Vec::new(),
            answers: Vec::new(),
            questions: 0,
            open_rounds: BTreeMap::new(),
            timeouts: vec![Wedge::Clear; n],
            continues_in_prompt: 0,
            tools_since_continue: false,
            end_turns_in_prompt: 0,
            asked_calls: 0,
            listed: vec![false; n],
            gate_round: None,
            guard_down: vec![false; n],
            expect_guard: None,
        };
        // A server is a required gate exactly when its entry says so and the
        // allowlist lets it hook [F1], [F3].
        for i in 0..n {
            let id = ServerId(i);
            assert_eq!(
                driver.session.is_required(id),
                driver.world.servers[i].required && driver.session.may_hook(id)
            );
        }
        driver.drain();
        driver
    }

    /// The session under test.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The world it runs in.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The virtual time now.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Every output the session gave, with its time, in order.
    pub fn outputs(&self) -> &[(Time, Output)] {
        &self.outputs
    }

    /// Every output as a line with its time: two runs of the same world and
    /// schedule give the same trace.
    pub fn trace(&self) -> &[String] {
        &self.trace
    }

    /// Every answer the loop got, with the time it came, in order.
    pub fn answers(&self) -> &[(Time, Answer)] {
        &self.answers
    }

    /// How many questions the loop asked; once none is open, as many as
    /// [`Driver::answers`].
    pub fn questions(&self) -> usize {
        self.questions
    }

    /// The longest deadline any call may get.
    fn max_timeout(&self) -> Duration {
        (0..self.world.servers.len())
            .map(|i| self.session.hook_timeout(ServerId(i)).duration())
            .max()
            .unwrap_or(Duration::ZERO)
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
            self.outputs.push((self.now, output.clone()));
            match output {
                Output::CallHook {
                    call,
                    server,
                    hook,
                    arguments,
                    deadline,
                } => {
                    // A call goes only to a server that is up, with its
                    // configured deadline from now [T1], [C4], at most 1 s
                    // for _SessionEnd [E6].
                    assert_eq!(self.session.server_state(server), ServerState::Up);
                    let mut timeout = self.session.hook_timeout(server).duration();
                    if hook == HookPoint::SessionEnd {
                        timeout = timeout.min(Duration::from_secs(1));
                    }
                    assert_eq!(deadline, self.now + timeout);
                    // A hook never gets a field its schema did not name, nor
                    // one that does not apply at its point [K1].
                    let listed = self.session.server_tools(server).hook(hook).unwrap();
                    for key in arguments.keys() {
                        let field = InputField::from_name(key).expect("a known field");
                        assert!(listed.input.fields().contains(&field));
                        assert!(field.applies_at(hook));
                    }
                    let b = match &self.world.servers[server.0].always {
                        Some(always) => always,
                        None => {
                            &self.world.behaviours[call.0 as usize % self.world.behaviours.len()]
                        }
                    };
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
        if let Some(pairs) = self.session.take_session_context() {
            self.check_answer(Answer::Pairs(HookPoint::SessionStart, pairs));
        }
        if let Some(pairs) = self.session.take_prompt_context() {
            self.check_answer(Answer::Pairs(HookPoint::UserPromptSubmit, pairs));
        }
        if let Some(pairs) = self.session.take_pins() {
            self.check_answer(Answer::Pairs(HookPoint::PreCompact, pairs));
        }
        if let Some(gates) = self.session.take_tool_gates() {
            self.check_answer(Answer::Gates(gates));
        }
        if let Some(notes) = self.session.take_tool_notes() {
            self.check_answer(Answer::Notes(notes));
        }
        if self.session.take_session_end().is_some() {
            self.check_answer(Answer::SessionEnded);
        }
        // A required gate's guard event comes with its server's [F2].
        assert_eq!(self.expect_guard, None, "a guard event is missing");
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

    /// Whether server `i`, not up, fails closed at `hook` \[F1\]: it is a
    /// required gate, `hook` is not `_SessionEnd`, and it listed the hook
    /// when last up (else it is not left out at all), or never came up and
    /// `hook` gates.
    fn fails_closed_when_down(&self, i: usize, hook: HookPoint) -> bool {
        self.session.is_required(ServerId(i))
            && hook != HookPoint::SessionEnd
            && (self.listed[i] || matches!(hook, HookPoint::Stop | HookPoint::PreToolUse))
    }

    /// \[F1\]: every required gate that failed in a round, or could not be
    /// called, is among those that answered it: it objected at `_Stop`,
    /// added text elsewhere, and at `_PreToolUse` refused every call if it
    /// could not be called, at least one if a call of it failed (a call
    /// about another subject may have answered).
    fn check_gates(&self, gates: &GateRound, decision: &PolicyDecision) {
        let hook = gates.hook;
        let failing: Vec<usize> = gates
            .unreachable
            .iter()
            .chain(&gates.failed)
            .copied()
            .collect();
        if failing.is_empty() {
            return;
        }
        let names: Vec<ServerName> = failing
            .iter()
            .map(|&i| self.session.server_name(ServerId(i)).clone())
            .collect();
        match decision {
            PolicyDecision::ObjectionHonoured { servers, .. }
            | PolicyDecision::Reinject { servers }
            | PolicyDecision::Inject { servers, .. } => {
                for name in &names {
                    assert!(
                        servers.contains(name),
                        "required gate {name} failed at {hook}, and nothing was said for it"
                    );
                }
            }
            PolicyDecision::ToolsGated { asked, refused } => {
                if gates.unreachable.is_empty() {
                    assert!(
                        !refused.is_empty(),
                        "a required gate's call failed at _PreToolUse, and every call ran"
                    );
                } else {
                    let all: Vec<usize> = (0..*asked).collect();
                    assert_eq!(
                        *refused, all,
                        "a required gate could not be called at _PreToolUse, and a call ran"
                    );
                }
            }
            // Only a cancellation ends a round a required gate failed in;
            // it never lets a `_Stop` pass.
            PolicyDecision::PromptEnded { reason } => {
                assert_eq!(
                    *reason,
                    EndReason::Cancelled,
                    "required gates {names:?} failed"
                );
            }
            PolicyDecision::SessionEnded { .. } => {
                panic!("_SessionEnd has no required gates")
            }
        }
    }

    fn check_event(&mut self, event: &Event) {
        // [F2]: a required gate's down and up are told right after its
        // server's own event, and only then.
        let expected_guard = self.expect_guard.take();
        if let Some(expected) = &expected_guard {
            assert_eq!(event, expected, "the guard event must follow at once");
        }
        match event {
            Event::RoundStarted {
                round,
                hook,
                deadline,
                servers,
                left_out,
            } => {
                // A round is only started with someone to call [E7], or a
                // required gate that cannot be called and fails closed [F1],
                // and lasts until its latest call's deadline.
                let unreachable: Vec<usize> = left_out
                    .iter()
                    .map(|s| s.as_str()[1..].parse().unwrap())
                    .filter(|&i| self.fails_closed_when_down(i, *hook))
                    .collect();
                assert!(
                    !servers.is_empty() || !unreachable.is_empty(),
                    "a round with nobody to call"
                );
                assert!(*deadline <= self.now + self.max_timeout());
                assert!(
                    self.open_rounds.insert(round.0, self.now).is_none(),
                    "round id reused"
                );
                self.gate_round = Some(GateRound {
                    round: *round,
                    hook: *hook,
                    unreachable,
                    failed: Vec::new(),
                });
            }
            Event::HookCalled {
                server,
                outcome,
                round,
                hook,
                ..
            } => {
                let i: usize = server.as_str()[1..].parse().unwrap();
                // [F1]: a required gate's failed call is one it answers.
                let failed = matches!(
                    outcome,
                    Outcome::Timeout | Outcome::Killed | Outcome::Error { .. } | Outcome::Crashed
                );
                if failed
                    && self.session.is_required(ServerId(i))
                    && *hook != HookPoint::SessionEnd
                    && let Some(gates) = &mut self.gate_round
                    && gates.round == *round
                    && !gates.failed.contains(&i)
                {
                    gates.failed.push(i);
                }
                // A server is killed only on its second consecutive timeout,
                // and a first timeout only counts [T3]; the parallel calls
                // of one round that time out together count once.
                match (outcome, self.timeouts[i]) {
                    (Outcome::Timeout, Wedge::TimedOut(r)) if r == *round => {}
                    (Outcome::Timeout, w) => {
                        assert!(
                            matches!(w, Wedge::Clear | Wedge::Killed(_)),
                            "timeout counted past one without a kill"
                        );
                        self.timeouts[i] = Wedge::TimedOut(*round);
                    }
                    (Outcome::Killed, Wedge::Killed(r)) if r == *round => {}
                    (Outcome::Killed, w) => {
                        assert!(
                            matches!(w, Wedge::TimedOut(r) if r < *round),
                            "killed without a previous timeout"
                        );
                        self.timeouts[i] = Wedge::Killed(*round);
                    }
                    (o, _) if o.completed() => self.timeouts[i] = Wedge::Clear,
                    _ => {}
                }
            }
            Event::Decided {
                round: Some(round),
                decision,
            } => {
                // Each round lasts at most the hook timeout [S6], [T1]; in
                // virtual time there is no scheduling slack.
                let started = self
                    .open_rounds
                    .remove(&round.0)
                    .expect("decision for an open round");
                assert!(self.now.saturating_since(started) <= self.max_timeout());
                if let Some(gates) = self.gate_round.take() {
                    assert_eq!(gates.round, *round, "a decision for another round");
                    self.check_gates(&gates, decision);
                }
            }
            Event::ServerUp { server, .. } => {
                let i: usize = server.as_str()[1..].parse().unwrap();
                self.timeouts[i] = Wedge::Clear;
                self.listed[i] = true;
                if self.guard_down[i] {
                    self.expect_guard = Some(Event::GuardUp {
                        server: server.clone(),
                    });
                }
            }
            // A kill's own down event keeps the kill's round: its other
            // calls of that round end as killed too.
            Event::ServerDown {
                server,
                cause,
                retry_at,
                ..
            } => {
                let i: usize = server.as_str()[1..].parse().unwrap();
                if !matches!(cause, DownCause::Killed) {
                    self.timeouts[i] = Wedge::Clear;
                }
                if self.session.is_required(ServerId(i)) {
                    self.expect_guard = Some(Event::GuardDown {
                        server: server.clone(),
                        cause: cause.clone(),
                        retired: retry_at.is_none(),
                    });
                }
            }
            Event::GuardDown { server, .. } => {
                assert!(expected_guard.is_some(), "guard_down without server_down");
                let i: usize = server.as_str()[1..].parse().unwrap();
                self.guard_down[i] = true;
            }
            Event::GuardUp { server } => {
                assert!(expected_guard.is_some(), "guard_up without server_up");
                let i: usize = server.as_str()[1..].parse().unwrap();
                self.guard_down[i] = false;
            }
            _ => {}
        }
    }

    fn check_answer(&mut self, answer: Answer) {
        match &answer {
            Answer::Turn(TurnVerdict::Continue { injections }) => {
                // Objections are charged at most `budget` times in the
                // budget's scope, and, with the decline rule on, never twice
                // in a row without a tool call [S2], [S3], [G1], [G2].
                assert!(
                    self.world.decline == DeclineRule::Off
                        || self.continues_in_prompt == 0
                        || self.tools_since_continue,
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
            Answer::Pairs(hook, injections) => {
                assert!(injections.iter().all(|i| i.hook == *hook));
            }
            // One gate per asked call, whatever the hooks did [E3]; every
            // refusal carries at least one _PreToolUse envelope.
            Answer::Gates(gates) => {
                assert_eq!(gates.len(), self.asked_calls);
                for gate in gates {
                    if let ToolGate::Refused { refusals } = gate {
                        assert!(!refusals.is_empty());
                        assert!(refusals.iter().all(|r| r.hook == HookPoint::PreToolUse));
                    }
                }
            }
            // One list of notes per call that ran [E4].
            Answer::Notes(notes) => {
                assert_eq!(notes.len(), self.asked_calls);
                assert!(
                    notes
                        .iter()
                        .flatten()
                        .all(|n| n.hook == HookPoint::PostToolUse)
                );
            }
            Answer::SessionEnded => {}
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
    pub fn advance_to(&mut self, to: Time) {
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
                            tools: self.world.servers[server.0]
                                .listing
                                .iter()
                                .map(|t| listed_tool(t))
                                .collect(),
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
    pub fn ask(&mut self, question: Question, cancel_after: Option<u16>) -> Answer {
        self.questions += 1;
        let asked_at = self.now;
        let cancel_at = cancel_after.map(|ms| asked_at + Duration::from_millis(u64::from(ms)));
        match question {
            Question::EndTurn { stop, tool_calls } => {
                let asked = self.session.end_turn(self.now, stop, tool_calls, "");
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::Compacted(removed) => {
                let asked = self.session.compacted(self.now, removed, None);
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::Abort(reason) => {
                let end = self.session.abort(self.now, reason).expect("a prompt runs");
                self.drain();
                self.check_answer(Answer::Ended(end));
            }
            Question::SessionStart => {
                let context = HookContext {
                    session_id: "s-1".into(),
                    cwd: "/w".into(),
                };
                let asked = self.session.session_start(self.now, context);
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::Submit => {
                let asked = self.session.prompt_submitted(self.now, "do it");
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::PreTool(calls) => {
                self.asked_calls = calls.len();
                let asked = self.session.tools_requested(self.now, calls);
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::PostTool(runs) => {
                self.asked_calls = runs.len();
                let asked = self.session.tools_ran(self.now, runs);
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::PreCompact => {
                let asked = self.session.compacting(self.now);
                asked.expect("the driver asks only when a prompt runs and no round does");
            }
            Question::SessionEnd => {
                let asked = self.session.session_end(self.now, SessionEndReason::Exit);
                asked.expect("the driver asks once, when no prompt runs");
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
                && self.session.in_prompt()
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

    /// The model asks for `calls` tool calls: `_PreToolUse` gates them and
    /// the ones let through run (`_PostToolUse`), unless cancelled.
    pub fn tool_round(&mut self, calls: usize, cancel_after: Option<u16>) {
        self.ask(
            Question::EndTurn {
                stop: StopReason::ToolUse,
                tool_calls: calls.max(1),
            },
            None,
        );
        let n = self.world.servers.len();
        let uses: Vec<ToolUse> = (0..calls)
            .map(|i| ToolUse {
                server: ServerId(i % n),
                tool: "read".into(),
                arguments: serde_json::json!({"path": format!("f{i}")}),
            })
            .collect();
        let Answer::Gates(gates) = self.ask(Question::PreTool(uses.clone()), cancel_after) else {
            return;
        };
        let runs: Vec<ToolRun> = uses
            .into_iter()
            .zip(gates)
            .filter(|(_, gate)| *gate == ToolGate::Run)
            .map(|(call, _)| ToolRun {
                call,
                output: "ok".into(),
                is_error: false,
            })
            .collect();
        self.ask(Question::PostTool(runs), None);
    }

    /// Ends the session: aborts a running prompt, then tells _SessionEnd.
    pub fn end_session(&mut self) {
        if self.session.in_prompt() {
            self.ask(Question::Abort(AbortReason::Cancelled), None);
        }
        assert_eq!(self.ask(Question::SessionEnd, None), Answer::SessionEnded);
    }

    /// Begins a prompt unless one runs.
    pub fn ensure_prompt(&mut self) {
        if !self.session.in_prompt() {
            self.session.begin_prompt(self.now).unwrap();
            self.drain();
        }
    }

    /// Does `op` (beginning a prompt first where it needs one) and runs
    /// virtual time until every question it asked is answered, checking the
    /// invariants after every step.
    pub fn apply(&mut self, op: &Op) {
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
            Op::SessionStart => {
                self.ensure_prompt();
                self.ask(Question::SessionStart, None);
            }
            Op::Submit => {
                self.ensure_prompt();
                self.ask(Question::Submit, None);
            }
            Op::ToolRound {
                calls,
                cancel_after,
            } => {
                self.ensure_prompt();
                self.tool_round(calls, cancel_after);
            }
            Op::PreCompact => {
                self.ensure_prompt();
                self.ask(Question::PreCompact, None);
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

/// `name` or `name(p1,p2)`: a tool whose schema names these properties.
fn listed_tool(word: &str) -> ListedTool {
    let Some((name, props)) = word.strip_suffix(')').and_then(|w| w.split_once('(')) else {
        return ListedTool::named(word);
    };
    let mut tool = ListedTool::named(name);
    tool.properties = props.split(',').map(str::to_owned).collect();
    tool
}
