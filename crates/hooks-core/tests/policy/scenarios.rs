//! Scenario tests: one or more per rule id of the contract (docs/hooks.md) that is a decision.
//!
//! Each test is a script and the trace it must produce (see `support`). The
//! trace is the contract: read it as the story of what the agent does. After
//! an intended behaviour change, `UPDATE_EXPECT=1 cargo test -p hooks-core`
//! rewrites the traces; review the diff.

use expect_test::expect;

use crate::support::check;

// [H2], [N2]: hooks never reach the model's tool list; model names are S__T.
// [H3]: a call to a hook or to nothing resolves to "unknown tool" alike.
#[test]
fn h2_h3_hooks_are_hidden_and_unreachable() {
    check(
        r"
        servers todo gate
        allow *
        up todo _Stop _PostCompact todo
        up gate _Stop run__all
        tools
        resolve todo__todo
        resolve gate__run__all
        resolve todo___Stop
        resolve gate___Stop
        resolve todo__nothing
        resolve nobody__todo
        resolve todo
        ",
        expect![[r#"
            [0ms] session
              start todo
              starting todo, attempt 1
              start gate
              starting gate, attempt 1
            [0ms] up todo _Stop _PostCompact todo
              server todo up: 1 model tool(s), hooks [_Stop _PostCompact]
            [0ms] up gate _Stop run__all
              server gate up: 1 model tool(s), hooks [_Stop]
            [0ms] tools
              model tools: todo__todo gate__run__all
            [0ms] resolve todo__todo
              -> todo.todo
            [0ms] resolve gate__run__all
              -> gate.run__all
            [0ms] resolve todo___Stop
              -> unknown tool: todo___Stop
            [0ms] resolve gate___Stop
              -> unknown tool: gate___Stop
            [0ms] resolve todo__nothing
              -> unknown tool: todo__nothing
            [0ms] resolve nobody__todo
              -> unknown tool: nobody__todo
            [0ms] resolve todo
              -> unknown tool: todo
        "#]],
    );
}

// [H3] holds with hooks off too [A1].
#[test]
fn h3_hooks_unreachable_when_hooks_are_off() {
    check(
        r"
        servers todo
        up todo _Stop todo
        resolve todo___Stop
        resolve todo__todo
        ",
        expect![[r#"
            [0ms] session
              start todo
              starting todo, attempt 1
            [0ms] up todo _Stop todo
              server todo up: 1 model tool(s), hooks [_Stop]
            [0ms] resolve todo___Stop
              -> unknown tool: todo___Stop
            [0ms] resolve todo__todo
              -> todo.todo
        "#]],
    );
}

// [N3], [N4], [H4]: listing warnings, and what the model is offered after them.
#[test]
fn n3_n4_h4_listing_warnings() {
    check(
        r"
        servers s
        allow *
        up s read read _Stop _stop _SubagentStart bad.name _Stop
        tools
        ",
        expect![[r#"
            [0ms] session
              start s
              starting s, attempt 1
            [0ms] up s read read _Stop _stop _SubagentStart bad.name _Stop
              server s up: 1 model tool(s), hooks [_Stop]
              warning: server s lists tool "read" twice; the second is ignored
              warning: server s lists "_stop", which starts with "_" and so is hidden from the model, but is no hook point Sprout calls (_SessionStart, _UserPromptSubmit, _PreToolUse, _PostToolUse, _Stop, _PreCompact, _PostCompact, _SessionEnd); did you mean _Stop?
              warning: server s lists "_SubagentStart", which starts with "_" and so is hidden from the model, but is no hook point Sprout calls (_SessionStart, _UserPromptSubmit, _PreToolUse, _PostToolUse, _Stop, _PreCompact, _PostCompact, _SessionEnd); rename it without the leading "_" if the model should see it
              warning: tool "bad.name" of server s is not offered to the model: the qualified name contains '.', model APIs accept only A-Z a-z 0-9 _ -
              warning: server s lists tool "_Stop" twice; the second is ignored
            [0ms] tools
              model tools: s__read
        "#]],
    );
}

// [A3]: an allowlist entry naming no server is a warning at start-up.
#[test]
fn a3_unknown_allowlist_entry_warns() {
    check(
        r"
        servers todo gate
        allow todo, tod
        up todo _Stop
        up gate _Stop
        ",
        expect![[r#"
            [0ms] session
              warning: MCP_HOOK_SERVERS names "tod", but no configured MCP server has that name, so it cannot hook
              start todo
              starting todo, attempt 1
              start gate
              starting gate, attempt 1
            [0ms] up todo _Stop
              server todo up: 0 model tool(s), hooks [_Stop]
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
        "#]],
    );
}

// [A1], [S5]: with hooks off, end-of-turn is honoured without any call.
#[test]
fn a1_hooks_off_stops_without_calling() {
    check(
        r"
        servers todo
        allow  ,
        up todo _Stop
        prompt
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              start todo
              starting todo, attempt 1
            [0ms] up todo _Stop
              server todo up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              decided: prompt ended, hooks_off
              => end: hooks_off
        "#]],
    );
}

// [A2]: only listed servers are called.
#[test]
fn a2_only_listed_servers_hook() {
    check(
        r"
        servers a b c
        allow c, a
        up a _Stop
        up b _Stop
        up c _Stop
        prompt
        model end_turn
        reply 1 empty
        reply 2 empty
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
              start c
              starting c, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] up c _Stop
              server c up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              call #2 c._Stop by 2500ms
              round 1 _Stop: [a c] by 2500ms
            [0ms] reply 1 empty
              hook a._Stop round 1: empty after 0ms
            [0ms] reply 2 empty
              hook c._Stop round 1: empty after 0ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [S1]: only an end-of-turn without tool calls is gated.
#[test]
fn s1_only_end_turn_without_tools_is_gated() {
    check(
        r"
        servers a
        allow *
        up a _Stop
        prompt
        model end_turn 1     # tool calls: not gated, whatever the stop reason
        model tool_use 2
        model max_tokens
        prompt
        model refusal
        prompt
        model content_filter
        prompt
        model pause_turn
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn 1
              => run tools
            [0ms] model tool_use 2
              => run tools
            [0ms] model max_tokens
              decided: prompt ended, max_tokens
              => end: max_tokens
            [0ms] prompt
            [0ms] model refusal
              decided: prompt ended, refusal
              => end: refusal
            [0ms] prompt
            [0ms] model content_filter
              decided: prompt ended, content_filter
              => end: content_filter
            [0ms] prompt
            [0ms] model pause_turn
              decided: prompt ended, pause_turn
              => end: pause_turn
        "#]],
    );
}

// [S4], [I1]-[I3]: one objection continues the prompt; answers are injected
// in configuration order, not completion order.
#[test]
fn s4_i3_objections_injected_in_configuration_order() {
    check(
        r"
        servers a b c
        allow *
        up a _Stop
        up b _Stop
        up c _Stop
        prompt
        model end_turn
        reply 3 c objects
        reply 2 empty
        at 40
        reply 1 a objects too
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
              start c
              starting c, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] up c _Stop
              server c up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              call #2 b._Stop by 2500ms
              call #3 c._Stop by 2500ms
              round 1 _Stop: [a b c] by 2500ms
            [0ms] reply 3 c objects
              hook c._Stop round 1: objection "c objects" after 0ms
            [0ms] reply 2 empty
              hook b._Stop round 1: empty after 0ms
            [40ms] at 40
            [40ms] reply 1 a objects too
              hook a._Stop round 1: objection "a objects too" after 40ms
              decided (round 1): objection honoured from [a c], budget 1/3
              => continue with 2 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"a objects too"}
                 sprout-1-2 c___Stop({}) -> {"hook":"_Stop","server":"c","text":"c objects"}
        "#]],
    );
}

// [S4]: no non-empty answer, no objection: the agent stops.
#[test]
fn s4_no_objection_stops() {
    check(
        r"
        servers a b
        allow *
        up a _Stop
        up b _Stop
        prompt
        model end_turn
        reply 1 blank
        reply 2 image
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              call #2 b._Stop by 2500ms
              round 1 _Stop: [a b] by 2500ms
            [0ms] reply 1 blank
              hook a._Stop round 1: empty after 0ms
            [0ms] reply 2 image
              hook b._Stop round 1: empty after 0ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [S5], [E7]: with nobody up to call there is no round: the prompt ends at
// once, saying nobody could object.
#[test]
fn s5_e7_no_stop_hook_when_nobody_up_lists_it() {
    check(
        r"
        servers a
        allow *
        up a read
        prompt
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a read
              server a up: 1 model tool(s), hooks []
            [0ms] prompt
            [0ms] model end_turn
              decided: prompt ended, no_stop_hook
              => end: no_stop_hook
        "#]],
    );
}

// [S2]: after an objection, ending again with no tool call in between stops
// without calling _Stop; a tool call in between resets the rule.
#[test]
fn s2_consecutive_end_turn_is_declined() {
    check(
        r"
        servers a
        allow *
        budget 5
        up a _Stop
        prompt
        model end_turn
        reply 1 tests fail
        model end_turn        # declined: no call
        prompt
        model end_turn
        reply 2 still failing
        model tool_use 1      # resets the rule
        model end_turn
        reply 3 one more
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              round 1 _Stop: [a] by 2500ms
            [0ms] reply 1 tests fail
              hook a._Stop round 1: objection "tests fail" after 0ms
              decided (round 1): objection honoured from [a], budget 1/5
              => continue with 1 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"tests fail"}
            [0ms] model end_turn
              decided: prompt ended, declined
              => end: declined
            [0ms] prompt
            [0ms] model end_turn
              call #2 a._Stop by 2500ms
              round 2 _Stop: [a] by 2500ms
            [0ms] reply 2 still failing
              hook a._Stop round 2: objection "still failing" after 0ms
              decided (round 2): objection honoured from [a], budget 2/5
              => continue with 1 pair(s)
                 sprout-2-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"still failing"}
            [0ms] model tool_use 1
              => run tools
            [0ms] model end_turn
              call #3 a._Stop by 2500ms
              round 3 _Stop: [a] by 2500ms
            [0ms] reply 3 one more
              hook a._Stop round 3: objection "one more" after 0ms
              decided (round 3): objection honoured from [a], budget 3/5
              => continue with 1 pair(s)
                 sprout-3-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"one more"}
        "#]],
    );
}

// [S2]: the rule is per prompt; a new prompt starts fresh.
#[test]
fn s2_rule_does_not_carry_across_prompts() {
    check(
        r"
        servers a
        allow *
        up a _Stop
        prompt
        model end_turn
        reply 1 object
        abort cancelled
        prompt
        model end_turn
        reply 2 object again
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              round 1 _Stop: [a] by 2500ms
            [0ms] reply 1 object
              hook a._Stop round 1: objection "object" after 0ms
              decided (round 1): objection honoured from [a], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"object"}
            [0ms] abort cancelled
              decided: prompt ended, cancelled
              => end: cancelled
            [0ms] prompt
            [0ms] model end_turn
              call #2 a._Stop by 2500ms
              round 2 _Stop: [a] by 2500ms
            [0ms] reply 2 object again
              hook a._Stop round 2: objection "object again" after 0ms
              decided (round 2): objection honoured from [a], budget 2/3
              => continue with 1 pair(s)
                 sprout-2-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"object again"}
        "#]],
    );
}

// [S3]: the budget counts objected end-of-turns across prompts, one per round
// however many servers objected; when spent, _Stop is not called again.
#[test]
fn s3_budget_is_per_session_and_per_round() {
    check(
        r"
        servers a b
        allow *
        budget 2
        up a _Stop
        up b _Stop
        prompt
        model end_turn
        reply 1 a says no
        reply 2 b says no
        model tool_use 1
        model end_turn
        reply 3 no
        reply 4 empty
        model tool_use 1
        model end_turn        # budget spent: no call
        prompt
        model end_turn        # still spent in the next prompt
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              call #2 b._Stop by 2500ms
              round 1 _Stop: [a b] by 2500ms
            [0ms] reply 1 a says no
              hook a._Stop round 1: objection "a says no" after 0ms
            [0ms] reply 2 b says no
              hook b._Stop round 1: objection "b says no" after 0ms
              decided (round 1): objection honoured from [a b], budget 1/2
              => continue with 2 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"a says no"}
                 sprout-1-1 b___Stop({}) -> {"hook":"_Stop","server":"b","text":"b says no"}
            [0ms] model tool_use 1
              => run tools
            [0ms] model end_turn
              call #3 a._Stop by 2500ms
              call #4 b._Stop by 2500ms
              round 2 _Stop: [a b] by 2500ms
            [0ms] reply 3 no
              hook a._Stop round 2: objection "no" after 0ms
            [0ms] reply 4 empty
              hook b._Stop round 2: empty after 0ms
              decided (round 2): objection honoured from [a], budget 2/2
              => continue with 1 pair(s)
                 sprout-2-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"no"}
            [0ms] model tool_use 1
              => run tools
            [0ms] model end_turn
              decided: prompt ended, budget_spent
              => end: budget_spent
            [0ms] prompt
            [0ms] model end_turn
              decided: prompt ended, budget_spent
              => end: budget_spent
        "#]],
    );
}

// [S3]: budget 0 disables _Stop.
#[test]
fn s3_zero_budget_disables_stop() {
    check(
        r"
        servers a
        allow *
        budget 0
        up a _Stop _PostCompact
        prompt
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop _PostCompact
              server a up: 0 model tool(s), hooks [_Stop _PostCompact]
            [0ms] prompt
            [0ms] model end_turn
              decided: prompt ended, budget_spent
              => end: budget_spent
        "#]],
    );
}

// [S3], [I1]: a session continued in another process (a resumed transcript)
// keeps the budget it spent, and numbers its rounds after the old ones, so
// its pairs' call ids do not repeat those already in the history. Restoring
// is refused while a prompt runs; more than this budget counts as all of it.
#[test]
fn s3_a_continued_session_keeps_its_budget_and_round_numbers() {
    check(
        r"
        servers a
        allow *
        budget 2
        up a _Stop
        restore 1 4
        carried
        prompt
        restore 0 0           # refused: a prompt runs
        model end_turn
        reply 1 not yet
        model end_turn        # declined twice [S2]
        carried
        prompt
        model end_turn        # budget 2/2 was spent: no call
        restore 9 1           # at most the budget; rounds never go back
        carried
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] restore 1 4
            [0ms] carried
              carried: budget used 1, rounds 4
            [0ms] prompt
            [0ms] restore 0 0
              usage error: a prompt is already running
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              round 5 _Stop: [a] by 2500ms
            [0ms] reply 1 not yet
              hook a._Stop round 5: objection "not yet" after 0ms
              decided (round 5): objection honoured from [a], budget 2/2
              => continue with 1 pair(s)
                 sprout-5-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"not yet"}
            [0ms] model end_turn
              decided: prompt ended, declined
              => end: declined
            [0ms] carried
              carried: budget used 2, rounds 5
            [0ms] prompt
            [0ms] model end_turn
              decided: prompt ended, budget_spent
              => end: budget_spent
            [0ms] restore 9 1
            [0ms] carried
              carried: budget used 2, rounds 5
        "#]],
    );
}

