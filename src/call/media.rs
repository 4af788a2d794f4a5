//! The voice side of one call: caller audio → server VAD → Realtime engine, and the engine's
//! actions → paced outgoing audio.
//!
//! Two modes, following the call's model. `Frames` hands every frame to a frame-level model
//! (`loopback`: the network reference used by the transport tests and the load generator) and
//! sends what it gives back. `Voice` is what turn-based models need: decode for VAD, keep the
//! caller's frames for echo replies, render text replies as speech (off the socket thread: the
//! worker runs each [`Job`] and hands back a [`JobDone`]), and stop outgoing audio within the
//! packet that detects a barge-in. A response that stops while its speech is being made
//! (cancel, barge-in, the call ending) cancels the job too. A `session.update` that switches
//! between a frame-level and a turn-based model switches the mode.
//!
//! Both modes carry the call's negotiated [`Codec`] (Opus, or G.711 for telephony clients): the
//! listener decodes and the player encodes with it, and every frame duration handed to the
//! session is in its RTP clock's ticks. A WebSocket session (see [`super::socket`]) drives the
//! same machinery with its formats' codecs, whose input and output may differ (`audio/pcm`
//! in, `audio/pcmu` out): an echo is then transcoded rather than replayed.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::audio::codec::Codec;
use crate::audio::input::Listener;
use crate::audio::player::Player;
use crate::audio::tts;
use crate::audio::vad::{VadConfig, VadEvent};
use crate::model::{AudioIn, ModelKind, Reply};
use crate::realtime::{Action, Conversation};

/// Without packets for this long mid-turn (DTX, a muted or vanished mic), input time is
/// advanced by the clock so the turn can still end.
const IDLE_ADVANCE: Duration = Duration::from_millis(100);
/// Arrival times kept to time barge-in and turn latency (≈ 2 s of 20 ms frames).
const ARRIVALS_KEPT: usize = 100;

/// Slow work for a response, run by the worker off the socket thread; its result comes back
/// as a [`JobDone`] through the worker's mailbox: speech synthesis, and MCP requests.
#[derive(Debug, Clone)]
pub struct Job {
    /// What the result is for: the response to speak, or the MCP request's key.
    pub response_id: String,
    pub work: Work,
    /// Fires when the response stops before the job is back.
    pub cancel: tts::CancelToken,
}

#[derive(Debug, Clone)]
pub enum Work {
    /// `speed` is the session's `audio.output.speed`.
    Synthesize {
        text: String,
        voice: String,
        speed: f64,
    },
    Mcp(crate::mcp::McpRequest),
}

impl Job {
    /// Starts the job off the calling thread; `deliver` gets its result, and is never called
    /// for a job cancelled meanwhile (nobody awaits it). Speech goes to the process's synthesis
    /// pool (espeak-ng is a subprocess; the pool's few workers run it). A job that cannot start
    /// comes back as the failure to report.
    pub fn start(self, deliver: impl FnOnce(JobDone) + Send + 'static) -> Result<(), JobDone> {
        use crate::audio::tts::pool::{Outcome, Pool};
        let Job {
            response_id,
            work,
            cancel,
        } = self;
        match work {
            Work::Mcp(request) => {
                crate::mcp::client::start(
                    request,
                    move || cancel.is_cancelled(),
                    move |outcome| {
                        deliver(JobDone {
                            response_id,
                            result: Ok(JobOutput::Mcp(outcome)),
                        })
                    },
                );
                Ok(())
            }
            Work::Synthesize { text, voice, speed } => {
                let id = response_id.clone();
                let pool = Pool::global();
                let submitted = pool.submit(&text, &voice, speed, cancel, move |outcome| {
                    let result = match outcome {
                        Outcome::Spoken(speech) => Ok(JobOutput::Speech(speech)),
                        Outcome::Failed(message) => Err(JobFailure::failed(message)),
                        Outcome::Cancelled(_) => return,
                    };
                    deliver(JobDone {
                        response_id: id,
                        result,
                    });
                });
                submitted.map_err(|busy| {
                    log::warn!("{response_id} not spoken: {busy}");
                    JobDone {
                        response_id,
                        result: Err(JobFailure::busy(busy)),
                    }
                })
            }
        }
    }
}

/// A job's result for one call's response.
#[derive(Debug)]
pub struct JobDone {
    pub response_id: String,
    pub result: Result<JobOutput, JobFailure>,
}

