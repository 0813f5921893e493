//! What the providers' typed wire formats share: decoding an answer so that
//! an error names the JSON path of what was wrong, the serde helpers that
//! keep the decoding as lenient as the APIs' many implementations need, and
//! the JSON text of a tool call in the \[V1\] fallback.

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde::ser::{Serialize, Serializer};
use serde_json::error::Category;

use crate::message::ToolCall;
use crate::model::ModelError;

/// How many characters of an answer's start an error message quotes.
const START_CHARS: usize = 120;

/// Decodes a JSON answer, an object, as `T`. A body that is not JSON is named
/// as such; a value of the wrong type is named by its path
/// (`choices[0].message.content: invalid type: …`). Both quote the answer's
/// start, to tell which server or proxy answered.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ModelError> {
    let start = || -> String {
        String::from_utf8_lossy(bytes)
            .chars()
            .take(START_CHARS)
            .collect()
    };
    // serde reads a struct from an array too, field by field in order: an
    // array is named as one, not by its elements.
    let array = bytes.trim_ascii_start().starts_with(b"[");
    let not_an_object = || {
        ModelError::Malformed(format!(
            "the answer is a JSON array, not an object: {:?}",
            start()
        ))
    };
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let (path, inner) = match serde_path_to_error::deserialize(&mut json) {
        // Trailing bytes after the value are checked as `serde_json::from_slice` does.
        Ok(value) => match json.end() {
            Ok(()) if array => return Err(not_an_object()),
            Ok(()) => return Ok(value),
            Err(e) => (None, e),
        },
        Err(e) => {
            let path = e.path();
            let path = (path.iter().len() > 0).then(|| path.to_string());
            (path, e.into_inner())
        }
    };
    let start = start();
    let what = match (inner.classify(), path) {
        (Category::Syntax | Category::Eof | Category::Io, _) => {
            return Err(ModelError::Malformed(format!(
                "the body is not JSON ({inner}): {start:?}"
            )));
        }
        (Category::Data, _) if array => return Err(not_an_object()),
        (Category::Data, Some(path)) => format!("{path}: {inner}"),
        (Category::Data, None) => inner.to_string(),
    };
    Err(ModelError::Malformed(format!(
        "{what}; the answer began {start:?}"
    )))
}

/// For a field whose value the API's implementations disagree on: the value
/// as `T` if it is one, `None` if it is anything else (the field must also be
/// `#[serde(default)]`, for when it is absent). An array is never a `T`:
/// serde would read a struct's fields from one by position.
pub(crate) fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    if value.is_array() {
        return Ok(None);
    }
    Ok(T::deserialize(value).ok())
}

/// For an object the API may send as `null`: `null` reads as the empty
/// object, so its fields' own checks name what is missing (the field must
/// also be `#[serde(default)]`, for when it is absent).
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Some(
        Option::<T>::deserialize(deserializer)?.unwrap_or_default(),
    ))
}

/// A value sent as a JSON string holding its JSON text (the \[V1\]
/// fallback). Encoded when the request is, so an error (there is none for
/// the types it wraps) fails the request instead of a panic.
#[derive(Debug)]
pub(crate) struct JsonText<T>(pub(crate) T);

impl<T: Serialize> Serialize for JsonText<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(&self.0).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }
}

/// `{"tool_call": {...}}`: a tool call as text \[V1\], alike for both
/// providers.
#[derive(Debug, serde::Serialize)]
pub(crate) struct ToolCallText<'a> {
    tool_call: ToolCallFields<'a>,
}

/// The fields in alphabetical order: the order of the text the providers
/// sent when it was built as a `serde_json::Value`, kept so the model sees
/// the same text.
#[derive(Debug, serde::Serialize)]
struct ToolCallFields<'a> {
    arguments: &'a str,
    id: &'a str,
    name: &'a str,
}

impl<'a> ToolCallText<'a> {
    pub(crate) fn new(call: &'a ToolCall) -> ToolCallText<'a> {
        ToolCallText {
            tool_call: ToolCallFields {
                arguments: &call.arguments,
                id: &call.id,
                name: &call.name,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Outer {
        #[allow(dead_code)]
        items: Vec<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Inner {
        #[allow(dead_code)]
        n: u32,
    }

    // However large the answer, the message quotes its start only.
    #[test]
    fn errors_quote_a_bounded_start_of_the_answer() {
        let big = format!(
            r#"{{"pad": "{}", "items": [{{"n": 1}}, {{"n": "2"}}]}}"#,
            "é".repeat(100_000)
        );
        let Err(ModelError::Malformed(e)) = decode::<Outer>(big.as_bytes()) else {
            panic!("decoded");
        };
        assert!(
            e.starts_with("items[1].n: invalid type: string \"2\", expected u32"),
            "{e}"
        );
        let start: String = big.chars().take(START_CHARS).collect();
        assert!(e.ends_with(&format!("; the answer began {start:?}")), "{e}");
        assert!(e.len() < 500, "{e}");

        let truncated = format!(r#"{{"pad": "{}"#, "é".repeat(100_000));
        let Err(ModelError::Malformed(e)) = decode::<Outer>(truncated.as_bytes()) else {
            panic!("decoded");
        };
        assert!(
            e.starts_with("the body is not JSON (EOF while parsing"),
            "{e}"
        );
        assert!(e.len() < 500, "{e}");
    }

    // Valid arrays, even one serde could read as the struct, are named as
    // arrays; a broken one is not JSON.
    #[test]
    fn an_array_is_no_answer() {
        for body in ["[]", " [[{\"n\": 1}]]", "[1]"] {
            let Err(ModelError::Malformed(e)) = decode::<Outer>(body.as_bytes()) else {
                panic!("decoded {body}");
            };
            assert_eq!(
                e,
                format!("the answer is a JSON array, not an object: {body:?}")
            );
        }
        let Err(ModelError::Malformed(e)) = decode::<Outer>(b"[") else {
            panic!("decoded");
        };
        assert!(e.starts_with("the body is not JSON (EOF"), "{e}");
    }

    #[test]
    fn json_text_is_a_string_of_json() {
        let call = ToolCall {
            id: "c".into(),
            name: "n".into(),
            arguments: r#"{"a":"\u0001"}"#.into(),
        };
        let sent = serde_json::to_value(JsonText(ToolCallText::new(&call))).unwrap();
        let text = sent.as_str().unwrap();
        assert_eq!(
            text,
            r#"{"tool_call":{"arguments":"{\"a\":\"\\u0001\"}","id":"c","name":"n"}}"#
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(text).unwrap()["tool_call"]["arguments"],
            call.arguments
        );
    }
}
