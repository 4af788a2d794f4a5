//! A call apart from its transport: the protocol engine, the media side, the slow jobs, the
//! event log, the sidebands and the recording, and the one pump that moves work between them.
//!
//! Two transports host a [`Call`]. A WebRTC session on a transceiver worker
//! (`transceiver::session`) feeds it decrypted RTP and `oai-events` messages and sends what it
//! yields as RTP and data-channel messages; a WebSocket session ([`crate::websocket`]) feeds it
//! text frames and sends back text frames, with the audio inside them. Everything a call does
//! whichever way it arrived (turns, barge-in, tool calls, expiry, what is logged and recorded)
//! is written here once, so a third transport is a host of this type, not a copy of the pump.
//!
//! Like the engines below it, a call owns no socket, task or clock: its host passes the time
//! in, runs the [`Job`]s it hands out and drains [`Call::poll_output`].

pub mod byte_budget;
pub mod engine;
pub mod event_log;
pub mod event_stream;
mod framer;
pub mod media;
pub mod recording;
pub mod reflection;
pub mod sideband;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use serde::Deserialize;

use crate::audio::Codec;
use crate::live::EventSource;
use crate::realtime::{Action, Conversation};
use crate::upstream::{Bridge, UpstreamLink};
use engine::Engine;
use event_log::EventLog;
use framer::Framer;
use media::{Job, JobDone, Media, VoiceTimings};
use recording::Recorder;
use reflection::Reflection;
use sideband::{SidebandId, Sidebands};

/// How the call's audio travels, which decides where its formats come from and what becomes
/// of the frames the media side makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioPath {
    /// Beside the events, as RTP (WebRTC): one codec, the one the SDP answer chose; the host
    /// sends each frame ([`CallOutput::Audio`]).
    Rtp,
    /// Inside the events (a WebSocket): appended base64 in, `*.output_audio.delta` out, in the
    /// formats the session names, which a `session.update` may change.
    Events,
}

/// What a call hands its host to do, in the order it must happen.
#[derive(Debug, PartialEq)]
pub enum CallOutput {
    /// One frame of the call's codec to send now; `ticks` is its duration in that codec's
    /// clock (the RTP timestamp step). Only on [`AudioPath::Rtp`].
    Audio { payload: Bytes, ticks: u32 },
    /// A server event for the client's own channel. It is already in the event log and on
    /// every sideband.
    Event(String),
    /// The conversation ended the call (it expired, a script hung up, Live's `session.close`):
    /// close it once every event this pump yields has reached the client. Actions come out
    /// first, so this may precede the events that explain it.
    End,
}

pub struct Call {
    id: String,
    backend: Backend,
    path: AudioPath,
    /// Appended audio not yet a whole frame ([`AudioPath::Events`] only).
    framer: Option<Framer>,
    /// The input clock for appended audio: the timestamp and sequence number the next frame
    /// would carry if it were RTP, which is what the media side and frame-level models order by.
    input_ticks: u32,
    input_seq: u16,
    /// The session's time zero, for Live's timeline: the call's creation on WebRTC, the first
    /// input on a WebSocket.
    epoch: Option<Instant>,
    jobs: Vec<Job>,
    /// Every event both ways (see [`event_log`]); off for WebSocket sessions, which have no
    /// route to read it and whose audio deltas would fill it.
    events: Option<EventLog>,
    sidebands: Sidebands,
    /// Both directions' audio, for a Live session started with `store: true`.
    recorder: Option<Recorder>,
    /// The call's own word to the client (its recording stopped), sent before the pump's.
    notices: VecDeque<String>,
    /// A Live call's audio for its sidebands, while one is attached (see [`reflection`]).
    reflection: Option<Reflection>,
}

