//! Delegation: the model hands a turn to the app (client delegation, answered by
//! `session.commentary.append`) or to the Responses backend, whose work the app sees as nested
//! Responses events inside `response.event`.

use serde_json::{Value, json};

use super::{ACKNOWLEDGEMENT, LiveSession};
use crate::live::config::DelegationTarget;
use crate::live::server_event::{DelegationRef, LiveServerEvent};

/// The function the turn engine is given under client delegation: a model's call to it (or,
/// in a script, to any function) is a delegation to the app.
pub(super) const DELEGATE_TOOL: &str = "delegate";

pub(super) struct Delegation {
    pub(super) id: String,
    /// The turn engine's function call this delegation is.
    pub(super) call_id: String,
    pub(super) target: DelegationTarget,
    pub(super) answered: bool,
}

/// A `response.create` on the Responses backend: the turn engine's next response is its
/// answer, and its output is also reported as nested Responses events.
pub(super) struct BackendTurn {
    pub(super) delegation_id: Option<String>,
    pub(super) client_event_id: Option<String>,
    pub(super) response_id: Option<String>,
    pub(super) text: String,
    /// Function calls it made, reported again in its `response.completed`.
    pub(super) calls: Vec<Value>,
}

impl LiveSession {
    /// The model called a function: a delegation to the app (client) or to the Responses
    /// backend, whose function call the app then sees as nested Responses events.
    pub(super) fn delegate(&mut self, call: &Value) {
        let target = DelegationTarget::of(&self.config);
        let call_id = call["call_id"].as_str().unwrap_or_default().to_owned();
        if target == DelegationTarget::Responses
            && self
                .backend
                .as_ref()
                .is_some_and(|b| b.response_id.is_some())
        {
            // The backend, answering the app's `response.create`, asks for a tool's result:
            // part of that response, not a new delegation.
            return self.report_call(call, &call_id, None, "");
        }
        let id = self.new_id("del");
        let response_id = (target == DelegationTarget::Responses).then(|| self.new_id("resp"));
        let delegation = DelegationRef {
            id: id.clone(),
            target: target.name(),
            kind: "delegation",
            response_id: response_id.clone(),
        };
        let offset_ms = self.now_ms;
        self.emit(
            LiveServerEvent::DelegationCreated {
                delegation,
                offset_ms,
            },
            None,
        );
        self.delegations.push(Delegation {
            id: id.clone(),
            call_id: call_id.clone(),
            target,
            answered: false,
        });
        if let Some(response_id) = response_id {
            self.report_call(call, &call_id, Some(&id), &response_id);
        }
        let delay = self
            .config
            .delegation
            .as_ref()
            .and_then(|d| d.acknowledgement_delay_ms)
            .unwrap_or(0);
        if delay == 0 {
            self.say(ACKNOWLEDGEMENT.to_owned());
        } else {
            self.ack_due = Some(self.now_ms + delay);
        }
    }

    /// A Responses delegation's function call as nested Responses events. Within the app's own
    /// `response.create` they belong to that response; a call the Live model made on a spoken
    /// turn gets a response of its own.
    fn report_call(
        &mut self,
        call: &Value,
        call_id: &str,
        delegation_id: Option<&str>,
        response_id: &str,
    ) {
        let item = |status: &str, arguments: &Value| {
            json!({"type": "function_call", "id": call["id"], "call_id": call_id,
                   "name": call["name"], "arguments": arguments, "status": status})
        };
        let done = item("completed", &call["arguments"]);
        let events = [
            json!({"type": "response.output_item.added", "output_index": 0, "item": item("in_progress", &json!(""))}),
            json!({"type": "response.function_call_arguments.done", "item_id": call["id"], "output_index": 0,
                   "name": call["name"], "arguments": call["arguments"]}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
        ];
        if let Some(b) = self.backend.as_mut().filter(|b| b.response_id.is_some()) {
            b.calls.push(done);
            for event in events {
                self.backend_event(event);
            }
            return;
        }
        let model = self.config.responses_model().map(str::to_owned);
        let response = |status: &str, output: Vec<Value>| json!({"id": response_id, "object": "response", "status": status, "model": model, "output": output});
        let created =
            json!({"type": "response.created", "response": response("in_progress", vec![])});
        let completed = json!({"type": "response.completed", "response": response("completed", vec![done.clone()])});
        for event in std::iter::once(created).chain(events).chain([completed]) {
            self.wrap_response_event(event, delegation_id, None);
        }
    }

    pub(super) fn backend_event(&mut self, event: Value) {
        let (delegation, client) = match &self.backend {
            Some(b) => (b.delegation_id.clone(), b.client_event_id.clone()),
            None => (None, None),
        };
        self.wrap_response_event(event, delegation.as_deref(), client.as_deref());
    }

    pub(super) fn backend_done(&mut self, b: BackendTurn, response: &Value) {
        let status = match response["status"].as_str() {
            Some("completed") => "completed",
            Some("cancelled") => "cancelled",
            _ => "incomplete",
        };
        let mut output = b.calls.clone();
        if !b.text.is_empty() {
            output.push(
                json!({"type": "message", "role": "assistant", "status": "completed",
                               "content": [{"type": "output_text", "text": b.text}]}),
            );
        }
        let model = self.config.responses_model().map(str::to_owned);
        let kind = if status == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        let event = json!({"type": kind, "response": {"id": b.response_id, "object": "response",
                           "status": status, "model": model, "output": output}});
        self.backend = Some(b);
        self.backend_event(event);
        self.backend = None;
    }

    fn wrap_response_event(
        &mut self,
        event: Value,
        delegation_id: Option<&str>,
        client_event_id: Option<&str>,
    ) {
        let delegation_id = delegation_id.map(str::to_owned);
        self.emit(
            LiveServerEvent::ResponseEvent {
                event,
                delegation_id,
            },
            client_event_id,
        );
    }
}
