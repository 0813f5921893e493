//! The bundled `todo` hook server (`sprout hook-server todo`).
//!
//! One model tool, `todo`: called without arguments it shows the list; called
//! with `items` it replaces the whole list. Three hooks:
//!
//! - `_Stop` objects with the open items while any remain. Its schema asks
//!   for `attempt` \[K2\], so from the prompt's second `_Stop` round on it
//!   says how many times the model has tried to finish; an agent that sends
//!   `{}` gets the same objection without the count.
//! - `_PreCompact` pins the open items \[E5\]: the summary must keep them, and
//!   the agent keeps the pin verbatim in the fresh history.
//! - `_PostCompact` re-injects the whole list when it is not empty, so the
//!   model keeps its plan across a compaction.
//!
//! The list lives in the server process: a restarted server starts empty.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use hooks_core::{HookPoint, InputField};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde::Deserialize;
use serde_json::json;

use super::ToolServer;

/// Most items a list may hold.
pub const MAX_ITEMS: usize = 100;
/// Longest item text, in characters.
pub const MAX_TEXT_CHARS: usize = 500;

/// One todo item.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// What is to be done.
    pub text: String,
    /// Whether it is done.
    #[serde(default)]
    pub done: bool,
}

/// The todo list, shared by the tool and the hooks.
#[derive(Clone, Debug, Default)]
pub struct TodoList(Arc<Mutex<Vec<Item>>>);

impl TodoList {
    fn items(&self) -> Vec<Item> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The `todo` tool: read (no `items`), or replace the whole list.
    pub fn call(&self, arguments: &JsonObject) -> CallToolResult {
        let Some(items) = arguments.get("items") else {
            return CallToolResult::success(vec![ContentBlock::text(render(&self.items()))]);
        };
        match parse_items(items) {
            Ok(items) => {
                let text = format!(
                    "The todo list now holds {} item(s):\n{}",
                    items.len(),
                    render(&items)
                );
                *self.0.lock().unwrap_or_else(|e| e.into_inner()) = items;
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            Err(problem) => CallToolResult::error(vec![ContentBlock::text(format!(
                "the todo list was not changed: {problem}. Send {{\"items\": [{{\"text\": \"...\", \"done\": false}}, ...]}} \
                 with at most {MAX_ITEMS} items of 1 to {MAX_TEXT_CHARS} characters each."
            ))]),
        }
    }

    /// The `_Stop` answer: the open items, or nothing.
    pub fn stop_answer(&self) -> String {
        self.stop_answer_at(None)
    }

    /// The `_Stop` answer at the prompt's `attempt`-th `_Stop` round (the
    /// `attempt` input field, `None` when the agent did not send it): the
    /// open items, with how many times the model has tried to finish from
    /// the second round on; or nothing.
    pub fn stop_answer_at(&self, attempt: Option<u64>) -> String {
        let items = self.items();
        let open: Vec<&Item> = items.iter().filter(|i| !i.done).collect();
        if open.is_empty() {
            return String::new();
        }
        let mut text = match attempt {
            Some(n) if n >= 2 => format!(
                "You have tried to finish {n} times in this prompt, and {} todo item(s) are still open:\n",
                open.len()
            ),
            _ => format!("{} todo item(s) are still open:\n", open.len()),
        };
        for item in open {
            let _ = writeln!(text, "- [ ] {}", item.text);
        }
        text.push_str("Finish them, or mark them done with the todo tool if they are.");
        text
    }

    /// The `_PreCompact` answer: the open items as a pin the summary must
    /// keep, or nothing when none is open.
    pub fn pre_compact_answer(&self) -> String {
        let items = self.items();
        let open: Vec<&Item> = items.iter().filter(|i| !i.done).collect();
        if open.is_empty() {
            return String::new();
        }
        let mut text = String::from("Open todo items; the work is not done until they are:");
        for item in open {
            let _ = write!(text, "\n- [ ] {}", item.text);
        }
        text
    }

    /// The `_PostCompact` answer: the whole list, or nothing when empty.
    pub fn post_compact_answer(&self) -> String {
        let items = self.items();
        if items.is_empty() {
            return String::new();
        }
        format!(
            "Your todo list, kept across the context compaction:\n{}",
            render(&items)
        )
    }
}

fn parse_items(value: &serde_json::Value) -> Result<Vec<Item>, String> {
    let list = value
        .as_array()
        .ok_or_else(|| format!("`items` must be a list, not {value}"))?;
    if list.len() > MAX_ITEMS {
        return Err(format!("{} items is more than {MAX_ITEMS}", list.len()));
    }
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            let item: Item =
                serde_json::from_value(v.clone()).map_err(|e| format!("item {}: {e}", i + 1))?;
            let text = item.text.trim();
            if text.is_empty() {
                return Err(format!("item {}: the text is empty", i + 1));
            }
            if text.chars().count() > MAX_TEXT_CHARS {
                return Err(format!(
                    "item {}: the text is longer than {MAX_TEXT_CHARS} characters",
                    i + 1
                ));
            }
            Ok(Item {
                text: text.to_owned(),
                done: item.done,
            })
        })
        .collect()
}

