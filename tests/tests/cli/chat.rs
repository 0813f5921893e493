//! `sprout chat` in a pseudo-terminal, typed at as a person would.

use std::time::Duration;

use rexpect::process::WaitStatus;
use rexpect::session::spawn_command;

use crate::support::{FakeOpenAi, Scratch, end, mcp_config, sprout_command};

// Several prompts are one session: the objection budget [S3] spent by the
// first prompt is still spent in the second. Ctrl-C while the model works
// cancels that prompt [T5] and the input line comes back; Ctrl-C at the
// input line leaves, with status 0.
#[test]
fn prompts_share_a_session_and_ctrl_c_cancels_then_leaves() {
    let scratch = Scratch::new("chat");
    let config = mcp_config(&scratch, &[("nag", vec!["--stop", "text=not yet"])]);
    let fake = FakeOpenAi::start(vec![
        // Prompt 1: objected once (budget 1/1), then let go [S2].
        (Duration::ZERO, end("first answer")),
        (Duration::ZERO, end("first answer, again")),
        // Prompt 2: the budget is spent, so nobody is asked.
        (Duration::ZERO, end("second answer")),
        // Prompt 3: a model that takes far longer than the test waits.
        (Duration::from_secs(120), end("never shown")),
    ]);
    let fake_env = fake.env();
    let mut env: Vec<(&str, &str)> = fake_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend([
        ("MCP_HOOK_SERVERS", "*"),
        ("SPROUT_AGENT_STOP_MAX_REJECTIONS", "1"),
    ]);
    let mut command = sprout_command(&["chat", "--mcp-config", &config], &env, &scratch.0);
    // The pty is its stdin (sprout_command gives other tests /dev/null).
    command.stdin(std::process::Stdio::inherit());
    let mut chat = spawn_command(command, Some(60_000)).expect("sprout chat starts in a pty");

    chat.exp_string("sprout> ").expect("the input line");
    chat.send_line("do the first thing").unwrap();
    chat.exp_string("(budget 1/1)")
        .expect("the objection is honoured");
    chat.exp_string("stopped: declined")
        .expect("the first prompt ends");
    chat.exp_string("sprout> ").expect("the input line again");

    chat.send_line("do the second thing").unwrap();
    chat.exp_string("second answer").expect("the second answer");
    chat.exp_string("stopped: budget_spent")
        .expect("the same session: the budget is still spent");
    chat.exp_string("sprout> ").expect("the input line again");

    chat.send_line("take your time").unwrap();
    // Ctrl-C once the model has the third prompt's request.
    let asked = std::time::Instant::now();
    while fake.requests.lock().unwrap().len() < 4 {
        assert!(
            asked.elapsed() < Duration::from_secs(60),
            "the model never got the third prompt"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    chat.send_control('c').unwrap();
    chat.exp_string("stopped: cancelled")
        .expect("Ctrl-C cancels the prompt");
    chat.exp_string("sprout> ")
        .expect("the input line after a cancel");

    chat.send_control('c').unwrap();
    // Bounded by the session's 60 s timeout: a chat that does not leave
    // fails here instead of hanging the suite.
    chat.exp_eof().expect("Ctrl-C at the input line leaves");
    let status = chat.process().wait().expect("sprout chat exits");
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "Ctrl-C at the input line leaves with 0: {status:?}"
    );
}

// A log line that comes while the input line is up (here: a server found
// wedged, flooding while nobody asked it anything) is written above the
// line, which is drawn again after it, not into what is being typed.
#[test]
fn a_log_line_at_the_input_line_does_not_run_into_it() {
    let scratch = Scratch::new("chat-printer");
    let trigger = scratch.path("flood-now");
    let config = mcp_config(
        &scratch,
        &[(
            "flood",
            vec!["--hostile", "ping-flood", "--flood-when", &trigger],
        )],
    );
    let fake = FakeOpenAi::start(vec![]);
    let fake_env = fake.env();
    let env: Vec<(&str, &str)> = fake_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut command = sprout_command(&["chat", "--mcp-config", &config], &env, &scratch.0);
    command.stdin(std::process::Stdio::inherit());
    let mut chat = spawn_command(command, Some(60_000)).expect("sprout chat starts in a pty");
    chat.exp_string("sprout> ").expect("the input line");
    chat.send("half a li").unwrap();
    chat.flush().unwrap();
    chat.exp_string("half a li").expect("the typing is echoed");
    std::fs::write(&trigger, "").unwrap();
    chat.exp_string("MCP server wedged")
        .expect("the log line is shown");
    // Drawn again after the log line, with what was typed so far.
    chat.exp_string("sprout> half a li")
        .expect("the input line is drawn again below the log line");
    chat.send_control('c').unwrap();
    chat.exp_eof().expect("Ctrl-C at the input line leaves");
    let status = chat.process().wait().expect("sprout chat exits");
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
}
