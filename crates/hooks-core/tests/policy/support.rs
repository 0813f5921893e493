//! A tiny scenario language for the policy, and the trace it renders.
//!
//! A script is one command a line (`#` starts a comment). Settings come first
//! and build the [`Session`] at the first other command:
//!
//! ```text
//! servers a b:120000 c!  configuration order; `b:120000`: b's own hookTimeoutMs;
//!                        `c!`: c is required ("required": true)
//! allow *                MCP_HOOK_SERVERS as written ("allow" alone: unset)
//! budget 3               SPROUT_AGENT_STOP_MAX_REJECTIONS
//! timeout 2500           SPROUT_AGENT_HOOK_TIMEOUT_MS
//! scope prompt           SPROUT_AGENT_STOP_BUDGET_SCOPE
//! decline off            SPROUT_AGENT_STOP_DECLINE_RULE
//! carry 1 4 a=2 gone=3   the session continues a saved one (Session::resume):
//!                        budget used 1, 4 rounds, a failed twice, gone 3 times
//! wide                   hook texts are shown whole, not shortened
//! ```
//!
//! Commands, each fed at the current virtual time:
//!
//! ```text
//! up a _Stop read        server a started and listed these tools
//! up a _Stop(attempt,x!) ... with these schema properties; `!`: required
//! fail a why             server a failed to start
//! exit a why             server a exited on its own
//! want a                 the loop wants server a for a tool call
//! prompt                 a prompt starts
//! session_start ID CWD   the session starts, with this id and directory
//! submit text...|big     the prompt's text (big: 20000 bytes) was submitted
//! model end_turn [N] [text...]  the model answered with this stop reason, N
//!                        tool calls and this text
//! pretool a.read[=JSON] ...     these tool calls are about to run
//! posttool a.read=out a.write!=out ...  these ran (`!`: an error result)
//! reply 3 text...        call #3 answered with this text
//! reply 3 empty|blank|image|crash|transport|rpc|error text...
//! at 2500                time is now 2500 ms: handle_timeout
//! precompact             compaction is about to run
//! compacted 4 [summary...]  compaction removed 4 messages, with this summary
//! end exit|closed|disconnected|signal  the session ends
//! abort cancelled|max_rounds|failed
//! tools                  print the model's tool list
//! restore 2 5            continue a saved session: budget used 2, 5 rounds
//! carried                print what a continuation would carry over
//! resolve NAME           print where a model tool call goes
//! ```
//!
//! The trace echoes each command with its time, then one indented line per
//! output. Hook call events are rendered compactly; answers to the loop's
//! questions (`model`, `compacted`, `abort`) start with `=>`.

use std::cell::Cell;
use std::fmt::Write as _;
use std::time::Duration;

use hooks_core::*;

/// Runs `script` and compares its trace with `expect`.
#[track_caller]
pub(crate) fn check(script: &str, expect: expect_test::Expect) {
    expect.assert_eq(&run(script));
}

