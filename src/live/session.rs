//! One Live session's protocol state: Live client events in, Live server events out, over the
//! Realtime turn engine (see the module docs of [`super`]).
//!
//! Like the engine it wraps, it owns no I/O and no clock: the host sets the session time
//! ([`LiveSession::tick`], milliseconds since the session was created) before feeding it, and
//! the timeline fields (`start_ms`, `end_ms`, `offset_ms`) come from that.
//!
//! This file holds the session's state and the host's side of it; the three directions it
//! translates are its submodules: `client_events` (Live client events into engine operations),
//! `engine_events` (the engine's Realtime events into Live ones, and the engine's Live-shaped
//! configuration) and `delegation` (handing turns to the app or the Responses backend).

mod client_events;
mod delegation;
mod engine_events;

use std::collections::VecDeque;

use serde_json::json;

use crate::model::ModelKind;
use crate::realtime::{Action, ClientError, Conversation, RealtimeClientEvent, Transport};
use delegation::{BackendTurn, Delegation};

use super::config::{Allowed, LiveConfig, SessionResource};
use super::server_event::{LiveError, LiveServerEvent, Usage};

/// Where a client event came from. The frontend's data channel obeys the session's
/// `client.data_channel` permissions; a sideband (the app's trusted backend) does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventSource {
    DataChannel,
    Sideband,
}

/// What the model says on its own when it delegates, unless the app's commentary or thinking
/// arrives within `acknowledgement_delay_ms`.
pub const ACKNOWLEDGEMENT: &str = "One moment.";

pub struct LiveSession {
    conv: Conversation,
    /// The session's `live_…` id and when it expires (Unix seconds), for its resource.
    id: String,
    expires_at: u64,
    /// What the app configured, as `session.started`/`session.updated` report it.
    config: LiveConfig,
    frames: VecDeque<String>,
    actions: VecDeque<Action>,
    next_event: u64,
    next_id: u64,
    now_ms: u64,
    started: bool,
    closed: bool,
    muted: bool,
    /// Startup history ends with a user message: the model answers it once the channel opens.
    answer_history: bool,
    /// Input time of the turn being heard (speech start, speech end).
    turn_span: (u64, u64),
    /// Session time minus input time: input audio is timed from the caller's first packet,
    /// Live's timeline from the session's creation.
    input_offset: u64,
    /// The turn's transcript words, held until it is complete so their times can split the
    /// turn.
    input_words: Vec<String>,
    /// Text the model is to say once it is not speaking: commentary and acknowledgements.
    to_say: VecDeque<String>,
    /// An acknowledgement is due at this session time unless commentary or thinking comes first.
    ack_due: Option<u64>,
    delegations: Vec<Delegation>,
    backend: Option<BackendTurn>,
}

impl LiveSession {
    /// `id` is the session's `live_…` id; `expires_at` is in Unix seconds. On a WebSocket the
    /// audio travels as events (`session.input_audio.append`, `session.output_audio.delta`) in
    /// the session's `audio.format`.
    pub fn new(
        id: String,
        model: &ModelKind,
        config: LiveConfig,
        expires_at: u64,
        transport: Transport,
    ) -> Self {
        let mut conv = Conversation::new(id.clone(), model);
        conv.set_transport(transport);
        // Live's output transcript carries each word's place on the session's timeline, which
        // this engine ties to playback: its replies are made at playback pace, not ahead.
        conv.set_generation_pace(1.0);
        let mut s = LiveSession {
            conv,
            id,
            expires_at,
            config,
            frames: VecDeque::new(),
            actions: VecDeque::new(),
            next_event: 0,
            next_id: 0,
            now_ms: 0,
            started: false,
            closed: false,
            muted: false,
            answer_history: false,
            turn_span: (0, 0),
            input_offset: 0,
            input_words: Vec::new(),
            to_say: VecDeque::new(),
            ack_due: None,
            delegations: Vec::new(),
            backend: None,
        };
        s.configure_engine();
        s.load_history();
        // The engine's own `session.created`/`updated` and item events are not Live events.
        while s.conv.poll_event().is_some() {}
        s
    }

    /// The turn engine, for the media side (VAD edges, playback progress, frames).
    pub fn conversation_mut(&mut self) -> &mut Conversation {
        &mut self.conv
    }

    pub fn conversation(&self) -> &Conversation {
        &self.conv
    }

    pub fn config(&self) -> &LiveConfig {
        &self.config
    }

    /// The `SessionResource` the `session.*` events carry.
    fn resource(&self) -> SessionResource {
        SessionResource {
            id: self.id.clone(),
            expires_at: self.expires_at,
            status: "active",
            config: self.config.clone(),
        }
    }

    /// The input is muted (`session.input_audio.mute`): the caller's audio must not reach the
    /// model.
    pub fn input_muted(&self) -> bool {
        self.muted
    }

