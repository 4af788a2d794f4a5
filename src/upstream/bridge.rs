//! One call's bridge to its upstream model: the caller's events and audio up, the model's
//! events and audio down. Sans-I/O, like the engines it stands in for: the call feeds it
//! text, frames, upstream events and the time, and drains what it queued
//! ([`Bridge::poll_frame`] for the caller, [`Bridge::poll_upstream`] for the model,
//! [`Bridge::next_audio`] for the RTP track).
//!
//! On WebRTC (`audio: Some`) the bridge does what OpenAI's WebRTC side does over its
//! WebSocket protocol:
//! - the upstream always speaks `audio/pcm` at 24 kHz both ways, whatever the browser
//!   negotiated: caller frames are decoded and sent as `input_audio_buffer.append`, and the
//!   model's `response.output_audio.delta`s become paced frames of the call's codec (they are
//!   not forwarded: WebRTC never sends them on `oai-events`);
//! - `output_audio_buffer.started`/`stopped`/`cleared` come from its own playout;
//! - a barge-in (the upstream's `speech_started` while audio plays, with `interrupt_response`)
//!   or the client's `output_audio_buffer.clear` stops the playout, cancels the response if it
//!   is still running and truncates the item to the milliseconds heard.
//!
//! On a WebSocket (`audio: None`) the formats are the client's and the bridge passes every
//! event both ways as it is.
//!
//! Either way the connect-time session goes up first as `session.update`s, and the caller's
//! `session.created` is the upstream's session once they are applied, so it shows the
//! session the call really has, as the service's does. The edge's own client events carry
//! `event_id`s starting `edge_`; errors answering them are the edge's business, not the
//! caller's (a cancel racing the model's own end of the response), and are only logged.
//!
//! Layout: this file is the bridge's state and its dispatch; `wire` what it reads and writes
//! of events, `rtp_audio` the WebRTC side's audio and timings, `live` the Live dialect.

mod live;
mod rtp_audio;
mod wire;

use std::collections::VecDeque;
use std::time::Instant;

use base64::Engine as _;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use super::link::{CONNECT_TIMEOUT, LinkEnd};
use crate::audio::Codec;
use crate::audio::player::Player;
use crate::realtime::{ClientError, RealtimeServerEvent, ServerEventFrame};
pub use rtp_audio::BridgeTimings;
use rtp_audio::{ARRIVALS_KEPT, Playing, RtpAudio};
pub(super) use wire::describe;
use wire::{
    APPEND_PREFIXES, EdgeEvent, MAX_EARLY_APPENDS, MAX_HELD, Peek, SESSION_UPDATE_ID,
    SESSION_UPDATE_KIND, SessionPeek, force_pcm, show_formats,
};

/// Which protocol the upstream speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Dialect {
    Realtime,
    /// OpenAI's Live WebSocket: one `session.start`, audio as `session.input_audio.append` and
    /// `session.output_audio.delta` (one stream, paced by the model like playback), the model
    /// owning turns. `call_id` is the edge's session id (`live_…`), which the app knows the
    /// session by: the upstream's own id is replaced with it.
    Live {
        call_id: String,
    },
}

/// A Live session's audio is one stream, not a response's: it plays under this name.
const LIVE_STREAM: &str = "live";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the upstream's `session.created` (and the connect-time updates' answers).
    Connecting,
    Open,
    /// Failed or ended: nothing more goes up or comes down.
    Over,
}

pub struct Bridge {
    dialect: Dialect,
    audio: Option<RtpAudio>,
    phase: Phase,
    created: Instant,
    /// Connect-time `session.update`s whose `session.updated` has not come back.
    updates_unanswered: usize,
    /// The session as the upstream last described it (for a sideband's `session.created`).
    session: Option<Value>,
    /// Responses the upstream has created and not finished.
    active: Vec<String>,
    to_upstream: VecDeque<String>,
    /// The link's upgrade was answered: frames go to it from now on. Until then they wait here
    /// (the link's own queue is for an upstream that stops reading, not one still connecting).
    link_open: bool,
    /// Caller appends waiting for the link.
    early_appends: usize,
    to_client: VecDeque<String>,
    channel_open: bool,
    end_taken: bool,
    next_id: u64,
}

