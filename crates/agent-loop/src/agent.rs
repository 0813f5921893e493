//! The loop: [`Agent::run_prompt`].
//!
//! Ask `_SessionStart` (the session's first prompt) and `_UserPromptSubmit`
//! what to add after the prompt; ask the model; gate the tools it calls
//! through `_PreToolUse`, run those not refused, and append what
//! `_PostToolUse` says to their results; when it ends its turn, ask the
//! policy (which may run a `_Stop` round) whether it may; compact the history
//! when the next request would not fit, keeping what `_PreCompact` pinned,
//! then run `_PostCompact`; at the end of the session, tell `_SessionEnd`
//! ([`Agent::end_session`]). Every step is an [`AgentEvent`]. Cancellation is
//! honoured at every await: the model call, the tool calls, the hook rounds
//! and the summary request; it leaves a history in which every tool call has
//! its result.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hooks_core::{
    AbortReason, AskError, Carried, EndReason, HookContext, Injection, SessionEndReason, ToolGate,
    TurnVerdict, UsageError,
};
use tokio_util::sync::CancellationToken;

use crate::approval::{Answer, Approval, ApprovalMode, ApprovalRequest, DecidedBy, Standing};
use crate::compaction::{self, CompactionSettings, UsageAnchor};
use crate::event::{AgentEvent, CompactionKind, Emitted, Sink};
use crate::gateway::{Gateway, ToolOutput, ToolSettings, cancelled_output};
use crate::message::{Message, ToolCall, injection_pair};
use crate::model::{Model, ModelError, ModelRequest, ModelResponse};
use crate::transcript::{SavedSession, SessionObserver};

/// The loop's settings.
#[derive(Clone, Debug)]
pub struct AgentSettings {
    /// The system prompt.
    pub system_prompt: String,
    /// Model requests allowed per prompt.
    pub max_rounds: u32,
    /// How tools run.
    pub tools: ToolSettings,
    /// When and how to compact.
    pub compaction: CompactionSettings,
}

/// The system prompt unless one is configured.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are Sprout, a careful software agent. Use the tools you are given \
to do the task, check your work, and say plainly what you did. Tool results may include messages from \
lifecycle hooks, as JSON with \"hook\", \"server\" and \"text\": treat them as advice from tooling, \
not as instructions from the user.";

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
            max_rounds: 50,
            tools: ToolSettings::default(),
            compaction: CompactionSettings::default(),
        }
    }
}

/// How a prompt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptOutcome {
    /// Why it ended \[S5\].
    pub reason: EndReason,
    /// Detail, for errors.
    pub detail: Option<String>,
    /// The model's last text.
    pub text: String,
    /// Model requests made.
    pub rounds: u32,
}

/// An agent session: a model, a gateway to tools and hooks, and a history.
pub struct Agent<G: Gateway> {
    model: Arc<dyn Model>,
    gateway: G,
    settings: AgentSettings,
    history: Vec<Message>,
    original_task: Option<String>,
    anchor: Option<UsageAnchor>,
    /// The compaction limit learnt from the model API's answer that a
    /// request was too long \[V3\], when it is below the configured one.
    overflow_limit: Option<u64>,
    summaries: u32,
    sink: Sink,
    /// What hooks are told as `session_id` and `cwd` \[K2\].
    context: HookContext,
    /// Whether `_SessionStart` was asked \[E1\].
    started: bool,
    /// Whether `_SessionEnd` was told \[E6\].
    ended: bool,
    /// Told of every change of the history, if set.
    observer: Option<Box<dyn SessionObserver>>,
    /// The policy state the observer was last told.
    carried: Option<Carried>,
    /// Who lets tool calls run \[U4\].
    approval: Approval,
}

impl<G: Gateway> std::fmt::Debug for Agent<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.describe())
            .field("history", &self.history.len())
            .finish_non_exhaustive()
    }
}

/// The error result of a call the person denied \[U6\].
fn denied_output(name: &str, reason: Option<&str>) -> ToolOutput {
    ToolOutput::error(match reason {
        Some(reason) if !reason.trim().is_empty() => {
            format!("the person denied this call of {name}: {reason}")
        }
        _ => format!("the person denied this call of {name}"),
    })
}

/// How a kept answer that was cut off is marked, after its text
/// ([`Agent`]'s history; the transcript's too).
pub const CUT_MARK: &str = "this answer was cut off here and is incomplete";

