//! Every bad input: exit status 2 and one message naming what was wrong.

use crate::support::{Scratch, run_sprout, text};

/// Arguments, environment, and the text stderr must hold.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, String);

#[test]
fn bad_inputs_exit_2_with_a_message() {
    let scratch = Scratch::new("errors");
    let write = |name: &str, body: &str| {
        let path = scratch.path(name);
        std::fs::write(&path, body).unwrap();
        path
    };
    let bad_json = write("bad.json", "{ not json");
    let sse = write(
        "sse.json",
        r#"{"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}"#,
    );
    let bad_name = write(
        "name.json",
        r#"{"mcpServers": {"my server": {"command": "x"}}}"#,
    );
    let bad_url = write(
        "url.json",
        r#"{"mcpServers": {"web": {"type": "http", "url": "http://exa mple.com/"}}}"#,
    );
    let script = write("script.jsonl", "{\"text\": 1}\n");
    let script_env = [("SPROUT_AGENT_PROVIDER", "script")];
    let openai = [("SPROUT_AGENT_PROVIDER", "openai")];
    let blank_model = [
        ("SPROUT_AGENT_PROVIDER", "openai"),
        ("OPENAI_COMPAT_BASE_URL", "http://127.0.0.1:9/v1"),
        ("OPENAI_COMPAT_MODEL", ""),
    ];
    let hostless_base = [
        ("SPROUT_AGENT_PROVIDER", "openai"),
        ("OPENAI_COMPAT_BASE_URL", "http://"),
        ("OPENAI_COMPAT_MODEL", "m"),
    ];
    let cases: Vec<Case<'_>> = vec![
        (vec!["run", "x", "--mcp-config", "/nonexistent/mcp.json"], vec![], "cannot read the MCP config /nonexistent/mcp.json".into()),
        (vec!["run", "x", "--mcp-config", &bad_json], vec![], format!("MCP config {bad_json}: not a valid mcpServers JSON document")),
        (vec!["run", "x", "--mcp-config", &sse], vec![], "mcpServers.a.type: unknown server type \"sse\": expected \"stdio\" or \"http\"".into()),
        (vec!["run", "x", "--mcp-config", &bad_name], vec![], "mcpServers.my server: invalid MCP server name \"my server\"".into()),
        (vec!["run", "x"], vec![("MCP_HOOK_SERVERS", "*,todo")], "MCP_HOOK_SERVERS=\"*,todo\" is not valid".into()),
        (vec!["run", "x"], vec![("SPROUT_AGENT_HOOK_TIMEOUT_MS", "0")], "SPROUT_AGENT_HOOK_TIMEOUT_MS=\"0\" is not valid: expected a whole number of milliseconds from 1 to 600000".into()),
        (vec!["run", "x", "--hook-timeout-ms", "700000"], vec![("SPROUT_AGENT_HOOK_TIMEOUT_MS", "100")], "--hook-timeout-ms=\"700000\" is not valid".into()),
        (vec!["run", "x"], vec![("SPROUT_AGENT_STOP_MAX_REJECTIONS", "-1")], "SPROUT_AGENT_STOP_MAX_REJECTIONS=\"-1\" is not valid".into()),
        (vec!["run", "x"], openai.to_vec(), "OPENAI_COMPAT_MODEL is not set".into()),
        (vec!["run", "x"], blank_model.to_vec(), "OPENAI_COMPAT_MODEL is blank".into()),
        (vec!["run", "x"], hostless_base.to_vec(), "OPENAI_COMPAT_BASE_URL=\"http://\" is not".into()),
        (vec!["run", "x", "--mcp-config", &bad_url], vec![], "mcpServers.web.url: \"http://exa mple.com/\" is not a valid URL".into()),
        (vec!["run", "x", "--provider", "anthropic"], vec![("ANTHROPIC_MODEL", "m")], "ANTHROPIC_API_KEY is not set".into()),
        (vec!["run", "x"], vec![("SPROUT_AGENT_PROVIDER", "gpt")], "SPROUT_AGENT_PROVIDER=\"gpt\" is not a provider".into()),
        (vec!["run", "x"], [openai.as_slice(), &[("OPENAI_COMPAT_MODEL", "m"), ("SPROUT_AGENT_STREAM", "maybe")]].concat(), "SPROUT_AGENT_STREAM=\"maybe\" is not valid: expected on or off".into()),
        (vec!["run", "x", "--stream-idle-ms", "0"], [openai.as_slice(), &[("OPENAI_COMPAT_MODEL", "m")]].concat(), "--stream-idle-ms=\"0\" is not valid".into()),
        (vec!["run", "x", "--temperature", "warm"], [openai.as_slice(), &[("OPENAI_COMPAT_MODEL", "m")]].concat(), "--temperature=\"warm\" is not valid: expected a temperature from 0 to 2".into()),
        (vec!["run", "x"], [openai.as_slice(), &[("OPENAI_COMPAT_MODEL", "m"), ("SPROUT_AGENT_TEMPERATURE", "NaN")]].concat(), "SPROUT_AGENT_TEMPERATURE=\"NaN\" is not valid".into()),
        (vec!["run", "x", "--script", &script], script_env.to_vec(), format!("model script {script}, line 1: invalid type")),
        (vec!["run", "x"], script_env.to_vec(), "SPROUT_AGENT_SCRIPT is not set".into()),
        (vec!["run", "  "], script_env.to_vec(), "the prompt is empty".into()),
        (vec!["hooks", "call", "_Start"], vec![], "\"_Start\" is not a hook point".into()),
        (vec!["acp", "--max-frame-bytes", "5"], vec![], "--max-frame-bytes=\"5\" is not valid: expected a whole number from 1024 to 1073741824".into()),
        (vec!["hook-server", "gate", "--", "true"], vec![("SPROUT_GATE_TIMEOUT_MS", "0")], "SPROUT_GATE_TIMEOUT_MS=\"0\" is not valid".into()),
        (vec!["hooks", "call", "_Stop"], vec![], "MCP_HOOK_SERVERS is not set, so the agent would call no hook".into()),
        (vec!["run"], vec![], "required arguments were not provided".into()),
    ];
    for (args, env, expected) in cases {
        let out = run_sprout(&args, &env, &scratch.0);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert!(
            stderr.contains(&expected),
            "{args:?} {env:?}: expected {expected:?} in {stderr:?}"
        );
    }
}