impl Bridge {
    /// A bridge for a WebRTC call in `codec`, sending caller audio in `append_ms` appends.
    pub fn rtp(now: Instant, codec: Codec, append_ms: u32, session: &[Value]) -> Bridge {
        let audio = RtpAudio::new(codec, append_ms);
        // The upstream speaks PCM at 24 kHz whatever the browser negotiated, and the edge
        // needs its audio (for `output_audio_buffer.*`), so that goes first.
        let pcm = serde_json::json!({
            "type": "realtime",
            "audio": {
                "input": {"format": {"type": "audio/pcm", "rate": 24000}},
                "output": {"format": {"type": "audio/pcm", "rate": 24000}},
            }
        });
        let mut layers: Vec<Value> = session.to_vec();
        for layer in &mut layers {
            force_pcm(layer);
        }
        layers.push(pcm);
        Bridge::with(now, Some(audio), &layers)
    }

    /// A bridge for a WebSocket session: events pass as they are, formats are the client's.
    pub fn stream(now: Instant, session: &[Value]) -> Bridge {
        let mut b = Bridge::with(now, None, session);
        b.channel_open = true;
        b
    }

    fn with(now: Instant, audio: Option<RtpAudio>, layers: &[Value]) -> Bridge {
        let mut b = Bridge {
            dialect: Dialect::Realtime,
            audio,
            phase: Phase::Connecting,
            created: now,
            updates_unanswered: 0,
            session: None,
            active: Vec::new(),
            to_upstream: VecDeque::new(),
            link_open: false,
            early_appends: 0,
            to_client: VecDeque::new(),
            channel_open: false,
            end_taken: false,
            next_id: 0,
        };
        for layer in layers {
            // `session.update` names its session's type; a connect-time layer may not.
            let mut layer = layer.clone();
            if let Some(obj) = layer.as_object_mut() {
                obj.entry("type").or_insert_with(|| "realtime".into());
            }
            let layer = &layer;
            let event_id = b.edge_id(SESSION_UPDATE_KIND);
            b.to_upstream.push_back(
                EdgeEvent::SessionUpdate {
                    event_id,
                    session: layer,
                }
                .text(),
            );
            b.updates_unanswered += 1;
        }
        b
    }

    fn edge_id(&mut self, what: &str) -> String {
        self.next_id += 1;
        format!("edge_{what}_{}", self.next_id)
    }

    /// The caller's event channel is open: what waited for it goes out.
    pub fn on_channel_open(&mut self) {
        self.channel_open = true;
    }

    /// A client event, from the caller's channel or a sideband.
    pub fn on_client_text(&mut self, now: Instant, text: &str) {
        if self.phase == Phase::Over {
            return;
        }
        let peek: Peek = serde_json::from_str(text).unwrap_or_default();
        if self.audio.is_some() {
            match peek.kind {
                // What only WebRTC has is answered here: the upstream has no playout.
                "output_audio_buffer.clear" => {
                    self.interrupt(now);
                    return;
                }
                // The upstream's formats are the edge's to choose on WebRTC.
                "session.update" => {
                    if let Ok(mut event) = serde_json::from_str::<Value>(text)
                        && let Some(session) = event.get_mut("session")
                    {
                        force_pcm(session);
                        self.to_upstream.push_back(event.to_string());
                        return;
                    }
                }
                _ => {}
            }
        }
        self.to_upstream.push_back(text.to_owned());
    }