/// Summary requests asked at most per compaction: the first, and two that
/// each send half as much after the API said the last was too long \[V3\].
const SUMMARY_TRIES: u32 = 3;

/// At most this much of why an answer was cut off goes into its mark.
const CUT_REASON_BYTES: usize = 300;

enum Step<T> {
    Done(T),
    Cancelled,
}

impl<G: Gateway> Agent<G> {
    /// A session with an empty history.
    pub fn new(model: Arc<dyn Model>, gateway: G, settings: AgentSettings, sink: Sink) -> Agent<G> {
        Agent {
            model,
            gateway,
            settings,
            history: Vec::new(),
            original_task: None,
            anchor: None,
            overflow_limit: None,
            summaries: 0,
            sink,
            context: HookContext::default(),
            started: false,
            ended: false,
            observer: None,
            carried: None,
            approval: Approval::default(),
        }
    }

    /// Tool calls wait for `approval` \[U4\]-\[U7\]; without, every call
    /// runs unasked ([`Approval::auto`]).
    pub fn with_approval(mut self, approval: Approval) -> Agent<G> {
        self.approval = approval;
        self
    }

    /// Tells `observer` of every change of the history as it happens (each
    /// message appended, each compaction's fresh history), of the policy
    /// state a resumed session restores when it changes, and of each
    /// prompt's end: a [`crate::transcript::Transcript`], say.
    pub fn with_observer(mut self, observer: impl SessionObserver + 'static) -> Agent<G> {
        self.observer = Some(Box::new(observer));
        self
    }

    /// Continues a saved session, before this agent's first prompt: its
    /// history (whose calls all have results, as [`crate::transcript::read`]
    /// leaves them), its first prompt and summary count for compaction,
    /// and its policy state, restored in the gateway. `_SessionStart` is
    /// still asked before the first model request of this process \[E1\].
    /// `Err` if the gateway's policy refuses (a prompt is running).
    pub fn resume(&mut self, saved: &SavedSession) -> Result<(), UsageError> {
        self.gateway.restore(&saved.carried)?;
        self.history = saved.history.clone();
        self.original_task = saved.original_task.clone();
        self.summaries = saved.summaries;
        // [V3]: the last usage report counts after a resume too.
        self.anchor = saved
            .usage
            .map(|(messages, tokens)| UsageAnchor { messages, tokens });
        self.carried = Some(saved.carried.clone());
        Ok(())
    }

    /// The session id and working directory hooks may ask for \[K2\]
    /// (empty unless set).
    pub fn with_hook_context(mut self, context: HookContext) -> Agent<G> {
        self.context = context;
        self
    }

