//! Reading rmcp results into the core's terms, and into tool output for the
//! model.
//!
//! A hook's `CallToolResult` or error becomes a [`hooks_core::HookReply`]; the
//! core then reads it \[R1\]-\[R3\]. A model tool's result becomes a
//! [`ToolOutput`]: text for the model, capped in size.

use hooks_core::{HookReply, ReplyPart};
use rmcp::ServiceError;
use rmcp::model::{CallToolResult, ContentBlock};

/// What a model tool call produced, as the model will read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text of the result.
    pub text: String,
    /// Whether it is an error result (the model is told so).
    pub is_error: bool,
}

impl ToolOutput {
    /// An error result with this text.
    pub fn error(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: true,
        }
    }
}

/// The answer of a hook call, for the core \[R1\]-\[R3\]. Content items keep
/// their order; only text items carry text.
pub(crate) fn hook_reply(result: Result<CallToolResult, ServiceError>) -> HookReply {
    match result {
        Ok(result) => {
            let parts = result
                .content
                .iter()
                .map(|block| match block.as_text() {
                    Some(text) => ReplyPart::Text(text.text.clone()),
                    None => ReplyPart::Other,
                })
                .collect();
            if result.is_error == Some(true) {
                HookReply::ErrorResult(parts)
            } else {
                HookReply::Result(parts)
            }
        }
        Err(ServiceError::McpError(error)) => HookReply::RpcError {
            code: i64::from(error.code.0),
            message: error.message.to_string(),
        },
        Err(ServiceError::TransportClosed) => HookReply::Crashed,
        Err(other) => HookReply::TransportFailed(describe_service_error(&other)),
    }
}

/// The output of a model tool call, capped at `max_bytes` of text.
pub(crate) fn tool_output(
    result: Result<CallToolResult, ServiceError>,
    max_bytes: usize,
) -> ToolOutput {
    match result {
        Ok(result) => {
            let mut text = String::new();
            for block in &result.content {
                if !text.is_empty() {
                    text.push('\n');
                }
                describe(block, &mut text);
            }
            if text.is_empty()
                && let Some(structured) = &result.structured_content
            {
                text = structured.to_string();
            }
            ToolOutput {
                text: hooks_core::answer::cut(text, max_bytes, "tool output"),
                is_error: result.is_error == Some(true),
            }
        }
        Err(ServiceError::McpError(error)) => ToolOutput::error(format!(
            "tool call failed: {} (code {})",
            error.message, error.code.0
        )),
        Err(ServiceError::TransportClosed) => {
            ToolOutput::error("tool call failed: the tool server exited during the call")
        }
        Err(other) => ToolOutput::error(format!(
            "tool call failed: {}",
            describe_service_error(&other)
        )),
    }
}

/// An rmcp call error in words a person can act on. rmcp's own texts name
/// Rust types (`Transport [AsyncRwTransport<…>] error`); these do not.
pub(crate) fn describe_service_error(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(error) => format!("{} (code {})", error.message, error.code.0),
        ServiceError::TransportSend(error) => {
            format!("the request could not be sent: {}", error.error)
        }
        ServiceError::TransportClosed => "the connection to the server closed".into(),
        ServiceError::UnexpectedResponse => {
            "the server answered with a result of the wrong kind".into()
        }
        ServiceError::Cancelled { .. } => "the request was cancelled".into(),
        ServiceError::Timeout { timeout } => {
            format!("no answer within {} ms", timeout.as_millis())
        }
        other => other.to_string(),
    }
}

fn describe(block: &ContentBlock, out: &mut String) {
    if let Some(text) = block.as_text() {
        out.push_str(&text.text);
        return;
    }
    match block {
        ContentBlock::Image(image) => out.push_str(&format!("[image: {}]", image.mime_type)),
        ContentBlock::Audio(audio) => out.push_str(&format!("[audio: {}]", audio.mime_type)),
        ContentBlock::Resource(resource) => match resource.get_text() {
            text if !text.is_empty() => out.push_str(&text),
            _ => out.push_str("[embedded resource]"),
        },
        ContentBlock::ResourceLink(link) => out.push_str(&format!("[resource: {}]", link.uri)),
        _ => out.push_str("[unsupported content]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ErrorData;

    #[test]
    fn results_map_to_the_cores_replies_r1_r3() {
        let ok = CallToolResult::success(vec![
            ContentBlock::text("a"),
            ContentBlock::image("aGk=", "image/png"),
            ContentBlock::text("b"),
        ]);
        assert_eq!(
            hook_reply(Ok(ok)),
            HookReply::Result(vec![
                ReplyPart::Text("a".into()),
                ReplyPart::Other,
                ReplyPart::Text("b".into())
            ])
        );
        let failed = CallToolResult::error(vec![ContentBlock::text("boom")]);
        assert_eq!(
            hook_reply(Ok(failed)),
            HookReply::ErrorResult(vec![ReplyPart::Text("boom".into())])
        );
        let rpc = ServiceError::McpError(ErrorData::invalid_params("no such tool", None));
        assert_eq!(
            hook_reply(Err(rpc)),
            HookReply::RpcError {
                code: -32602,
                message: "no such tool".into()
            }
        );
        assert_eq!(
            hook_reply(Err(ServiceError::TransportClosed)),
            HookReply::Crashed
        );
    }

    #[test]
    fn tool_output_is_text_and_capped() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("line one"),
            ContentBlock::image("aGk=", "image/png"),
            ContentBlock::text("é".repeat(100)),
        ]);
        let out = tool_output(Ok(result), 30);
        assert!(!out.is_error);
        assert!(
            out.text.starts_with("line one\n[image: image/png]\n"),
            "{}",
            out.text
        );
        assert!(
            out.text.contains("[sprout: tool output cut here"),
            "{}",
            out.text
        );
        let err = tool_output(
            Ok(CallToolResult::error(vec![ContentBlock::text("bad")])),
            100,
        );
        assert_eq!(err, ToolOutput::error("bad"));
    }
}
