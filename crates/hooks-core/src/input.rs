//! Hook input by schema: \[K1\]-\[K4\], \[H5\].
//!
//! A hook receives `{}` unless its `inputSchema.properties` names fields of
//! the table of \[K2\] ([`InputField`]); then it receives exactly the named
//! fields that apply at its hook point, never one its schema did not name, so
//! a server written for the seed, or one that refuses unknown fields, sees no
//! change. The core learns the names when a server lists its tools
//! ([`ListedTool`]), keeps what each hook asked for ([`HookInput`]) and builds
//! every call's arguments from the facts of its question.

use crate::prelude::*;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::answer::{MAX_ANSWER_BYTES, cut};
use crate::name::HookPoint;

/// The longest string value a hook input carries, in bytes \[K3\]; longer ones
/// are cut as answers are \[R4\].
pub const MAX_INPUT_STRING_BYTES: usize = MAX_ANSWER_BYTES;

/// One tool of a server's `tools/list`: its bare name and the property names
/// its `inputSchema` gives. Only hooks' schemas matter to the core.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListedTool {
    /// The bare name.
    pub name: String,
    /// The keys of `inputSchema.properties`, in the schema's order.
    pub properties: Vec<String>,
    /// The strings of `inputSchema.required`, in order.
    pub required: Vec<String>,
}

impl ListedTool {
    /// A tool whose schema names no property (or that the driver did not
    /// read): its hook, if it is one, gets `{}` \[H5\].
    pub fn named(name: impl Into<String>) -> ListedTool {
        ListedTool {
            name: name.into(),
            properties: Vec::new(),
            required: Vec::new(),
        }
    }