// [S5]: every end of a prompt carries its reason, loop-made ends included.
#[test]
fn s5_every_end_has_a_reason() {
    check(
        r"
        servers a
        allow *
        up a _Stop
        prompt
        abort max_rounds
        prompt
        abort failed
        prompt
        model end_turn
        abort cancelled
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] abort max_rounds
              decided: prompt ended, max_rounds
              => end: max_rounds
            [0ms] prompt
            [0ms] abort failed
              decided: prompt ended, error
              => end: error
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              round 1 _Stop: [a] by 2500ms
            [0ms] abort cancelled
              cancel #1
              hook a._Stop round 1: cancelled after 0ms
              decided (round 1): prompt ended, cancelled
              => end: cancelled
        "#]],
    );
}

// [R1]-[R3] inside a round: text concatenation, whitespace, and every failure
// as its own outcome, none of them an objection.
#[test]
fn r1_r3_answers_in_a_round() {
    check(
        r"
        servers a b c d e
        allow *
        up a _Stop
        up b _Stop
        up c _Stop
        up d _Stop
        up e _Stop
        prompt
        model end_turn
        reply 1 error tests are red
        reply 2 rpc method not found
        reply 3 transport
        reply 4 crash
        reply 5 image
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
              start c
              starting c, attempt 1
              start d
              starting d, attempt 1
              start e
              starting e, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] up c _Stop
              server c up: 0 model tool(s), hooks [_Stop]
            [0ms] up d _Stop
              server d up: 0 model tool(s), hooks [_Stop]
            [0ms] up e _Stop
              server e up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              call #2 b._Stop by 2500ms
              call #3 c._Stop by 2500ms
              call #4 d._Stop by 2500ms
              call #5 e._Stop by 2500ms
              round 1 _Stop: [a b c d e] by 2500ms
            [0ms] reply 1 error tests are red
              hook a._Stop round 1: error (error result) "tests are red" after 0ms
            [0ms] reply 2 rpc method not found
              hook b._Stop round 1: error (JSON-RPC error) "-32603: method not found" after 0ms
            [0ms] reply 3 transport
              hook c._Stop round 1: error (transport failure) "broken pipe" after 0ms
            [0ms] reply 4 crash
              hook d._Stop round 1: crashed after 0ms
              server d down: crashed (during a hook call), failures 1, retry from 250ms
            [0ms] reply 5 image
              hook e._Stop round 1: empty after 0ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [R4]: a long answer is cut to 16 KiB with a marker before injection.
#[test]
fn r4_long_answers_are_capped() {
    check(
        r"
        servers a
        allow *
        up a _Stop
        prompt
        model end_turn
        reply 1 big
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              round 1 _Stop: [a] by 2500ms
            [0ms] reply 1 big
              hook a._Stop round 1: objection "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…(16442 bytes)…xx\n[sprout: hook answer cut here, 3616 more bytes not shown]" after 0ms
              decided (round 1): objection honoured from [a], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"xxxxxxxxxxxxxxxxxxxxxxx…(16482 bytes)…n[sprout: hook answer cut here, 3616 more bytes not shown]"}
        "#]],
    );
}

// [T1]: every call of a round shares one deadline; K hanging hooks cost one
// timeout. [T2]: timed-out calls are cancelled and late answers discarded.
#[test]
fn t1_t2_one_deadline_per_round() {
    check(
        r"
        servers a b c
        allow *
        timeout 1000
        up a _Stop
        up b _Stop
        up c _Stop
        prompt
        model end_turn
        reply 2 b objects in time
        at 999
        at 1000
        reply 1 too late
        model tool_use 1
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
              start c
              starting c, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] up c _Stop
              server c up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 1000ms
              call #2 b._Stop by 1000ms
              call #3 c._Stop by 1000ms
              round 1 _Stop: [a b c] by 1000ms
            [0ms] reply 2 b objects in time
              hook b._Stop round 1: objection "b objects in time" after 0ms
            [999ms] at 999
            [1000ms] at 1000
              cancel #1
              hook a._Stop round 1: timeout after 1000ms
              cancel #3
              hook c._Stop round 1: timeout after 1000ms
              decided (round 1): objection honoured from [b], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-1 b___Stop({}) -> {"hook":"_Stop","server":"b","text":"b objects in time"}
            [1000ms] reply 1 too late
            [1000ms] model tool_use 1
              => run tools
        "#]],
    );
}

