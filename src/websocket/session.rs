//! One session over a WebSocket, as a state machine: text frames in, text frames out, time
//! passed in. No socket, task or clock: [`super::host`] drives it, and tests drive it in
//! virtual time.
//!
//! It is a [`Call`] on [`crate::call::AudioPath::Events`]: appended audio (base64 in
//! `input_audio_buffer.append`, or Live's `session.input_audio.append`, in the session's input
//! format) goes to the media side in 20 ms frames, and the frames the media side makes come back
//! as `response.output_audio.delta` (Live: `session.output_audio.delta`) events, at the pace of
//! real playback. What is left here is how a WebSocket session starts: at once for Realtime,
//! from the client's `session.start` for Live ([`WsSession::start_live`]).

use std::collections::VecDeque;
use std::time::Instant;

use serde::Deserialize;

use crate::call::byte_budget::Exhausted;
use crate::call::engine::Engine;
use crate::call::media::{Job, JobDone};
use crate::call::recording::{Recorder, RecordingRoom};
use crate::call::{Call, CallOutput};
use crate::live::{EventSource, LiveSession, config::check_start};
use crate::model::ModelKind;
use crate::realtime::{ClientError, Conversation, Transport};

/// What a WebSocket is opened for (`?model=`, `?intent=transcription`, or a Live session,
/// whose config comes in its first message).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionRequest {
    Realtime {
        model: ModelKind,
        /// The starting session, checked by signaling (an ephemeral key's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<serde_json::Value>,
    },
    Transcription,
    /// A session passed through to the upstream model (see [`crate::upstream`]).
    Upstream(crate::upstream::UpstreamCall),
    /// A Live session; `id` is minted by signaling, which placed it, so the session can be
    /// found again by it (its recording, `GET /v1/live/sessions/{id}/content`).
    Live {
        id: String,
        /// The client's address, for its share of the recording budget.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<std::net::IpAddr>,
    },
}

pub struct WsSession {
    pub id: String,
    call: Call,
    /// Server events the last input produced, in order.
    outbox: VecDeque<String>,
    /// The session ended itself (it expired); close once its last events are out.
    ended: bool,
}

impl WsSession {
    /// A Realtime session. `session.created` is queued at once: on a WebSocket it is the first
    /// thing a client reads.
    pub fn new(id: String, request: &SessionRequest, expires_at_unix: u64) -> WsSession {
        let (model, session) = match request {
            SessionRequest::Realtime { model, session } => (model.clone(), session.as_ref()),
            SessionRequest::Transcription
            | SessionRequest::Live { .. }
            | SessionRequest::Upstream(_) => (ModelKind::Echo, None),
        };
        let mut conv = Conversation::new(id.clone(), &model);
        conv.set_transport(Transport::WebSocket);
        if let Some(session) = session {
            crate::realtime::connect_session::start_checked(&mut conv, session, &id);
        }
        if *request == SessionRequest::Transcription {
            conv.set_transcription_only();
        }
        conv.set_expires_at(expires_at_unix);
        let mut session = WsSession::with_engine(id, Engine::Realtime(Box::new(conv)));
        session.call.on_channel_open();
        session.pump(Instant::now());
        session
    }