    /// One frame of the caller's audio (WebRTC): decoded, halved to 24 kHz and sent up in
    /// appends of the configured length.
    pub fn on_rtp(&mut self, now: Instant, payload: &[u8]) {
        if self.phase == Phase::Over {
            return;
        }
        let Some(a) = &mut self.audio else {
            return;
        };
        let Ok(pcm24) = a.decoder.decode_24k(payload) else {
            return;
        };
        if a.arrivals.len() == ARRIVALS_KEPT {
            a.arrivals.pop_front();
        }
        a.arrivals.push_back((a.input_ms, now));
        a.input_ms += (pcm24.len() / 24) as u64;
        a.pending.extend(pcm24);
        while a.pending.len() >= a.append_samples {
            let chunk: Vec<u8> = a
                .pending
                .drain(..a.append_samples)
                .flat_map(i16::to_le_bytes)
                .collect();
            let audio = base64::engine::general_purpose::STANDARD.encode(chunk);
            let append = match self.dialect {
                Dialect::Realtime => EdgeEvent::Append { audio }.text(),
                Dialect::Live { .. } => EdgeEvent::LiveAppend { audio }.text(),
            };
            if !self.link_open && self.early_appends >= MAX_EARLY_APPENDS {
                // The caller talks before the upstream is there: its latest audio is kept.
                if let Some(i) = self
                    .to_upstream
                    .iter()
                    .position(|f| APPEND_PREFIXES.iter().any(|p| f.starts_with(p)))
                {
                    self.to_upstream.remove(i);
                    self.early_appends -= 1;
                }
            }
            if !self.link_open {
                self.early_appends += 1;
            }
            self.to_upstream.push_back(append);
        }
    }

    /// An event from the upstream's link.
    pub fn on_upstream(&mut self, now: Instant, event: super::UpstreamEvent) {
        match event {
            super::UpstreamEvent::Open => self.link_open = true,
            super::UpstreamEvent::Text(text) => self.on_upstream_text(now, text),
            super::UpstreamEvent::Closed(end) => self.fail(&end),
        }
    }

    fn on_upstream_text(&mut self, now: Instant, text: String) {
        if self.phase == Phase::Over {
            return;
        }
        let peek: Peek = match serde_json::from_str(&text) {
            Ok(p) => p,
            Err(_) => {
                log::warn!("upstream sent a frame that is not an event; passed on as it is");
                return self.for_caller(text);
            }
        };
        if let Dialect::Live { .. } = self.dialect {
            return self.on_live_text(&text, peek);
        }
        match peek.kind {
            "session.created" | "session.updated" => return self.on_session(&text, peek.kind),
            "error" => {
                let answers = peek.error.and_then(|e| e.event_id).unwrap_or_default();
                // The connect-time session is the caller's own config: its refusal is theirs
                // to see, and the session opens without it.
                if answers.starts_with(SESSION_UPDATE_ID) {
                    self.for_caller(text);
                    return self.session_update_answered(None);
                }
                if answers.starts_with("edge_") {
                    log::info!("upstream refused an edge event: {text}");
                    return;
                }
            }
            "response.created" => {
                if let Some(id) = peek.response.and_then(|r| r.id) {
                    self.active.push(id);
                }
            }
            "response.done" => {
                if let Some(id) = peek.response.and_then(|r| r.id) {
                    self.active.retain(|a| *a != id);
                    self.finish_audio(&id);
                }
            }
            _ => {}
        }
        if self.audio.is_some() {
            match peek.kind {
                "response.output_audio.delta" => {
                    if let (Some(rid), Some(delta)) = (peek.response_id, peek.delta) {
                        let item = peek.item_id.unwrap_or_default();
                        self.on_delta(rid, item, peek.content_index.unwrap_or(0), delta);
                    }
                    return;
                }
                "response.output_audio.done" => {
                    if let Some(rid) = &peek.response_id {
                        self.finish_audio(rid);
                    }
                }
                "input_audio_buffer.speech_stopped" => {
                    if let (Some(a), Some(end)) = (&mut self.audio, peek.audio_end_ms) {
                        a.speech_end_at = a.arrival_of(end.saturating_sub(a.silence_ms));
                    }
                }
                "input_audio_buffer.speech_started" => {
                    if let (Some(a), Some(start)) = (&mut self.audio, peek.audio_start_ms) {
                        a.onset_at = a.arrival_of(start);
                    }
                    self.for_caller(text);
                    let barge = self.audio.as_ref().is_some_and(|a| {
                        a.interrupt_response && a.playout.front().is_some_and(|p| p.started)
                    });
                    if barge {
                        self.interrupt(now);
                    }
                    return;
                }
                _ => {}
            }
        }
        self.for_caller(text);
    }