// [T3]: the first timeout only counts; the second consecutive one kills. A
// completed call of any kind in between resets the count.
#[test]
fn t3_second_consecutive_timeout_kills() {
    check(
        r"
        servers a
        allow *
        timeout 100
        up a _Stop
        prompt
        model end_turn        # call 1
        at 100                # first timeout: cancelled, counted
        prompt
        model end_turn        # call 2
        reply 2 error oops    # an error result completes: count reset
        prompt
        model end_turn        # call 3
        at 200                # first again
        prompt
        model end_turn        # call 4
        at 300                # second in a row: killed, not cancelled
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 100ms
              round 1 _Stop: [a] by 100ms
            [100ms] at 100
              cancel #1
              hook a._Stop round 1: timeout after 100ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
            [100ms] prompt
            [100ms] model end_turn
              call #2 a._Stop by 200ms
              round 2 _Stop: [a] by 200ms
            [100ms] reply 2 error oops
              hook a._Stop round 2: error (error result) "oops" after 0ms
              decided (round 2): prompt ended, no_objection
              => end: no_objection
            [100ms] prompt
            [100ms] model end_turn
              call #3 a._Stop by 200ms
              round 3 _Stop: [a] by 200ms
            [200ms] at 200
              cancel #3
              hook a._Stop round 3: timeout after 100ms
              decided (round 3): prompt ended, no_objection
              => end: no_objection
            [200ms] prompt
            [200ms] model end_turn
              call #4 a._Stop by 300ms
              round 4 _Stop: [a] by 300ms
            [300ms] at 300
              kill a
              hook a._Stop round 4: killed after 100ms
              server a down: killed, failures 1, retry from 550ms
              decided (round 4): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [T4]: a killed server is left out of rounds while down, restarted lazily
// on next use once its backoff passed (outside the round), and retired after
// three failures; its tools then leave the model's list.
#[test]
fn t4_lazy_restart_with_backoff_and_limit() {
    check(
        r"
        servers a b
        allow *
        timeout 100
        up a _Stop work
        up b _Stop
        prompt
        model end_turn        # calls 1 (a) and 2 (b)
        reply 2 empty
        at 100                # a: first timeout
        prompt
        model end_turn        # calls 3 (a) and 4 (b)
        reply 4 empty
        at 200                # a killed: failures 1, retry from 450
        tools                 # a's tools stay offered while it may come back
        prompt
        model end_turn        # a down, backoff not over: left out
        reply 5 empty
        at 450
        prompt
        model end_turn        # a due: restarted beside the round, left out of it
        reply 6 empty
        up a _Stop work       # restarted
        prompt
        model end_turn        # calls 7 (a) and 8 (b)
        reply 8 empty
        at 550
        prompt
        model end_turn        # calls 9 (a) and 10 (b)
        reply 10 empty
        at 650                # killed again: failures 2, retry from 1150
        want a                # too early: nothing
        at 1150
        want a                # a tool call wants it: restart
        fail a spawn refused  # failures 3: retired
        tools
        resolve a__work
        want a
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up a _Stop work
              server a up: 1 model tool(s), hooks [_Stop]
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 100ms
              call #2 b._Stop by 100ms
              round 1 _Stop: [a b] by 100ms
            [0ms] reply 2 empty
              hook b._Stop round 1: empty after 0ms
            [100ms] at 100
              cancel #1
              hook a._Stop round 1: timeout after 100ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
            [100ms] prompt
            [100ms] model end_turn
              call #3 a._Stop by 200ms
              call #4 b._Stop by 200ms
              round 2 _Stop: [a b] by 200ms
            [100ms] reply 4 empty
              hook b._Stop round 2: empty after 0ms
            [200ms] at 200
              kill a
              hook a._Stop round 2: killed after 100ms
              server a down: killed, failures 1, retry from 450ms
              decided (round 2): prompt ended, no_objection
              => end: no_objection
            [200ms] tools
              model tools: a__work
            [200ms] prompt
            [200ms] model end_turn
              call #5 b._Stop by 300ms
              round 3 _Stop: [b] by 300ms, left out [a]
            [200ms] reply 5 empty
              hook b._Stop round 3: empty after 0ms
              decided (round 3): prompt ended, no_objection
              => end: no_objection
            [450ms] at 450
            [450ms] prompt
            [450ms] model end_turn
              start a
              starting a, attempt 2
              call #6 b._Stop by 550ms
              round 4 _Stop: [b] by 550ms, left out [a]
            [450ms] reply 6 empty
              hook b._Stop round 4: empty after 0ms
              decided (round 4): prompt ended, no_objection
              => end: no_objection
            [450ms] up a _Stop work
              server a up: 1 model tool(s), hooks [_Stop]
            [450ms] prompt
            [450ms] model end_turn
              call #7 a._Stop by 550ms
              call #8 b._Stop by 550ms
              round 5 _Stop: [a b] by 550ms
            [450ms] reply 8 empty
              hook b._Stop round 5: empty after 0ms
            [550ms] at 550
              cancel #7
              hook a._Stop round 5: timeout after 100ms
              decided (round 5): prompt ended, no_objection
              => end: no_objection
            [550ms] prompt
            [550ms] model end_turn
              call #9 a._Stop by 650ms
              call #10 b._Stop by 650ms
              round 6 _Stop: [a b] by 650ms
            [550ms] reply 10 empty
              hook b._Stop round 6: empty after 0ms
            [650ms] at 650
              kill a
              hook a._Stop round 6: killed after 100ms
              server a down: killed, failures 2, retry from 1150ms
              decided (round 6): prompt ended, no_objection
              => end: no_objection
            [650ms] want a
            [1150ms] at 1150
            [1150ms] want a
              start a
              starting a, attempt 3
            [1150ms] fail a spawn refused
              server a down: start failed (spawn refused), failures 3, retired for the session
            [1150ms] tools
              model tools: 
            [1150ms] resolve a__work
              -> unknown tool: a__work
            [1150ms] want a
        "#]],
    );
}

// [T4]: a crash counts like a kill, a start failure too; a server that exits
// while its call is in flight ends that call as crashed.
#[test]
fn t4_crashes_and_start_failures_count() {
    check(
        r"
        servers a b
        allow *
        up b _Stop
        fail a no such command
        prompt
        model end_turn        # a is down: left out
        exit b pipe closed    # b dies mid-call
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] fail a no such command
              server a down: start failed (no such command), failures 1, retry from 250ms
            [0ms] prompt
            [0ms] model end_turn
              call #1 b._Stop by 2500ms
              round 1 _Stop: [b] by 2500ms, left out [a]
            [0ms] exit b pipe closed
              hook b._Stop round 1: crashed after 0ms
              server b down: crashed (pipe closed), failures 1, retry from 250ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [T4], [S3]: a session continued in another process (Session::resume)
// keeps each server's failures, matched by name, before anything starts: a
// server with 2 of 3 gets one more try, one at the limit is not started at
// all (one event says why; its tools are not offered, it is neither called
// nor left out, and wanting it restarts nothing), a new server starts with
// none, and a carried server no longer configured changes nothing but is
// carried on. Counts past the limit count as the limit.
#[test]
fn t4_a_resumed_session_keeps_its_failure_counts() {
    check(
        r"
        servers a b c
        allow *
        carry 1 4 a=2 b=9 gone=1 c=0
        carried
        up a _Stop read
        up c _Stop
        tools
        want b
        prompt
        model end_turn        # round 5: a and c; b is neither asked nor left out
        exit a pipe closed    # a's third failure: it stays down
        reply 2 empty
        exit c pipe closed    # c's first
        carried
        tools
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              server b down: at its limit before the resume, failures 3, retired for the session
              start c
              starting c, attempt 1
            [0ms] carried
              carried: budget used 1, rounds 4, failures a=2 b=3 gone=1
            [0ms] up a _Stop read
              server a up: 1 model tool(s), hooks [_Stop]
            [0ms] up c _Stop
              server c up: 0 model tool(s), hooks [_Stop]
            [0ms] tools
              model tools: a__read
            [0ms] want b
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              call #2 c._Stop by 2500ms
              round 5 _Stop: [a c] by 2500ms
            [0ms] exit a pipe closed
              hook a._Stop round 5: crashed after 0ms
              server a down: crashed (pipe closed), failures 3, retired for the session
            [0ms] reply 2 empty
              hook c._Stop round 5: empty after 0ms
              decided (round 5): prompt ended, no_objection
              => end: no_objection
            [0ms] exit c pipe closed
              server c down: crashed (pipe closed), failures 1, retry from 250ms
            [0ms] carried
              carried: budget used 1, rounds 5, failures a=3 b=3 c=1 gone=1
            [0ms] tools
              model tools: 
        "#]],
    );
}

// [T5]: cancelling during a round cancels every call in flight and ends the
// prompt at once; the next prompt works.
#[test]
fn t5_cancel_ends_the_round_at_once() {
    check(
        r"
        servers a b
        allow *
        up a _Stop
        up b _Stop
        prompt
        model end_turn
        reply 1 a objects
        at 10
        abort cancelled
        reply 2 late
        prompt
        model end_turn
        reply 3 empty
        reply 4 empty
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] up b _Stop
              server b up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              call #2 b._Stop by 2500ms
              round 1 _Stop: [a b] by 2500ms
            [0ms] reply 1 a objects
              hook a._Stop round 1: objection "a objects" after 0ms
            [10ms] at 10
            [10ms] abort cancelled
              cancel #2
              hook b._Stop round 1: cancelled after 10ms
              decided (round 1): prompt ended, cancelled
              => end: cancelled
            [10ms] reply 2 late
            [10ms] prompt
            [10ms] model end_turn
              call #3 a._Stop by 2510ms
              call #4 b._Stop by 2510ms
              round 2 _Stop: [a b] by 2510ms
            [10ms] reply 3 empty
              hook a._Stop round 2: empty after 0ms
            [10ms] reply 4 empty
              hook b._Stop round 2: empty after 0ms
              decided (round 2): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [P1], [P2], [P3]: _PostCompact runs after a compaction that removed
// messages, answers in configuration order, no budget charged.
#[test]
fn p1_p3_post_compact_reinjects() {
    check(
        r"
        servers a b
        allow *
        budget 1
        up a _Stop _PostCompact
        up b _PostCompact
        prompt
        model tool_use 1
        compacted 0           # nothing removed: no round
        compacted 12
        reply 2 b state
        reply 1 a todo list
        compacted 3
        reply 3 blank
        reply 4 timeout-free
        model end_turn
        reply 5 object
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up a _Stop _PostCompact
              server a up: 0 model tool(s), hooks [_Stop _PostCompact]
            [0ms] up b _PostCompact
              server b up: 0 model tool(s), hooks [_PostCompact]
            [0ms] prompt
            [0ms] model tool_use 1
              => run tools
            [0ms] compacted 0
              => reinject with 0 pair(s)
            [0ms] compacted 12
              call #1 a._PostCompact by 2500ms
              call #2 b._PostCompact by 2500ms
              round 1 _PostCompact: [a b] by 2500ms
            [0ms] reply 2 b state
              hook b._PostCompact round 1: injection "b state" after 0ms
            [0ms] reply 1 a todo list
              hook a._PostCompact round 1: injection "a todo list" after 0ms
              decided (round 1): reinject from [a b]
              => reinject with 2 pair(s)
                 sprout-1-0 a___PostCompact({}) -> {"hook":"_PostCompact","server":"a","text":"a todo list"}
                 sprout-1-1 b___PostCompact({}) -> {"hook":"_PostCompact","server":"b","text":"b state"}
            [0ms] compacted 3
              call #3 a._PostCompact by 2500ms
              call #4 b._PostCompact by 2500ms
              round 2 _PostCompact: [a b] by 2500ms
            [0ms] reply 3 blank
              hook a._PostCompact round 2: empty after 0ms
            [0ms] reply 4 timeout-free
              hook b._PostCompact round 2: injection "timeout-free" after 0ms
              decided (round 2): reinject from [b]
              => reinject with 1 pair(s)
                 sprout-2-1 b___PostCompact({}) -> {"hook":"_PostCompact","server":"b","text":"timeout-free"}
            [0ms] model end_turn
              call #5 a._Stop by 2500ms
              round 3 _Stop: [a] by 2500ms
            [0ms] reply 5 object
              hook a._Stop round 3: objection "object" after 0ms
              decided (round 3): objection honoured from [a], budget 1/1
              => continue with 1 pair(s)
                 sprout-3-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"object"}
        "#]],
    );
}

// [P1]: hooks off, no _PostCompact round.
#[test]
fn p1_no_round_when_hooks_off() {
    check(
        r"
        servers a
        up a _PostCompact
        prompt
        compacted 5
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _PostCompact
              server a up: 0 model tool(s), hooks [_PostCompact]
            [0ms] prompt
            [0ms] compacted 5
              => reinject with 0 pair(s)
        "#]],
    );
}

// [S2] with [P1]: a compaction between an objection and the next end-of-turn
// does not reset the consecutive rule (it is not a tool call).
#[test]
fn s2_compaction_does_not_reset_the_rule() {
    check(
        r"
        servers a
        allow *
        up a _Stop _PostCompact
        prompt
        model end_turn
        reply 1 not yet
        compacted 4
        reply 2 list
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop _PostCompact
              server a up: 0 model tool(s), hooks [_Stop _PostCompact]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              round 1 _Stop: [a] by 2500ms
            [0ms] reply 1 not yet
              hook a._Stop round 1: objection "not yet" after 0ms
              decided (round 1): objection honoured from [a], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"not yet"}
            [0ms] compacted 4
              call #2 a._PostCompact by 2500ms
              round 2 _PostCompact: [a] by 2500ms
            [0ms] reply 2 list
              hook a._PostCompact round 2: injection "list" after 0ms
              decided (round 2): reinject from [a]
              => reinject with 1 pair(s)
                 sprout-2-0 a___PostCompact({}) -> {"hook":"_PostCompact","server":"a","text":"list"}
            [0ms] model end_turn
              decided: prompt ended, declined
              => end: declined
        "#]],
    );
}

// Misuse is an error and changes nothing.
#[test]
fn usage_errors_leave_the_state_alone() {
    check(
        r"
        servers a
        allow *
        up a _Stop
        model end_turn
        abort cancelled
        prompt
        prompt
        model end_turn
        model end_turn
        compacted 2
        reply 1 empty
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] model end_turn
              usage error: no prompt is running
            [0ms] abort cancelled
              usage error: no prompt is running
            [0ms] prompt
            [0ms] prompt
              usage error: a prompt is already running
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              round 1 _Stop: [a] by 2500ms
            [0ms] model end_turn
              usage error: a hook round is in flight; wait for its answer
            [0ms] compacted 2
              usage error: a hook round is in flight; wait for its answer
            [0ms] reply 1 empty
              hook a._Stop round 1: empty after 0ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [T4]: a server that never started has no tool a call could want; the next
// prompt after its backoff is its next use, and it sits out rounds (it may
// list the hook) until it is up.
#[test]
fn t4_never_started_server_restarts_on_next_prompt() {
    check(
        r"
        servers a
        allow *
        fail a npx timed out
        prompt
        model end_turn        # down, backoff not over: nobody to ask [S5]
        at 300
        prompt                # due: restarted
        up a _Stop
        model end_turn
        reply 1 now I object
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] fail a npx timed out
              server a down: start failed (npx timed out), failures 1, retry from 250ms
            [0ms] prompt
            [0ms] model end_turn
              decided: prompt ended, no_stop_hook
              => end: no_stop_hook
            [300ms] at 300
            [300ms] prompt
              start a
              starting a, attempt 2
            [300ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [300ms] model end_turn
              call #1 a._Stop by 2800ms
              round 1 _Stop: [a] by 2800ms
            [300ms] reply 1 now I object
              hook a._Stop round 1: objection "now I object" after 0ms
              decided (round 1): objection honoured from [a], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"now I object"}
        "#]],
    );
}

// [E1], [K1], [K2]: _SessionStart runs once the loop knows the session, before
// the first model request; its answers are pairs after the prompt. A hook
// whose schema names session_id and cwd gets exactly those; one that names
// nothing gets {} [H5].
#[test]
fn e1_session_start_injects_and_learns_the_context() {
    check(
        r"
        servers a b
        allow *
        up a _SessionStart(session_id,cwd,prompt)
        up b _SessionStart _Stop(session_id)
        prompt
        session_start s-7 /work/repo
        reply 1 welcome back
        reply 2 empty
        model end_turn 0 done
        reply 3 empty
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up a _SessionStart(session_id,cwd,prompt)
              server a up: 0 model tool(s), hooks [_SessionStart]
            [0ms] up b _SessionStart _Stop(session_id)
              server b up: 0 model tool(s), hooks [_SessionStart _Stop]
            [0ms] prompt
            [0ms] session_start s-7 /work/repo
              call #1 a._SessionStart by 2500ms with {"cwd":"/work/repo","session_id":"s-7"}
              call #2 b._SessionStart by 2500ms
              round 1 _SessionStart: [a b] by 2500ms
            [0ms] reply 1 welcome back
              hook a._SessionStart round 1: injection "welcome back" after 0ms
            [0ms] reply 2 empty
              hook b._SessionStart round 1: empty after 0ms
              decided (round 1): _SessionStart adds from [a]
              => session context with 1 pair(s)
                 sprout-1-0 a___SessionStart({}) -> {"hook":"_SessionStart","server":"a","text":"welcome back"}
            [0ms] model end_turn 0 done
              call #3 b._Stop by 2500ms with {"session_id":"s-7"}
              round 2 _Stop: [b] by 2500ms
            [0ms] reply 3 empty
              hook b._Stop round 2: empty after 0ms
              decided (round 2): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [E2], [K2]: _UserPromptSubmit sees the prompt if it asks; its answers are
// pairs right after the prompt; it cannot refuse the prompt.
#[test]
fn e2_user_prompt_submit_adds_context() {
    check(
        r"
        servers a
        allow *
        up a _UserPromptSubmit(prompt,attempt)
        prompt
        submit fix the build
        reply 1 the build broke at 10:02
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _UserPromptSubmit(prompt,attempt)
              server a up: 0 model tool(s), hooks [_UserPromptSubmit]
            [0ms] prompt
            [0ms] submit fix the build
              call #1 a._UserPromptSubmit by 2500ms with {"prompt":"fix the build"}
              round 1 _UserPromptSubmit: [a] by 2500ms
            [0ms] reply 1 the build broke at 10:02
              hook a._UserPromptSubmit round 1: injection "the build broke at 10:02" after 0ms
              decided (round 1): _UserPromptSubmit adds from [a]
              => prompt context with 1 pair(s)
                 sprout-1-0 a___UserPromptSubmit({}) -> {"hook":"_UserPromptSubmit","server":"a","text":"the build broke at 10:02"}
            [0ms] model end_turn
              decided: prompt ended, no_stop_hook
              => end: no_stop_hook
        "#]],
    );
}

// [E3]: the tool calls of one turn are asked about in one round, in
// parallel; a non-empty answer refuses that call with the envelope as its
// error result; empty, error and timeout let it run (fail-open). One gate
// per asked call, in order.
#[test]
fn e3_pre_tool_use_refuses_calls() {
    check(
        r#"
        servers gate todo
        allow *
        timeout 100
        up gate _PreToolUse(tool,server,arguments,output) sh
        up todo _PreToolUse add
        prompt
        model tool_use 3
        pretool gate.sh={"cmd":"git-push"} todo.add={"item":"x"} gate.sh={"cmd":"ls"}
        reply 1 no git push while the suite is red
        reply 2 error crashed inside
        reply 4 empty
        reply 5 blank
        reply 6 also no
        at 100
        "#,
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
              start todo
              starting todo, attempt 1
            [0ms] up gate _PreToolUse(tool,server,arguments,output) sh
              server gate up: 1 model tool(s), hooks [_PreToolUse]
            [0ms] up todo _PreToolUse add
              server todo up: 1 model tool(s), hooks [_PreToolUse]
            [0ms] prompt
            [0ms] model tool_use 3
              => run tools
            [0ms] pretool gate.sh={"cmd":"git-push"} todo.add={"item":"x"} gate.sh={"cmd":"ls"}
              call #1 gate._PreToolUse by 100ms with {"arguments":{"cmd":"git-push"},"server":"gate","tool":"sh"}
              call #2 gate._PreToolUse by 100ms with {"arguments":{"item":"x"},"server":"todo","tool":"add"}
              call #3 gate._PreToolUse by 100ms with {"arguments":{"cmd":"ls"},"server":"gate","tool":"sh"}
              call #4 todo._PreToolUse by 100ms
              call #5 todo._PreToolUse by 100ms
              call #6 todo._PreToolUse by 100ms
              round 1 _PreToolUse: [gate todo] by 100ms
            [0ms] reply 1 no git push while the suite is red
              hook gate._PreToolUse round 1: objection "no git push while the suite is red" after 0ms
            [0ms] reply 2 error crashed inside
              hook gate._PreToolUse round 1: error (error result) "crashed inside" after 0ms
            [0ms] reply 4 empty
              hook todo._PreToolUse round 1: empty after 0ms
            [0ms] reply 5 blank
              hook todo._PreToolUse round 1: empty after 0ms
            [0ms] reply 6 also no
              hook todo._PreToolUse round 1: objection "also no" after 0ms
            [100ms] at 100
              cancel #3
              hook gate._PreToolUse round 1: timeout after 100ms
              decided (round 1): 3 tool call(s) gated, refused [0 2]
              => gates for 3 call(s)
                 [0] refused, error result:
                   {"hook":"_PreToolUse","server":"gate","text":"no git push while the suite is red"}
                 [1] run
                 [2] refused, error result:
                   {"hook":"_PreToolUse","server":"todo","text":"also no"}
        "#]],
    );
}

// [E3], [E7]: with no server listing _PreToolUse, every call runs at once:
// no round, no event.
#[test]
fn e3_e7_no_pre_tool_hook_costs_nothing() {
    check(
        r"
        servers a
        allow *
        up a _Stop read
        prompt
        model tool_use 2
        pretool a.read a.read
        posttool a.read=ok a.read=!failed
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop read
              server a up: 1 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model tool_use 2
              => run tools
            [0ms] pretool a.read a.read
              => gates for 2 call(s)
                 [0] run
                 [1] run
            [0ms] posttool a.read=ok a.read=!failed
              => notes for 2 call(s)
                 [0] 0 after the output
                 [1] 0 after the output
        "#]],
    );
}

// [E4]: after tools ran, _PostToolUse answers become extra envelopes after
// each call's output; a hook that asks sees the output and is_error.
#[test]
fn e4_post_tool_use_appends_notes() {
    check(
        r"
        servers lint log
        allow *
        up lint _PostToolUse(tool,output,is_error) write
        up log _PostToolUse
        prompt
        model tool_use 2
        posttool lint.write=wrote lint.write=!disk-full
        reply 1 line 3 has a tab
        reply 2 empty
        reply 3 logged
        reply 4 logged
        ",
        expect![[r#"
            [0ms] session
              start lint
              starting lint, attempt 1
              start log
              starting log, attempt 1
            [0ms] up lint _PostToolUse(tool,output,is_error) write
              server lint up: 1 model tool(s), hooks [_PostToolUse]
            [0ms] up log _PostToolUse
              server log up: 0 model tool(s), hooks [_PostToolUse]
            [0ms] prompt
            [0ms] model tool_use 2
              => run tools
            [0ms] posttool lint.write=wrote lint.write=!disk-full
              call #1 lint._PostToolUse by 2500ms with {"is_error":false,"output":"wrote","tool":"write"}
              call #2 lint._PostToolUse by 2500ms with {"is_error":true,"output":"disk-full","tool":"write"}
              call #3 log._PostToolUse by 2500ms
              call #4 log._PostToolUse by 2500ms
              round 1 _PostToolUse: [lint log] by 2500ms
            [0ms] reply 1 line 3 has a tab
              hook lint._PostToolUse round 1: injection "line 3 has a tab" after 0ms
            [0ms] reply 2 empty
              hook lint._PostToolUse round 1: empty after 0ms
            [0ms] reply 3 logged
              hook log._PostToolUse round 1: injection "logged" after 0ms
            [0ms] reply 4 logged
              hook log._PostToolUse round 1: injection "logged" after 0ms
              decided (round 1): _PostToolUse adds from [lint log log]
              => notes for 2 call(s)
                 [0] 2 after the output
                   {"hook":"_PostToolUse","server":"lint","text":"line 3 has a tab"}
                   {"hook":"_PostToolUse","server":"log","text":"logged"}
                 [1] 1 after the output
                   {"hook":"_PostToolUse","server":"log","text":"logged"}
        "#]],
    );
}

// [E5], [K2]: _PreCompact answers are pins (pairs kept verbatim, given to the
// summariser); the next _PostCompact gets them as `pins`, and the summary.
#[test]
fn e5_pre_compact_pins_reach_post_compact() {
    check(
        r"
        servers todo
        allow *
        up todo _PreCompact(reason) _PostCompact(pins,summary,reason)
        prompt
        precompact
        reply 1 [ ] ship the fix
        compacted 9 we fixed two bugs
        reply 2 empty
        precompact
        reply 3 empty
        compacted 4
        reply 4 empty
        ",
        expect![[r#"
            [0ms] session
              start todo
              starting todo, attempt 1
            [0ms] up todo _PreCompact(reason) _PostCompact(pins,summary,reason)
              server todo up: 0 model tool(s), hooks [_PreCompact _PostCompact]
            [0ms] prompt
            [0ms] precompact
              call #1 todo._PreCompact by 2500ms with {"reason":"threshold"}
              round 1 _PreCompact: [todo] by 2500ms
            [0ms] reply 1 [ ] ship the fix
              hook todo._PreCompact round 1: injection "[ ] ship the fix" after 0ms
              decided (round 1): _PreCompact adds from [todo]
              => pin with 1 pair(s)
                 sprout-1-0 todo___PreCompact({}) -> {"hook":"_PreCompact","server":"todo","text":"[ ] ship the fix"}
            [0ms] compacted 9 we fixed two bugs
              call #2 todo._PostCompact by 2500ms with {"pins":[{"server":"todo","text":"[ ] ship the fix"}],"summary":"we fixed two bugs"}
              round 2 _PostCompact: [todo] by 2500ms
            [0ms] reply 2 empty
              hook todo._PostCompact round 2: empty after 0ms
              decided (round 2): reinject from []
              => reinject with 0 pair(s)
            [0ms] precompact
              call #3 todo._PreCompact by 2500ms with {"reason":"threshold"}
              round 3 _PreCompact: [todo] by 2500ms
            [0ms] reply 3 empty
              hook todo._PreCompact round 3: empty after 0ms
              decided (round 3): _PreCompact adds from []
              => pin with 0 pair(s)
            [0ms] compacted 4
              call #4 todo._PostCompact by 2500ms with {"pins":[]}
              round 4 _PostCompact: [todo] by 2500ms
            [0ms] reply 4 empty
              hook todo._PostCompact round 4: empty after 0ms
              decided (round 4): reinject from []
              => reinject with 0 pair(s)
        "#]],
    );
}

// [E6]: _SessionEnd is told once, when no prompt runs, with a deadline of at
// most 1 s whatever the hook timeout; its answers are ignored; nothing may
// follow.
#[test]
fn e6_session_end_is_short_and_ignored() {
    check(
        r"
        servers a b:500
        allow *
        timeout 5000
        up a _SessionEnd(reason)
        up b _SessionEnd
        prompt
        end exit
        abort cancelled
        end signal
        reply 1 bye
        at 500
        at 1000
        end exit
        prompt
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up a _SessionEnd(reason)
              server a up: 0 model tool(s), hooks [_SessionEnd]
            [0ms] up b _SessionEnd
              server b up: 0 model tool(s), hooks [_SessionEnd]
            [0ms] prompt
            [0ms] end exit
              usage error: a prompt is already running
            [0ms] abort cancelled
              decided: prompt ended, cancelled
              => end: cancelled
            [0ms] end signal
              call #1 a._SessionEnd by 1000ms with {"reason":"signal"}
              call #2 b._SessionEnd by 500ms
              round 1 _SessionEnd: [a b] by 1000ms
            [0ms] reply 1 bye
              hook a._SessionEnd round 1: ignored "bye" after 0ms
            [500ms] at 500
              cancel #2
              hook b._SessionEnd round 1: timeout after 500ms
              decided (round 1): session ended, signal
              => session end told
            [1000ms] at 1000
            [1000ms] end exit
              usage error: the session has ended
            [1000ms] prompt
              usage error: the session has ended
        "#]],
    );
}

// [E7]: a hook point that no allowlisted up server lists costs nothing: no
// round, no event, an answer at once; for _Stop the end says so [S5].
#[test]
fn e7_unlisted_hook_points_cost_nothing() {
    check(
        r"
        servers a b
        allow a
        up a read
        up b _SessionStart _UserPromptSubmit _PreCompact _PostCompact _SessionEnd _Stop
        prompt
        session_start s /
        submit hi
        precompact
        compacted 3 summary
        model end_turn
        end closed
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
            [0ms] up a read
              server a up: 1 model tool(s), hooks []
            [0ms] up b _SessionStart _UserPromptSubmit _PreCompact _PostCompact _SessionEnd _Stop
              server b up: 0 model tool(s), hooks [_SessionStart _UserPromptSubmit _PreCompact _PostCompact _SessionEnd _Stop]
            [0ms] prompt
            [0ms] session_start s /
              => session context with 0 pair(s)
            [0ms] submit hi
              => prompt context with 0 pair(s)
            [0ms] precompact
              => pin with 0 pair(s)
            [0ms] compacted 3 summary
              => reinject with 0 pair(s)
            [0ms] model end_turn
              decided: prompt ended, no_stop_hook
              => end: no_stop_hook
            [0ms] end closed
              => session end told
        "#]],
    );
}

// [K4]: a required property the agent cannot fill at that hook point is a
// start-up warning naming server, hook and property; the hook is still
// called, with what it can get.
#[test]
fn k4_unfillable_required_property_warns() {
    check(
        r"
        servers a
        allow *
        up a _Stop(attempt!,prompt!,ticket!)
        prompt
        model end_turn
        reply 1 empty
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop(attempt!,prompt!,ticket!)
              server a up: 0 model tool(s), hooks [_Stop]
              warning: _Stop of server a requires input property "prompt", which Sprout cannot fill at _Stop; it is called without it
              warning: _Stop of server a requires input property "ticket", which Sprout cannot fill at _Stop; it is called without it
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms with {"attempt":1}
              round 1 _Stop: [a] by 2500ms
            [0ms] reply 1 empty
              hook a._Stop round 1: empty after 0ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
}

// [K2]: `attempt` counts the _Stop rounds of this prompt from 1; budget_left
// is what the budget still allows before the round; last_assistant_message
// is the model's text.
#[test]
fn k2_stop_input_counts_attempts() {
    check(
        r"
        servers a
        allow *
        budget 2
        up a _Stop(attempt,budget_left,last_assistant_message)
        prompt
        model end_turn 0 all done
        reply 1 tests are red
        model tool_use 1
        model end_turn 0 fixed it
        reply 2 empty
        prompt
        model end_turn 0 again
        reply 3 no
        model tool_use 1
        model end_turn 0 now
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop(attempt,budget_left,last_assistant_message)
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn 0 all done
              call #1 a._Stop by 2500ms with {"attempt":1,"budget_left":2,"last_assistant_message":"all done"}
              round 1 _Stop: [a] by 2500ms
            [0ms] reply 1 tests are red
              hook a._Stop round 1: objection "tests are red" after 0ms
              decided (round 1): objection honoured from [a], budget 1/2
              => continue with 1 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"tests are red"}
            [0ms] model tool_use 1
              => run tools
            [0ms] model end_turn 0 fixed it
              call #2 a._Stop by 2500ms with {"attempt":2,"budget_left":1,"last_assistant_message":"fixed it"}
              round 2 _Stop: [a] by 2500ms
            [0ms] reply 2 empty
              hook a._Stop round 2: empty after 0ms
              decided (round 2): prompt ended, no_objection
              => end: no_objection
            [0ms] prompt
            [0ms] model end_turn 0 again
              call #3 a._Stop by 2500ms with {"attempt":1,"budget_left":1,"last_assistant_message":"again"}
              round 3 _Stop: [a] by 2500ms
            [0ms] reply 3 no
              hook a._Stop round 3: objection "no" after 0ms
              decided (round 3): objection honoured from [a], budget 2/2
              => continue with 1 pair(s)
                 sprout-3-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"no"}
            [0ms] model tool_use 1
              => run tools
            [0ms] model end_turn 0 now
              decided: prompt ended, budget_spent
              => end: budget_spent
        "#]],
    );
}

// [K3]: every string of a hook's input is capped at 16 KiB, cut as in [R4].
#[test]
fn k3_long_input_strings_are_cut() {
    check(
        r"
        servers a
        allow *
        up a _UserPromptSubmit(prompt)
        prompt
        submit big              # 20000 bytes
        reply 1 empty
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _UserPromptSubmit(prompt)
              server a up: 0 model tool(s), hooks [_UserPromptSubmit]
            [0ms] prompt
            [0ms] submit big
              call #1 a._UserPromptSubmit by 2500ms with {"prompt":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy…(16455 bytes)…\n[sprout: hook input cut here, 3616 more bytes not shown]"}
              round 1 _UserPromptSubmit: [a] by 2500ms
            [0ms] reply 1 empty
              hook a._UserPromptSubmit round 1: empty after 0ms
              decided (round 1): _UserPromptSubmit adds from []
              => prompt context with 0 pair(s)
        "#]],
    );
}

// [G1]: with scope `prompt` the budget is refilled at every prompt.
#[test]
fn g1_prompt_scope_refills_the_budget() {
    check(
        r"
        servers a
        allow *
        budget 1
        scope prompt
        up a _Stop(budget_left)
        prompt
        model end_turn
        reply 1 no
        model tool_use 1
        model end_turn          # spent in this prompt
        prompt
        model end_turn          # refilled
        reply 2 no again
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop(budget_left)
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms with {"budget_left":1}
              round 1 _Stop: [a] by 2500ms
            [0ms] reply 1 no
              hook a._Stop round 1: objection "no" after 0ms
              decided (round 1): objection honoured from [a], budget 1/1
              => continue with 1 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"no"}
            [0ms] model tool_use 1
              => run tools
            [0ms] model end_turn
              decided: prompt ended, budget_spent
              => end: budget_spent
            [0ms] prompt
            [0ms] model end_turn
              call #2 a._Stop by 2500ms with {"budget_left":1}
              round 2 _Stop: [a] by 2500ms
            [0ms] reply 2 no again
              hook a._Stop round 2: objection "no again" after 0ms
              decided (round 2): objection honoured from [a], budget 1/1
              => continue with 1 pair(s)
                 sprout-2-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"no again"}
        "#]],
    );
}

// [G2]: with the decline rule `off`, a model that ends again right after an
// objection is asked about again, until the budget is spent.
#[test]
fn g2_decline_rule_off_asks_again() {
    check(
        r"
        servers a
        allow *
        budget 2
        decline off
        up a _Stop
        prompt
        model end_turn
        reply 1 no
        model end_turn          # no tool call in between: asked again
        reply 2 still no
        model end_turn          # spent
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _Stop
              server a up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 a._Stop by 2500ms
              round 1 _Stop: [a] by 2500ms
            [0ms] reply 1 no
              hook a._Stop round 1: objection "no" after 0ms
              decided (round 1): objection honoured from [a], budget 1/2
              => continue with 1 pair(s)
                 sprout-1-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"no"}
            [0ms] model end_turn
              call #2 a._Stop by 2500ms
              round 2 _Stop: [a] by 2500ms
            [0ms] reply 2 still no
              hook a._Stop round 2: objection "still no" after 0ms
              decided (round 2): objection honoured from [a], budget 2/2
              => continue with 1 pair(s)
                 sprout-2-0 a___Stop({}) -> {"hook":"_Stop","server":"a","text":"still no"}
            [0ms] model end_turn
              decided: prompt ended, budget_spent
              => end: budget_spent
        "#]],
    );
}

// [C4], [T1]: a server's own hook timeout overrides the session's, per call:
// a round lasts until its latest deadline, each call times out at its own.
#[test]
fn c4_per_server_hook_timeout() {
    check(
        r"
        servers todo gate:120000
        allow *
        up todo _Stop
        up gate _Stop
        prompt
        model end_turn
        at 2500
        at 60000
        reply 2 suite is red
        ",
        expect![[r#"
            [0ms] session
              start todo
              starting todo, attempt 1
              start gate
              starting gate, attempt 1
            [0ms] up todo _Stop
              server todo up: 0 model tool(s), hooks [_Stop]
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 todo._Stop by 2500ms
              call #2 gate._Stop by 120000ms
              round 1 _Stop: [todo gate] by 120000ms
            [2500ms] at 2500
              cancel #1
              hook todo._Stop round 1: timeout after 2500ms
            [60000ms] at 60000
            [60000ms] reply 2 suite is red
              hook gate._Stop round 1: objection "suite is red" after 60000ms
              decided (round 1): objection honoured from [gate], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-1 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"suite is red"}
        "#]],
    );
}

// [R5]: one round injects at most 64 KiB, servers in configuration order:
// the first answer past the cap is cut with a marker, later ones dropped,
// each with a warning.
#[test]
fn r5_round_injection_cap() {
    check(
        r"
        servers a b c d e f
        allow *
        up a _PostCompact
        up b _PostCompact
        up c _PostCompact
        up d _PostCompact
        up e _PostCompact
        up f _PostCompact
        prompt
        compacted 5
        reply 1 big
        reply 2 big
        reply 3 big
        reply 4 big
        reply 5 big
        reply 6 small
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
              start b
              starting b, attempt 1
              start c
              starting c, attempt 1
              start d
              starting d, attempt 1
              start e
              starting e, attempt 1
              start f
              starting f, attempt 1
            [0ms] up a _PostCompact
              server a up: 0 model tool(s), hooks [_PostCompact]
            [0ms] up b _PostCompact
              server b up: 0 model tool(s), hooks [_PostCompact]
            [0ms] up c _PostCompact
              server c up: 0 model tool(s), hooks [_PostCompact]
            [0ms] up d _PostCompact
              server d up: 0 model tool(s), hooks [_PostCompact]
            [0ms] up e _PostCompact
              server e up: 0 model tool(s), hooks [_PostCompact]
            [0ms] up f _PostCompact
              server f up: 0 model tool(s), hooks [_PostCompact]
            [0ms] prompt
            [0ms] compacted 5
              call #1 a._PostCompact by 2500ms
              call #2 b._PostCompact by 2500ms
              call #3 c._PostCompact by 2500ms
              call #4 d._PostCompact by 2500ms
              call #5 e._PostCompact by 2500ms
              call #6 f._PostCompact by 2500ms
              round 1 _PostCompact: [a b c d e f] by 2500ms
            [0ms] reply 1 big
              hook a._PostCompact round 1: injection "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…(16442 bytes)…xx\n[sprout: hook answer cut here, 3616 more bytes not shown]" after 0ms
            [0ms] reply 2 big
              hook b._PostCompact round 1: injection "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…(16442 bytes)…xx\n[sprout: hook answer cut here, 3616 more bytes not shown]" after 0ms
            [0ms] reply 3 big
              hook c._PostCompact round 1: injection "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…(16442 bytes)…xx\n[sprout: hook answer cut here, 3616 more bytes not shown]" after 0ms
            [0ms] reply 4 big
              hook d._PostCompact round 1: injection "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…(16442 bytes)…xx\n[sprout: hook answer cut here, 3616 more bytes not shown]" after 0ms
            [0ms] reply 5 big
              hook e._PostCompact round 1: injection "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…(16442 bytes)…xx\n[sprout: hook answer cut here, 3616 more bytes not shown]" after 0ms
            [0ms] reply 6 small
              hook f._PostCompact round 1: injection "small" after 0ms
              warning: the answer of server e to _PostCompact (round 1) was dropped: the round's answers passed the 64 KiB cap
              warning: the answer of server f to _PostCompact (round 1) was dropped: the round's answers passed the 64 KiB cap
              decided (round 1): reinject from [a b c d]
              => reinject with 4 pair(s)
                 sprout-1-0 a___PostCompact({}) -> {"hook":"_PostCompact","server":"a","text":"xxxxxxxxxxxxxxxx…(16489 bytes)…n[sprout: hook answer cut here, 3616 more bytes not shown]"}
                 sprout-1-1 b___PostCompact({}) -> {"hook":"_PostCompact","server":"b","text":"xxxxxxxxxxxxxxxx…(16489 bytes)…n[sprout: hook answer cut here, 3616 more bytes not shown]"}
                 sprout-1-2 c___PostCompact({}) -> {"hook":"_PostCompact","server":"c","text":"xxxxxxxxxxxxxxxx…(16489 bytes)…n[sprout: hook answer cut here, 3616 more bytes not shown]"}
                 sprout-1-3 d___PostCompact({}) -> {"hook":"_PostCompact","server":"d","text":"xxxxxxxxxxxxxxxx…(16314 bytes)…\n[sprout: hook answer cut here, 232 more bytes not shown]"}
        "#]],
    );
}

// [T3] with [E3]: a server's parallel calls of one round share a deadline,
// so timing out together counts once; the next round's timeout kills it,
// ending all its calls. [T5]: cancelling during a _PreToolUse round cancels
// every call at once.
#[test]
fn t3_t5_parallel_calls_of_one_server() {
    check(
        r"
        servers a
        allow *
        timeout 100
        up a _PreToolUse x
        prompt
        model tool_use 2
        pretool a.x a.x
        at 100                  # both time out: one timeout counted
        pretool a.x a.x
        at 200                  # the second in a row: killed, both calls end
        abort failed
        at 500
        prompt
        want a
        up a _PreToolUse x
        model tool_use 2
        pretool a.x a.x
        abort cancelled
        ",
        expect![[r#"
            [0ms] session
              start a
              starting a, attempt 1
            [0ms] up a _PreToolUse x
              server a up: 1 model tool(s), hooks [_PreToolUse]
            [0ms] prompt
            [0ms] model tool_use 2
              => run tools
            [0ms] pretool a.x a.x
              call #1 a._PreToolUse by 100ms
              call #2 a._PreToolUse by 100ms
              round 1 _PreToolUse: [a] by 100ms
            [100ms] at 100
              cancel #1
              hook a._PreToolUse round 1: timeout after 100ms
              cancel #2
              hook a._PreToolUse round 1: timeout after 100ms
              decided (round 1): 2 tool call(s) gated, refused []
              => gates for 2 call(s)
                 [0] run
                 [1] run
            [100ms] pretool a.x a.x
              call #3 a._PreToolUse by 200ms
              call #4 a._PreToolUse by 200ms
              round 2 _PreToolUse: [a] by 200ms
            [200ms] at 200
              kill a
              hook a._PreToolUse round 2: killed after 100ms
              hook a._PreToolUse round 2: killed after 100ms
              server a down: killed, failures 1, retry from 450ms
              decided (round 2): 2 tool call(s) gated, refused []
              => gates for 2 call(s)
                 [0] run
                 [1] run
            [200ms] abort failed
              decided: prompt ended, error
              => end: error
            [500ms] at 500
            [500ms] prompt
            [500ms] want a
              start a
              starting a, attempt 2
            [500ms] up a _PreToolUse x
              server a up: 1 model tool(s), hooks [_PreToolUse]
            [500ms] model tool_use 2
              => run tools
            [500ms] pretool a.x a.x
              call #5 a._PreToolUse by 600ms
              call #6 a._PreToolUse by 600ms
              round 3 _PreToolUse: [a] by 600ms
            [500ms] abort cancelled
              cancel #5
              cancel #6
              hook a._PreToolUse round 3: cancelled after 0ms
              hook a._PreToolUse round 3: cancelled after 0ms
              decided (round 3): prompt ended, cancelled
              => end: cancelled
        "#]],
    );
}

// [F1]: a required gate's `_Stop` call that times out is an objection the
// agent writes, naming the server and the cause; it spends budget like any
// other [S3]. The consecutive rule still lets the model go [S2].
#[test]
fn f1_required_stop_timeout_objects() {
    check(
        r"
        servers gate! todo
        wide
        allow *
        timeout 5000
        up gate _Stop
        up todo _Stop
        prompt
        model end_turn 0 Done.
        reply 2 empty
        at 5000
        model end_turn 0 Done again.
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
              start todo
              starting todo, attempt 1
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
            [0ms] up todo _Stop
              server todo up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn 0 Done.
              call #1 gate._Stop by 5000ms
              call #2 todo._Stop by 5000ms
              round 1 _Stop: [gate todo] by 5000ms
            [0ms] reply 2 empty
              hook todo._Stop round 1: empty after 0ms
            [5000ms] at 5000
              cancel #1
              hook gate._Stop round 1: timeout after 5000ms
              decided (round 1): objection honoured from [gate], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: it timed out after 5000 ms; the agent treats that as an objection]"}
            [5000ms] model end_turn 0 Done again.
              decided: prompt ended, declined
              => end: declined
        "#]],
    );
}

// [F1]: each failed call of a required gate at `_Stop` objects, in its own
// words: an error result, a JSON-RPC error, a transport failure, an exit
// during the call (the server goes down [F2]), and a second timeout in a
// row, which kills it [T3].
#[test]
fn f1_every_failed_stop_call_objects() {
    check(
        r"
        servers gate!
        wide
        allow *
        budget 10
        timeout 100
        up gate _Stop
        prompt
        model end_turn
        reply 1 error no tests were run
        model end_turn 1
        model end_turn
        reply 2 rpc tool not found
        model end_turn 1
        model end_turn
        reply 3 transport
        model end_turn 1
        model end_turn
        at 100                # first timeout
        model end_turn 1
        model end_turn
        at 200                # second in a row: killed
        model end_turn 1
        at 450
        want gate
        up gate _Stop
        model end_turn
        reply 6 crash
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 gate._Stop by 100ms
              round 1 _Stop: [gate] by 100ms
            [0ms] reply 1 error no tests were run
              hook gate._Stop round 1: error (error result) "no tests were run" after 0ms
              decided (round 1): objection honoured from [gate], budget 1/10
              => continue with 1 pair(s)
                 sprout-1-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: it returned an error result: \"no tests were run\"; the agent treats that as an objection]"}
            [0ms] model end_turn 1
              => run tools
            [0ms] model end_turn
              call #2 gate._Stop by 100ms
              round 2 _Stop: [gate] by 100ms
            [0ms] reply 2 rpc tool not found
              hook gate._Stop round 2: error (JSON-RPC error) "-32603: tool not found" after 0ms
              decided (round 2): objection honoured from [gate], budget 2/10
              => continue with 1 pair(s)
                 sprout-2-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: it answered with a JSON-RPC error: \"-32603: tool not found\"; the agent treats that as an objection]"}
            [0ms] model end_turn 1
              => run tools
            [0ms] model end_turn
              call #3 gate._Stop by 100ms
              round 3 _Stop: [gate] by 100ms
            [0ms] reply 3 transport
              hook gate._Stop round 3: error (transport failure) "broken pipe" after 0ms
              decided (round 3): objection honoured from [gate], budget 3/10
              => continue with 1 pair(s)
                 sprout-3-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: its connection failed: \"broken pipe\"; the agent treats that as an objection]"}
            [0ms] model end_turn 1
              => run tools
            [0ms] model end_turn
              call #4 gate._Stop by 100ms
              round 4 _Stop: [gate] by 100ms
            [100ms] at 100
              cancel #4
              hook gate._Stop round 4: timeout after 100ms
              decided (round 4): objection honoured from [gate], budget 4/10
              => continue with 1 pair(s)
                 sprout-4-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: it timed out after 100 ms; the agent treats that as an objection]"}
            [100ms] model end_turn 1
              => run tools
            [100ms] model end_turn
              call #5 gate._Stop by 200ms
              round 5 _Stop: [gate] by 200ms
            [200ms] at 200
              kill gate
              hook gate._Stop round 5: killed after 100ms
              server gate down: killed, failures 1, retry from 450ms
              guard gate down: killed, restarted on next use
              decided (round 5): objection honoured from [gate], budget 5/10
              => continue with 1 pair(s)
                 sprout-5-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: it timed out after 100 ms, its second timeout in a row, and was killed; the agent treats that as an objection]"}
            [200ms] model end_turn 1
              => run tools
            [450ms] at 450
            [450ms] want gate
              start gate
              starting gate, attempt 2
            [450ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
              guard gate up
            [450ms] model end_turn
              call #6 gate._Stop by 550ms
              round 6 _Stop: [gate] by 550ms
            [450ms] reply 6 crash
              hook gate._Stop round 6: crashed after 0ms
              server gate down: crashed (during a hook call), failures 2, retry from 950ms
              guard gate down: crashed (during a hook call), restarted on next use
              decided (round 6): objection honoured from [gate], budget 6/10
              => continue with 1 pair(s)
                 sprout-6-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: it exited during the call; the agent treats that as an objection]"}
        "#]],
    );
}

// [F1], [T4]: a required gate that is down, restarting or retired cannot be
// called: it still objects at every `_Stop` (it listed `_Stop` when last
// up), in a round of its own with no call when nobody else is asked.
#[test]
fn f1_down_and_retired_gates_object_at_stop() {
    check(
        r"
        servers gate!
        wide
        allow *
        budget 10
        up gate _Stop
        exit gate exit status 1
        prompt
        model end_turn        # down, backoff not over
        model end_turn 1
        at 250
        model end_turn        # due: restarting beside the round
        fail gate spawn: no such file
        model end_turn 1
        at 750
        want gate
        fail gate spawn: no such file    # failures 3: retired
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
            [0ms] exit gate exit status 1
              server gate down: crashed (exit status 1), failures 1, retry from 250ms
              guard gate down: crashed (exit status 1), restarted on next use
            [0ms] prompt
            [0ms] model end_turn
              round 1 _Stop: [] by 0ms, left out [gate]
              decided (round 1): objection honoured from [gate], budget 1/10
              => continue with 1 pair(s)
                 sprout-1-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate could not be called for _Stop: it exited (exit status 1) and will be restarted after its backoff; the agent treats that as an objection]"}
            [0ms] model end_turn 1
              => run tools
            [250ms] at 250
            [250ms] model end_turn
              start gate
              starting gate, attempt 2
              round 2 _Stop: [] by 250ms, left out [gate]
              decided (round 2): objection honoured from [gate], budget 2/10
              => continue with 1 pair(s)
                 sprout-2-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate could not be called for _Stop: it exited (exit status 1) and is restarting; the agent treats that as an objection]"}
            [250ms] fail gate spawn: no such file
              server gate down: start failed (spawn: no such file), failures 2, retry from 750ms
              guard gate down: start failed (spawn: no such file), restarted on next use
            [250ms] model end_turn 1
              => run tools
            [750ms] at 750
            [750ms] want gate
              start gate
              starting gate, attempt 3
            [750ms] fail gate spawn: no such file
              server gate down: start failed (spawn: no such file), failures 3, retired for the session
              guard gate down: start failed (spawn: no such file), off for the session
            [750ms] model end_turn
              round 3 _Stop: [] by 750ms, left out [gate]
              decided (round 3): objection honoured from [gate], budget 3/10
              => continue with 1 pair(s)
                 sprout-3-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate could not be called for _Stop: it failed to start (spawn: no such file) and, after 3 failures, is off for the rest of the session; the agent treats that as an objection]"}
        "#]],
    );
}