    /// Sets the session time, in milliseconds since the session was created.
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
    }

    /// When the session next needs [`LiveSession::on_timeout`] (session time, ms).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.ack_due
    }

    pub fn on_timeout(&mut self) {
        if self.ack_due.is_some_and(|t| t <= self.now_ms) {
            self.ack_due = None;
            self.say(ACKNOWLEDGEMENT.to_owned());
        }
    }

    /// The data channel opened: `session.started`, the first event; then an answer to startup
    /// history that ends with the user speaking.
    pub fn on_channel_open(&mut self) {
        self.start(None);
    }

    /// Starts the session: on WebRTC when the channel opens, on a WebSocket on `session.start`
    /// (whose `event_id` is `client_event_id`).
    pub fn start(&mut self, client_event_id: Option<&str>) {
        if self.started {
            return;
        }
        self.started = true;
        self.conv.on_channel_open();
        while self.conv.poll_event().is_some() {}
        let session = self.resource();
        self.emit(LiveServerEvent::SessionStarted { session }, client_event_id);
        if let Some(dc) = self.config.data_channel().filter(|dc| !dc.is_empty()) {
            let message = format!(
                "This data channel may send {} and receives {}.",
                describe_permission(dc.allowed_client_events.as_ref(), |k| k.clone()),
                describe_permission(dc.allowed_server_events.as_ref(), |s| s.kind.clone()),
            );
            let code = "data_channel_permissions";
            self.emit(LiveServerEvent::Info { code, message }, None);
        }
        if std::mem::take(&mut self.answer_history) {
            self.engine_event(RealtimeClientEvent::response_create(None), None);
        }
        self.pump();
    }

    /// `session.started` for one more client joining the session (a sideband).
    pub fn welcome_frame(&mut self) -> String {
        let session = self.resource();
        self.make(&LiveServerEvent::SessionStarted { session }, None)
    }

    pub fn poll_frame(&mut self) -> Option<String> {
        self.pump();
        self.frames.pop_front()
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front().or_else(|| self.conv.poll_action())
    }

    /// The session hit its maximum duration: `session.closed` (`expired`), then the call ends.
    pub fn expire(&mut self) {
        self.close("expired", None);
    }

    /// The call ended under the session (`remote_hangup`, `connection_lost`, or the app's
    /// hang-up, `close_requested`): `session.closed` with that reason, for whoever still
    /// listens (a sideband); nothing if the session had closed already.
    pub fn end(&mut self, reason: &'static str) {
        self.close(reason, None);
    }

    /// Whether the frontend's data channel may receive this server event (`client.data_channel.
    /// allowed_server_events`); sidebands receive everything.
    pub fn data_channel_receives(&self, frame: &str) -> bool {
        let Some(allowed) = self
            .config
            .data_channel()
            .and_then(|dc| dc.allowed_server_events.as_ref())
        else {
            return true;
        };
        /// Just the parts of a frame a selector names.
        #[derive(serde::Deserialize)]
        struct Kinds {
            #[serde(rename = "type")]
            kind: String,
            event: Option<Inner>,
        }
        #[derive(serde::Deserialize)]
        struct Inner {
            #[serde(rename = "type")]
            kind: Option<String>,
        }
        let Ok(event) = serde_json::from_str::<Kinds>(frame) else {
            return false;
        };
        let inner = event.event.and_then(|e| e.kind);
        allowed.allows(|sel| {
            sel.kind == event.kind && (sel.response_event.is_none() || sel.response_event == inner)
        })
    }

    fn close(&mut self, reason: &'static str, event_id: Option<&str>) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.to_say.clear();
        self.ack_due = None;
        if let Some(r) = self.conv.active_response().map(str::to_owned) {
            self.actions.push_back(Action::StopAudio { response_id: r });
        }
        let (session, usage) = (self.resource(), self.usage());
        let closed = LiveServerEvent::SessionClosed {
            reason,
            session,
            usage,
        };
        self.emit(closed, event_id);
        self.actions.push_back(Action::EndCall);
    }

    fn usage(&self) -> Usage {
        Usage {
            seconds: self.now_ms as f64 / 1000.0,
        }
    }

    /// Queues `text` for the model to say; an empty text answers in the conversation (a
    /// script's `tool_output` turn).
    fn say(&mut self, text: String) {
        self.to_say.push_back(text);
        self.say_next();
    }

    fn say_next(&mut self) {
        if self.closed || self.conv.active_response().is_some() {
            return;
        }
        let Some(text) = self.to_say.pop_front() else {
            return;
        };
        let response = (!text.is_empty()).then(|| {
            // Out of band and with no input: the stubs say the instructions verbatim.
            json!({"conversation": "none", "input": [], "instructions": text})
        });
        self.engine_event(RealtimeClientEvent::response_create(response), None);
    }

    /// Hands the turn engine a Realtime client event; its refusal, if any, echoes `event_id`.
    fn engine_event(&mut self, event: RealtimeClientEvent, event_id: Option<&str>) {
        self.conv
            .on_client_event(event, event_id.map(str::to_owned));
    }

    fn error(&mut self, e: ClientError, client_event_id: Option<String>) {
        let error = LiveError::new(e, client_event_id.as_deref());
        self.emit(LiveServerEvent::Error { error }, client_event_id.as_deref());
    }

    fn emit(&mut self, event: LiveServerEvent, client_event_id: Option<&str>) {
        let frame = self.make(&event, client_event_id);
        self.frames.push_back(frame);
    }

    fn make(&mut self, event: &LiveServerEvent, client_event_id: Option<&str>) -> String {
        self.next_event += 1;
        event.to_frame(self.next_event, client_event_id)
    }

    fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}_{:06}", self.next_id)
    }
}

/// An `error` frame for a client that has no session yet (a WebSocket before `session.start`).
pub fn error_frame(e: ClientError, client_event_id: Option<String>) -> String {
    let id = client_event_id.as_deref();
    let error = LiveError::new(e, id);
    LiveServerEvent::Error { error }.to_frame(0, id)
}

fn describe_permission<T>(p: Option<&Allowed<T>>, name: impl Fn(&T) -> String) -> String {
    match p {
        None | Some(Allowed::All(_)) => "every event".into(),
        Some(Allowed::Only(list)) if list.is_empty() => "no events".into(),
        Some(Allowed::Only(list)) => list.iter().map(name).collect::<Vec<_>>().join(", "),
    }
}

#[cfg(test)]
mod tests;