    /// A tool with its `inputSchema` object as the server sent it. Anything
    /// that is not an object under `properties` or a string under
    /// `required` is ignored.
    pub fn from_schema(name: impl Into<String>, input_schema: &Map<String, Value>) -> ListedTool {
        let properties = match input_schema.get("properties") {
            Some(Value::Object(properties)) => properties.keys().cloned().collect(),
            _ => Vec::new(),
        };
        let required = match input_schema.get("required") {
            Some(Value::Array(required)) => required
                .iter()
                .filter_map(|r| r.as_str().map(ToOwned::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        ListedTool {
            name: name.into(),
            properties,
            required,
        }
    }
}

impl From<&str> for ListedTool {
    fn from(name: &str) -> ListedTool {
        ListedTool::named(name)
    }
}

impl From<String> for ListedTool {
    fn from(name: String) -> ListedTool {
        ListedTool::named(name)
    }
}

/// A field of the hook input table \[K2\].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputField {
    /// The agent's session id (every hook point).
    SessionId,
    /// The agent's working directory (every hook point).
    Cwd,
    /// The prompt's text (`_UserPromptSubmit`).
    Prompt,
    /// 1 for the prompt's first `_Stop` round, then 2, … (`_Stop`).
    Attempt,
    /// Objections the budget still allows, before this round (`_Stop`).
    BudgetLeft,
    /// The text of the model's last answer (`_Stop`).
    LastAssistantMessage,
    /// The bare tool name (`_PreToolUse`, `_PostToolUse`).
    Tool,
    /// The tool's server (`_PreToolUse`, `_PostToolUse`).
    Server,
    /// The tool call's arguments (`_PreToolUse`, `_PostToolUse`).
    Arguments,
    /// The tool's output text (`_PostToolUse`).
    Output,
    /// Whether the tool's result is an error (`_PostToolUse`).
    IsError,
    /// The compaction summary, after a summary handoff (`_PostCompact`).
    Summary,
    /// What `_PreCompact` pinned \[E5\] (`_PostCompact`).
    Pins,
    /// Why: `threshold` (`_PreCompact`); `exit`, `closed`, `disconnected`,
    /// `signal` (`_SessionEnd`).
    Reason,
}

impl InputField {
    /// Every field, in the table's order.
    pub const ALL: [InputField; 14] = [
        InputField::SessionId,
        InputField::Cwd,
        InputField::Prompt,
        InputField::Attempt,
        InputField::BudgetLeft,
        InputField::LastAssistantMessage,
        InputField::Tool,
        InputField::Server,
        InputField::Arguments,
        InputField::Output,
        InputField::IsError,
        InputField::Summary,
        InputField::Pins,
        InputField::Reason,
    ];

    /// The property name, as a schema writes it.
    pub const fn name(self) -> &'static str {
        match self {
            InputField::SessionId => "session_id",
            InputField::Cwd => "cwd",
            InputField::Prompt => "prompt",
            InputField::Attempt => "attempt",
            InputField::BudgetLeft => "budget_left",
            InputField::LastAssistantMessage => "last_assistant_message",
            InputField::Tool => "tool",
            InputField::Server => "server",
            InputField::Arguments => "arguments",
            InputField::Output => "output",
            InputField::IsError => "is_error",
            InputField::Summary => "summary",
            InputField::Pins => "pins",
            InputField::Reason => "reason",
        }
    }

    /// The field a property name names, if any. Exact and case-sensitive.
    pub fn from_name(name: &str) -> Option<InputField> {
        InputField::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the field applies at `hook` \[K2\].
    pub fn applies_at(self, hook: HookPoint) -> bool {
        use HookPoint as H;
        match self {
            InputField::SessionId | InputField::Cwd => true,
            InputField::Prompt => hook == H::UserPromptSubmit,
            InputField::Attempt | InputField::BudgetLeft | InputField::LastAssistantMessage => {
                hook == H::Stop
            }
            InputField::Tool | InputField::Server | InputField::Arguments => {
                matches!(hook, H::PreToolUse | H::PostToolUse)
            }
            InputField::Output | InputField::IsError => hook == H::PostToolUse,
            InputField::Summary | InputField::Pins => hook == H::PostCompact,
            InputField::Reason => matches!(hook, H::PreCompact | H::SessionEnd),
        }
    }
}

/// What one hook asked for: the fields its schema names that apply at its
/// hook point \[K1\], in the table's order. Empty: the hook gets `{}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookInput {
    /// Invariant: every field applies at the hook's point; no repeats; table order.
    fields: Vec<InputField>,
}

impl HookInput {
    /// Reads the schema of `tool`, the listing of `hook`: what it asked for,
    /// and the `required` properties the agent cannot fill there \[K4\].
    pub fn read(hook: HookPoint, tool: &ListedTool) -> (HookInput, Vec<String>) {
        let fields = InputField::ALL
            .into_iter()
            .filter(|f| f.applies_at(hook) && tool.properties.iter().any(|p| p == f.name()))
            .collect();
        let unfillable = tool
            .required
            .iter()
            .filter(|r| !InputField::from_name(r).is_some_and(|f| f.applies_at(hook)))
            .cloned()
            .collect();
        (HookInput { fields }, unfillable)
    }

    /// The fields, in the table's order.
    pub fn fields(&self) -> &[InputField] {
        &self.fields
    }

    /// The arguments of one call: every asked-for field that `facts` has a
    /// value for, and nothing else \[K1\].
    pub(crate) fn arguments(&self, facts: &Facts) -> Map<String, Value> {
        self.fields
            .iter()
            .filter_map(|f| Some((f.name().to_owned(), facts.get(*f)?.clone())))
            .collect()
    }
}

/// The values one hook call may be given, each already capped \[K3\]. A
/// field without a value is left out of the input even if asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Invariant: at most one value per field; every string in it at most
    /// `MAX_INPUT_STRING_BYTES` plus the cut marker.
    values: Vec<(InputField, Value)>,
}

impl Facts {
    /// Sets `field` to `value`, cutting every string in it \[K3\].
    pub(crate) fn set(&mut self, field: InputField, mut value: Value) {
        cap_strings(&mut value);
        self.values.retain(|(f, _)| *f != field);
        self.values.push((field, value));
    }

    /// Sets `field` to a string, cut \[K3\].
    pub(crate) fn set_str(&mut self, field: InputField, value: &str) {
        self.set(field, Value::String(value.to_owned()));
    }