// [F1]: a required gate that never came up never listed anything: it fails
// at `_Stop` and `_PreToolUse`, the points that gate, and at no other.
#[test]
fn f1_a_gate_that_never_came_up_fails_at_stop_and_pre_tool_use() {
    check(
        r"
        servers gate! todo
        wide
        allow *
        fail gate spawn: no such file
        up todo _Stop _PostCompact _UserPromptSubmit read
        prompt
        submit hello
        reply 1 empty
        pretool todo.read
        compacted 3
        reply 2 empty
        model end_turn
        reply 3 empty
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
              start todo
              starting todo, attempt 1
            [0ms] fail gate spawn: no such file
              server gate down: start failed (spawn: no such file), failures 1, retry from 250ms
              guard gate down: start failed (spawn: no such file), restarted on next use
            [0ms] up todo _Stop _PostCompact _UserPromptSubmit read
              server todo up: 1 model tool(s), hooks [_Stop _PostCompact _UserPromptSubmit]
            [0ms] prompt
            [0ms] submit hello
              call #1 todo._UserPromptSubmit by 2500ms
              round 1 _UserPromptSubmit: [todo] by 2500ms, left out [gate]
            [0ms] reply 1 empty
              hook todo._UserPromptSubmit round 1: empty after 0ms
              decided (round 1): _UserPromptSubmit adds from []
              => prompt context with 0 pair(s)
            [0ms] pretool todo.read
              round 2 _PreToolUse: [] by 0ms, left out [gate]
              decided (round 2): 1 tool call(s) gated, refused [0]
              => gates for 1 call(s)
                 [0] refused, error result:
                   {"hook":"_PreToolUse","server":"gate","text":"[sprout: required hook server gate could not be called for _PreToolUse: it failed to start (spawn: no such file) and will be restarted after its backoff; the agent refuses this tool call]"}
            [0ms] compacted 3
              call #2 todo._PostCompact by 2500ms
              round 3 _PostCompact: [todo] by 2500ms, left out [gate]
            [0ms] reply 2 empty
              hook todo._PostCompact round 3: empty after 0ms
              decided (round 3): reinject from []
              => reinject with 0 pair(s)
            [0ms] model end_turn
              call #3 todo._Stop by 2500ms
              round 4 _Stop: [todo] by 2500ms, left out [gate]
            [0ms] reply 3 empty
              hook todo._Stop round 4: empty after 0ms
              decided (round 4): objection honoured from [gate], budget 1/3
              => continue with 1 pair(s)
                 sprout-4-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate could not be called for _Stop: it failed to start (spawn: no such file) and will be restarted after its backoff; the agent treats that as an objection]"}
        "#]],
    );
}