#[derive(Debug)]
pub enum JobOutput {
    Speech(tts::Speech),
    /// Handed to the engine by the call, never to the media side.
    Mcp(crate::mcp::McpOutcome),
}

/// Why a job gave nothing: an `error` event's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    pub code: &'static str,
    pub message: String,
}

impl JobFailure {
    /// The synthesis pool's queue was full.
    pub fn busy(busy: tts::pool::Busy) -> Self {
        JobFailure {
            code: "speech_synthesis_busy",
            message: format!("This response was not spoken: {busy}. Try again shortly."),
        }
    }

    /// The synthesizer failed; `message` is the pool's, for the client.
    pub fn failed(message: String) -> Self {
        JobFailure {
            code: "speech_synthesis_failed",
            message,
        }
    }
}

/// The response whose job is running; dropping it (the response stopped, or the call is gone)
/// cancels the job.
#[derive(Debug)]
struct AwaitingJob {
    response_id: String,
    /// What its speech is encoded in.
    codec: Codec,
    /// When its audio may start (the plan's delay after the response began).
    play_at: Instant,
    _cancel: tts::CancelOnDrop,
}

/// Latencies measured at the server, per call (the last occurrence of each).
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct VoiceTimings {
    /// Caller's speech onset (arrival of the packet holding it) → last outgoing audio packet
    /// of the interrupted response.
    pub barge_in_ms: Option<u64>,
    /// Arrival of the caller's last speech packet → first audio packet of the reply.
    pub turn_ms: Option<u64>,
    pub barge_ins: u64,
    pub turns_answered: u64,
}

pub enum Media {
    /// Frames go to and from the frame-level model the conversation holds.
    Frames(Codec),
    Voice(Box<Voice>),
}

pub struct Voice {
    codec: Codec,
    /// What the player encodes: `codec` on RTP; a WebSocket's output format may differ.
    out_codec: Codec,
    listener: Listener,
    player: Option<Player>,
    /// Audio is held until then (a planned delay).
    hold_until: Option<Instant>,
    /// The next response's audio, queued behind a finished response that still plays (the
    /// model generates ahead of playback), with when it may start at the earliest.
    queued: Option<(Player, Instant)>,
    /// A response with nothing to play, held until its delay is over (`Action::Hold`).
    held: Option<(String, Instant)>,
    awaiting_job: Option<AwaitingJob>,
    last_packet: Option<Instant>,
    /// When input time was last advanced by the clock (packets stopped mid-turn).
    idle_checked: Option<Instant>,
    /// (input ms at packet start, arrival) of recent packets.
    arrivals: VecDeque<(u64, Instant)>,
    prefix_padding_ms: u64,
    silence_ms: u64,
    /// Arrival of the current turn's onset packet.
    onset_at: Option<Instant>,
    /// When the last turn's speech ended (arrival of its last speech packet).
    speech_end_at: Option<Instant>,
    last_sent_at: Option<Instant>,
    first_frame_pending: bool,
    /// Seconds of audio sent per second (see `Conversation::send_pace`).
    send_pace: f64,
    pub timings: VoiceTimings,
}

impl Media {
    pub fn for_model(kind: &ModelKind, codec: Codec) -> Media {
        Media::for_stream(kind, codec, codec)
    }

    /// Input in `input`, output in `output` (a WebSocket session's formats). A frame-level
    /// model hands back what it is given, so it sends in the input codec.
    pub fn for_stream(kind: &ModelKind, input: Codec, output: Codec) -> Media {
        if kind.is_frame_level() {
            Media::Frames(input)
        } else {
            Media::Voice(Box::new(Voice::new(input, output)))
        }
    }

    /// The input codec (the only one, on RTP).
    pub fn codec(&self) -> Codec {
        match self {
            Media::Frames(codec) => *codec,
            Media::Voice(v) => v.codec,
        }
    }

    /// The codec outgoing frames are in.
    pub fn output_codec(&self) -> Codec {
        match self {
            Media::Frames(codec) => *codec,
            Media::Voice(v) => v.out_codec,
        }
    }

    pub fn timings(&self) -> VoiceTimings {
        match self {
            Media::Voice(v) => v.timings,
            Media::Frames(_) => VoiceTimings::default(),
        }
    }

