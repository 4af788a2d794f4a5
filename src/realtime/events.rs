//! Outgoing queues and the one place event ids and the `error` shape are made.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde_json::{Map, Value};

use super::Action;
use super::server_event::{ErrorObject, RealtimeServerEvent, ServerEventFrame};

/// Server events and media actions waiting to be polled. Events are kept typed and written to
/// text only when a transport polls them, so a dialect on top of the engine (Live) reads them
/// without parsing text the engine just wrote.
#[derive(Default)]
pub(super) struct Outbox {
    pub events: VecDeque<ServerEventFrame>,
    pub actions: VecDeque<Action>,
    next_event: u64,
}

impl Outbox {
    /// Queues one server event under the next event id.
    pub fn emit(&mut self, event: RealtimeServerEvent) {
        let frame = self.make(event);
        self.events.push_back(frame);
    }

    /// One server event with the next event id, not queued.
    pub fn make(&mut self, event: RealtimeServerEvent) -> ServerEventFrame {
        self.next_event += 1;
        ServerEventFrame {
            event_id: format!("event_{:06}", self.next_event),
            event,
        }
    }

    pub fn act(&mut self, action: Action) {
        self.actions.push_back(action);
    }

    pub fn error(&mut self, e: ClientError) {
        self.emit(RealtimeServerEvent::Error {
            error: e.into_object(),
        });
    }
}

/// An `error` event's contents: mostly a refused client event, whose `event_id` is filled in by
/// the dispatcher so that every such error echoes the client's id: the SDK releases a pending
/// `response.create` or history request only when `error.event_id` matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    pub kind: &'static str,
    /// Ours are static; a model's (a script's failure) may be any string.
    pub code: Cow<'static, str>,
    pub message: String,
    pub param: Option<String>,
    pub event_id: Option<String>,
}

impl ClientError {
    pub fn new(code: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        ClientError {
            kind: "invalid_request_error",
            code: code.into(),
            message: message.into(),
            param: None,
            event_id: None,
        }
    }

    /// The server could not do what was asked (not the client's mistake); the event carries no
    /// client `event_id`.
    pub fn server(code: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        ClientError {
            kind: "server_error",
            ..ClientError::new(code, message)
        }
    }

    /// The `error` event's object.
    pub fn into_object(self) -> ErrorObject {
        ErrorObject {
            kind: self.kind.to_owned(),
            code: self.code.into_owned(),
            message: self.message,
            param: self.param,
            event_id: self.event_id,
        }
    }

    pub fn param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// The service's refusal of a key it does not know, naming its full path.
    pub fn unknown_parameter(param: String) -> Self {
        ClientError::new(
            "unknown_parameter",
            format!("Unknown parameter: '{param}'."),
        )
        .param(param)
    }

    /// The wording the real service uses for absent fields.
    pub fn missing(param: &str) -> Self {
        ClientError::new(
            "missing_required_parameter",
            format!("Missing required parameter: '{param}'."),
        )
        .param(param)
    }

    pub fn invalid(param: &str, detail: impl std::fmt::Display) -> Self {
        ClientError::new(
            "invalid_value",
            format!("Invalid value for '{param}': {detail}."),
        )
        .param(param)
    }

    pub fn wrong_type(param: &str, expected: &str) -> Self {
        ClientError::new(
            "invalid_type",
            format!("Invalid type for '{param}': expected {expected}."),
        )
        .param(param)
    }
}

/// A client event's envelope as Realtime and Live both read it: a JSON object, whose `event_id`
/// every error about it echoes. The `type` is asked for separately, because its absence is such
/// an error.
pub struct ClientEvent {
    pub body: Map<String, Value>,
    pub event_id: Option<String>,
}

impl ClientEvent {
    /// Refused as `invalid_json`, with no `event_id` to echo, when the text is not an object.
    pub fn parse(text: &str) -> Result<ClientEvent, ClientError> {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(body)) => {
                let event_id = body
                    .get("event_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                Ok(ClientEvent { body, event_id })
            }
            Ok(_) => Err(ClientError::new(
                "invalid_json",
                "An event must be a JSON object.",
            )),
            Err(e) => Err(ClientError::new(
                "invalid_json",
                format!("Could not parse event JSON: {e}"),
            )),
        }
    }

    pub fn kind(&self) -> Result<&str, ClientError> {
        self.body
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| ClientError::missing("type"))
    }
}

/// `obj[key]` as a string, or the matching error.
pub(super) fn required_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    param: &str,
) -> Result<&'a str, ClientError> {
    match obj.get(key) {
        None | Some(Value::Null) => Err(ClientError::missing(param)),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(ClientError::wrong_type(param, "a string")),
    }
}