    /// A Live session from the client's first message, which must be `session.start` with a
    /// valid config; otherwise the Live `error` frame to send, and the socket waits for another.
    /// A stored session takes its recording's room from `record` first (see
    /// [`crate::call::recording`]); none is an `error` too.
    pub fn start_live(
        id: String,
        text: &str,
        expires_at_unix: u64,
        record: impl FnOnce() -> Result<RecordingRoom, Exhausted>,
    ) -> Result<WsSession, String> {
        let event: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            let e = ClientError::new("invalid_json", format!("Could not parse event JSON: {e}"));
            crate::live::error_frame(e, None)
        })?;
        let client_event_id = event["event_id"].as_str().map(str::to_owned);
        let refuse = |e: ClientError| crate::live::error_frame(e, client_event_id.clone());
        if event["type"] != "session.start" {
            return Err(refuse(ClientError::new(
                "session_not_started",
                "The first message of a Live WebSocket is session.start with the session config.",
            )));
        }
        let start = check_start(&event["session"], Transport::WebSocket).map_err(refuse)?;
        let model = crate::live::model_for(&start).map_err(refuse)?;
        let room = match start.store {
            true => Some(record().map_err(|e| {
                refuse(ClientError::new(
                    "recording_budget_exceeded",
                    crate::call::recording::no_room(e),
                ))
            })?),
            false => None,
        };
        let mut live = LiveSession::new(
            id.clone(),
            &model,
            start,
            expires_at_unix,
            Transport::WebSocket,
        );
        live.start(client_event_id.as_deref());
        let mut session = WsSession::with_engine(id, Engine::Live(Box::new(live)));
        if let Some(room) = room {
            session.call.start_recording(room);
        }
        session.pump(Instant::now());
        Ok(session)
    }

    /// A session passed through to the upstream model; its link comes from the host
    /// ([`Self::attach_upstream`]), and `session.created` from the upstream.
    pub fn bridged(id: String, call: &crate::upstream::UpstreamCall) -> WsSession {
        let bridge = crate::upstream::Bridge::stream(Instant::now(), &call.session);
        let mut session = WsSession {
            call: Call::stream_bridged(id.clone(), bridge),
            id,
            outbox: VecDeque::new(),
            ended: false,
        };
        session.call.on_channel_open();
        session
    }

    pub fn attach_upstream(&mut self, now: Instant, link: crate::upstream::UpstreamLink) {
        self.call.attach_upstream(link);
        self.pump(now);
    }

    pub fn on_upstream(&mut self, now: Instant, event: crate::upstream::UpstreamEvent) {
        self.call.on_upstream(now, event);
        self.pump(now);
    }

    fn with_engine(id: String, engine: Engine) -> WsSession {
        WsSession {
            call: Call::stream(id.clone(), engine),
            id,
            outbox: VecDeque::new(),
            ended: false,
        }
    }

    /// One text frame from the client.
    pub fn on_client_text(&mut self, now: Instant, text: &str) {
        self.call
            .on_client_text(now, text, EventSource::DataChannel);
        self.pump(now);
    }

    pub fn on_job_done(&mut self, now: Instant, done: JobDone) {
        self.call.on_job_done(now, done);
        self.pump(now);
    }

    /// A `store: true` session's recording as a stereo WAV, once (see [`crate::call::recording`]).
    pub fn take_recording(&mut self) -> Option<Recorder> {
        self.call.take_recording()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.call.on_timeout(now);
        self.pump(now);
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.call.poll_timeout()
    }

    /// The next server event to send.
    pub fn poll_frame(&mut self) -> Option<String> {
        self.outbox.pop_front()
    }

    /// Runs the call's pump to the end of what the last input made ready.
    fn pump(&mut self, now: Instant) {
        while let Some(output) = self.call.poll_output(now) {
            match output {
                CallOutput::Event(frame) => self.outbox.push_back(frame),
                CallOutput::End => self.ended = true,
                // Audio travels inside the events on a WebSocket.
                CallOutput::Audio { .. } => debug_assert!(false, "RTP audio from a stream call"),
            }
        }
    }

    /// Slow work to run off this thread; results come back through [`Self::on_job_done`].
    pub fn take_jobs(&mut self) -> Vec<Job> {
        self.call.take_jobs()
    }

    /// The session has ended itself; the host closes the socket once the frames are out.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// No client event came for `idle`: the session says so and the socket closes, as on
    /// expiry.
    pub fn idle_out(&mut self, now: Instant, idle: std::time::Duration) {
        self.call.idle_out(now, idle);
        self.pump(now);
    }

    /// The session expires as a call does: the `error` event (Live: `session.closed`), then
    /// the socket closes.
    pub fn expire(&mut self, now: Instant) {
        self.call.expire(now);
        self.pump(now);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use base64::Engine as _;

    static STORE: std::sync::LazyLock<crate::call::recording::SharedRecordings> =
        std::sync::LazyLock::new(|| crate::call::recording::Recordings::shared(64 << 20));
    use serde_json::{Value, json};

    /// A Realtime session with the echo model and the default session.
    fn echo_request() -> SessionRequest {
        SessionRequest::Realtime {
            model: ModelKind::Echo,
            session: None,
        }
    }

    fn speech_24k() -> Vec<u8> {
        let wav = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav"))
            .expect("fixtures/speech.wav");
        let (rate, pcm) = crate::audio::wav::parse_wav(&wav).unwrap();
        assert_eq!(rate, 48_000);
        let pcm = crate::audio::resample::resample(&pcm, 48_000, 24_000);
        pcm.iter().flat_map(|s| s.to_le_bytes()).collect()
    }

    fn append(audio: &[u8]) -> String {
        append_as("input_audio_buffer.append", audio)
    }

    fn append_as(kind: &str, audio: &[u8]) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(audio);
        json!({"type": kind, "audio": b64}).to_string()
    }

    /// Runs the session in virtual time until `until`, 10 ms a step, collecting its events.
    fn run_until(s: &mut WsSession, now: &mut Instant, until: Instant, out: &mut Vec<Value>) {
        while *now < until {
            *now += Duration::from_millis(10);
            if s.poll_timeout().is_some_and(|t| t <= *now) {
                s.handle_timeout(*now);
            }
            drain(s, out);
        }
    }

    fn drain(s: &mut WsSession, out: &mut Vec<Value>) {
        while let Some(f) = s.poll_frame() {
            out.push(serde_json::from_str(&f).unwrap());
        }
    }

    fn types(events: &[Value]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    fn audio_bytes(events: &[Value]) -> usize {
        delta_bytes(events, "response.output_audio.delta")
    }

    /// Speech appended in real-time 100 ms chunks, then a second of silence: the server VAD
    /// ends the turn and the echo comes back as deltas, as long as the speech, in real time.
    fn spoken_turn(s: &mut WsSession, audio: &[u8], bytes_per_ms: usize) -> Vec<Value> {
        spoken_turn_as(s, "input_audio_buffer.append", audio, bytes_per_ms)
    }

    fn spoken_turn_as(
        s: &mut WsSession,
        kind: &str,
        audio: &[u8],
        bytes_per_ms: usize,
    ) -> Vec<Value> {
        let mut now = Instant::now();
        let mut out = Vec::new();
        drain(s, &mut out);
        let silence = vec![if bytes_per_ms == 8 { 0xff } else { 0 }; bytes_per_ms * 1000];
        for chunk in audio
            .chunks(bytes_per_ms * 100)
            .chain(silence.chunks(bytes_per_ms * 100))
        {
            s.on_client_text(now, &append_as(kind, chunk));
            let next = now + Duration::from_millis(100);
            run_until(s, &mut now, next, &mut out);
        }
        let end = now + Duration::from_secs(6);
        run_until(s, &mut now, end, &mut out);
        out
    }

    #[test]
    fn echo_over_pcm_comes_back_as_paced_deltas_without_output_buffer_events() {
        let request = echo_request();
        let mut s = WsSession::new("sess_test".into(), &request, 0);
        let speech = speech_24k();
        let events = spoken_turn(&mut s, &speech, 48);
        let t = types(&events);
        assert_eq!(t[0], "session.created");
        assert_eq!(
            events[0]["session"]["audio"]["output"]["format"]["type"],
            "audio/pcm"
        );
        for want in [
            "input_audio_buffer.speech_started",
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
            "response.created",
            "response.output_audio.delta",
            "response.output_audio.done",
            "response.done",
        ] {
            assert!(t.contains(&want), "no {want} in {t:?}");
        }
        assert!(
            !t.iter().any(|k| k.starts_with("output_audio_buffer.")),
            "WebRTC-only events on a WebSocket: {t:?}"
        );
        let done = events
            .iter()
            .find(|e| e["type"] == "response.done")
            .unwrap();
        assert_eq!(done["response"]["status"], "completed");
        // The echo is the speech turn (onset minus padding to the end of speech), so within
        // the speech's length plus the VAD's padding and hangover.
        let got = audio_bytes(&events) as f64 / 48.0;
        let spoken = speech.len() as f64 / 48.0;
        assert!(
            got > spoken * 0.6 && got < spoken + 1500.0,
            "echo of {got:.0} ms for {spoken:.0} ms of speech"
        );
        let first = t
            .iter()
            .position(|k| *k == "response.output_audio.delta")
            .unwrap();
        let done_at = t.iter().position(|k| *k == "response.done").unwrap();
        assert!(first < done_at);
    }

    #[test]
    fn pcmu_in_and_out() {
        let request = echo_request();
        let mut s = WsSession::new("sess_test".into(), &request, 0);
        let now = Instant::now();
        let update = json!({"type": "session.update", "session": {"type": "realtime", "audio": {
            "input": {"format": {"type": "audio/pcmu"}}, "output": {"format": {"type": "audio/pcmu"}}}}});
        s.on_client_text(now, &update.to_string());
        let mut out = Vec::new();
        drain(&mut s, &mut out);
        let updated = out.iter().find(|e| e["type"] == "session.updated").unwrap();
        assert_eq!(
            updated["session"]["audio"]["input"]["format"]["type"],
            "audio/pcmu"
        );
        let law = crate::audio::g711::Law::Mu;
        let speech: Vec<u8> = crate::audio::resample::resample(
            &crate::audio::wav::parse_wav(
                &std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav"))
                    .unwrap(),
            )
            .unwrap()
            .1,
            48_000,
            8_000,
        )
        .iter()
        .map(|&x| law.encode(x))
        .collect();
        let events = spoken_turn(&mut s, &speech, 8);
        let got = audio_bytes(&events) as f64 / 8.0;
        let spoken = speech.len() as f64 / 8.0;
        assert!(
            got > spoken * 0.6 && got < spoken + 1500.0,
            "μ-law echo of {got:.0} ms for {spoken:.0} ms"
        );
        // The output deltas are μ-law: one byte a sample, at 8 kHz.
        assert!(events.iter().any(|e| e["type"] == "response.done"));
    }

    #[test]
    fn with_vad_off_a_manual_commit_and_response_create_echo_the_appended_audio() {
        let request = echo_request();
        let mut s = WsSession::new("sess_test".into(), &request, 0);
        let mut now = Instant::now();
        let off = json!({"type": "session.update", "session": {"type": "realtime",
            "audio": {"input": {"turn_detection": null}}}});
        s.on_client_text(now, &off.to_string());
        let speech = speech_24k();
        s.on_client_text(now, &append(&speech));
        s.on_client_text(now, r#"{"type":"input_audio_buffer.commit"}"#);
        s.on_client_text(now, r#"{"type":"response.create"}"#);
        let mut out = Vec::new();
        let end = now + Duration::from_secs(8);
        run_until(&mut s, &mut now, end, &mut out);
        let t = types(&out);
        assert!(
            !t.contains(&"input_audio_buffer.speech_stopped"),
            "VAD is off: {t:?}"
        );
        assert!(t.contains(&"input_audio_buffer.committed"), "{t:?}");
        let done = out.iter().find(|e| e["type"] == "response.done").unwrap();
        assert_eq!(done["response"]["status"], "completed");
        // The whole appended buffer comes back (the commit takes it all, silence included).
        let got = audio_bytes(&out);
        assert!(
            got >= speech.len() - 960 && got <= speech.len() + 960,
            "echo of {got} bytes for {} appended",
            speech.len()
        );
    }

    /// `response.create` may ask for another output format than the session's: that response's
    /// audio comes in it (G.711: 160 bytes per 20 ms, not 960), and the next one is back in the
    /// session's.
    #[test]
    fn a_response_speaks_in_its_own_format() {
        use crate::audio::tts::{self, CancelToken, Synth};
        use crate::call::media::{JobOutput, Work};
        let request = SessionRequest::Realtime {
            model: crate::model::ModelKind::Tts,
            session: None,
        };
        let mut s = WsSession::new("sess_test".into(), &request, 0);
        let mut now = Instant::now();
        drain(&mut s, &mut Vec::new());
        let ask = |format: Option<&str>| {
            let mut r = json!({"type": "response.create",
                               "response": {"instructions": "Hello there."}});
            if let Some(f) = format {
                r["response"]["audio"] = json!({"output": {"format": {"type": f}}});
            }
            r.to_string()
        };
        let mut sizes = Vec::new();
        for format in [Some("audio/pcmu"), None] {
            let mut out = Vec::new();
            s.on_client_text(now, &ask(format));
            // The speech job, run here as the host would run it.
            for job in s.take_jobs() {
                let Work::Synthesize { text, voice, speed } = job.work else {
                    panic!("a speech job");
                };
                let never = CancelToken::new();
                let speech =
                    tts::synthesize_with(&text, &voice, speed, Synth::Shipped, &never).unwrap();
                let result = Ok(JobOutput::Speech(speech));
                let response_id = job.response_id;
                s.on_job_done(
                    now,
                    JobDone {
                        response_id,
                        result,
                    },
                );
            }
            let end = now + Duration::from_secs(5);
            run_until(&mut s, &mut now, end, &mut out);
            let done = out.iter().find(|e| e["type"] == "response.done").unwrap();
            let said = &done["response"]["audio"]["output"]["format"]["type"];
            assert_eq!(said, format.unwrap_or("audio/pcm"), "{done}");
            let delta = out
                .iter()
                .find(|e| e["type"] == "response.output_audio.delta")
                .unwrap();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(delta["delta"].as_str().unwrap())
                .unwrap();
            sizes.push(bytes.len());
        }
        assert_eq!(
            sizes,
            [160, 960],
            "a 20 ms delta in G.711, then in PCM16 at 24 kHz"
        );
    }

    /// The client plays a WebSocket reply itself, so its audio goes out as fast as it is made
    /// (the generation pace): the whole echo and `response.done` well before it could have
    /// played, each delta still 20 ms of audio.
    #[test]
    fn a_reply_is_sent_as_fast_as_it_is_made() {
        let request = echo_request();
        let mut s = WsSession::new("sess_test".into(), &request, 0);
        let speech = speech_24k();
        let mut now = Instant::now();
        let mut events = Vec::new();
        drain(&mut s, &mut events);
        for chunk in speech.chunks(4800).chain(vec![0u8; 48_000].chunks(4800)) {
            s.on_client_text(now, &append(chunk));
            let next = now + Duration::from_millis(100);
            run_until(&mut s, &mut now, next, &mut events);
            if events.iter().any(|e| e["type"] == "response.created") {
                break;
            }
        }
        let started = now;
        let end = now + Duration::from_secs(6);
        let mut done_at = None;
        while now < end && done_at.is_none() {
            let next = now + Duration::from_millis(10);
            run_until(&mut s, &mut now, next, &mut events);
            if events.iter().any(|e| e["type"] == "response.done") {
                done_at = Some(now);
            }
        }
        let took = done_at.expect("the reply completed") - started;
        let audio_ms = audio_bytes(&events) as u64 / 48;
        let pace = crate::realtime::GENERATION_PACE;
        assert!(audio_ms > 1000, "an echo of {audio_ms} ms");
        assert!(
            took.as_millis() as f64 <= audio_ms as f64 / pace + 150.0,
            "{audio_ms} ms of audio took {took:?} to send at {pace}x"
        );
    }

    /// At playback pace (a slow model), speech while the echo is still being sent cancels it;
    /// the server never truncates on a WebSocket, the client does from its playback clock.
    #[test]
    fn barge_in_cancels_and_leaves_truncation_to_the_client() {
        let request = echo_request();
        let mut s = WsSession::new("sess_test".into(), &request, 0);
        s.call.set_generation_pace(1.0);
        let speech = speech_24k();
        let mut events = spoken_turn(&mut s, &speech, 48);
        assert!(events.iter().any(|e| e["type"] == "response.done"));
        // A second turn, then speech again while its echo plays.
        let mut now = Instant::now() + Duration::from_secs(30);
        for chunk in speech.chunks(4800).chain(vec![0u8; 48_000].chunks(4800)) {
            s.on_client_text(now, &append(chunk));
            let next = now + Duration::from_millis(100);
            run_until(&mut s, &mut now, next, &mut events);
        }
        let next = now + Duration::from_millis(600);
        run_until(&mut s, &mut now, next, &mut events);
        for chunk in speech.chunks(4800).take(10) {
            s.on_client_text(now, &append(chunk));
            let next = now + Duration::from_millis(100);
            run_until(&mut s, &mut now, next, &mut events);
        }
        let cancelled = events
            .iter()
            .find(|e| e["type"] == "response.done" && e["response"]["status"] == "cancelled")
            .expect("the barge-in cancelled the playing response");
        assert_eq!(
            cancelled["response"]["status_details"]["reason"],
            "turn_detected"
        );
        let item = cancelled["response"]["output"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            !events
                .iter()
                .any(|e| e["type"] == "conversation.item.truncated"),
            "the server truncated on its own"
        );
        // The client's truncate, from its playback clock, is taken.
        let truncate = json!({"type": "conversation.item.truncate", "item_id": item,
            "content_index": 0, "audio_end_ms": 300});
        s.on_client_text(now, &truncate.to_string());
        let mut out = Vec::new();
        drain(&mut s, &mut out);
        assert_eq!(out[0]["type"], "conversation.item.truncated", "{out:?}");
    }

    #[test]
    fn transcription_sessions_transcribe_turns_and_refuse_responses() {
        let mut s = WsSession::new("sess_t".into(), &SessionRequest::Transcription, 0);
        let speech = speech_24k();
        let events = spoken_turn(&mut s, &speech, 48);
        assert_eq!(events[0]["session"]["type"], "transcription");
        assert_eq!(
            events[0]["session"]["object"],
            "realtime.transcription_session"
        );
        let t = types(&events);
        assert!(
            t.contains(&"conversation.item.input_audio_transcription.completed"),
            "{t:?}"
        );
        assert!(!t.contains(&"response.created"), "{t:?}");
        s.on_client_text(Instant::now(), r#"{"type":"response.create"}"#);
        let mut out = Vec::new();
        drain(&mut s, &mut out);
        assert_eq!(out[0]["type"], "error");
        let change = json!({"type": "session.update", "session": {"type": "realtime"}});
        s.on_client_text(Instant::now(), &change.to_string());
        let mut out = Vec::new();
        drain(&mut s, &mut out);
        assert_eq!(out[0]["error"]["param"], "session.type", "{out:?}");
    }

    #[test]
    fn bad_audio_gets_an_error_and_output_buffer_clear_is_webrtc_only() {
        let request = echo_request();
        let mut s = WsSession::new("sess_test".into(), &request, 0);
        let now = Instant::now();
        let mut out = Vec::new();
        drain(&mut s, &mut out);
        s.on_client_text(now, r#"{"type":"input_audio_buffer.append","audio":"%%%"}"#);
        s.on_client_text(now, r#"{"type":"output_audio_buffer.clear"}"#);
        let mut out = Vec::new();
        drain(&mut s, &mut out);
        assert_eq!(types(&out), ["error", "error"]);
        assert_eq!(out[0]["error"]["param"], "audio");
    }

    fn delta_bytes(events: &[Value], kind: &str) -> usize {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| {
                base64::engine::general_purpose::STANDARD
                    .decode(e["delta"].as_str().unwrap())
                    .unwrap()
                    .len()
            })
            .sum()
    }

    #[test]
    fn a_stored_live_websocket_session_records_both_sides() {
        let start = json!({"type": "session.start", "session": {"model": "echo", "store": true}});
        let mut s = WsSession::start_live("live_rec".into(), &start.to_string(), 0, || {
            STORE.room(None)
        })
        .unwrap();
        let speech = speech_24k();
        spoken_turn_as(&mut s, "session.input_audio.append", &speech, 48);
        let wav = s
            .take_recording()
            .expect("a stored session is recorded")
            .wav();
        let (rate, channels, samples) = stereo(&wav);
        assert_eq!((rate, channels), (24_000, 2));
        let energy = |ch: usize| -> f64 {
            samples
                .iter()
                .skip(ch)
                .step_by(2)
                .map(|&x| f64::from(x).abs())
                .sum::<f64>()
                / (samples.len() / 2) as f64
        };
        assert!(
            energy(0) > 100.0,
            "the caller's side is silent: {}",
            energy(0)
        );
        assert!(
            energy(1) > 100.0,
            "the model's side is silent: {}",
            energy(1)
        );
        assert!(
            samples.len() / 2 >= speech.len() / 2,
            "shorter than the speech"
        );
        // Without store: nothing kept.
        let plain = json!({"type": "session.start", "session": {"model": "echo"}});
        let mut s = WsSession::start_live("live_plain".into(), &plain.to_string(), 0, || {
            STORE.room(None)
        })
        .unwrap();
        assert!(s.take_recording().is_none());
    }

    /// A PCM16 WAV's rate, channel count and interleaved samples.
    fn stereo(wav: &[u8]) -> (u32, u16, Vec<i16>) {
        assert_eq!(&wav[..4], b"RIFF");
        let channels = u16::from_le_bytes([wav[22], wav[23]]);
        let rate = u32::from_le_bytes([wav[24], wav[25], wav[26], wav[27]]);
        let samples = wav[44..]
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        (rate, channels, samples)
    }

    #[test]
    fn a_live_websocket_at_16_khz_hears_and_answers_at_16_khz() {
        let start = json!({"type": "session.start", "session": {"model": "echo",
            "audio": {"format": {"type": "audio/pcm", "rate": 16000}}}});
        let mut s = WsSession::start_live("live_16k".into(), &start.to_string(), 0, || {
            STORE.room(None)
        })
        .unwrap();
        let wav = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav"))
            .expect("fixtures/speech.wav");
        let (_, pcm) = crate::audio::wav::parse_wav(&wav).unwrap();
        let pcm16 = crate::audio::resample::resample(&pcm, 48_000, 16_000);
        let speech: Vec<u8> = pcm16.iter().flat_map(|s| s.to_le_bytes()).collect();
        // 32 bytes a millisecond: the VAD hears the turn only if the input is read at 16 kHz.
        let events = spoken_turn_as(&mut s, "session.input_audio.append", &speech, 32);
        assert_eq!(events[0]["session"]["audio"]["format"]["rate"], 16000);
        let bytes = delta_bytes(&events, "session.output_audio.delta");
        // Each delta is 20 ms: 320 samples of 16-bit PCM at 16 kHz (480 at 24 kHz).
        let first = events
            .iter()
            .find(|e| e["type"] == "session.output_audio.delta")
            .expect("audio came back");
        assert_eq!(
            delta_bytes(std::slice::from_ref(first), "session.output_audio.delta"),
            640
        );
        let echoed_ms = bytes as f64 / 32.0;
        let spoken_ms = speech.len() as f64 / 32.0;
        assert!(
            echoed_ms > spoken_ms * 0.6 && echoed_ms < spoken_ms + 1500.0,
            "a 16 kHz echo of {echoed_ms:.0} ms for {spoken_ms:.0} ms of speech"
        );
    }

    #[test]
    fn a_live_websocket_starts_with_session_start_and_echoes_a_turn() {
        // Anything before session.start is refused, as is a bad config; neither ends the socket.
        let early = WsSession::start_live(
            "live_ws".into(),
            r#"{"type":"session.close","event_id":"x"}"#,
            0,
            || STORE.room(None),
        );
        let e: Value = serde_json::from_str(&early.err().unwrap()).unwrap();
        assert_eq!(e["error"]["code"], "session_not_started");
        assert_eq!(e["client_event_id"], "x");
        let bad = json!({"type": "session.start", "session": {"model": "echo", "audio": {"format": {"type": "audio/pcm", "rate": 44100}}}});
        assert!(
            WsSession::start_live("live_ws".into(), &bad.to_string(), 0, || STORE.room(None))
                .is_err()
        );
        let start =
            json!({"type": "session.start", "event_id": "s1", "session": {"model": "echo"}});
        let mut s =
            WsSession::start_live("live_ws".into(), &start.to_string(), 0, || STORE.room(None))
                .unwrap();
        let speech = speech_24k();
        let events = spoken_turn_as(&mut s, "session.input_audio.append", &speech, 48);
        assert_eq!(events[0]["type"], "session.started");
        assert_eq!(events[0]["client_event_id"], "s1");
        assert_eq!(events[0]["session"]["audio"]["format"]["type"], "audio/pcm");
        assert!(
            events
                .iter()
                .all(|e| e["type"].as_str().unwrap().starts_with("session.")),
            "{:?}",
            types(&events)
        );
        // The echo: the turn (speech, prefix padding and the VAD's silence) as audio deltas.
        let bytes = delta_bytes(&events, "session.output_audio.delta");
        assert!(
            bytes >= speech.len() / 2,
            "{bytes} bytes of audio for {} spoken",
            speech.len()
        );
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "session.input_transcript.delta")
        );
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "session.output_transcript.delta")
        );
        // session.close ends the session: the host closes the socket once the frames are out.
        let mut now = Instant::now();
        s.on_client_text(now, r#"{"type":"session.close"}"#);
        let mut out = Vec::new();
        run_until(
            &mut s,
            &mut now,
            Instant::now() + Duration::from_millis(50),
            &mut out,
        );
        assert!(types(&out).contains(&"session.closed"));
        assert!(s.is_ended());
    }
}