/// What answers the call: everything above it (log, sidebands, recording) is the same.
enum Backend {
    /// The edge's own engine (the stub models), whose actions the media side renders.
    Edge { engine: Engine, media: Media },
    /// A model upstream, through the bridge (see [`crate::upstream`]); `link` is its
    /// WebSocket once the host has opened it, and is dropped (closed) when the bridge is over.
    Upstream {
        bridge: Box<Bridge>,
        link: Option<UpstreamLink>,
    },
}

/// What the call reads of a client event before the engine sees it: its type, and an
/// append's audio.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    audio: Option<std::borrow::Cow<'a, str>>,
}

impl Call {
    /// A WebRTC call created at `now`, its audio in `codec` (the answer's).
    pub fn rtp(id: String, now: Instant, mut engine: Engine, codec: Codec) -> Call {
        let media = Media::for_model(&engine.conversation().model_kind(), codec);
        Call::on_rtp_path(id, now, Backend::Edge { engine, media })
    }

    /// A WebRTC call answered by an upstream model; the host opens its link
    /// ([`Self::attach_upstream`]).
    pub fn rtp_bridged(id: String, now: Instant, bridge: Bridge) -> Call {
        let backend = Backend::Upstream {
            bridge: Box::new(bridge),
            link: None,
        };
        Call::on_rtp_path(id, now, backend)
    }

    fn on_rtp_path(id: String, now: Instant, backend: Backend) -> Call {
        let mut call = Call::with(id, backend, AudioPath::Rtp);
        call.epoch = Some(now);
        call.events = Some(EventLog::starting(now));
        call
    }

    /// A WebSocket session: formats from the session config, audio inside the events.
    pub fn stream(id: String, mut engine: Engine) -> Call {
        let conv = engine.conversation();
        let (input, output) = formats(conv);
        let mut media = Media::for_stream(&conv.model_kind(), input, output);
        media.configure(conv);
        let mut call = Call::with(id, Backend::Edge { engine, media }, AudioPath::Events);
        call.framer = Some(Framer::new(input));
        call
    }

    /// A WebSocket session passed through to an upstream model.
    pub fn stream_bridged(id: String, bridge: Bridge) -> Call {
        let backend = Backend::Upstream {
            bridge: Box::new(bridge),
            link: None,
        };
        Call::with(id, backend, AudioPath::Events)
    }

    fn with(id: String, backend: Backend, path: AudioPath) -> Call {
        Call {
            id,
            backend,
            path,
            framer: None,
            input_ticks: 0,
            input_seq: 0,
            epoch: None,
            jobs: Vec::new(),
            events: None,
            sidebands: Sidebands::default(),
            recorder: None,
            notices: Default::default(),
            reflection: None,
        }
    }

    /// The upstream link for a bridged call, opened by the host; frames the bridge queued
    /// meanwhile go out on the next [`Self::poll_output`]. Dropped if the bridge is over.
    pub fn attach_upstream(&mut self, new: UpstreamLink) {
        if let Backend::Upstream { bridge, link } = &mut self.backend
            && !bridge.is_over()
        {
            *link = Some(new);
        }
    }

    /// What the call's upstream link reported.
    pub fn on_upstream(&mut self, now: Instant, event: crate::upstream::UpstreamEvent) {
        self.tick(now);
        if let Backend::Upstream { bridge, .. } = &mut self.backend {
            bridge.on_upstream(now, event);
        }
    }

    /// How far ahead of real time replies are made (see `realtime::GENERATION_PACE`); the
    /// media side follows it on a WebSocket, where the audio is sent as fast as it is made.
    /// An upstream model keeps its own pace.
    pub fn set_generation_pace(&mut self, pace: f64) {
        if let Backend::Edge { engine, media } = &mut self.backend {
            let conv = engine.conversation();
            conv.set_generation_pace(pace);
            media.configure(conv);
        }
    }

    /// Keeps both directions' audio from now on, as decoded 24 kHz PCM, in `room` (see
    /// [`recording`]).
    pub fn start_recording(&mut self, room: recording::RecordingRoom) {
        let (input, output) = self.codecs();
        self.recorder = Some(Recorder::new(input, output, room));
    }