// A URL that carries a secret in its query is never echoed with the secret,
// whether it parses (wrong scheme) or not.
#[test]
fn a_bad_server_url_does_not_leak_its_query() {
    let scratch = Scratch::new("errors-secret");
    for (name, url) in [
        ("scheme", "ftp://x/?api_key=s3cret"),
        ("unparsable", "http://exa mple.com/?api_key=s3cret"),
    ] {
        let path = scratch.path(&format!("{name}.json"));
        let config = serde_json::json!({"mcpServers": {"web": {"type": "http", "url": url}}});
        std::fs::write(&path, config.to_string()).unwrap();
        let out = run_sprout(&["run", "x", "--mcp-config", &path], &[], &scratch.0);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert!(stderr.contains("mcpServers.web.url"), "{url}: {stderr:?}");
        assert!(
            !stderr.contains("s3cret"),
            "{url}: the secret leaked: {stderr:?}"
        );
    }
}

// A variable set to bytes that are not UTF-8 is named in the message.
#[test]
fn a_variable_that_is_not_text_is_named() {
    use std::os::unix::ffi::OsStrExt as _;
    let scratch = Scratch::new("errors-not-text");
    for name in [
        "SPROUT_AGENT_MAX_ROUNDS",
        "OPENAI_COMPAT_MODEL",
        "MCP_HOOK_SERVERS",
    ] {
        let out = crate::support::sprout_command(&["run", "x"], &[], &scratch.0)
            .env(name, std::ffi::OsStr::from_bytes(b"5\xff"))
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{name} is set to bytes that are not UTF-8")),
            "{stderr}"
        );
    }
}

// Whatever RUST_LOG lets through, a server URL's credentials never reach
// the log: the MCP SDK's own error lines quote the URL they failed on.
#[test]
fn no_log_level_shows_a_urls_secret() {
    let scratch = Scratch::new("errors-log-secret");
    let path = scratch.path("mcp.json");
    let config = serde_json::json!({"mcpServers": {"web": {"type": "http", "url": "http://127.0.0.1:9/mcp?api_key=s3cret&x=1"}}});
    std::fs::write(&path, config.to_string()).unwrap();
    for level in ["warn", "debug", "trace"] {
        let out = run_sprout(
            &["hooks", "list", "--mcp-config", &path],
            &[("RUST_LOG", level)],
            &scratch.0,
        );
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(
            all.contains("127.0.0.1:9"),
            "{level}: the server is named: {all}"
        );
        assert!(!all.contains("s3cret"), "{level}: the secret leaked: {all}");
    }
}