thread_local! {
    /// `wide`: the script shows hook texts whole. Each test runs on a thread
    /// of its own, and each script sets it anew.
    static WIDE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `script` and returns its trace.
pub(crate) fn run(script: &str) -> String {
    WIDE.set(false);
    let mut servers: Vec<ServerSetup> = Vec::new();
    let mut allow: Option<String> = None;
    let mut budget: Option<String> = None;
    let mut timeout: Option<String> = None;
    let mut scope: Option<String> = None;
    let mut decline: Option<String> = None;
    let mut carry: Option<Carried> = None;
    let mut session: Option<Session> = None;
    let mut now = Time::ZERO;
    let mut out = String::new();

    for line in script.lines() {
        let line = line.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        let words: Vec<&str> = rest.split_whitespace().collect();
        match (cmd, &session) {
            ("servers", None) => {
                servers = words.iter().map(|w| server_setup(w)).collect();
                continue;
            }
            ("scope", None) => {
                scope = Some(rest.to_owned());
                continue;
            }
            ("decline", None) => {
                decline = Some(rest.to_owned());
                continue;
            }
            ("allow", None) => {
                allow = Some(rest.to_owned()).filter(|r| !r.is_empty());
                continue;
            }
            ("budget", None) => {
                budget = Some(rest.to_owned());
                continue;
            }
            ("timeout", None) => {
                timeout = Some(rest.to_owned());
                continue;
            }
            ("carry", None) => {
                carry = Some(carried(&words));
                continue;
            }
            ("wide", None) => {
                WIDE.set(true);
                continue;
            }
            _ => {}
        }
        let s = session.get_or_insert_with(|| {
            let config =
                HookConfig::from_values(allow.as_deref(), timeout.as_deref(), budget.as_deref())
                    .and_then(|c| c.with_stop_governance(scope.as_deref(), decline.as_deref()))
                    .unwrap();
            let mut s = match &carry {
                Some(carried) => Session::resume(config, servers.clone(), carried).unwrap(),
                None => Session::new(config, servers.clone()).unwrap(),
            };
            writeln!(out, "[{now}] session").unwrap();
            drain(&mut s, &mut out);
            s
        });
        let id = |name: &str| {
            s.server_id(name)
                .unwrap_or_else(|| panic!("no server {name}"))
        };
        if cmd == "at" {
            now = Time::from_millis(words[0].parse().unwrap());
        }
        writeln!(out, "[{now}] {line}").unwrap();
        let mut ended = None;
        let input = match cmd {
            "up" => Some(Input::ServerStarted {
                server: id(words[0]),
                tools: words[1..].iter().map(|w| listed_tool(w)).collect(),
            }),
            "fail" => Some(Input::ServerStartFailed {
                server: id(words[0]),
                reason: words[1..].join(" "),
            }),
            "exit" => Some(Input::ServerExited {
                server: id(words[0]),
                reason: words[1..].join(" "),
            }),
            "want" => Some(Input::ServerWanted {
                server: id(words[0]),
            }),
            "prompt" => {
                usage(s.begin_prompt(now), &mut out);
                None
            }
            "model" => {
                let stop = StopReason::from_word(words[0]);
                let tool_calls = words.get(1).map_or(0, |n| n.parse().unwrap());
                let text = words.get(2..).unwrap_or_default().join(" ");
                usage(s.end_turn(now, stop, tool_calls, &text), &mut out);
                None
            }
            "session_start" => {
                let context = HookContext {
                    session_id: words[0].to_owned(),
                    cwd: words[1].to_owned(),
                };
                usage(s.session_start(now, context), &mut out);
                None
            }
            "submit" => {
                // `submit big`: a prompt of 20000 bytes.
                let big = "y".repeat(20_000);
                let prompt = if rest == "big" { big.as_str() } else { rest };
                usage(s.prompt_submitted(now, prompt), &mut out);
                None
            }
            "pretool" => {
                let calls = words.iter().map(|w| tool_use(s, w).0).collect();
                usage(s.tools_requested(now, calls), &mut out);
                None
            }
            "posttool" => {
                let runs = words
                    .iter()
                    .map(|w| {
                        let (call, output) = tool_use(s, w);
                        let (is_error, output) = match output.strip_prefix('!') {
                            Some(rest) => (true, rest),
                            None => (false, output),
                        };
                        ToolRun {
                            call,
                            output: output.to_owned(),
                            is_error,
                        }
                    })
                    .collect();
                usage(s.tools_ran(now, runs), &mut out);
                None
            }
            "precompact" => {
                usage(s.compacting(now), &mut out);
                None
            }
            "end" => {
                let reason = match words[0] {
                    "exit" => SessionEndReason::Exit,
                    "closed" => SessionEndReason::Closed,
                    "disconnected" => SessionEndReason::Disconnected,
                    "signal" => SessionEndReason::Signal,
                    other => panic!("unknown session end reason {other}"),
                };
                usage(s.session_end(now, reason), &mut out);
                None
            }
            "reply" => {
                let call = CallId(words[0].parse().unwrap());
                let text = rest.splitn(3, ' ').nth(2).unwrap_or("").to_owned();
                Some(Input::HookReplied {
                    call,
                    reply: reply(words.get(1).copied(), text),
                })
            }
            "compacted" => {
                let summary = words[1..].join(" ");
                let summary = Some(summary.as_str()).filter(|s| !s.is_empty());
                usage(
                    s.compacted(now, words[0].parse().unwrap(), summary),
                    &mut out,
                );
                None
            }
            "abort" => {
                let reason = match words[0] {
                    "cancelled" => AbortReason::Cancelled,
                    "max_rounds" => AbortReason::MaxRounds,
                    "failed" => AbortReason::Failed,
                    other => panic!("unknown abort reason {other}"),
                };
                match s.abort(now, reason) {
                    Ok(end) => ended = Some(end),
                    Err(e) => writeln!(out, "  usage error: {e}").unwrap(),
                }
                None
            }
            "at" => {
                s.handle_timeout(now);
                None
            }
            "restore" => {
                usage(s.restore(&carried(&words)), &mut out);
                None
            }
            "carried" => {
                let c = s.carried();
                let failures: Vec<String> = c
                    .failures
                    .iter()
                    .map(|(name, n)| format!(" {name}={n}"))
                    .collect();
                writeln!(
                    out,
                    "  carried: budget used {}, rounds {}{}",
                    c.budget_used,
                    c.rounds,
                    if failures.is_empty() {
                        String::new()
                    } else {
                        format!(", failures{}", failures.concat())
                    }
                )
                .unwrap();
                None
            }
            "tools" => {
                let names: Vec<&str> = s.model_tools().map(|(_, t)| t.qualified.as_str()).collect();
                writeln!(out, "  model tools: {}", names.join(" ")).unwrap();
                None
            }
            "resolve" => {
                match s.resolve(words[0]) {
                    Some((server, bare)) => {
                        writeln!(out, "  -> {}.{bare}", s.server_name(server)).unwrap()
                    }
                    None => writeln!(out, "  -> unknown tool: {}", words[0]).unwrap(),
                }
                None
            }
            other => panic!("unknown command {other:?}"),
        };
        if let Some(input) = input
            && let Err(e) = s.handle(now, input)
        {
            writeln!(out, "  usage error: {e}").unwrap();
        }
        drain(s, &mut out);
        if let Some(reason) = ended {
            writeln!(out, "  => end: {reason}").unwrap();
        }
    }
    out
}

/// `BUDGET ROUNDS [SERVER=FAILURES]...`: what a saved session carries.
fn carried(words: &[&str]) -> Carried {
    Carried {
        budget_used: words[0].parse().unwrap(),
        rounds: words[1].parse().unwrap(),
        failures: words[2..]
            .iter()
            .map(|w| {
                let (name, n) = w.split_once('=').unwrap();
                (ServerName::new(name).unwrap(), n.parse().unwrap())
            })
            .collect(),
    }
}

/// `name`, `name:MS` or either with a `!` after it: a server, with its own
/// hook timeout \[C4\], `!`: required \[F1\].
fn server_setup(word: &str) -> ServerSetup {
    let (word, required) = match word.strip_suffix('!') {
        Some(word) => (word, true),
        None => (word, false),
    };
    let (name, timeout) = match word.split_once(':') {
        Some((name, ms)) => (name, HookTimeout::from_millis(ms.parse().unwrap())),
        None => (word, None),
    };
    ServerSetup {
        name: ServerName::new(name).unwrap(),
        hook_timeout: timeout,
        required,
    }
}

/// `name` or `name(p1,p2!)`: a tool whose schema names p1 and p2, p2 required.
fn listed_tool(word: &str) -> ListedTool {
    let Some((name, props)) = word.strip_suffix(')').and_then(|w| w.split_once('(')) else {
        return ListedTool::named(word);
    };
    let mut tool = ListedTool::named(name);
    for prop in props.split(',').filter(|p| !p.is_empty()) {
        match prop.strip_suffix('!') {
            Some(required) => {
                tool.properties.push(required.to_owned());
                tool.required.push(required.to_owned());
            }
            None => tool.properties.push(prop.to_owned()),
        }
    }
    tool
}

/// `server.tool` or `server.tool=REST`: the call, with REST as JSON
/// arguments (`pretool`) or as output text (`posttool`).
fn tool_use<'w>(s: &Session, word: &'w str) -> (ToolUse, &'w str) {
    let (target, rest) = word.split_once('=').unwrap_or((word, ""));
    let (server, tool) = target.split_once('.').unwrap();
    let arguments = serde_json::from_str(rest).unwrap_or(serde_json::json!({}));
    let call = ToolUse {
        server: s.server_id(server).unwrap(),
        tool: tool.to_owned(),
        arguments,
    };
    (call, rest)
}