    /// The recording stopped short of its end: the client hears why once, as a Live `error`
    /// (only Live sessions record), and the session goes on.
    fn recording_stopped(notices: &mut VecDeque<String>, why: Option<byte_budget::Exhausted>) {
        if let Some(why) = why {
            let e = crate::realtime::ClientError::new(
                "recording_budget_exceeded",
                format!(
                    "the recording stopped here: {why}; the session goes on, and what was recorded can still be downloaded"
                ),
            );
            notices.push_back(crate::live::error_frame(e, None));
        }
    }

    /// The client's channel for events is open (`oai-events`, or the socket itself).
    pub fn on_channel_open(&mut self) {
        match &mut self.backend {
            Backend::Edge { engine, .. } => engine.on_channel_open(),
            Backend::Upstream { bridge, .. } => bridge.on_channel_open(),
        }
    }

    /// A client event, from the client's own channel or a sideband: one conversation, whoever
    /// sends. On [`AudioPath::Events`] an append's audio goes on to the media side here.
    pub fn on_client_text(&mut self, now: Instant, text: &str, origin: EventSource) {
        if let Some(log) = &mut self.events {
            log.record_client(now, text);
        }
        self.tick(now);
        let at = self.session_ms(now);
        let (engine, media) = match &mut self.backend {
            Backend::Edge { engine, media } => (engine, media),
            Backend::Upstream { bridge, .. } => return bridge.on_client_text(now, text),
        };
        let peek = serde_json::from_str::<Peek>(text).ok();
        let kind = peek.as_ref().map_or("", |p| p.kind);
        let appends = kind == engine.append_event();
        let audio = match (&peek, self.path) {
            (
                Some(Peek {
                    audio: Some(b64), ..
                }),
                AudioPath::Events,
            ) if appends && engine.hears_input() => base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .ok(),
            _ => None,
        };
        let updates_session = kind == "session.update";
        // The engine checks and answers the event (an `error` for bad base64) either way.
        engine.on_client_text(text, origin);
        if let (Some(audio), Some(framer)) = (audio, &mut self.framer) {
            let ticks = media.codec().frame_ticks();
            for frame in framer.push(&audio) {
                if let Some(r) = &mut self.recorder {
                    let why = r.caller(at, &frame);
                    Self::recording_stopped(&mut self.notices, why);
                }
                let (ts, seq) = (self.input_ticks, self.input_seq);
                media.on_rtp(now, &frame, ts, seq, engine.conversation());
                self.input_ticks = self.input_ticks.wrapping_add(ticks);
                self.input_seq = self.input_seq.wrapping_add(1);
            }
        }
        if updates_session && self.path == AudioPath::Events {
            self.follow_formats();
        }
        // Appends, a stream's bulk, change nothing the media side follows.
        if !appends && let Backend::Edge { engine, media } = &mut self.backend {
            media.configure(engine.conversation());
        }
    }

    /// A session's formats changed: new codecs. Audio buffered in the old input format is
    /// dropped, since it cannot be read in the new one.
    fn follow_formats(&mut self) {
        let Backend::Edge { engine, media } = &mut self.backend else {
            return;
        };
        let conv = engine.conversation();
        let (input, output) = formats(conv);
        if (input, output) != (media.codec(), media.output_codec()) {
            *media = Media::for_stream(&conv.model_kind(), input, output);
            self.framer = Some(Framer::new(input));
        }
    }