// [F1]: at `_PreToolUse` a required gate's failed call refuses that call
// alone; a call it answered empty runs. A timeout refuses every call of the
// round it hangs on.
#[test]
fn f1_pre_tool_use_failure_refuses_the_call() {
    check(
        r"
        servers gate! other
        wide
        allow *
        timeout 300
        up gate _PreToolUse
        up other read write
        prompt
        pretool other.read other.write
        reply 1 empty
        reply 2 rpc no such tool
        pretool other.read other.write
        at 300
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
              start other
              starting other, attempt 1
            [0ms] up gate _PreToolUse
              server gate up: 0 model tool(s), hooks [_PreToolUse]
            [0ms] up other read write
              server other up: 2 model tool(s), hooks []
            [0ms] prompt
            [0ms] pretool other.read other.write
              call #1 gate._PreToolUse by 300ms
              call #2 gate._PreToolUse by 300ms
              round 1 _PreToolUse: [gate] by 300ms
            [0ms] reply 1 empty
              hook gate._PreToolUse round 1: empty after 0ms
            [0ms] reply 2 rpc no such tool
              hook gate._PreToolUse round 1: error (JSON-RPC error) "-32603: no such tool" after 0ms
              decided (round 1): 2 tool call(s) gated, refused [1]
              => gates for 2 call(s)
                 [0] run
                 [1] refused, error result:
                   {"hook":"_PreToolUse","server":"gate","text":"[sprout: required hook server gate did not answer _PreToolUse: it answered with a JSON-RPC error: \"-32603: no such tool\"; the agent refuses this tool call]"}
            [0ms] pretool other.read other.write
              call #3 gate._PreToolUse by 300ms
              call #4 gate._PreToolUse by 300ms
              round 2 _PreToolUse: [gate] by 300ms
            [300ms] at 300
              cancel #3
              hook gate._PreToolUse round 2: timeout after 300ms
              cancel #4
              hook gate._PreToolUse round 2: timeout after 300ms
              decided (round 2): 2 tool call(s) gated, refused [0 1]
              => gates for 2 call(s)
                 [0] refused, error result:
                   {"hook":"_PreToolUse","server":"gate","text":"[sprout: required hook server gate did not answer _PreToolUse: it timed out after 300 ms; the agent refuses this tool call]"}
                 [1] refused, error result:
                   {"hook":"_PreToolUse","server":"gate","text":"[sprout: required hook server gate did not answer _PreToolUse: it timed out after 300 ms; the agent refuses this tool call]"}
        "#]],
    );
}