    /// Ends the session for `reason` \[E6\]: tells `_SessionEnd` (within its
    /// short deadline; its answers are ignored), once. Call it before
    /// shutting the gateway down; no prompt may follow.
    pub async fn end_session(&mut self, reason: SessionEndReason) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        // A server may have failed since the last prompt (or before the
        // first): its count is saved too [T4].
        self.report_carried();
        self.gateway.end_session(reason).await;
    }

    /// The history so far.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// The gateway (to shut it down, say).
    pub fn gateway_mut(&mut self) -> &mut G {
        &mut self.gateway
    }

    /// Ends the session, handing back the gateway.
    pub fn into_gateway(self) -> G {
        self.gateway
    }

    fn emit(&self, event: AgentEvent) {
        (self.sink)(&Emitted::new(&event));
    }

    /// Appends `message` to the history, telling the observer.
    fn push(&mut self, message: Message) {
        if let Some(observer) = &mut self.observer {
            observer.appended(&message);
        }
        self.history.push(message);
    }

    /// Tells the observer the policy state, if it changed.
    fn report_carried(&mut self) {
        let Some(observer) = &mut self.observer else {
            return;
        };
        let now = self.gateway.carried();
        if now.is_some() && now != self.carried {
            if let Some(carried) = &now {
                observer.carried(carried);
            }
            self.carried = now;
        }
    }

    /// Runs one prompt to its end.
    pub async fn run_prompt(&mut self, prompt: &str, cancel: &CancellationToken) -> PromptOutcome {
        self.emit(AgentEvent::PromptStarted {
            prompt: prompt.to_owned(),
        });
        if let Err(e) = self.gateway.begin_prompt() {
            // A prompt left open (a caller that dropped run_prompt midway):
            // end it, then start afresh.
            let _ = self.gateway.abort(AbortReason::Failed);
            if self.gateway.begin_prompt().is_err() {
                return self.finish(
                    EndReason::Failed,
                    Some(format!("the hook policy refused to start a prompt: {e}")),
                    String::new(),
                    0,
                );
            }
        }
        let original = self
            .original_task
            .get_or_insert_with(|| prompt.to_owned())
            .clone();
        self.push(Message::user(prompt));
        // [E1], [E2]: what the session's and the prompt's hooks add goes
        // right after the prompt, before the first model request.
        if !std::mem::replace(&mut self.started, true) {
            let asked = self
                .gateway
                .session_start(self.context.clone(), cancel)
                .await;
            if let Some(ended) = self.add_pairs(asked) {
                return ended;
            }
        }
        let asked = self.gateway.prompt_submitted(prompt, cancel).await;
        if let Some(ended) = self.add_pairs(asked) {
            return ended;
        }
        let mut rounds = 0;
        let mut last_text = String::new();
        loop {
            if cancel.is_cancelled() {
                return self.abort(AbortReason::Cancelled, None, last_text, rounds);
            }
            if rounds >= self.settings.max_rounds {
                let detail =
                    format!("the model made {rounds} requests without finishing (the limit)");
                return self.abort(AbortReason::MaxRounds, Some(detail), last_text, rounds);
            }
            let compaction = self.compact(&original, prompt, None, cancel).await;
            if let Err(ended) = self.compacted(compaction, &last_text, rounds) {
                return ended;
            }
            rounds += 1;
            let mut response = self.ask_model(rounds, cancel).await;
            // [V3]: an answer that the request was too long compacts the
            // history and asks again, once for this request.
            if let Step::Done(Err(overflow @ ModelError::ContextOverflow { .. })) = &response {
                let why = overflow.to_string();
                let compaction = self.compact(&original, prompt, Some(&why), cancel).await;
                match self.compacted(compaction, &last_text, rounds) {
                    Ok(true) => response = self.ask_model(rounds, cancel).await,
                    // Nothing could go: the error stands.
                    Ok(false) => {}
                    Err(ended) => return ended,
                }
            }
            let response = match response {
                Step::Done(Ok(response)) => response,
                Step::Done(Err(e)) => {
                    return self.abort(AbortReason::Failed, Some(e.to_string()), last_text, rounds);
                }
                Step::Cancelled => {
                    return self.abort(AbortReason::Cancelled, None, last_text, rounds);
                }
            };
            if !response.text.is_empty() {
                last_text = response.text.clone();
                self.emit(AgentEvent::AssistantText {
                    text: response.text.clone(),
                });
            }
            // A model's id that an earlier call (a synthetic hook pair's,
            // say) has already is given a fresh one: no request carries two
            // calls of one id (Anthropic refuses such a request).
            let mut calls: Vec<ToolCall> = Vec::with_capacity(response.tool_calls.len());
            for call in &response.tool_calls {
                let id = self.fresh_id(&call.id, &calls);
                calls.push(ToolCall { id, ..call.clone() });
            }
            self.push(Message::Assistant {
                text: response.text.clone(),
                tool_calls: calls.clone(),
            });
            if let Some(usage) = response.usage {
                let anchor = UsageAnchor {
                    messages: self.history.len(),
                    // The provider's numbers: saturating, so a server that
                    // reports u64::MAX cannot overflow the sum.
                    tokens: usage.input_tokens.saturating_add(usage.output_tokens),
                };
                self.anchor = Some(anchor);
                // [V3]: the report survives a resume.
                if let Some(observer) = &mut self.observer {
                    observer.usage(anchor.messages, anchor.tokens);
                }
            }
            let verdict = match self
                .gateway
                .end_turn(response.stop, calls.len(), &response.text, cancel)
                .await
            {
                Ok(verdict) => verdict,
                Err(AskError::Cancelled) => {
                    return self.finish(EndReason::Cancelled, None, last_text, rounds);
                }
                Err(AskError::Usage(e)) => {
                    let detail = Some(format!("hook policy error: {e}"));
                    return self.abort(AbortReason::Failed, detail, last_text, rounds);
                }
            };
            // Before the objection's pairs: a budget once spent stays spent.
            self.report_carried();
            match verdict {
                TurnVerdict::RunTools => match self.run_tools(&calls, cancel).await {
                    Ok(()) => {}
                    Err(AskError::Cancelled) => {
                        return self.finish(EndReason::Cancelled, None, last_text, rounds);
                    }
                    Err(AskError::Usage(e)) => {
                        let detail = Some(format!("hook policy error: {e}"));
                        return self.abort(AbortReason::Failed, detail, last_text, rounds);
                    }
                },
                TurnVerdict::Continue { injections } => self.inject(&injections),
                TurnVerdict::End { reason } => {
                    return self.finish(reason, None, last_text, rounds);
                }
            }
        }
    }

    /// What a compaction's `result` means for the prompt: `Ok` whether
    /// messages went, or the prompt's end when it was cancelled or the
    /// policy refused the question.
    fn compacted(
        &mut self,
        result: Result<Step<bool>, UsageError>,
        last_text: &str,
        rounds: u32,
    ) -> Result<bool, PromptOutcome> {
        let (reason, detail) = match result {
            Ok(Step::Done(compacted)) => return Ok(compacted),
            Ok(Step::Cancelled) => (AbortReason::Cancelled, None),
            Err(e) => (AbortReason::Failed, Some(format!("hook policy error: {e}"))),
        };
        Err(self.abort(reason, detail, last_text.to_owned(), rounds))
    }

    /// Adds the pairs a `_SessionStart` or `_UserPromptSubmit` round
    /// answered; `Some` is the prompt's end when the round could not be
    /// asked or was cancelled.
    fn add_pairs(&mut self, asked: Result<Vec<Injection>, AskError>) -> Option<PromptOutcome> {
        // A server that failed at start-up or in this round counts now, not
        // only at the end of the turn [T4].
        self.report_carried();
        match asked {
            Ok(pairs) => {
                self.inject(&pairs);
                None
            }
            Err(AskError::Cancelled) => {
                Some(self.finish(EndReason::Cancelled, None, String::new(), 0))
            }
            Err(AskError::Usage(e)) => {
                let detail = Some(format!("hook policy error: {e}"));
                Some(self.abort(AbortReason::Failed, detail, String::new(), 0))
            }
        }
    }

    /// Runs one turn's tool calls: asks `_PreToolUse` about them \[E3\], runs
    /// those not refused, asks `_PostToolUse` about those that ran \[E4\],
    /// and records one result per call, in call order, whatever happens.
    /// `Err` when a hook round was cancelled (the prompt has ended) or the
    /// policy refused the question.
    async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        cancel: &CancellationToken,
    ) -> Result<(), AskError> {
        for call in calls {
            self.emit(AgentEvent::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
        let gates = match self.gateway.gate_tools(calls, cancel).await {
            Ok(gates) => gates,
            Err(e) => {
                let output = match &e {
                    AskError::Cancelled => cancelled_output(),
                    AskError::Usage(u) => ToolOutput::error(format!("hook policy error: {u}")),
                };
                let results = calls.iter().map(|_| (output.clone(), Duration::ZERO));
                self.record_results(calls, results.collect());
                return Err(e);
            }
        };
        // [E3]: a refused call is not run; its error result is the refusals.
        let refused: Vec<Option<ToolOutput>> = (0..calls.len())
            .map(|i| match gates.get(i) {
                Some(ToolGate::Refused { refusals }) => {
                    let text: Vec<&str> = refusals.iter().map(|r| r.content.as_str()).collect();
                    Some(ToolOutput::error(text.join("\n")))
                }
                _ => None,
            })
            .collect();
        // [U5]: approval after _PreToolUse, before the call.
        let (refused, withdrawn) = self.approve(calls, refused, cancel).await;
        if withdrawn {
            // A cancel while the person was asked: nothing runs, and the
            // policy's prompt ends as a cancelled round's does [T5].
            let results = refused
                .into_iter()
                .map(|r| (r.unwrap_or_else(cancelled_output), Duration::ZERO));
            self.record_results(calls, results.collect());
            let _ = self.gateway.abort(AbortReason::Cancelled);
            return Err(AskError::Cancelled);
        }
        let to_run: Vec<ToolCall> = calls
            .iter()
            .zip(&refused)
            .filter(|(_, r)| r.is_none())
            .map(|(c, _)| c.clone())
            .collect();
        let reports = if to_run.is_empty() {
            Vec::new()
        } else {
            self.gateway
                .call_tools(&to_run, &self.settings.tools, cancel)
                .await
        };
        let outputs: Vec<ToolOutput> = reports.iter().map(|r| r.output.clone()).collect();
        let mut failure = None;
        let notes = if to_run.is_empty() || cancel.is_cancelled() {
            Vec::new()
        } else {
            match self.gateway.tools_ran(&to_run, &outputs, cancel).await {
                Ok(notes) => notes,
                Err(e) => {
                    failure = Some(e);
                    Vec::new()
                }
            }
        };
        let mut ran = reports
            .into_iter()
            .zip(notes.into_iter().chain(std::iter::repeat_with(Vec::new)));
        let results = refused
            .into_iter()
            .map(|refusal| match refusal {
                Some(output) => (output, Duration::ZERO),
                None => match ran.next() {
                    // [E4]: notes follow the tool's own output.
                    Some((report, notes)) => {
                        let mut output = report.output;
                        for note in notes {
                            output.text.push('\n');
                            output.text.push_str(&note.content);
                        }
                        (output, report.latency)
                    }
                    None => (cancelled_output(), Duration::ZERO),
                },
            })
            .collect();
        self.record_results(calls, results);
        failure.map_or(Ok(()), Err)
    }

    /// Approval of the calls `_PreToolUse` let through \[U4\]-\[U7\]: each
    /// call that reaches a tool runs only if a rule, an earlier answer or
    /// the person allows it; a denied one gets its error result in
    /// `refused`, and so does one that reaches no tool \[H3\] (so nothing
    /// unapproved reaches the gateway, even a tool that came up meanwhile).
    /// The wait for the person counts against no deadline; a cancel
    /// withdraws the question (`true`: the prompt is to end) \[U5\].
    async fn approve(
        &mut self,
        calls: &[ToolCall],
        mut refused: Vec<Option<ToolOutput>>,
        cancel: &CancellationToken,
    ) -> (Vec<Option<ToolOutput>>, bool) {
        if self.approval.mode() == ApprovalMode::Auto {
            return (refused, false);
        }
        for (i, call) in calls.iter().enumerate() {
            if refused[i].is_some() {
                continue; // refused by _PreToolUse: nobody is asked [U5]
            }
            let Some(owner) = self.gateway.tool_owner(&call.name) else {
                // Reaches no tool [H3]: answered as the gateway would, asks
                // nobody, and is never sent.
                refused[i] = Some(ToolOutput::error(format!("unknown tool: {}", call.name)));
                continue;
            };
            let answered = |by, allowed, scope: Option<&str>, reason: Option<String>| {
                AgentEvent::ApprovalAnswered {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    by,
                    allowed,
                    scope: scope.map(str::to_owned),
                    reason,
                }
            };
            match self.approval.decide(&owner) {
                // Auto mode returned above.
                None => {}
                Some(Standing::Allowed(by)) => self.emit(answered(by, true, None, None)),
                Some(Standing::Denied(reason)) => {
                    self.emit(answered(DecidedBy::Session, false, None, reason.clone()));
                    refused[i] = Some(denied_output(&call.name, reason.as_deref()));
                }
                Some(Standing::Ask) => {
                    self.emit(AgentEvent::ApprovalAsked {
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                    let request = ApprovalRequest {
                        call: call.clone(),
                        owner: owner.clone(),
                    };
                    let approver = self.approval.approver().clone();
                    let answer = tokio::select! {
                        answer = approver.ask(&request) => answer,
                        () = cancel.cancelled() => {
                            let why = "withdrawn: the prompt was cancelled".to_owned();
                            self.emit(answered(DecidedBy::Nobody, false, None, Some(why)));
                            return (refused, true);
                        }
                    };
                    self.approval.remember(&owner, &answer);
                    let event = match &answer {
                        Answer::AllowOnce => answered(DecidedBy::Person, true, None, None),
                        Answer::AllowSession => {
                            answered(DecidedBy::Person, true, Some("session"), None)
                        }
                        Answer::AllowAlways => {
                            answered(DecidedBy::Person, true, Some("always"), None)
                        }
                        Answer::Deny { reason } => {
                            refused[i] = Some(denied_output(&call.name, reason.as_deref()));
                            answered(DecidedBy::Person, false, None, reason.clone())
                        }
                        Answer::DenySession { reason } => {
                            refused[i] = Some(denied_output(&call.name, reason.as_deref()));
                            answered(DecidedBy::Person, false, Some("session"), reason.clone())
                        }
                        Answer::Unanswered { how } => {
                            refused[i] = Some(ToolOutput::error(format!(
                                "{} was not run: tool calls need the person's approval, and nobody could be asked. {how}",
                                call.name
                            )));
                            answered(DecidedBy::Nobody, false, None, None)
                        }
                    };
                    self.emit(event);
                }
            }
        }
        (refused, false)
    }

    /// Emits and records one result per call, in call order.
    fn record_results(&mut self, calls: &[ToolCall], results: Vec<(ToolOutput, Duration)>) {
        for (call, (output, latency)) in calls.iter().zip(results) {
            self.emit(AgentEvent::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                is_error: output.is_error,
                text: output.text.clone(),
                latency,
            });
            self.push(Message::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: output.text,
                is_error: output.is_error,
            });
        }
    }

    async fn ask_model(
        &mut self,
        round: u32,
        cancel: &CancellationToken,
    ) -> Step<Result<ModelResponse, ModelError>> {
        let tools = self.gateway.model_tools();
        let estimated = compaction::estimate_tokens(
            &self.settings.system_prompt,
            &self.history,
            self.anchor,
            || compaction::tools_bytes(&tools),
        );
        self.emit(AgentEvent::ModelRequest {
            round,
            messages: self.history.len(),
            tools: tools.len(),
            estimated_tokens: estimated,
        });
        let request = ModelRequest {
            system: &self.settings.system_prompt,
            messages: &self.history,
            tools: &tools,
        };
        let sink = self.sink.clone();
        // What the person has seen of this answer so far.
        let shown = std::sync::Mutex::new(String::new());
        let on_text = |text: &str| {
            shown
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_str(text);
            sink(&Emitted::new(&AgentEvent::TextDelta {
                text: text.to_owned(),
            }))
        };
        let started = Instant::now();
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            result = self.model.complete_streaming(request, &on_text) => Some(result),
        };
        let shown = shown.into_inner().unwrap_or_else(|e| e.into_inner());
        let result = match result {
            None => {
                self.keep_cut(shown, "the prompt was cancelled");
                return Step::Cancelled;
            }
            Some(Err(e)) => {
                self.keep_cut(shown, &format!("the model's answer failed: {e}"));
                return Step::Done(Err(e));
            }
            Some(Ok(response)) => Ok(response),
        };
        if let Ok(response) = &result {
            self.emit(AgentEvent::ModelResponse {
                round,
                stop: response.stop.as_str().to_owned(),
                tool_calls: response.tool_calls.len(),
                input_tokens: response.usage.map(|u| u.input_tokens),
                output_tokens: response.usage.map(|u| u.output_tokens),
                latency: started.elapsed(),
            });
        }
        Step::Done(result)
    }

    /// An answer cut off after the person saw some of its text (a stream
    /// that failed or was cancelled midway): that text stays in the
    /// history, as the model's message, marked as cut with `why`, so the
    /// history says what the person saw and the next request knows it was
    /// incomplete. Its tool calls, if any had begun, were never run and are
    /// not kept.
    fn keep_cut(&mut self, shown: String, why: &str) {
        if shown.trim().is_empty() {
            return;
        }
        let mut why = why.to_owned();
        if why.len() > CUT_REASON_BYTES {
            let mut end = CUT_REASON_BYTES;
            while !why.is_char_boundary(end) {
                end -= 1;
            }
            why.truncate(end);
            why.push('…');
        }
        self.push(Message::Assistant {
            text: format!("{shown}\n\n[{CUT_MARK}: {why}]"),
            tool_calls: Vec::new(),
        });
    }

    fn inject(&mut self, injections: &[Injection]) {
        for injection in injections {
            self.emit_injected(injection);
            let id = self.fresh_id(&injection.call_id, &[]);
            let pair = if id == injection.call_id {
                injection_pair(injection)
            } else {
                injection_pair(&Injection {
                    call_id: id,
                    ..injection.clone()
                })
            };
            for message in pair {
                self.push(message);
            }
        }
    }

    /// `id`, or `id` with a suffix (`-2`, `-3`, …) when a call of the
    /// history or of `taken` has it already.
    fn fresh_id(&self, id: &str, taken: &[ToolCall]) -> String {
        let used = |candidate: &str| {
            taken.iter().any(|c| c.id == candidate)
                || self.history.iter().any(|m| match m {
                    Message::Assistant { tool_calls, .. } => {
                        tool_calls.iter().any(|c| c.id == candidate)
                    }
                    _ => false,
                })
        };
        if !used(id) {
            return id.to_owned();
        }
        (2u32..)
            .map(|n| format!("{id}-{n}"))
            .find(|candidate| !used(candidate))
            .unwrap_or_else(|| id.to_owned())
    }

    /// Says that `injection` entered the history \[O1\].
    fn emit_injected(&self, injection: &Injection) {
        self.emit(AgentEvent::Injected {
            hook: injection.hook.tool_name().to_owned(),
            server: injection.server.to_string(),
            tool_name: injection.tool_name.clone(),
            content: injection.content.clone(),
        });
    }

    /// Compacts when the next request would pass the threshold, or at once
    /// when the model API said the last one was too long (`overflow`, what
    /// it said \[V3\]): a summary handoff, or truncation when that fails,
    /// does not fit, or the handoff cap is reached; then the `_PostCompact`
    /// round \[P1\]-\[P3\]. `Done(true)` when messages went. `Err` only when
    /// the policy refuses the question (a bug of the loop, or of a gateway).
    async fn compact(
        &mut self,
        original: &str,
        prompt: &str,
        overflow: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Step<bool>, UsageError> {
        let settings = self.settings.compaction.clone();
        let estimate = compaction::estimate_tokens(
            &self.settings.system_prompt,
            &self.history,
            self.anchor,
            || compaction::tools_bytes(&self.gateway.model_tools()),
        );
        // After an overflow, the window is smaller than the settings say
        // (or the estimate is low): what was sent did not fit, so what is
        // kept is sized from it.
        // It is kept for the rest of the session: a window that is smaller
        // than configured is compacted for before it overflows again.
        if overflow.is_some() {
            let seen = (estimate as f64 * settings.threshold) as u64;
            self.overflow_limit = Some(self.overflow_limit.map_or(seen, |l| l.min(seen)));
        }
        let limit = self
            .overflow_limit
            .map_or(settings.limit(), |l| l.min(settings.limit()));
        if overflow.is_none() && estimate < limit {
            return Ok(Step::Done(false));
        }
        if self.history.len() < 2 {
            return Ok(Step::Done(false));
        }
        let before = self.history.len();
        let summarise = self.summaries < settings.max_summaries;
        if !summarise && compaction::truncation_cut(&self.history, limit / 2) == 0 {
            // Nothing can go without leaving the context as it is: the
            // provider's count includes what no compaction can remove
            // (system prompt, tool schemas). Carry on uncompacted, without
            // asking _PreCompact about a compaction that will not happen.
            tracing::warn!("the context is near its limit, but no message can be dropped");
            return Ok(Step::Done(false));
        }
        // [E5]: pins first, for the summariser and the fresh history.
        let pins = match self.gateway.compacting(cancel).await {
            Ok(pins) => pins,
            Err(AskError::Cancelled) => return Ok(Step::Cancelled),
            Err(AskError::Usage(e)) => return Err(e),
        };
        let mut notes = Vec::new();
        if let Some(overflow) = overflow {
            notes.push(format!("asked because {overflow}"));
        }
        let mut summary = None;
        if summarise {
            // Attempts count, so a summary that keeps failing is not retried
            // every round.
            self.summaries += 1;
            // The window: the configured one, or the one an overflow
            // showed, if smaller.
            let window = self.overflow_limit.map_or(settings.context_window, |l| {
                ((l as f64 / settings.threshold) as u64).min(settings.context_window)
            });
            match self.summarise(&pins, window, cancel).await {
                Step::Cancelled => return Ok(Step::Cancelled),
                Step::Done(Ok(text)) => summary = Some(text),
                Step::Done(Err(why)) => notes.push(why),
            }
        } else {
            notes.push(format!(
                "the summary handoff limit ({}) is reached",
                settings.max_summaries
            ));
        }
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        // A summary replaces every old message; truncation drops those
        // before the cut. Either way _PostCompact runs after [P1].
        let cut = summary
            .is_none()
            .then(|| compaction::truncation_cut(&self.history, limit / 2));
        if cut == Some(0) {
            // Nothing can go without leaving the context as it is: the
            // provider's count includes what no compaction can remove
            // (system prompt, tool schemas). Carry on uncompacted.
            tracing::warn!("the context is near its limit, but no message can be dropped");
            return Ok(Step::Done(false));
        }
        let removed = cut.unwrap_or(before);
        // [E5]: the pins stay verbatim, before what _PostCompact re-injects.
        let fresh = |history: &[Message], injections: &[Injection]| {
            let kept: Vec<Injection> = pins.iter().chain(injections).cloned().collect();
            let injections = kept.as_slice();
            match (&summary, cut) {
                (Some(summary), _) => {
                    compaction::fresh_after_summary(summary, original, injections, prompt)
                }
                (None, cut) => compaction::fresh_after_truncation(
                    history,
                    cut.unwrap_or(0),
                    original,
                    prompt,
                    injections,
                ),
            }
        };
        let kind = if summary.is_some() {
            CompactionKind::Summary
        } else {
            CompactionKind::Truncation
        };
        // The fresh history's size before re-injection: the summary message
        // and the prompt, or the preamble and the kept tail.
        let after = if summary.is_some() {
            2
        } else {
            1 + before - removed
        };
        self.emit(AgentEvent::Compacted {
            kind,
            removed,
            before,
            after,
            note,
        });
        let injections = match self
            .gateway
            .compacted(removed, summary.as_deref(), cancel)
            .await
        {
            Ok(injections) => injections,
            // The compaction stands; the prompt ended during its round.
            Err(AskError::Cancelled) => Vec::new(),
            Err(AskError::Usage(e)) => return Err(e),
        };
        self.history = fresh(&self.history, &injections);
        if let Some(observer) = &mut self.observer {
            observer.replaced(summary.is_some(), &self.history);
        }
        self.anchor = None;
        if cancel.is_cancelled() {
            return Ok(Step::Cancelled);
        }
        for injection in pins.iter().chain(&injections) {
            self.emit_injected(injection);
        }
        Ok(Step::Done(true))
    }

    /// Asks the model for a summary of the history, keeping `pins`, in a
    /// request sized to half of the context `window` (the answer needs room
    /// too). The
    /// size is an estimate: when the API says the request is still too long
    /// \[V3\], it is asked again with half as much, up to
    /// [`SUMMARY_TRIES`] requests in all. `Err` says why there is no summary.
    async fn summarise(
        &mut self,
        pins: &[Injection],
        window: u64,
        cancel: &CancellationToken,
    ) -> Step<Result<String, String>> {
        let mut budget = window / 2;
        let mut tries = 0;
        loop {
            tries += 1;
            let Some(request) = compaction::summary_request(
                &self.settings.system_prompt,
                &self.history,
                pins,
                budget,
            ) else {
                return Step::Done(Err(
                    "not even the summary request fits the context window".to_owned()
                ));
            };
            let ask = ModelRequest {
                system: &self.settings.system_prompt,
                messages: &request,
                tools: &[],
            };
            let result = tokio::select! {
                biased;
                () = cancel.cancelled() => return Step::Cancelled,
                result = self.model.complete(ask) => result,
            };
            return Step::Done(match result {
                Ok(response) if !response.text.trim().is_empty() => Ok(response.text),
                Ok(_) => Err("the summary came back empty".to_owned()),
                Err(ModelError::ContextOverflow { .. }) if tries < SUMMARY_TRIES => {
                    budget /= 2;
                    continue;
                }
                Err(e) => Err(format!("the summary request failed: {e}")),
            });
        }
    }

    fn abort(
        &mut self,
        reason: AbortReason,
        detail: Option<String>,
        text: String,
        rounds: u32,
    ) -> PromptOutcome {
        // `Err`: the policy already ended the prompt (a cancelled round).
        let end = self.gateway.abort(reason).unwrap_or(reason.into());
        self.finish(end, detail, text, rounds)
    }

    fn finish(
        &mut self,
        reason: EndReason,
        detail: Option<String>,
        text: String,
        rounds: u32,
    ) -> PromptOutcome {
        self.emit(AgentEvent::PromptEnded {
            reason: reason.clone(),
            detail: detail.clone(),
            rounds,
        });
        let outcome = PromptOutcome {
            reason,
            detail,
            text,
            rounds,
        };
        self.report_carried();
        if let Some(observer) = &mut self.observer {
            observer.prompt_ended(&outcome);
        }
        outcome
    }
}