    /// One decrypted RTP packet of the caller's audio.
    pub fn on_rtp(&mut self, now: Instant, payload: &Bytes, rtp_ts: u32, seq: u16) {
        let at = self.session_ms(now);
        if let Some(r) = &mut self.recorder {
            let why = r.caller(at, payload);
            Self::recording_stopped(&mut self.notices, why);
        }
        if let Some(r) = &mut self.reflection {
            let event = r.caller(payload);
            self.reflect(event);
        }
        match &mut self.backend {
            Backend::Upstream { bridge, .. } => bridge.on_rtp(now, payload),
            // Live's input mute: the model hears nothing, as if the caller were silent.
            Backend::Edge { engine, .. } if !engine.hears_input() => {}
            Backend::Edge { engine, media } => {
                media.on_rtp(now, payload, rtp_ts, seq, engine.conversation())
            }
        }
    }

    pub fn on_job_done(&mut self, now: Instant, done: JobDone) {
        self.tick(now);
        let Backend::Edge { engine, media } = &mut self.backend else {
            return;
        };
        match done.result {
            Ok(media::JobOutput::Mcp(outcome)) => engine
                .conversation()
                .on_mcp_outcome(&done.response_id, outcome),
            result => media.on_job_done(
                now,
                JobDone {
                    response_id: done.response_id,
                    result,
                },
                engine.conversation(),
            ),
        }
    }

    /// Time has passed to [`Self::poll_timeout`] (or beyond; only what is due happens).
    pub fn on_timeout(&mut self, now: Instant) {
        self.tick(now);
        match &mut self.backend {
            Backend::Edge { engine, media } => {
                media.on_timeout(now, engine.conversation());
                engine.on_timeout();
            }
            Backend::Upstream { bridge, .. } => bridge.on_timeout(now),
        }
    }