// [F1]: at the injection points a required gate's failure is text the
// agent adds in its place: `_UserPromptSubmit` (timeout), `_SessionStart`
// (error), `_PostToolUse` (a note after the output), `_PreCompact` (a pin)
// and `_PostCompact` (down: it exited).
#[test]
fn f1_injection_points_say_the_gate_failed() {
    check(
        r"
        servers gate!
        wide
        allow *
        timeout 200
        up gate _SessionStart _UserPromptSubmit _PostToolUse _PreCompact _PostCompact
        prompt
        session_start s-1 /work
        reply 1 error not ready
        submit hello
        at 200
        posttool gate.read=ok
        reply 3 crash
        precompact
        compacted 4 the summary
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
            [0ms] up gate _SessionStart _UserPromptSubmit _PostToolUse _PreCompact _PostCompact
              server gate up: 0 model tool(s), hooks [_SessionStart _UserPromptSubmit _PostToolUse _PreCompact _PostCompact]
            [0ms] prompt
            [0ms] session_start s-1 /work
              call #1 gate._SessionStart by 200ms
              round 1 _SessionStart: [gate] by 200ms
            [0ms] reply 1 error not ready
              hook gate._SessionStart round 1: error (error result) "not ready" after 0ms
              decided (round 1): _SessionStart adds from [gate]
              => session context with 1 pair(s)
                 sprout-1-0 gate___SessionStart({}) -> {"hook":"_SessionStart","server":"gate","text":"[sprout: required hook server gate did not answer _SessionStart: it returned an error result: \"not ready\"; this note stands in for its answer]"}
            [0ms] submit hello
              call #2 gate._UserPromptSubmit by 200ms
              round 2 _UserPromptSubmit: [gate] by 200ms
            [200ms] at 200
              cancel #2
              hook gate._UserPromptSubmit round 2: timeout after 200ms
              decided (round 2): _UserPromptSubmit adds from [gate]
              => prompt context with 1 pair(s)
                 sprout-2-0 gate___UserPromptSubmit({}) -> {"hook":"_UserPromptSubmit","server":"gate","text":"[sprout: required hook server gate did not answer _UserPromptSubmit: it timed out after 200 ms; this note stands in for its answer]"}
            [200ms] posttool gate.read=ok
              call #3 gate._PostToolUse by 400ms
              round 3 _PostToolUse: [gate] by 400ms
            [200ms] reply 3 crash
              hook gate._PostToolUse round 3: crashed after 0ms
              server gate down: crashed (during a hook call), failures 1, retry from 450ms
              guard gate down: crashed (during a hook call), restarted on next use
              decided (round 3): _PostToolUse adds from [gate]
              => notes for 1 call(s)
                 [0] 1 after the output
                   {"hook":"_PostToolUse","server":"gate","text":"[sprout: required hook server gate did not answer _PostToolUse: it exited during the call; this note stands in for its answer]"}
            [200ms] precompact
              round 4 _PreCompact: [] by 200ms, left out [gate]
              decided (round 4): _PreCompact adds from [gate]
              => pin with 1 pair(s)
                 sprout-4-0 gate___PreCompact({}) -> {"hook":"_PreCompact","server":"gate","text":"[sprout: required hook server gate could not be called for _PreCompact: it exited (during a hook call) and will be restarted after its backoff; this note stands in for its answer]"}
            [200ms] compacted 4 the summary
              round 5 _PostCompact: [] by 200ms, left out [gate]
              decided (round 5): reinject from [gate]
              => reinject with 1 pair(s)
                 sprout-5-0 gate___PostCompact({}) -> {"hook":"_PostCompact","server":"gate","text":"[sprout: required hook server gate could not be called for _PostCompact: it exited (during a hook call) and will be restarted after its backoff; this note stands in for its answer]"}
        "#]],
    );
}

