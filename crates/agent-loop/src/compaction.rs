//! Compaction decisions as pure functions: when to compact, where truncation
//! may cut, and what the fresh history holds \[P2\].
//!
//! The loop does the IO (the summary request, the `_PostCompact` round); this
//! module only computes.

use hooks_core::Injection;

use crate::gateway::ToolDef;
use crate::message::{Message, injection_pair};

/// When and how to compact.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionSettings {
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// Compact when the next request would pass this share of the window.
    pub threshold: f64,
    /// Summary handoffs allowed per session; then truncation.
    pub max_summaries: u32,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            context_window: 128_000,
            threshold: 0.8,
            max_summaries: 3,
        }
    }
}

impl CompactionSettings {
    /// The token count at which to compact.
    pub fn limit(&self) -> u64 {
        (self.context_window as f64 * self.threshold) as u64
    }
}

/// Bytes per token for estimates; a common rule of thumb for English and code.
const BYTES_PER_TOKEN: u64 = 4;

/// The last size the provider reported: the first `messages` messages of the
/// history came to `tokens` (its input plus its own answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UsageAnchor {
    /// How many history messages the report covers.
    pub messages: usize,
    /// Their size in tokens.
    pub tokens: u64,
}

/// What the tool definitions `tools` add to a request, in bytes: names,
/// descriptions and schemas, as they go on the wire.
pub(crate) fn tools_bytes(tools: &[ToolDef]) -> u64 {
    tools.iter().fold(0u64, |sum, tool| {
        let schema = serde_json::to_string(&tool.input_schema).map_or(0, |s| s.len());
        let description = tool.description.as_deref().map_or(0, str::len);
        // The wrapping object's keys and quotes.
        sum.saturating_add((tool.name.len() + description + schema + 64) as u64)
    })
}

/// The estimated input size of the next request, in tokens: the provider's
/// last report plus an estimate of what was added since, or a byte estimate of
/// everything before the first report, the tool definitions (`tools`
/// bytes, [`tools_bytes`]) included \[V3\]. `tools` is called only when
/// there is no report, since a report counts them already.
pub(crate) fn estimate_tokens(
    system: &str,
    history: &[Message],
    anchor: Option<UsageAnchor>,
    tools: impl FnOnce() -> u64,
) -> u64 {
    // Saturating throughout: the anchor's tokens are the provider's numbers,
    // which may be anything up to u64::MAX.
    let bytes = |messages: &[Message]| {
        messages
            .iter()
            .fold(0u64, |sum, m| sum.saturating_add(m.byte_len() as u64))
    };
    match anchor.filter(|a| a.messages <= history.len()) {
        Some(a) => a
            .tokens
            .saturating_add(bytes(&history[a.messages..]).div_ceil(BYTES_PER_TOKEN)),
        None => (system.len() as u64)
            .saturating_add(bytes(history))
            .saturating_add(tools())
            .div_ceil(BYTES_PER_TOKEN),
    }
}

/// Where truncation may cut so that what is kept after the cut comes to at
/// most `budget` tokens: the index of the first kept message. The cut never
/// falls on a tool result, so no call is parted from its result; it may be
/// `history.len()` (nothing kept).
pub(crate) fn truncation_cut(history: &[Message], budget: u64) -> usize {
    let mut kept: u64 = 0;
    let mut cut = history.len();
    for (i, message) in history.iter().enumerate().rev() {
        kept = kept.saturating_add((message.byte_len() as u64).div_ceil(BYTES_PER_TOKEN));
        if kept > budget {
            break;
        }
        cut = i;
    }
    while cut < history.len() && matches!(history[cut], Message::ToolResult { .. }) {
        cut += 1;
    }
    cut
}