fn usage(result: Result<(), UsageError>, out: &mut String) {
    if let Err(e) = result {
        writeln!(out, "  usage error: {e}").unwrap();
    }
}

fn reply(kind: Option<&str>, text: String) -> HookReply {
    let text_part = |t: String| ReplyPart::Text(t);
    match kind {
        None | Some("empty") => HookReply::Result(vec![]),
        Some("blank") => HookReply::Result(vec![text_part(" \n\t ".into())]),
        Some("image") => HookReply::Result(vec![ReplyPart::Other]),
        Some("crash") => HookReply::Crashed,
        Some("transport") => HookReply::TransportFailed("broken pipe".into()),
        Some("rpc") => HookReply::RpcError {
            code: -32603,
            message: text,
        },
        Some("error") => HookReply::ErrorResult(vec![text_part(text)]),
        Some("big") => HookReply::Result(vec![text_part("x".repeat(20_000))]),
        Some(first) => {
            // Plain text: the first word is part of it.
            let mut all = first.to_owned();
            if !text.is_empty() {
                all.push(' ');
                all.push_str(&text);
            }
            HookReply::Result(vec![text_part(all)])
        }
    }
}

/// Renders every queued output, one indented line each, then the answer to
/// the question asked, if it is decided.
pub(crate) fn drain(s: &mut Session, out: &mut String) {
    while let Some(output) = s.poll_output() {
        let line = match output {
            Output::CallHook {
                call,
                server,
                hook,
                arguments,
                deadline,
            } => {
                let mut line =
                    format!("call {call} {}.{hook} by {deadline}", s.server_name(server));
                if !arguments.is_empty() {
                    let input = sorted(serde_json::Value::Object(arguments)).to_string();
                    write!(line, " with {}", shorten(&input)).unwrap();
                }
                line
            }
            Output::CancelCall { call } => format!("cancel {call}"),
            Output::KillServer { server } => format!("kill {}", s.server_name(server)),
            Output::StartServer { server } => format!("start {}", s.server_name(server)),
            Output::Event(event) => render_event(&event),
        };
        writeln!(out, "  {line}").unwrap();
    }
    if let Some(verdict) = s.take_verdict() {
        writeln!(out, "  {}", render_verdict(&verdict)).unwrap();
    }
    if let Some(injections) = s.take_reinjections() {
        writeln!(out, "  {}", render_injections("reinject", &injections)).unwrap();
    }
    if let Some(injections) = s.take_session_context() {
        writeln!(
            out,
            "  {}",
            render_injections("session context", &injections)
        )
        .unwrap();
    }
    if let Some(injections) = s.take_prompt_context() {
        writeln!(
            out,
            "  {}",
            render_injections("prompt context", &injections)
        )
        .unwrap();
    }
    if let Some(injections) = s.take_pins() {
        writeln!(out, "  {}", render_injections("pin", &injections)).unwrap();
    }
    if let Some(gates) = s.take_tool_gates() {
        let mut line = format!("=> gates for {} call(s)", gates.len());
        for (i, gate) in gates.iter().enumerate() {
            match gate {
                ToolGate::Run => write!(line, "\n     [{i}] run").unwrap(),
                ToolGate::Refused { refusals } => {
                    write!(line, "\n     [{i}] refused, error result:").unwrap();
                    render_texts(&mut line, refusals);
                }
            }
        }
        writeln!(out, "  {line}").unwrap();
    }
    if let Some(notes) = s.take_tool_notes() {
        let mut line = format!("=> notes for {} call(s)", notes.len());
        for (i, texts) in notes.iter().enumerate() {
            write!(line, "\n     [{i}] {} after the output", texts.len()).unwrap();
            render_texts(&mut line, texts);
        }
        writeln!(out, "  {line}").unwrap();
    }
    if s.take_session_end().is_some() {
        writeln!(out, "  => session end told").unwrap();
    }
}