    /// These facts with every value of `more` added (overriding).
    pub(crate) fn with(mut self, more: &Facts) -> Facts {
        for (field, value) in &more.values {
            self.values.retain(|(f, _)| f != field);
            self.values.push((*field, value.clone()));
        }
        self
    }

    fn get(&self, field: InputField) -> Option<&Value> {
        self.values
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| v)
    }
}

/// Cuts every string in `value`, at any depth, to \[K3\]'s cap.
fn cap_strings(value: &mut Value) {
    match value {
        Value::String(s) if s.len() > MAX_INPUT_STRING_BYTES => {
            *s = cut(core::mem::take(s), MAX_INPUT_STRING_BYTES, "hook input");
        }
        Value::Array(items) => items.iter_mut().for_each(cap_strings),
        Value::Object(map) => map.values_mut().for_each(cap_strings),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(properties: &[&str], required: &[&str]) -> ListedTool {
        let schema = serde_json::json!({
            "type": "object",
            "properties": properties.iter().map(|p| (p.to_string(), serde_json::json!({}))).collect::<Map<_, _>>(),
            "required": required,
        });
        ListedTool::from_schema("_Stop", schema.as_object().unwrap())
    }

    // [K1]: only named fields that apply at the hook point; unknown names never.
    #[test]
    fn only_named_fields_that_apply_k1() {
        let listed = tool(&["attempt", "prompt", "session_id", "colour"], &[]);
        let (input, unfillable) = HookInput::read(HookPoint::Stop, &listed);
        assert_eq!(input.fields(), [InputField::SessionId, InputField::Attempt]);
        assert!(unfillable.is_empty());
        let (none, _) = HookInput::read(HookPoint::Stop, &ListedTool::named("_Stop"));
        assert!(none.fields().is_empty());
        let mut facts = Facts::default();
        facts.set_str(InputField::SessionId, "s-1");
        facts.set(InputField::Attempt, Value::from(2));
        facts.set_str(InputField::Prompt, "not for _Stop");
        let args = input.arguments(&facts);
        // Compared as JSON, not as text: key order is serde_json's (sorted,
        // or insertion order where the workspace turns on `preserve_order`).
        assert_eq!(
            Value::Object(args),
            serde_json::json!({"attempt": 2, "session_id": "s-1"})
        );
        assert!(none.arguments(&facts).is_empty());
    }

    // [K3]: every string value, nested ones too, is cut at 16 KiB with a marker.
    #[test]
    fn long_strings_are_cut_k3() {
        let mut facts = Facts::default();
        let long = "é".repeat(MAX_INPUT_STRING_BYTES);
        facts.set(
            InputField::Arguments,
            serde_json::json!({"content": long, "n": 1}),
        );
        let Some(Value::Object(args)) = facts.get(InputField::Arguments) else {
            panic!()
        };
        let content = args["content"].as_str().unwrap();
        assert!(
            content.len() < MAX_INPUT_STRING_BYTES + 80,
            "{}",
            content.len()
        );
        assert!(content.ends_with("[sprout: hook input cut here, 16384 more bytes not shown]"));
        assert_eq!(args["n"], 1);
    }

    // [K4]: a required property the agent cannot fill at that point is reported.
    #[test]
    fn unfillable_required_properties_k4() {
        let listed = tool(&["prompt", "budget_left"], &["prompt", "budget_left", "x"]);
        let (_, unfillable) = HookInput::read(HookPoint::Stop, &listed);
        assert_eq!(unfillable, ["prompt", "x"]);
        let (_, none) =
            HookInput::read(HookPoint::UserPromptSubmit, &tool(&["prompt"], &["prompt"]));
        assert!(none.is_empty());
    }

    #[test]
    fn field_names_round_trip() {
        for field in InputField::ALL {
            assert_eq!(InputField::from_name(field.name()), Some(field));
            assert_eq!(
                serde_json::to_value(field).unwrap(),
                Value::String(field.name().into())
            );
        }
    }
}