    /// One decrypted RTP packet from the caller.
    pub fn on_rtp(
        &mut self,
        now: Instant,
        payload: &Bytes,
        rtp_ts: u32,
        seq: u16,
        conv: &mut Conversation,
    ) {
        match self {
            Media::Frames(codec) => conv.model_mut().on_audio(
                now,
                AudioIn {
                    payload,
                    rtp_timestamp: rtp_ts,
                    sequence: seq,
                    clock_hz: codec.clock_hz(),
                },
            ),
            Media::Voice(v) => v.on_rtp(now, payload, rtp_ts, conv),
        }
    }

    pub fn on_action(
        &mut self,
        now: Instant,
        action: Action,
        conv: &mut Conversation,
    ) -> Option<Job> {
        match self {
            Media::Voice(v) => v.on_action(now, action, conv),
            // Frames go back as they come, with no turns: answer every response at once so the
            // engine stays consistent.
            Media::Frames(_) => {
                match action {
                    Action::Speak { response_id, .. } => conv.on_audio_done(&response_id),
                    Action::Hold { response_id, .. } => conv.on_hold_over(&response_id),
                    _ => {}
                }
                None
            }
        }
    }

    /// A job's result for one of this call's responses.
    pub fn on_job_done(&mut self, now: Instant, done: JobDone, conv: &mut Conversation) {
        if let Media::Voice(v) = self {
            v.on_job_done(now, done, conv);
        }
    }

    /// The next frame to send now, if any, with its duration in RTP clock ticks.
    pub fn next_audio(&mut self, now: Instant, conv: &mut Conversation) -> Option<(Bytes, u32)> {
        match self {
            Media::Frames(_) => conv
                .model_mut()
                .poll_audio(now)
                .map(|f| (f.payload, f.samples)),
            Media::Voice(v) => v.next_audio(now, conv),
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Media::Frames(_) => None,
            Media::Voice(v) => v.poll_timeout(),
        }
    }

    pub fn on_timeout(&mut self, now: Instant, conv: &mut Conversation) {
        if let Media::Voice(v) = self {
            v.on_timeout(now, conv);
        }
    }

    /// Follows the session: the mode its model needs, and its turn detection settings.
    pub fn configure(&mut self, conv: &Conversation) {
        let kind = conv.model_kind();
        if kind.is_frame_level() != matches!(self, Media::Frames(_)) {
            *self = Media::for_stream(&kind, self.codec(), self.output_codec());
        }
        if let Media::Voice(v) = self {
            v.send_pace = conv.send_pace();
        }
        if let (Media::Voice(v), Some(td)) = (self, conv.turn_detection()) {
            let cfg = VadConfig {
                threshold: td.threshold,
                prefix_padding_ms: td.prefix_padding_ms,
                silence_duration_ms: td.silence_duration_ms,
                ..VadConfig::default()
            };
            if *v.listener.vad().config() != cfg {
                v.listener.vad_mut().set_config(cfg);
            }
            v.prefix_padding_ms = u64::from(td.prefix_padding_ms);
            v.silence_ms = u64::from(td.silence_duration_ms);
        }
    }
}

impl Voice {
    fn new(codec: Codec, out_codec: Codec) -> Self {
        let cfg = VadConfig::default();
        Voice {
            codec,
            out_codec,
            listener: Listener::with_codec(codec, cfg),
            player: None,
            hold_until: None,
            queued: None,
            held: None,
            awaiting_job: None,
            last_packet: None,
            idle_checked: None,
            arrivals: VecDeque::with_capacity(ARRIVALS_KEPT),
            prefix_padding_ms: u64::from(cfg.prefix_padding_ms),
            silence_ms: u64::from(cfg.silence_duration_ms),
            onset_at: None,
            speech_end_at: None,
            last_sent_at: None,
            first_frame_pending: false,
            send_pace: 1.0,
            timings: VoiceTimings::default(),
        }
    }

    fn on_rtp(&mut self, now: Instant, payload: &Bytes, rtp_ts: u32, conv: &mut Conversation) {
        self.last_packet = Some(now);
        let before = self.listener.buffer.now_ms();
        let events = self.listener.on_packet(payload.clone(), Some(rtp_ts));
        let input_ms = self.listener.buffer.now_ms();
        if input_ms != before {
            if self.arrivals.len() == ARRIVALS_KEPT {
                self.arrivals.pop_front();
            }
            self.arrivals.push_back((before, now));
        }
        conv.on_input_audio(input_ms);
        for ev in events {
            self.on_vad(ev, conv);
        }
    }