// [F1]: at `_SessionEnd` a required gate's failure is nothing: the answers
// are ignored there [E6], and a down gate gets no round.
#[test]
fn f1_session_end_failure_is_nothing() {
    check(
        r"
        servers gate! late!
        allow *
        up gate _SessionEnd
        up late _SessionEnd
        exit late gone
        end exit
        at 1000
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
              start late
              starting late, attempt 1
            [0ms] up gate _SessionEnd
              server gate up: 0 model tool(s), hooks [_SessionEnd]
            [0ms] up late _SessionEnd
              server late up: 0 model tool(s), hooks [_SessionEnd]
            [0ms] exit late gone
              server late down: crashed (gone), failures 1, retry from 250ms
              guard late down: crashed (gone), restarted on next use
            [0ms] end exit
              call #1 gate._SessionEnd by 1000ms
              round 1 _SessionEnd: [gate] by 1000ms, left out [late]
            [1000ms] at 1000
              cancel #1
              hook gate._SessionEnd round 1: timeout after 1000ms
              decided (round 1): session ended, exit
              => session end told
        "#]],
    );
}

// [F1]: an empty answer of a required gate is still nothing [R2]: required
// means "must answer", not "must object".
#[test]
fn f1_empty_answers_of_a_gate_are_nothing() {
    check(
        r"
        servers gate!
        allow *
        up gate _Stop _PreToolUse _PostCompact read
        prompt
        model end_turn
        reply 1 empty
        prompt
        model end_turn
        reply 2 blank
        prompt
        pretool gate.read
        reply 3 image
        compacted 2
        reply 4 empty
        model end_turn
        reply 5 objection: tests fail
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
            [0ms] up gate _Stop _PreToolUse _PostCompact read
              server gate up: 1 model tool(s), hooks [_Stop _PreToolUse _PostCompact]
            [0ms] prompt
            [0ms] model end_turn
              call #1 gate._Stop by 2500ms
              round 1 _Stop: [gate] by 2500ms
            [0ms] reply 1 empty
              hook gate._Stop round 1: empty after 0ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
            [0ms] prompt
            [0ms] model end_turn
              call #2 gate._Stop by 2500ms
              round 2 _Stop: [gate] by 2500ms
            [0ms] reply 2 blank
              hook gate._Stop round 2: empty after 0ms
              decided (round 2): prompt ended, no_objection
              => end: no_objection
            [0ms] prompt
            [0ms] pretool gate.read
              call #3 gate._PreToolUse by 2500ms
              round 3 _PreToolUse: [gate] by 2500ms
            [0ms] reply 3 image
              hook gate._PreToolUse round 3: empty after 0ms
              decided (round 3): 1 tool call(s) gated, refused []
              => gates for 1 call(s)
                 [0] run
            [0ms] compacted 2
              call #4 gate._PostCompact by 2500ms
              round 4 _PostCompact: [gate] by 2500ms
            [0ms] reply 4 empty
              hook gate._PostCompact round 4: empty after 0ms
              decided (round 4): reinject from []
              => reinject with 0 pair(s)
            [0ms] model end_turn
              call #5 gate._Stop by 2500ms
              round 5 _Stop: [gate] by 2500ms
            [0ms] reply 5 objection: tests fail
              hook gate._Stop round 5: objection "objection: tests fail" after 0ms
              decided (round 5): objection honoured from [gate], budget 1/3
              => continue with 1 pair(s)
                 sprout-5-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"objection: tests fail"}
        "#]],
    );
}