    /// When the media side or the protocol next needs time to pass.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let (engine, media) = match &self.backend {
            Backend::Edge { engine, media } => (engine, media),
            Backend::Upstream { bridge, .. } => return bridge.poll_timeout(),
        };
        let protocol = match (engine.poll_timeout(), self.epoch) {
            (Some(ms), Some(epoch)) => Some(epoch + Duration::from_millis(ms)),
            _ => None,
        };
        [media.poll_timeout(), protocol].into_iter().flatten().min()
    }

    /// The session hit its maximum duration: the Realtime `error` (Live: `session.closed`),
    /// then [`CallOutput::End`].
    pub fn expire(&mut self, now: Instant) {
        self.tick(now);
        match &mut self.backend {
            Backend::Edge { engine, .. } => engine.expire(),
            Backend::Upstream { bridge, .. } => bridge.expire(),
        }
    }

    /// The session is closed for going `idle` that long (see [`Engine::idle_out`]).
    pub fn idle_out(&mut self, now: Instant, idle: Duration) {
        self.tick(now);
        match &mut self.backend {
            Backend::Edge { engine, .. } => engine.idle_out(idle),
            Backend::Upstream { bridge, .. } => bridge.close_with(engine::idle_error(idle)),
        }
    }

    /// The call is ending for `reason` (a Live `session.closed` reason): the engine's last
    /// events go to the log and the sidebands, the only listeners left.
    pub fn end(&mut self, now: Instant, reason: &'static str) {
        self.tick(now);
        if let Backend::Edge { engine, .. } = &mut self.backend
            && engine.end(reason)
        {
            while self.poll_output(now).is_some() {}
        }
    }

    /// The pump: the engine's actions to the media side, the media side's frames out (or into
    /// delta events), the engine's events out, until nothing is left. Actions go first, so a
    /// frame is never sent for a response the engine has already stopped.
    pub fn poll_output(&mut self, now: Instant) -> Option<CallOutput> {
        // Only an input starts the clock (see `epoch`).
        if self.epoch.is_some() {
            self.tick(now);
        }
        if let Some(notice) = self.notices.pop_front() {
            return Some(self.server_event(now, notice));
        }
        if let Backend::Upstream { .. } = self.backend {
            return self.poll_bridge(now);
        }
        loop {
            let Backend::Edge { engine, media } = &mut self.backend else {
                return None;
            };
            if let Some(action) = engine.poll_action() {
                if action == Action::EndCall {
                    return Some(CallOutput::End);
                }
                if action == Action::ClearInput
                    && let Some(framer) = &mut self.framer
                {
                    framer.clear();
                }
                // Network work of the engine's own, beside the media side's.
                if let Action::Mcp { key, request } = action {
                    self.jobs.push(Job {
                        response_id: key,
                        work: media::Work::Mcp(request),
                        cancel: crate::audio::tts::CancelToken::new(),
                    });
                    continue;
                }
                if let Some(job) = media.on_action(now, action, engine.conversation()) {
                    self.jobs.push(job);
                }
                continue;
            }
            if let Some((payload, ticks)) = media.next_audio(now, engine.conversation()) {
                match self.model_audio(now, payload, ticks) {
                    Some(out) => return Some(out),
                    None => continue,
                }
            }
            let frame = engine.poll_frame()?;
            return Some(self.server_event(now, frame));
        }
    }

    /// [`Self::poll_output`] for a bridged call: its frames to the upstream (a full link
    /// fails the call: the upstream stopped reading), then the end, audio and events.
    fn poll_bridge(&mut self, now: Instant) -> Option<CallOutput> {
        let Backend::Upstream { bridge, link } = &mut self.backend else {
            return None;
        };
        if let Some(l) = link.as_ref() {
            while let Some(frame) = bridge.poll_upstream() {
                if l.send(frame).is_err() {
                    bridge.on_stalled();
                }
            }
        }
        if bridge.is_over() {
            *link = None;
        }
        if bridge.take_end() {
            return Some(CallOutput::End);
        }
        if let Some((payload, ticks)) = bridge.next_audio(now)
            && let Some(out) = self.model_audio(now, payload, ticks)
        {
            return Some(out);
        }
        let Backend::Upstream { bridge, .. } = &mut self.backend else {
            return None;
        };
        let frame = bridge.poll_frame()?;
        Some(self.server_event(now, frame))
    }

    /// A frame of the model's audio: recorded and reflected, then RTP audio for the host, or
    /// (on [`AudioPath::Events`]) into the engine's delta events (`None`: nothing to send).
    fn model_audio(&mut self, now: Instant, payload: Bytes, ticks: u32) -> Option<CallOutput> {
        let at = self.session_ms(now);
        if let Some(r) = &mut self.recorder {
            let why = r.model(at, &payload);
            Self::recording_stopped(&mut self.notices, why);
        }
        if let Some(r) = &mut self.reflection {
            let event = r.model(at, &payload);
            self.reflect(event);
        }
        match (self.path, &mut self.backend) {
            (AudioPath::Rtp, _) => Some(CallOutput::Audio { payload, ticks }),
            (AudioPath::Events, Backend::Edge { engine, .. }) => {
                engine.conversation().on_audio_out(&payload);
                None
            }
            (AudioPath::Events, Backend::Upstream { .. }) => None,
        }
    }

    /// A server event on its way to the client: into the log and onto every sideband.
    fn server_event(&mut self, now: Instant, frame: String) -> CallOutput {
        if let Some(log) = &mut self.events {
            log.record_server(now, &frame);
        }
        self.sidebands.send(&self.id, &frame);
        CallOutput::Event(frame)
    }

    /// Slow work to run off the host's thread; results come back through [`Self::on_job_done`].
    pub fn take_jobs(&mut self) -> Vec<Job> {
        std::mem::take(&mut self.jobs)
    }

    /// Whether the client's own channel receives this event (Live's frontend permissions);
    /// sidebands receive every event.
    pub fn channel_receives(&self, frame: &str) -> bool {
        match &self.backend {
            Backend::Edge { engine, .. } => engine.data_channel_receives(frame),
            Backend::Upstream { .. } => true,
        }
    }

    /// Attaches a sideband; `None` when the call has as many as it takes. The sideband's first
    /// frame is a `session.created` with the session as it is now.
    pub fn attach_sideband(
        &mut self,
        out: crate::call::event_stream::FrameSender,
    ) -> Option<SidebandId> {
        let (welcome, live) = match &mut self.backend {
            Backend::Edge { engine, .. } => (engine.welcome_frame(), engine.is_live()),
            Backend::Upstream { bridge, .. } => (bridge.welcome_frame(), false),
        };
        let id = self.sidebands.attach(out, welcome)?;
        if live && self.reflection.is_none() {
            let (input, output) = self.codecs();
            self.reflection = Some(Reflection::new(input, output));
        }
        Some(id)
    }

    /// A reflected audio event to the sidebands (see [`reflection`]); reflecting stops once
    /// none is left to hear it.
    fn reflect(&mut self, event: Option<String>) {
        if let Some(e) = event {
            self.sidebands.send(&self.id, &e);
        }
        if self.sidebands.is_empty() {
            self.reflection = None;
        }
    }

    pub fn detach_sideband(&mut self, id: SidebandId) {
        self.sidebands.detach(id);
        if self.sidebands.is_empty() {
            self.reflection = None;
        }
    }

    /// The event log, read while the call is live (empty for a WebSocket session).
    pub fn event_log(&self) -> Option<&EventLog> {
        self.events.as_ref()
    }

    /// The event log, taken when the call ends so it outlives the call.
    pub fn take_event_log(&mut self) -> Option<EventLog> {
        self.events.take()
    }

    /// The recording, when there is one; taken when the call ends, for the store to keep.
    pub fn take_recording(&mut self) -> Option<Recorder> {
        self.recorder.take()
    }

    /// The codec of the caller's audio.
    pub fn codec(&self) -> Codec {
        self.codecs().0
    }

    /// The caller's codec and the model's (they differ only on a WebSocket).
    fn codecs(&self) -> (Codec, Codec) {
        match &self.backend {
            Backend::Edge { media, .. } => (media.codec(), media.output_codec()),
            Backend::Upstream { bridge, .. } => {
                let codec = bridge.codec().unwrap_or(Codec::Pcm24);
                (codec, codec)
            }
        }
    }

    pub fn timings(&self) -> VoiceTimings {
        match &self.backend {
            Backend::Edge { media, .. } => media.timings(),
            Backend::Upstream { bridge, .. } => {
                let t = bridge.timings();
                VoiceTimings {
                    barge_in_ms: t.barge_in_ms,
                    turn_ms: t.turn_ms,
                    barge_ins: t.barge_ins,
                    turns_answered: t.turns_answered,
                }
            }
        }
    }

    /// The engine's session clock: ms since the epoch.
    fn tick(&mut self, now: Instant) {
        self.epoch.get_or_insert(now);
        let ms = self.session_ms(now);
        if let Backend::Edge { engine, .. } = &mut self.backend {
            engine.tick(ms);
        }
    }

    fn session_ms(&self, now: Instant) -> u64 {
        self.epoch
            .map_or(0, |e| now.saturating_duration_since(e).as_millis() as u64)
    }
}