/// The request that asks the model for a summary of `history`, keeping
/// what `_PreCompact` pinned \[E5\], sized to fit `budget` tokens: only
/// the newest messages that fit go in (never starting on a tool result).
/// `None` when not even the ask itself fits.
pub(crate) fn summary_request(
    system: &str,
    history: &[Message],
    pins: &[Injection],
    budget: u64,
) -> Option<Vec<Message>> {
    let ask = summary_ask(pins);
    let fixed = (system.len() + ask.len() + 16) as u64;
    let room = budget.checked_sub(fixed.div_ceil(BYTES_PER_TOKEN))?;
    let start = truncation_cut(history, room);
    if start == history.len() {
        return None;
    }
    let mut messages = history[start..].to_vec();
    messages.push(Message::user(ask));
    Some(messages)
}

/// What the summary request asks, with the pins.
fn summary_ask(pins: &[Injection]) -> String {
    let mut ask = SUMMARY_PROMPT.to_owned();
    if !pins.is_empty() {
        ask.push_str(PINS_PROMPT);
        for pin in pins {
            ask.push_str("\n- ");
            ask.push_str(&pin.content);
        }
    }
    ask
}

/// What the summary request adds before the pins, one per line.
const PINS_PROMPT: &str = "\n\nLifecycle hooks pinned these facts (JSON with \"hook\", \"server\" and \"text\"); \
the summary must keep each of them:";

/// What the summary request asks.
pub(crate) const SUMMARY_PROMPT: &str = "The conversation is about to be compacted to fit the context window. \
Write a summary that lets you continue the work from it alone: the task, what has been done, what was \
learned (files, commands, results), what remains, and any commitments made. Answer with the summary only.";

/// The fresh history after a summary handoff \[P2\]: one user message with the
/// summary and the original task, the `_PreCompact` and `_PostCompact` pairs
/// \[E5\], then the current prompt.
pub(crate) fn fresh_after_summary(
    summary: &str,
    original_task: &str,
    injections: &[Injection],
    prompt: &str,
) -> Vec<Message> {
    let mut fresh = vec![Message::user(format!(
        "[The conversation so far was compacted into this summary.]\n\n{summary}\n\n[The original task:]\n{original_task}"
    ))];
    for injection in injections {
        fresh.extend(injection_pair(injection));
    }
    fresh.push(Message::user(prompt));
    fresh
}

