//! A tiny scenario language for the policy, and the trace it renders.
//!
//! A script is one command a line (`#` starts a comment). Settings come first
//! and build the [`Session`] at the first other command:
//!
//! ```text
//! servers a b c          configuration order
//! allow *                MCP_HOOK_SERVERS as written ("allow" alone: unset)
//! budget 3               SPROUT_AGENT_STOP_MAX_REJECTIONS
//! timeout 2500           SPROUT_AGENT_HOOK_TIMEOUT_MS
//! ```
//!
//! Commands, each fed at the current virtual time:
//!
//! ```text
//! up a _Stop read        server a started and listed these tools
//! fail a why             server a failed to start
//! exit a why             server a exited on its own
//! want a                 the loop wants server a for a tool call
//! prompt                 a prompt starts
//! model end_turn [N]     the model answered with this stop reason and N tool calls
//! reply 3 text...        call #3 answered with this text
//! reply 3 empty|blank|image|crash|transport|rpc|error text...
//! at 2500                time is now 2500 ms: handle_timeout
//! compacted 4            compaction removed 4 messages
//! abort cancelled|max_rounds|failed
//! tools                  print the model's tool list
//! resolve NAME           print where a model tool call goes
//! ```
//!
//! The trace echoes each command with its time, then one indented line per
//! output. Hook call events are rendered compactly; answers to the loop's
//! questions (`model`, `compacted`, `abort`) start with `=>`.

use std::fmt::Write as _;
use std::time::Duration;

use hooks_core::*;

/// Runs `script` and compares its trace with `expect`.
#[track_caller]
pub(crate) fn check(script: &str, expect: expect_test::Expect) {
    expect.assert_eq(&run(script));
}

/// Runs `script` and returns its trace.
pub(crate) fn run(script: &str) -> String {
    let mut servers: Vec<ServerName> = Vec::new();
    let mut allow: Option<String> = None;
    let mut budget: Option<String> = None;
    let mut timeout: Option<String> = None;
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
                servers = words.iter().map(|w| ServerName::new(*w).unwrap()).collect();
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
            _ => {}
        }
        let s = session.get_or_insert_with(|| {
            let config =
                HookConfig::from_values(allow.as_deref(), timeout.as_deref(), budget.as_deref())
                    .unwrap();
            let mut s = Session::new(config, servers.clone()).unwrap();
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
                tools: words[1..].iter().map(|w| w.to_string()).collect(),
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
                usage(s.end_turn(now, stop, tool_calls), &mut out);
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
                usage(s.compacted(now, words[0].parse().unwrap()), &mut out);
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
                deadline,
            } => {
                format!("call {call} {}.{hook} by {deadline}", s.server_name(server))
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
                Outcome::Objection { text } | Outcome::Injection { text } => {
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
            }
        }
        Event::ServerDown {
            server,
            cause,
            failures,
            retry_at,
        } => {
            let cause = match cause {
                DownCause::Killed => "killed".to_owned(),
                DownCause::Crashed(why) => format!("crashed ({why})"),
                DownCause::StartFailed(why) => format!("start failed ({why})"),
            };
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
    if text.len() <= 120 {
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