    fn arrival_of(&self, input_ms: u64) -> Option<Instant> {
        self.arrivals
            .iter()
            .rev()
            .find(|(ms, _)| *ms <= input_ms)
            .map(|(_, t)| *t)
    }

    fn on_vad(&mut self, ev: VadEvent, conv: &mut Conversation) {
        match ev {
            VadEvent::SpeechStarted { audio_start_ms } => {
                self.onset_at = self.arrival_of(audio_start_ms + self.prefix_padding_ms);
                conv.on_speech_started(audio_start_ms);
            }
            VadEvent::SpeechStopped {
                audio_end_ms,
                speech_end_ms,
            } => {
                self.speech_end_at = self.arrival_of(speech_end_ms);
                conv.on_speech_stopped(audio_end_ms);
            }
        }
    }

    fn on_action(&mut self, now: Instant, action: Action, conv: &mut Conversation) -> Option<Job> {
        match action {
            Action::Speak {
                response_id,
                reply,
                delay_ms,
                voice,
                codec,
                ..
            } => {
                let out = codec.unwrap_or(self.out_codec);
                match reply {
                    Reply::EchoInput {
                        audio_start_ms,
                        audio_end_ms,
                        ..
                    } => {
                        let frames = self
                            .listener
                            .buffer
                            .frames_between(audio_start_ms, audio_end_ms);
                        if frames.is_empty() {
                            conv.on_audio_done(&response_id);
                        } else {
                            let play_at = now + Duration::from_millis(delay_ms);
                            let player = if out == self.codec {
                                Player::from_frames(response_id, frames, self.codec)
                            } else {
                                let pcm = transcode_input(self.codec, &frames);
                                Player::from_pcm(response_id, pcm, out)
                            };
                            self.start(player, play_at);
                        }
                        None
                    }
                    Reply::Text { text } => {
                        let cancel = tts::CancelToken::new();
                        // Replacing a still-awaited response (never expected) cancels it.
                        self.awaiting_job = Some(AwaitingJob {
                            response_id: response_id.clone(),
                            codec: out,
                            play_at: now + Duration::from_millis(delay_ms),
                            _cancel: tts::CancelOnDrop(cancel.clone()),
                        });
                        Some(Job {
                            response_id,
                            work: Work::Synthesize {
                                text,
                                voice,
                                speed: conv.config().audio.output.speed,
                            },
                            cancel,
                        })
                    }
                }
            }
            Action::StopAudio { response_id } => {
                if self.awaiting(&response_id) {
                    self.awaiting_job = None; // cancels its job
                }
                if let Some((mut p, _)) =
                    self.queued.take_if(|(p, _)| p.response_id() == response_id)
                {
                    p.stop();
                }
                if let Some(p) = self.player.as_mut()
                    && p.response_id() == response_id
                {
                    p.stop();
                    self.player_gone(now);
                    if let (Some(onset), Some(last)) = (self.onset_at, self.last_sent_at) {
                        self.timings.barge_in_ms =
                            Some(last.saturating_duration_since(onset).as_millis() as u64);
                        self.timings.barge_ins += 1;
                        log::info!(
                            "barge-in: last outgoing audio {} ms after speech onset",
                            last.saturating_duration_since(onset).as_millis()
                        );
                    }
                }
                None
            }
            Action::ClearInput => {
                self.listener.clear();
                None
            }
            Action::Hold {
                response_id,
                delay_ms,
            } => {
                self.held = Some((response_id, now + Duration::from_millis(delay_ms)));
                None
            }
            // The session ends the call; the call runs MCP requests (see `Call::poll_output`).
            Action::EndCall | Action::Mcp { .. } => None,
        }
    }

    /// Plays `player` from `play_at`, or after the one still playing: a response that
    /// completed ahead of its playout is heard to the end unless it is stopped.
    fn start(&mut self, mut player: Player, play_at: Instant) {
        player.set_pace(self.send_pace);
        // Queued even behind a player that has just run out: its end is still to be reported
        // (see `next_audio`).
        if self.player.is_some() {
            if let Some((mut old, _)) = self.queued.replace((player, play_at)) {
                old.stop();
            }
            return;
        }
        self.player = Some(player);
        self.hold_until = Some(play_at);
        self.first_frame_pending = true;
    }