/// A stream session's input and output codecs, from its formats.
fn formats(conv: &Conversation) -> (Codec, Codec) {
    let audio = &conv.config().audio;
    (audio.input.format.codec(), audio.output.format.codec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelKind;
    use crate::realtime::Transport;
    use serde_json::Value;

    fn realtime(model: ModelKind, transport: Transport) -> Engine {
        let mut conv = Conversation::new("sess_test".into(), &model);
        conv.set_transport(transport);
        Engine::Realtime(Box::new(conv))
    }

    fn drain(call: &mut Call, now: Instant) -> Vec<CallOutput> {
        std::iter::from_fn(|| call.poll_output(now)).collect()
    }

    fn event_types(outputs: &[CallOutput]) -> Vec<String> {
        outputs
            .iter()
            .filter_map(|o| match o {
                CallOutput::Event(f) => {
                    let v: Value = serde_json::from_str(f).unwrap();
                    Some(v["type"].as_str().unwrap().to_owned())
                }
                _ => None,
            })
            .collect()
    }

    /// Expiry is the engine's `error` and the end, and the event reaches log and sidebands.
    #[test]
    fn expiry_is_the_error_event_then_the_end_and_both_reach_log_and_sideband() {
        let now = Instant::now();
        let engine = realtime(ModelKind::Echo, Transport::WebRtc);
        let mut call = Call::rtp("rtc_test".into(), now, engine, Codec::Opus);
        call.on_channel_open();
        let (tx, mut rx) = crate::call::event_stream::frames();
        call.attach_sideband(tx).unwrap();
        drain(&mut call, now);
        call.expire(now);
        let out = drain(&mut call, now);
        assert_eq!(event_types(&out), ["error"]);
        assert!(out.contains(&CallOutput::End), "{out:?}");
        let log = call.event_log().unwrap().render(0);
        assert!(log.contains("session_expired"), "{log}");
        let mut sideband = Vec::new();
        while let Some(f) = rx.try_recv() {
            sideband.push(f);
        }
        assert!(sideband.iter().any(|f| f.contains("session_expired")));
    }

    /// A Live call that ends under its session tells its sidebands why, once.
    #[test]
    fn a_live_call_ending_sends_session_closed_with_its_reason_to_the_sidebands() {
        let now = Instant::now();
        let start = crate::live::config::check_start(
            &serde_json::json!({"model": "gpt-live-1"}),
            Transport::WebRtc,
        )
        .unwrap();
        let live = crate::live::LiveSession::new(
            "live_test".into(),
            &ModelKind::Echo,
            start,
            0,
            Transport::WebRtc,
        );
        let mut call = Call::rtp(
            "live_test".into(),
            now,
            Engine::Live(Box::new(live)),
            Codec::Opus,
        );
        call.on_channel_open();
        let (tx, mut rx) = crate::call::event_stream::frames();
        call.attach_sideband(tx).unwrap();
        drain(&mut call, now);
        call.end(now, "remote_hangup");
        call.end(now, "connection_lost");
        let mut closed = Vec::new();
        while let Some(f) = rx.try_recv() {
            let v: Value = serde_json::from_str(&f).unwrap();
            if v["type"] == "session.closed" {
                closed.push(v["reason"].as_str().unwrap().to_owned());
            }
        }
        assert_eq!(closed, ["remote_hangup"]);
    }

    /// The same loopback frame comes back as RTP audio on WebRTC and as a delta event on a
    /// WebSocket: the transport decides only where the audio goes.
    #[test]
    fn audio_is_rtp_on_webrtc_and_delta_events_on_a_websocket() {
        let now = Instant::now();
        let frame = Bytes::from(vec![0u8; 960]);
        let mut rtp = Call::rtp(
            "rtc_test".into(),
            now,
            realtime(ModelKind::Loopback, Transport::WebRtc),
            Codec::Pcm24,
        );
        rtp.on_channel_open();
        drain(&mut rtp, now);
        rtp.on_rtp(now, &frame, 0, 0);
        let out = drain(&mut rtp, now);
        assert!(
            out.iter()
                .any(|o| matches!(o, CallOutput::Audio { payload, .. } if payload.len() == 960)),
            "{out:?}"
        );

        let mut ws = Call::stream(
            "sess_test".into(),
            realtime(ModelKind::Loopback, Transport::WebSocket),
        );
        ws.on_channel_open();
        drain(&mut ws, now);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&frame);
        let append = format!(r#"{{"type":"input_audio_buffer.append","audio":"{b64}"}}"#);
        ws.on_client_text(now, &append, EventSource::DataChannel);
        let out = drain(&mut ws, now);
        assert!(!out.iter().any(|o| matches!(o, CallOutput::Audio { .. })));
        assert!(
            event_types(&out).contains(&"response.output_audio.delta".to_owned()),
            "{:?}",
            event_types(&out)
        );
        assert!(ws.event_log().is_none(), "a WebSocket session keeps no log");
    }

    /// A Live call's sideband hears its audio, as the service reflects it: the caller's as
    /// `session.input_audio.append`, the model's as `session.output_audio.delta` with its span,
    /// both 24 kHz PCM16; a Realtime sideband hears none, and none is made once detached.
    #[test]
    fn a_live_sideband_hears_both_sides_audio_and_a_realtime_one_none() {
        let now = Instant::now();
        // A 24 kHz PCM frame of a loud square wave: loopback sends it straight back.
        let samples: Vec<i16> = (0..480)
            .map(|i| if i % 48 < 24 { 8000 } else { -8000 })
            .collect();
        let frame = Bytes::from(
            samples
                .iter()
                .flat_map(|s| s.to_le_bytes())
                .collect::<Vec<_>>(),
        );
        let live = |model| {
            let start = crate::live::config::check_start(
                &serde_json::json!({"model": "gpt-live-1"}),
                Transport::WebRtc,
            )
            .unwrap();
            Engine::Live(Box::new(crate::live::LiveSession::new(
                "live_test".into(),
                &model,
                start,
                0,
                Transport::WebRtc,
            )))
        };
        let heard = |engine: Engine| -> (Vec<Value>, Call, SidebandId) {
            let mut call = Call::rtp("live_test".into(), now, engine, Codec::Pcm24);
            call.on_channel_open();
            let (tx, mut rx) = crate::call::event_stream::frames();
            let id = call.attach_sideband(tx).unwrap();
            drain(&mut call, now);
            for n in 0..3u16 {
                let at = now + Duration::from_millis(20 * u64::from(n));
                call.on_rtp(at, &frame, 480 * u32::from(n), n);
                drain(&mut call, at);
            }
            let mut audio = Vec::new();
            while let Some(f) = rx.try_recv() {
                let v: Value = serde_json::from_str(&f).unwrap();
                if v["type"] == "session.input_audio.append"
                    || v["type"] == "session.output_audio.delta"
                    || v["type"] == "response.output_audio.delta"
                {
                    audio.push(v);
                }
            }
            (audio, call, id)
        };
        let (audio, mut call, id) = heard(live(ModelKind::Loopback));
        let of = |kind: &str| {
            audio
                .iter()
                .filter(|v| v["type"] == kind)
                .collect::<Vec<_>>()
        };
        let (input, output) = (
            of("session.input_audio.append"),
            of("session.output_audio.delta"),
        );
        assert_eq!((input.len(), output.len()), (3, 3), "{audio:?}");
        let pcm = |b64: &Value| -> Vec<i16> {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.as_str().unwrap())
                .unwrap();
            bytes
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]]))
                .collect()
        };
        for v in &input {
            assert!(
                v.get("event_id").is_none(),
                "a reflection is no acknowledgment"
            );
            let p = pcm(&v["audio"]);
            assert_eq!(p.len(), 480, "20 ms at 24 kHz");
            assert!(p.iter().map(|s| i32::from(*s).abs()).max().unwrap() > 4000);
        }
        for (n, v) in output.iter().enumerate() {
            assert_eq!(pcm(&v["delta"]).len(), 480);
            let (start, end) = (
                v["start_ms"].as_u64().unwrap(),
                v["end_ms"].as_u64().unwrap(),
            );
            assert_eq!((start, end - start), (20 * n as u64, 20), "{v}");
        }
        call.detach_sideband(id);
        call.on_rtp(now, &frame, 1440, 3);
        drain(&mut call, now);
        assert!(call.reflection.is_none(), "reflecting for nobody");

        let (audio, _, _) = heard(realtime(ModelKind::Loopback, Transport::WebRtc));
        assert!(audio.is_empty(), "a Realtime sideband got audio: {audio:?}");
    }
}