/// The fresh history after truncation: a preamble with the original task and
/// the current prompt, the kept tail, then the `_PreCompact` and
/// `_PostCompact` pairs \[P1\], \[E5\].
pub(crate) fn fresh_after_truncation(
    history: &[Message],
    cut: usize,
    original_task: &str,
    prompt: &str,
    injections: &[Injection],
) -> Vec<Message> {
    let mut preamble = format!(
        "[Earlier messages were dropped to fit the context window.]\n\n[The original task:]\n{original_task}"
    );
    if prompt != original_task {
        preamble.push_str(&format!("\n\n[The current request:]\n{prompt}"));
    }
    let mut fresh = vec![Message::user(preamble)];
    fresh.extend_from_slice(&history[cut.min(history.len())..]);
    for injection in injections {
        fresh.extend(injection_pair(injection));
    }
    fresh
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolCall, check_pairing};

    fn call(id: &str) -> Message {
        Message::Assistant {
            text: "x".repeat(100),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "s__t".into(),
                arguments: "{}".into(),
            }],
        }
    }

    fn result(id: &str) -> Message {
        Message::ToolResult {
            call_id: id.into(),
            name: "s__t".into(),
            content: "y".repeat(400),
            is_error: false,
        }
    }

    #[test]
    fn estimate_uses_the_last_report_then_bytes() {
        let history = vec![Message::user("a".repeat(400)), call("1"), result("1")];
        let all = estimate_tokens("", &history, None, || 0);
        let bytes: u64 = history.iter().map(|m| m.byte_len() as u64).sum();
        assert_eq!(all, bytes.div_ceil(4));
        // [V3]: before any report, the tool definitions count too.
        assert_eq!(
            estimate_tokens("", &history, None, || 800),
            (bytes + 800).div_ceil(4)
        );
        // A report counts them already: they are not asked for.
        let anchored = estimate_tokens(
            "",
            &history,
            Some(UsageAnchor {
                messages: 2,
                tokens: 1000,
            }),
            || panic!("the tools were counted twice"),
        );
        assert_eq!(anchored, 1000 + (history[2].byte_len() as u64).div_ceil(4));
    }

    // [V3]: a tool's name, description and schema count, as sent.
    #[test]
    fn tool_definitions_count_by_their_wire_size() {
        let tool = ToolDef {
            name: "s__t".into(),
            description: Some("d".repeat(100)),
            input_schema: serde_json::json!({"type": "object"}),
        };
        let schema = r#"{"type":"object"}"#.len() as u64;
        assert_eq!(
            tools_bytes(std::slice::from_ref(&tool)),
            4 + 100 + schema + 64
        );
        assert_eq!(
            tools_bytes(&[tool.clone(), tool]),
            2 * (4 + 100 + schema + 64)
        );
    }

    // The summary request is sized: a history longer than its budget goes
    // in by its newest messages, never starting on a tool result; one whose
    // ask alone does not fit makes no request.
    #[test]
    fn the_summary_request_takes_the_newest_messages_that_fit() {
        let history = vec![
            Message::user("a".repeat(4000)),
            call("1"),
            result("1"),
            Message::user("b".repeat(40)),
        ];
        let whole = summary_request("", &history, &[], 100_000).unwrap();
        assert_eq!(whole.len(), history.len() + 1);
        assert_eq!(&whole[..history.len()], &history[..]);
        // Room for the ask and about 300 tokens: the 1000-token prompt goes.
        let ask = (SUMMARY_PROMPT.len() as u64 + 16).div_ceil(4);
        let sized = summary_request("", &history, &[], ask + 300).unwrap();
        assert_eq!(&sized[..sized.len() - 1], &history[1..]);
        let bytes: u64 = sized.iter().map(|m| m.byte_len() as u64).sum();
        assert!(bytes.div_ceil(4) <= ask + 300, "{bytes} bytes");
        assert_eq!(summary_request("", &history, &[], ask / 2), None);
    }

    // The provider's count can be anything; the estimate saturates instead of
    // overflowing (this panicked in debug builds with u64::MAX).
    #[test]
    fn estimate_saturates_on_a_huge_reported_count() {
        let history = vec![Message::user("a".repeat(400)), call("1"), result("1")];
        let anchor = UsageAnchor {
            messages: 1,
            tokens: u64::MAX,
        };
        assert_eq!(estimate_tokens("", &history, Some(anchor), || 0), u64::MAX);
        let settings = CompactionSettings {
            context_window: u64::MAX,
            threshold: 2.0,
            max_summaries: 0,
        };
        // `as` saturates: the limit is u64::MAX, not a wrapped small number.
        assert_eq!(settings.limit(), u64::MAX);
    }

    // The cut never parts a call from its result.
    #[test]
    fn truncation_never_splits_a_pair() {
        let history = vec![
            Message::user("task"),
            call("1"),
            result("1"),
            call("2"),
            result("2"),
            Message::user("more"),
        ];
        for budget in 0..400 {
            let cut = truncation_cut(&history, budget);
            let kept = &history[cut..];
            assert!(check_pairing(kept).is_ok(), "budget {budget}: cut {cut}");
        }
        assert_eq!(truncation_cut(&history, 1_000_000), 0);
    }

    // [P2]: summary, task, pairs, then the prompt; every result after its call.
    #[test]
    fn fresh_history_after_summary_p2() {
        let server = hooks_core::ServerName::new("todo").unwrap();
        let inj = Injection::new(
            hooks_core::HookPoint::PostCompact,
            &server,
            0,
            4,
            "- [ ] ship",
        );
        let fresh = fresh_after_summary("did A", "build it", &[inj], "continue");
        assert_eq!(fresh.len(), 4);
        assert!(
            matches!(&fresh[0], Message::User { text } if text.contains("did A") && text.ends_with("build it"))
        );
        assert!(
            matches!(&fresh[1], Message::Assistant { tool_calls, .. } if tool_calls[0].name == "todo___PostCompact")
        );
        assert!(
            matches!(&fresh[2], Message::ToolResult { content, .. } if content.contains("- [ ] ship"))
        );
        assert_eq!(fresh[3], Message::user("continue"));
        check_pairing(&fresh).unwrap();
    }
}