// [F3]: `required` on a server the allowlist does not let hook is a warning
// at start-up naming it, and has no effect: no guard events, its hooks are
// not called. With hooks off [A1] it is the same.
#[test]
fn f3_required_without_the_allowlist_warns_and_does_nothing() {
    check(
        r"
        servers gate! todo
        allow todo
        up gate _Stop
        up todo _Stop
        exit gate gone
        prompt
        model end_turn
        reply 1 empty
        ",
        expect![[r#"
            [0ms] session
              warning: server gate is marked "required", but MCP_HOOK_SERVERS does not let it hook, so "required" has no effect (add it to MCP_HOOK_SERVERS, or drop "required")
              start gate
              starting gate, attempt 1
              start todo
              starting todo, attempt 1
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
            [0ms] up todo _Stop
              server todo up: 0 model tool(s), hooks [_Stop]
            [0ms] exit gate gone
              server gate down: crashed (gone), failures 1, retry from 250ms
            [0ms] prompt
            [0ms] model end_turn
              call #1 todo._Stop by 2500ms
              round 1 _Stop: [todo] by 2500ms
            [0ms] reply 1 empty
              hook todo._Stop round 1: empty after 0ms
              decided (round 1): prompt ended, no_objection
              => end: no_objection
        "#]],
    );
    check(
        r"
        servers gate!
        up gate _Stop
        prompt
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              warning: server gate is marked "required", but MCP_HOOK_SERVERS does not let it hook, so "required" has no effect (add it to MCP_HOOK_SERVERS, or drop "required")
              start gate
              starting gate, attempt 1
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              decided: prompt ended, hooks_off
              => end: hooks_off
        "#]],
    );
}

// [F2]: a required gate going down is told at once, right after the
// server's own event (killed, crashed, failed start, retired), and its
// return once; a plain server gets no guard events. A gate retired before a
// resume is told so at start-up.
#[test]
fn f2_guard_down_and_up_events() {
    check(
        r"
        servers gate! plain
        wide
        allow *
        timeout 100
        up gate _Stop
        up plain _Stop
        exit plain gone
        exit gate exit status 1
        at 250
        want gate
        fail gate spawn refused
        at 750
        want gate
        up gate _Stop
        want plain
        up plain _Stop
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
              start plain
              starting plain, attempt 1
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
            [0ms] up plain _Stop
              server plain up: 0 model tool(s), hooks [_Stop]
            [0ms] exit plain gone
              server plain down: crashed (gone), failures 1, retry from 250ms
            [0ms] exit gate exit status 1
              server gate down: crashed (exit status 1), failures 1, retry from 250ms
              guard gate down: crashed (exit status 1), restarted on next use
            [250ms] at 250
            [250ms] want gate
              start gate
              starting gate, attempt 2
            [250ms] fail gate spawn refused
              server gate down: start failed (spawn refused), failures 2, retry from 750ms
              guard gate down: start failed (spawn refused), restarted on next use
            [750ms] at 750
            [750ms] want gate
              start gate
              starting gate, attempt 3
            [750ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
              guard gate up
            [750ms] want plain
              start plain
              starting plain, attempt 2
            [750ms] up plain _Stop
              server plain up: 0 model tool(s), hooks [_Stop]
        "#]],
    );
    check(
        r"
        servers gate! plain
        allow *
        wide
        carry 0 0 gate=3 plain=3
        prompt
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              server gate down: at its limit before the resume, failures 3, retired for the session
              guard gate down: at its limit before the resume, off for the session
              server plain down: at its limit before the resume, failures 3, retired for the session
            [0ms] prompt
            [0ms] model end_turn
              round 1 _Stop: [] by 0ms, left out [gate]
              decided (round 1): objection honoured from [gate], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate could not be called for _Stop: it failed 3 times before the session was resumed and is off for the rest of the session; the agent treats that as an objection]"}
        "#]],
    );
}

// [F4], [S6]: a required gate that never answers cannot trap the agent:
// it objects until the budget is spent, then the prompt ends; the next
// prompt of the session finds the budget spent.
#[test]
fn f4_budget_ends_the_prompt_past_a_gate_that_never_answers() {
    check(
        r"
        servers gate!
        wide
        allow *
        budget 3
        decline off
        timeout 100
        up gate _Stop
        prompt
        model end_turn
        at 100
        model end_turn
        at 200                # killed
        model end_turn        # down: objects without a call
        model end_turn        # budget spent
        prompt
        model end_turn
        ",
        expect![[r#"
            [0ms] session
              start gate
              starting gate, attempt 1
            [0ms] up gate _Stop
              server gate up: 0 model tool(s), hooks [_Stop]
            [0ms] prompt
            [0ms] model end_turn
              call #1 gate._Stop by 100ms
              round 1 _Stop: [gate] by 100ms
            [100ms] at 100
              cancel #1
              hook gate._Stop round 1: timeout after 100ms
              decided (round 1): objection honoured from [gate], budget 1/3
              => continue with 1 pair(s)
                 sprout-1-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: it timed out after 100 ms; the agent treats that as an objection]"}
            [100ms] model end_turn
              call #2 gate._Stop by 200ms
              round 2 _Stop: [gate] by 200ms
            [200ms] at 200
              kill gate
              hook gate._Stop round 2: killed after 100ms
              server gate down: killed, failures 1, retry from 450ms
              guard gate down: killed, restarted on next use
              decided (round 2): objection honoured from [gate], budget 2/3
              => continue with 1 pair(s)
                 sprout-2-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate did not answer _Stop: it timed out after 100 ms, its second timeout in a row, and was killed; the agent treats that as an objection]"}
            [200ms] model end_turn
              round 3 _Stop: [] by 200ms, left out [gate]
              decided (round 3): objection honoured from [gate], budget 3/3
              => continue with 1 pair(s)
                 sprout-3-0 gate___Stop({}) -> {"hook":"_Stop","server":"gate","text":"[sprout: required hook server gate could not be called for _Stop: it was killed after two hook timeouts in a row and will be restarted after its backoff; the agent treats that as an objection]"}
            [200ms] model end_turn
              decided: prompt ended, budget_spent
              => end: budget_spent
            [200ms] prompt
            [200ms] model end_turn
              decided: prompt ended, budget_spent
              => end: budget_spent
        "#]],
    );
}
