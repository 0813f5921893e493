//! Asking the person through the client: `session/request_permission`
//! before a project's servers start \[U3\], and for each tool call that
//! needs approval \[U4\]-\[U7\].
//!
//! Each question is sent from one of the session table's tasks, never from
//! an SDK handler: the SDK's dispatch waits for a handler to finish, so a
//! handler that awaited the client's answer would wait forever.

use std::sync::Arc;

use agent_client_protocol::v1::{ConnectionTo, schema as s};
use agent_client_protocol::{self as acp, Client};
use agent_loop::{Answer, ApprovalRequest, Approver, ToolOwner};
use async_trait::async_trait;

use crate::approve::{AskedAt, Remembered, how_to_allow};
use crate::render::printable;

/// The options of a tool call's question \[U7\].
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";
const REJECT_ALWAYS: &str = "reject_always";

/// What the client chose, by option id; `None` for `cancelled`.
async fn ask(
    client: &ConnectionTo<Client>,
    request: s::RequestPermissionRequest,
) -> Result<Option<String>, acp::Error> {
    let response = client.send_request(request).block_task().await?;
    Ok(match response.outcome {
        s::RequestPermissionOutcome::Selected(selected) => Some(selected.option_id.0.to_string()),
        _ => None,
    })
}

/// How the person answered about a project's untrusted servers \[U3\].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TrustAnswer {
    /// Trust them (recorded) and start them.
    Always,
    /// Start them for this session only.
    Once,
    /// Start none of them.
    Reject,
}

/// Asks the client whether the untrusted servers of `file` (each as
/// `shown`) may start, for session `session` \[U3\]. A client that cannot
/// be asked, or cancels, starts none of them.
pub(super) async fn trust(
    client: &ConnectionTo<Client>,
    session: &str,
    file: &std::path::Path,
    shown: &[String],
) -> Result<TrustAnswer, String> {
    let text = crate::trust::listing(file, shown);
    let call = s::ToolCallUpdate::new(
        format!("sprout-trust-{session}"),
        s::ToolCallUpdateFields::new()
            .title(format!(
                "Start the MCP servers of {}?",
                printable(&file.display().to_string())
            ))
            .kind(s::ToolKind::Execute)
            .status(s::ToolCallStatus::Pending)
            .content(vec![s::ToolCallContent::from(text)]),
    );
    let options = vec![
        s::PermissionOption::new(
            ALLOW_ALWAYS,
            "Trust them and start them",
            s::PermissionOptionKind::AllowAlways,
        ),
        s::PermissionOption::new(
            ALLOW_ONCE,
            "Start them for this session",
            s::PermissionOptionKind::AllowOnce,
        ),
        s::PermissionOption::new(
            REJECT_ONCE,
            "Do not start them",
            s::PermissionOptionKind::RejectOnce,
        ),
    ];
    let request = s::RequestPermissionRequest::new(session.to_owned(), call, options);
    match ask(client, request).await {
        Ok(Some(option)) if option == ALLOW_ALWAYS => Ok(TrustAnswer::Always),
        Ok(Some(option)) if option == ALLOW_ONCE => Ok(TrustAnswer::Once),
        Ok(_) => Ok(TrustAnswer::Reject),
        Err(e) => Err(e.to_string()),
    }
}

/// The person behind the client, asked about each tool call that needs
/// approval: the tool call the client already shows, with the options
/// `allow_once`, `allow_always`, `reject_once` and `reject_always` \[U7\].
pub(super) struct ClientApprover {
    pub(super) client: ConnectionTo<Client>,
    pub(super) session: s::SessionId,
    pub(super) remembered: Remembered,
}

#[async_trait]
impl Approver for ClientApprover {
    fn allowed_always(&self, owner: &ToolOwner) -> bool {
        self.remembered.allowed(owner)
    }

    async fn ask(&self, request: &ApprovalRequest) -> Answer {
        let call = s::ToolCallUpdate::new(
            request.call.id.clone(),
            s::ToolCallUpdateFields::new().status(s::ToolCallStatus::Pending),
        );
        let options = vec![
            s::PermissionOption::new(ALLOW_ONCE, "Allow once", s::PermissionOptionKind::AllowOnce),
            s::PermissionOption::new(
                ALLOW_ALWAYS,
                "Always allow",
                s::PermissionOptionKind::AllowAlways,
            ),
            s::PermissionOption::new(REJECT_ONCE, "Reject", s::PermissionOptionKind::RejectOnce),
            s::PermissionOption::new(
                REJECT_ALWAYS,
                "Reject for this session",
                s::PermissionOptionKind::RejectAlways,
            ),
        ];
        let question = s::RequestPermissionRequest::new(self.session.clone(), call, options);
        let file = self.remembered.file_of(&request.owner);
        let nobody = |why: &str| Answer::Unanswered {
            how: format!(
                "{why} {}",
                how_to_allow(&request.owner, file.as_deref(), AskedAt::Editor)
            ),
        };
        match ask(&self.client, question).await {
            Ok(Some(option)) => match option.as_str() {
                ALLOW_ONCE => Answer::AllowOnce,
                ALLOW_ALWAYS => {
                    self.remembered.allow(&request.owner);
                    Answer::AllowAlways
                }
                REJECT_ONCE => Answer::Deny { reason: None },
                REJECT_ALWAYS => Answer::DenySession { reason: None },
                other => nobody(&format!(
                    "The client chose an option Sprout did not offer ({:?}).",
                    printable(other)
                )),
            },
            Ok(None) => nobody("The client cancelled the question."),
            Err(e) => nobody(&format!("The client could not be asked ({e}).")),
        }
    }
}

/// A [`ClientApprover`] behind the trait, for [`agent_loop::Approval`].
pub(super) fn approver(approver: ClientApprover) -> Arc<dyn Approver> {
    Arc::new(approver)
}