    /// The player ran out or was stopped: what was queued behind it plays next.
    fn player_gone(&mut self, now: Instant) {
        self.player = None;
        if let Some((next, play_at)) = self.queued.take() {
            self.start(next, play_at.max(now));
        }
    }

    fn awaiting(&self, response_id: &str) -> bool {
        self.awaiting_job
            .as_ref()
            .is_some_and(|a| a.response_id == response_id)
    }

    fn on_job_done(&mut self, now: Instant, done: JobDone, conv: &mut Conversation) {
        let response_id = done.response_id.as_str();
        if !self.awaiting(response_id) {
            return; // stopped while the job ran
        }
        let (play_at, codec) = self
            .awaiting_job
            .take()
            .map_or((now, self.out_codec), |a| (a.play_at, a.codec));
        let speech = match done.result {
            Ok(JobOutput::Speech(speech)) => speech,
            Ok(JobOutput::Mcp(_)) => return,
            Err(f) => return conv.on_audio_failed(response_id, f.code, &f.message),
        };
        if speech.pcm48k.is_empty() {
            conv.on_audio_done(response_id);
            return;
        }
        conv.on_audio_length(response_id, speech.duration_ms());
        self.start(
            Player::from_pcm(response_id, speech.pcm48k, codec),
            play_at.max(now),
        );
    }

    fn next_audio(&mut self, now: Instant, conv: &mut Conversation) -> Option<(Bytes, u32)> {
        if self.hold_until.is_some_and(|t| now < t) {
            return None;
        }
        let p = self.player.as_mut()?;
        if let Some(f) = p.next_frame(now) {
            let rid = p.response_id().to_owned();
            let played = p.played_ms();
            self.last_sent_at = Some(now);
            if self.first_frame_pending {
                self.first_frame_pending = false;
                if let Some(end) = self.speech_end_at.take() {
                    self.timings.turn_ms =
                        Some(now.saturating_duration_since(end).as_millis() as u64);
                    self.timings.turns_answered += 1;
                }
            }
            conv.on_audio_progress(&rid, played);
            return Some((f.payload, f.samples));
        }
        if p.is_done() {
            let rid = p.response_id().to_owned();
            self.player_gone(now);
            conv.on_audio_done(&rid);
        }
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let player = match self.hold_until {
            Some(t) if self.player.is_some() && self.player_idle() => Some(t),
            _ => self.player.as_ref().and_then(|p| p.next_deadline()),
        };
        let idle = if self.listener.vad().is_speaking() {
            let since = match (self.last_packet, self.idle_checked) {
                (Some(p), Some(c)) => Some(p.max(c)),
                (p, c) => p.or(c),
            };
            since.map(|t| t + IDLE_ADVANCE)
        } else {
            None
        };
        [player, idle, self.held.as_ref().map(|(_, t)| *t)]
            .into_iter()
            .flatten()
            .min()
    }

    /// The player has not sent its first frame (its deadline is "now" until then).
    fn player_idle(&self) -> bool {
        self.player
            .as_ref()
            .is_some_and(|p| p.next_deadline().is_none())
    }

    fn on_timeout(&mut self, now: Instant, conv: &mut Conversation) {
        if let Some((response_id, _)) = self.held.take_if(|(_, at)| *at <= now) {
            conv.on_hold_over(&response_id);
        }
        if let Some(last) = self.last_packet
            && self.listener.vad().is_speaking()
            && now.duration_since(last) >= IDLE_ADVANCE
            && let Some(ev) = self
                .listener
                .idle_for(now.duration_since(last).as_millis() as u64)
        {
            self.on_vad(ev, conv);
        }
    }
}

/// The caller's stored frames decoded to 48 kHz PCM, for an echo in another codec.
fn transcode_input(codec: Codec, frames: &[(Bytes, u32)]) -> Vec<i16> {
    let mut decoder = crate::audio::codec::Decoder::new(codec);
    let mut pcm = Vec::new();
    for (frame, ticks) in frames {
        match decoder.decode(frame) {
            Ok(samples) => pcm.extend_from_slice(samples),
            Err(_) => pcm.extend_from_slice(decoder.decode_lost(*ticks as usize)),
        }
    }
    pcm
}