fn render(items: &[Item]) -> String {
    if items.is_empty() {
        return "(the todo list is empty)".to_owned();
    }
    let mut text = String::new();
    for item in items {
        let mark = if item.done { 'x' } else { ' ' };
        let _ = writeln!(text, "- [{mark}] {}", item.text);
    }
    text.pop();
    text
}

/// The todo server, ready to serve.
pub fn server(list: TodoList) -> ToolServer {
    let schema = json!({
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "description": "The whole new list. Leave out to read the list.",
                "maxItems": MAX_ITEMS,
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
                        "done": {"type": "boolean"}
                    },
                    "required": ["text"],
                    "additionalProperties": false
                }
            }
        },
        "additionalProperties": false
    });
    let schema = schema.as_object().cloned().unwrap_or_default();
    let tool = Tool::new(
        "todo",
        "Your todo list for this task. Call with no arguments to read it; call with `items` to \
         replace the whole list (mark finished items done: true). You will be reminded of open \
         items when you try to finish.",
        schema,
    );
    let (for_tool, for_stop, for_pins, for_compact) =
        (list.clone(), list.clone(), list.clone(), list);
    ToolServer::new("sprout-todo")
        .instructions(
            "A todo list that keeps the agent honest: _Stop objects while items are open, \
             _PreCompact pins the open items and _PostCompact re-injects the list.",
        )
        .tool(tool, move |args, _cancel| {
            let result = for_tool.call(&args);
            async move { Ok(result) }
        })
        .hook_with_input(
            HookPoint::Stop,
            "Objects while todo items are open, saying how many times the model tried to finish.",
            &[InputField::Attempt],
            move |input, _cancel| {
                let attempt = input.get("attempt").and_then(serde_json::Value::as_u64);
                let answer = for_stop.stop_answer_at(attempt);
                async move { answer }
            },
        )
        .hook(
            HookPoint::PreCompact,
            "Pins the open todo items, for the summary to keep.",
            move |_cancel| {
                let answer = for_pins.pre_compact_answer();
                async move { answer }
            },
        )
        .hook(
            HookPoint::PostCompact,
            "Re-injects the todo list after a compaction.",
            move |_cancel| {
                let answer = for_compact.post_compact_answer();
                async move { answer }
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: serde_json::Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    fn text(result: &CallToolResult) -> String {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    #[test]
    fn read_replace_and_hooks() {
        let list = TodoList::default();
        assert_eq!(
            text(&list.call(&JsonObject::new())),
            "(the todo list is empty)"
        );
        assert_eq!(list.stop_answer(), "");
        assert_eq!(list.post_compact_answer(), "");
        let set = list.call(&args(
            json!({"items": [{"text": " write tests "}, {"text": "ship", "done": true}]}),
        ));
        assert_eq!(set.is_error, Some(false));
        assert_eq!(
            text(&set),
            "The todo list now holds 2 item(s):\n- [ ] write tests\n- [x] ship"
        );
        assert_eq!(
            list.stop_answer(),
            "1 todo item(s) are still open:\n- [ ] write tests\nFinish them, or mark them done with the todo tool if they are."
        );
        assert!(
            list.post_compact_answer()
                .ends_with("- [ ] write tests\n- [x] ship")
        );
        list.call(&args(
            json!({"items": [{"text": "write tests", "done": true}]}),
        ));
        assert_eq!(list.stop_answer(), "");
    }

    #[test]
    fn bad_items_are_refused_with_the_reason() {
        let list = TodoList::default();
        let cases = [
            (json!({"items": "x"}), "`items` must be a list, not \"x\""),
            (
                json!({"items": [{"text": "  "}]}),
                "item 1: the text is empty",
            ),
            (
                json!({"items": [{"text": "a"}, {"txt": "b"}]}),
                "item 2: unknown field `txt`, expected `text` or `done`",
            ),
            (
                json!({"items": [{"text": "a".repeat(501)}]}),
                "item 1: the text is longer than 500 characters",
            ),
            (
                json!({"items": vec![json!({"text": "a"}); 101]}),
                "101 items is more than 100",
            ),
        ];
        for (input, problem) in cases {
            let result = list.call(&args(input));
            assert_eq!(result.is_error, Some(true));
            assert!(
                text(&result).starts_with(&format!("the todo list was not changed: {problem}.")),
                "{}",
                text(&result)
            );
        }
        assert_eq!(
            text(&list.call(&JsonObject::new())),
            "(the todo list is empty)"
        );
    }

    fn two_open() -> TodoList {
        let list = TodoList::default();
        list.call(&args(json!({"items": [
            {"text": "write tests"},
            {"text": "ship", "done": true},
            {"text": "tag the release"}
        ]})));
        list
    }

    // The `_Stop` hook asks for `attempt` and counts from the second round
    // on; without it (an agent that sends `{}`), or with a value that is not
    // a count, it objects as before [K1], [K2].
    #[tokio::test]
    async fn stop_counts_attempts_from_its_input_k2() {
        let list = two_open();
        let server = server(list.clone());
        let schema = &server.listed("_Stop").unwrap().input_schema;
        assert_eq!(schema["properties"]["attempt"]["type"], "integer");
        let listed = hooks_core::ListedTool::from_schema("_Stop", schema);
        let (input, _) = hooks_core::HookInput::read(HookPoint::Stop, &listed);
        assert_eq!(input.fields(), [InputField::Attempt]);

        let plain = "2 todo item(s) are still open:\n- [ ] write tests\n- [ ] tag the release\n\
                     Finish them, or mark them done with the todo tool if they are.";
        assert_eq!(server.call_text("_Stop", json!({})).await, plain);
        assert_eq!(
            server.call_text("_Stop", json!({"attempt": 1})).await,
            plain
        );
        assert_eq!(
            server.call_text("_Stop", json!({"attempt": "two"})).await,
            plain
        );
        assert_eq!(
            server
                .call_text("_Stop", json!({"attempt": 3, "budget_left": 1}))
                .await,
            "You have tried to finish 3 times in this prompt, and 2 todo item(s) are still open:\n\
             - [ ] write tests\n- [ ] tag the release\n\
             Finish them, or mark them done with the todo tool if they are."
        );
        list.call(&args(
            json!({"items": [{"text": "write tests", "done": true}]}),
        ));
        assert_eq!(server.call_text("_Stop", json!({"attempt": 4})).await, "");
    }

    // `_PreCompact` pins the open items, and nothing when none is open [E5];
    // `_PostCompact` still re-injects the whole list [P2].
    #[tokio::test]
    async fn pre_compact_pins_the_open_items_e5() {
        let list = two_open();
        let server = server(list.clone());
        assert_eq!(
            server.listed("_PreCompact").unwrap().input_schema["type"],
            "object"
        );
        assert_eq!(
            server
                .call_text("_PreCompact", json!({"reason": "threshold"}))
                .await,
            "Open todo items; the work is not done until they are:\n\
             - [ ] write tests\n- [ ] tag the release"
        );
        assert!(
            server
                .call_text("_PostCompact", json!({}))
                .await
                .ends_with("- [ ] write tests\n- [x] ship\n- [ ] tag the release")
        );
        list.call(&args(json!({"items": [{"text": "ship", "done": true}]})));
        assert_eq!(server.call_text("_PreCompact", json!({})).await, "");
        assert_eq!(TodoList::default().pre_compact_answer(), "");
        let hooks: Vec<&str> = ["_Stop", "_PreCompact", "_PostCompact", "_PreToolUse"]
            .into_iter()
            .filter(|name| server.listed(name).is_some())
            .collect();
        assert_eq!(hooks, ["_Stop", "_PreCompact", "_PostCompact"]);
    }
}