    /// The upstream's session, shown as the call has it; the connect-time updates' answers
    /// become the one `session.created` the caller sees.
    fn on_session(&mut self, text: &str, kind: &str) {
        let Ok(mut event) = serde_json::from_str::<Value>(text) else {
            return;
        };
        if let (Some(a), Some(session)) = (&self.audio, event.get_mut("session")) {
            show_formats(session, a.codec);
        }
        if let Some(session) = event.get("session") {
            if let Some(a) = &mut self.audio {
                let peek = SessionPeek::deserialize(session).unwrap_or_default();
                if let Some(td) = peek
                    .audio
                    .and_then(|a| a.input)
                    .and_then(|i| i.turn_detection)
                {
                    a.interrupt_response = td.interrupt_response;
                    a.silence_ms = td.silence_duration_ms.unwrap_or(0);
                }
            }
            self.session = Some(session.clone());
        }
        match (kind, self.phase) {
            ("session.created", Phase::Connecting) if self.updates_unanswered > 0 => {}
            ("session.created", Phase::Connecting) => {
                self.phase = Phase::Open;
                self.for_caller(event.to_string());
            }
            ("session.updated", Phase::Connecting) => self.session_update_answered(Some(event)),
            _ => self.for_caller(event.to_string()),
        }
    }

    /// One connect-time `session.update` was answered (`updated`, or refused): once all are,
    /// the caller's `session.created` shows the session as it now is.
    fn session_update_answered(&mut self, updated: Option<Value>) {
        if self.phase != Phase::Connecting {
            return;
        }
        self.updates_unanswered = self.updates_unanswered.saturating_sub(1);
        if self.updates_unanswered > 0 {
            return;
        }
        self.phase = Phase::Open;
        let session = match updated {
            Some(event) => event.get("session").cloned(),
            None => self.session.clone(),
        };
        let event_id = self.edge_id("event");
        let created = ServerEventFrame {
            event_id,
            event: RealtimeServerEvent::SessionCreated {
                session: session.unwrap_or_else(|| serde_json::json!({})),
            },
        };
        self.for_caller(created.to_text());
    }