fn render_texts(line: &mut String, texts: &[HookText]) {
    for text in texts {
        write!(line, "\n       {}", shorten(&text.content)).unwrap();
    }
}

fn names(list: &[ServerName]) -> String {
    list.iter()
        .map(ServerName::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

fn render_event(event: &Event) -> String {
    match event {
        Event::RoundStarted {
            round,
            hook,
            servers,
            left_out,
            deadline,
        } => {
            let mut line = format!("round {round} {hook}: [{}] by {deadline}", names(servers));
            if !left_out.is_empty() {
                write!(line, ", left out [{}]", names(left_out)).unwrap();
            }
            line
        }
        Event::HookCalled {
            round,
            hook,
            server,
            outcome,
            latency,
        } => {
            let detail = match outcome {
                Outcome::Objection { text }
                | Outcome::Injection { text }
                | Outcome::Ignored { text } => {
                    format!(" {:?}", shorten(text))
                }
                Outcome::Error { kind, detail } => format!(" ({kind}) {detail:?}"),
                _ => String::new(),
            };
            format!(
                "hook {server}.{hook} round {round}: {}{detail} after {}",
                outcome.label(),
                ms(*latency)
            )
        }
        Event::Decided { round, decision } => {
            let round = round.map_or(String::new(), |r| format!(" (round {r})"));
            match decision {
                PolicyDecision::ObjectionHonoured {
                    servers,
                    budget_used,
                    budget,
                } => format!(
                    "decided{round}: objection honoured from [{}], budget {budget_used}/{budget}",
                    names(servers)
                ),
                PolicyDecision::Reinject { servers } => {
                    format!("decided{round}: reinject from [{}]", names(servers))
                }
                PolicyDecision::PromptEnded { reason } => {
                    format!("decided{round}: prompt ended, {reason}")
                }
                PolicyDecision::Inject { hook, servers } => {
                    format!("decided{round}: {hook} adds from [{}]", names(servers))
                }
                PolicyDecision::ToolsGated { asked, refused } => {
                    let refused: Vec<String> = refused.iter().map(ToString::to_string).collect();
                    format!(
                        "decided{round}: {asked} tool call(s) gated, refused [{}]",
                        refused.join(" ")
                    )
                }
                PolicyDecision::SessionEnded { reason } => {
                    format!("decided{round}: session ended, {reason}")
                }
            }
        }
        Event::ServerDown {
            server,
            cause,
            failures,
            retry_at,
        } => {
            let cause = render_cause(cause);
            let next = match retry_at {
                Some(t) => format!("retry from {t}"),
                None => "retired for the session".to_owned(),
            };
            format!("server {server} down: {cause}, failures {failures}, {next}")
        }
        Event::ServerStarting { server, attempt } => {
            format!("starting {server}, attempt {attempt}")
        }
        Event::ServerUp {
            server,
            model_tools,
            hooks,
        } => {
            let hooks: Vec<&str> = hooks.iter().map(|h| h.tool_name()).collect();
            format!(
                "server {server} up: {model_tools} model tool(s), hooks [{}]",
                hooks.join(" ")
            )
        }
        Event::Warning(warning) => format!("warning: {warning}"),
        Event::GuardDown {
            server,
            cause,
            retired,
        } => {
            let next = if *retired {
                "off for the session"
            } else {
                "restarted on next use"
            };
            format!("guard {server} down: {}, {next}", render_cause(cause))
        }
        Event::GuardUp { server } => format!("guard {server} up"),
    }
}

fn render_cause(cause: &DownCause) -> String {
    match cause {
        DownCause::Killed => "killed".to_owned(),
        DownCause::Crashed(why) => format!("crashed ({why})"),
        DownCause::StartFailed(why) => format!("start failed ({why})"),
        DownCause::BeforeResume => "at its limit before the resume".to_owned(),
    }
}

fn render_verdict(verdict: &TurnVerdict) -> String {
    match verdict {
        TurnVerdict::RunTools => "=> run tools".to_owned(),
        TurnVerdict::End { reason } => format!("=> end: {reason}"),
        TurnVerdict::Continue { injections } => render_injections("continue", injections),
    }
}

fn render_injections(verb: &str, injections: &[Injection]) -> String {
    let mut line = format!("=> {verb} with {} pair(s)", injections.len());
    for i in injections {
        write!(
            line,
            "\n     {} {}({}) -> {}",
            i.call_id,
            i.tool_name,
            i.arguments(),
            shorten(&i.content)
        )
        .unwrap();
    }
    line
}

/// Keeps traces readable when a hook answers at length.
fn shorten(text: &str) -> String {
    if text.len() <= 120 || WIDE.get() {
        return text.to_owned();
    }
    let mut end = 60;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut tail = text.len() - 60;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}…({} bytes)…{}", &text[..end], text.len(), &text[tail..])
}

/// `value` with every object's keys in sorted order, so a trace reads the
/// same whether or not serde_json keeps insertion order (`preserve_order`,
/// which the workspace build turns on).
fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let keys: std::collections::BTreeMap<String, serde_json::Value> =
                map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            serde_json::Value::Object(keys.into_iter().collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}