    fn on_delta(&mut self, response_id: String, item_id: String, content_index: u32, b64: &str) {
        let Some(a) = &mut self.audio else {
            return;
        };
        if a.interrupted.contains(&response_id) {
            return;
        }
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64) else {
            log::warn!("upstream audio delta for {response_id} is not base64; dropped");
            return;
        };
        // 24 → 48 kHz by linear interpolation: each sample, preceded by its midpoint with the
        // one before (carried across deltas, so their joins are smooth).
        let mut pcm48 = Vec::with_capacity(bytes.len());
        for b in bytes.chunks_exact(2) {
            let s = i16::from_le_bytes([b[0], b[1]]);
            pcm48.push(((i32::from(a.last_model_sample) + i32::from(s)) / 2) as i16);
            pcm48.push(s);
            a.last_model_sample = s;
        }
        if let Some(p) = a
            .playout
            .iter_mut()
            .find(|p| p.response_id == response_id && p.player.is_open())
        {
            p.player.push_pcm(&pcm48);
            return;
        }
        let mut player = Player::streaming(response_id.clone(), a.codec);
        player.push_pcm(&pcm48);
        a.playout.push_back(Playing {
            player,
            response_id,
            item_id,
            content_index,
            started: false,
        });
    }

    /// A response's audio is complete: its playout ends when what came has played.
    fn finish_audio(&mut self, response_id: &str) {
        if let Some(a) = &mut self.audio {
            for p in a
                .playout
                .iter_mut()
                .filter(|p| p.response_id == response_id)
            {
                p.player.finish();
            }
        }
    }

    /// Barge-in or `output_audio_buffer.clear`: the playout stops, the response (if still
    /// running) is cancelled, and the item is truncated to what the caller heard.
    fn interrupt(&mut self, now: Instant) {
        let Some(a) = &mut self.audio else {
            return;
        };
        let playing = a.playout.pop_front();
        let queued: Vec<Playing> = a.playout.drain(..).collect();
        for q in queued {
            a.remember_interrupted(q.response_id);
        }
        let Some(mut p) = playing else {
            self.edge_event(RealtimeServerEvent::OutputBufferCleared { response_id: None });
            return;
        };
        let heard = p.player.heard_ms(now);
        p.player.stop();
        a.remember_interrupted(p.response_id.clone());
        if let (true, Some(onset), Some(last)) = (p.started, a.onset_at, a.last_sent_at) {
            a.timings.barge_in_ms = Some(last.saturating_duration_since(onset).as_millis() as u64);
            a.timings.barge_ins += 1;
        }
        self.edge_event(RealtimeServerEvent::OutputBufferCleared {
            response_id: Some(p.response_id.clone()),
        });
        if self.active.contains(&p.response_id) {
            let event_id = self.edge_id("cancel");
            self.to_upstream.push_back(
                EdgeEvent::Cancel {
                    event_id,
                    response_id: &p.response_id,
                }
                .text(),
            );
        }
        if p.started && !p.item_id.is_empty() {
            let event_id = self.edge_id("truncate");
            self.to_upstream.push_back(
                EdgeEvent::Truncate {
                    event_id,
                    item_id: &p.item_id,
                    content_index: p.content_index,
                    audio_end_ms: heard,
                }
                .text(),
            );
        }
    }

    /// The next frame of the model's audio due now, in the call's codec and its RTP ticks.
    pub fn next_audio(&mut self, now: Instant) -> Option<(Bytes, u32)> {
        loop {
            let a = self.audio.as_mut()?;
            let p = a.playout.front_mut()?;
            if let Some(f) = p.player.next_frame(now) {
                a.last_sent_at = Some(now);
                if !p.started {
                    p.started = true;
                    if self.dialect != Dialect::Realtime {
                        return Some((f.payload, f.samples));
                    }
                    if let Some(end) = a.speech_end_at.take() {
                        a.timings.turn_ms =
                            Some(now.saturating_duration_since(end).as_millis() as u64);
                        a.timings.turns_answered += 1;
                    }
                    let response_id = Some(p.response_id.clone());
                    self.edge_event(RealtimeServerEvent::OutputBufferStarted { response_id });
                }
                return Some((f.payload, f.samples));
            }
            if !p.player.is_done() {
                return None;
            }
            let done = a.playout.pop_front().expect("the front is there");
            if done.started && self.dialect == Dialect::Realtime {
                self.edge_event(RealtimeServerEvent::OutputBufferStopped {
                    response_id: Some(done.response_id),
                });
            }
        }
    }

    /// When the bridge next needs the time: the playout's next frame, or the connect deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let playout = self
            .audio
            .as_ref()
            .and_then(|a| a.playout.front())
            .and_then(|p| p.player.next_deadline());
        let connect = (self.phase == Phase::Connecting).then(|| self.created + CONNECT_TIMEOUT);
        [playout, connect].into_iter().flatten().min()
    }

    pub fn on_timeout(&mut self, now: Instant) {
        if self.phase == Phase::Connecting && now >= self.created + CONNECT_TIMEOUT {
            self.fail(&LinkEnd::Timeout);
        }
    }

    /// The link's queue is full: the upstream stopped reading.
    pub fn on_stalled(&mut self) {
        self.fail(&LinkEnd::Stalled);
    }

    /// The upstream failed or went away: the caller hears why, and the call ends.
    fn fail(&mut self, end: &LinkEnd) {
        if self.phase == Phase::Over {
            return;
        }
        log::warn!("upstream link ended: {end:?}");
        let (code, message) = describe(end);
        let error = ClientError::server(code, message);
        match self.dialect {
            Dialect::Realtime => self.edge_event(RealtimeServerEvent::Error {
                error: error.into_object(),
            }),
            Dialect::Live { .. } => {
                let frame = crate::live::error_frame(error, None);
                self.to_client.push_back(frame);
            }
        }
        self.stop();
    }

    /// The session hit its maximum duration: the service's `error`, then the end.
    pub fn expire(&mut self) {
        self.close_with(ClientError::new(
            "session_expired",
            "Your session hit the maximum duration of 60 minutes.",
        ));
    }

    /// The edge ends the session for its own reason (an idle WebSocket): that `error`, then
    /// the end, as on expiry.
    pub fn close_with(&mut self, error: ClientError) {
        if self.phase == Phase::Over {
            return;
        }
        self.edge_event(RealtimeServerEvent::Error {
            error: error.into_object(),
        });
        self.stop();
    }

    fn stop(&mut self) {
        self.phase = Phase::Over;
        self.to_upstream.clear();
        if let Some(a) = &mut self.audio {
            a.playout.clear();
        }
    }

    /// Whether the link should close: the bridge is over.
    pub fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    /// True once, when the call should end: after the bridge is over and its last events
    /// can reach the caller (its channel is open).
    pub fn take_end(&mut self) -> bool {
        if self.phase == Phase::Over && self.channel_open && !self.end_taken {
            self.end_taken = true;
            return true;
        }
        false
    }

    /// The next event for the caller, once its channel is open.
    pub fn poll_frame(&mut self) -> Option<String> {
        if !self.channel_open {
            return None;
        }
        self.to_client.pop_front()
    }

    /// The next frame for the upstream.
    pub fn poll_upstream(&mut self) -> Option<String> {
        if !self.link_open {
            return None;
        }
        self.early_appends = 0;
        self.to_upstream.pop_front()
    }

    /// A sideband's first frame: the session as the upstream last described it.
    pub fn welcome_frame(&mut self) -> String {
        let session = self
            .session
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        let event_id = self.edge_id("event");
        if let Dialect::Live { .. } = self.dialect {
            return serde_json::json!({"type": "session.started", "event_id": event_id, "session": session})
                .to_string();
        }
        ServerEventFrame {
            event_id,
            event: RealtimeServerEvent::SessionCreated { session },
        }
        .to_text()
    }

    /// Turn and barge-in latencies as the edge saw them (WebRTC only).
    pub fn timings(&self) -> BridgeTimings {
        self.audio
            .as_ref()
            .map_or_else(Default::default, |a| a.timings)
    }

    /// The call's codec on WebRTC.
    pub fn codec(&self) -> Option<Codec> {
        self.audio.as_ref().map(|a| a.codec)
    }

    fn for_caller(&mut self, text: String) {
        if self.to_client.len() >= MAX_HELD {
            self.to_client.clear();
            return self.fail(&LinkEnd::Dropped(format!(
                "more than {MAX_HELD} upstream events waited for the caller"
            )));
        }
        self.to_client.push_back(text);
    }

    fn edge_event(&mut self, event: RealtimeServerEvent) {
        let event_id = self.edge_id("event");
        let text = ServerEventFrame { event_id, event }.to_text();
        self.to_client.push_back(text);
    }
}

#[cfg(test)]
mod tests;
