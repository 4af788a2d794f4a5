//! The bridge in virtual time: an upstream played by the test, frame by frame.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::audio::codec::Decoder;
use crate::upstream::UpstreamEvent;

const MS: Duration = Duration::from_millis(1);

fn upstream(bridge: &mut Bridge, now: Instant, event: Value) {
    bridge.on_upstream(now, UpstreamEvent::Text(event.to_string()));
}

fn sent_up(bridge: &mut Bridge) -> Vec<Value> {
    std::iter::from_fn(|| bridge.poll_upstream())
        .map(|t| serde_json::from_str(&t).unwrap())
        .collect()
}

fn to_caller(bridge: &mut Bridge) -> Vec<Value> {
    std::iter::from_fn(|| bridge.poll_frame())
        .map(|t| serde_json::from_str(&t).unwrap())
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// A bridged G.711 call whose upstream has opened its session.
fn open_call(now: Instant) -> Bridge {
    let mut b = Bridge::rtp(now, Codec::Pcmu, 20, &[]);
    b.on_upstream(now, UpstreamEvent::Open);
    b.on_channel_open();
    let session = json!({"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}, "output": {"format": {"type": "audio/pcm", "rate": 24000}}}});
    upstream(
        &mut b,
        now,
        json!({"type": "session.created", "event_id": "u1", "session": session}),
    );
    upstream(
        &mut b,
        now,
        json!({"type": "session.updated", "event_id": "u2", "session": session}),
    );
    sent_up(&mut b);
    to_caller(&mut b);
    b
}

/// 24 kHz PCM16 of `ms` milliseconds, base64, as a delta carries it.
fn delta_b64(ms: usize) -> String {
    let bytes: Vec<u8> = (0..24 * ms)
        .flat_map(|i| (((i % 48) as i16 - 24) * 400).to_le_bytes())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn delta(response_id: &str, ms: usize) -> Value {
    json!({"type": "response.output_audio.delta", "event_id": "d", "response_id": response_id,
           "item_id": "item_1", "output_index": 0, "content_index": 0, "delta": delta_b64(ms)})
}

/// Plays the bridge's audio out from `from` for `span`, polling every ms like a worker.
fn play(b: &mut Bridge, from: Instant, span: Duration) -> usize {
    let mut frames = 0;
    let mut now = from;
    while now <= from + span {
        while b.next_audio(now).is_some() {
            frames += 1;
        }
        now += MS;
    }
    frames
}

#[test]
fn the_connect_time_session_goes_first_with_pcm_forced_and_the_caller_sees_one_created() {
    let now = Instant::now();
    let key_layer = json!({"type": "realtime", "instructions": "be brief",
        "audio": {"output": {"format": {"type": "audio/pcmu"}, "voice": "marin"}}});
    let mut b = Bridge::rtp(now, Codec::Pcmu, 20, &[key_layer]);
    assert!(
        sent_up(&mut b).is_empty(),
        "nothing goes up before the link is open"
    );
    b.on_upstream(now, UpstreamEvent::Open);
    let up = sent_up(&mut b);
    assert_eq!(types(&up), ["session.update", "session.update"]);
    assert_eq!(up[0]["session"]["instructions"], "be brief");
    assert_eq!(
        up[0]["session"]["audio"]["output"]["format"],
        json!({"type": "audio/pcm", "rate": 24000}),
        "the upstream speaks PCM whatever the layer asked"
    );
    assert_eq!(up[0]["session"]["audio"]["output"]["voice"], "marin");
    assert!(
        up.iter()
            .all(|e| e["event_id"].as_str().unwrap().starts_with("edge_"))
    );

    let pcm = json!({"type": "audio/pcm", "rate": 24000});
    let session = json!({"type": "realtime", "instructions": "be brief",
        "audio": {"input": {"format": pcm}, "output": {"format": pcm}}});
    upstream(
        &mut b,
        now,
        json!({"type": "session.created", "event_id": "u1", "session": {"type": "realtime"}}),
    );
    upstream(
        &mut b,
        now,
        json!({"type": "session.updated", "event_id": "u2", "session": session}),
    );
    assert!(to_caller(&mut b).is_empty(), "held until the channel opens");
    upstream(
        &mut b,
        now,
        json!({"type": "session.updated", "event_id": "u3", "session": session}),
    );
    b.on_channel_open();
    let out = to_caller(&mut b);
    assert_eq!(types(&out), ["session.created"]);
    assert_eq!(out[0]["session"]["instructions"], "be brief");
    assert_eq!(
        out[0]["session"]["audio"]["input"]["format"]["type"], "audio/pcmu",
        "shown as the call's codec, as WebRTC shows it"
    );
    assert_eq!(b.poll_timeout(), None, "no connect deadline once open");
}

#[test]
fn caller_audio_goes_up_as_24khz_appends_of_the_configured_length() {
    let now = Instant::now();
    let mut b = Bridge::rtp(now, Codec::Pcmu, 40, &[]);
    b.on_upstream(now, UpstreamEvent::Open);
    sent_up(&mut b);
    let frame = vec![0x55u8; 160]; // 20 ms of G.711
    b.on_rtp(now, &frame);
    assert!(sent_up(&mut b).is_empty(), "20 ms is half an append");
    b.on_rtp(now, &frame);
    let up = sent_up(&mut b);
    assert_eq!(types(&up), ["input_audio_buffer.append"]);
    let audio = base64::engine::general_purpose::STANDARD
        .decode(up[0]["audio"].as_str().unwrap())
        .unwrap();
    assert_eq!(audio.len(), 24 * 40 * 2, "40 ms of PCM16 at 24 kHz");
}

#[test]
fn model_audio_plays_as_paced_rtp_with_the_buffer_events_and_no_deltas() {
    let t0 = Instant::now();
    let mut b = open_call(t0);
    upstream(
        &mut b,
        t0,
        json!({"type": "response.created", "event_id": "e", "response": {"id": "resp_1"}}),
    );
    upstream(&mut b, t0, delta("resp_1", 100));
    upstream(&mut b, t0, delta("resp_1", 100));
    upstream(
        &mut b,
        t0,
        json!({"type": "response.output_audio.done", "event_id": "e", "response_id": "resp_1", "item_id": "item_1"}),
    );
    upstream(
        &mut b,
        t0,
        json!({"type": "response.done", "event_id": "e", "response": {"id": "resp_1", "status": "completed"}}),
    );
    // Generation ran ahead: the whole response is told before the audio has played.
    let first = play(&mut b, t0, 50 * MS);
    let out = to_caller(&mut b);
    assert_eq!(
        types(&out),
        [
            "response.created",
            "response.output_audio.done",
            "response.done",
            "output_audio_buffer.started"
        ]
    );
    assert_eq!(out[3]["response_id"], "resp_1");
    let rest = play(&mut b, t0 + 51 * MS, 400 * MS);
    assert_eq!(first + rest, 10, "200 ms in 20 ms frames");
    let out = to_caller(&mut b);
    assert_eq!(types(&out), ["output_audio_buffer.stopped"]);
    assert!(sent_up(&mut b).is_empty(), "nothing to cancel or truncate");
}

#[test]
fn a_barge_in_stops_the_playout_cancels_a_running_response_and_truncates_to_what_was_heard() {
    let t0 = Instant::now();
    let mut b = open_call(t0);
    upstream(
        &mut b,
        t0,
        json!({"type": "response.created", "event_id": "e", "response": {"id": "resp_1"}}),
    );
    upstream(&mut b, t0, delta("resp_1", 1000));
    play(&mut b, t0, 300 * MS);
    to_caller(&mut b);
    let at = t0 + 300 * MS;
    upstream(
        &mut b,
        at,
        json!({"type": "input_audio_buffer.speech_started", "event_id": "e", "audio_start_ms": 900, "item_id": "item_2"}),
    );
    let out = to_caller(&mut b);
    assert_eq!(
        types(&out),
        [
            "input_audio_buffer.speech_started",
            "output_audio_buffer.cleared"
        ]
    );
    let up = sent_up(&mut b);
    assert_eq!(
        types(&up),
        ["response.cancel", "conversation.item.truncate"]
    );
    assert_eq!(up[0]["response_id"], "resp_1");
    assert_eq!(up[1]["item_id"], "item_1");
    let heard = up[1]["audio_end_ms"].as_u64().unwrap();
    assert!(
        (280..=300).contains(&heard),
        "heard {heard} ms of 300 ms played"
    );
    assert_eq!(
        play(&mut b, at, 200 * MS),
        0,
        "not a frame after the barge-in"
    );
    // The upstream's answer to the edge's own cancel (a race with its own end) is not the
    // caller's business; its truncation is.
    upstream(
        &mut b,
        at,
        json!({"type": "error", "event_id": "e", "error": {"type": "invalid_request_error", "code": "response_cancel_not_active", "message": "no", "event_id": up[0]["event_id"]}}),
    );
    upstream(
        &mut b,
        at,
        json!({"type": "conversation.item.truncated", "event_id": "e", "item_id": "item_1", "content_index": 0, "audio_end_ms": heard}),
    );
    assert_eq!(types(&to_caller(&mut b)), ["conversation.item.truncated"]);
}

#[test]
fn speech_without_playout_or_with_interrupt_response_off_interrupts_nothing() {
    let t0 = Instant::now();
    let mut b = open_call(t0);
    upstream(
        &mut b,
        t0,
        json!({"type": "input_audio_buffer.speech_started", "event_id": "e"}),
    );
    assert_eq!(
        types(&to_caller(&mut b)),
        ["input_audio_buffer.speech_started"]
    );
    assert!(sent_up(&mut b).is_empty());

    upstream(
        &mut b,
        t0,
        json!({"type": "session.updated", "event_id": "e",
        "session": {"audio": {"input": {"turn_detection": {"type": "server_vad", "interrupt_response": false}}}}}),
    );
    upstream(&mut b, t0, delta("resp_1", 500));
    play(&mut b, t0, 100 * MS);
    to_caller(&mut b);
    upstream(
        &mut b,
        t0 + 100 * MS,
        json!({"type": "input_audio_buffer.speech_started", "event_id": "e"}),
    );
    assert_eq!(
        types(&to_caller(&mut b)),
        ["input_audio_buffer.speech_started"]
    );
    assert!(play(&mut b, t0 + 100 * MS, 100 * MS) > 0, "still playing");
}

#[test]
fn the_clients_clear_is_answered_by_the_edge_and_never_reaches_the_upstream() {
    let t0 = Instant::now();
    let mut b = open_call(t0);
    upstream(&mut b, t0, delta("resp_1", 500));
    play(&mut b, t0, 100 * MS);
    to_caller(&mut b);
    b.on_client_text(t0 + 100 * MS, r#"{"type":"output_audio_buffer.clear"}"#);
    assert_eq!(types(&to_caller(&mut b)), ["output_audio_buffer.cleared"]);
    let up = sent_up(&mut b);
    assert_eq!(
        types(&up),
        ["conversation.item.truncate"],
        "no cancel: not running"
    );
    // Everything else a client sends goes up as it was sent; a session.update keeps PCM.
    b.on_client_text(
        t0,
        r#"{"type":"conversation.item.create","item":{"type":"message"}}"#,
    );
    b.on_client_text(t0, r#"{"type":"session.update","session":{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcmu"}}}}}"#);
    let up = sent_up(&mut b);
    assert_eq!(
        up[0],
        json!({"type":"conversation.item.create","item":{"type":"message"}})
    );
    assert_eq!(
        up[1]["session"]["audio"]["input"]["format"]["type"],
        "audio/pcm"
    );
}

#[test]
fn a_refusal_is_an_error_naming_it_then_the_end_once_the_caller_can_hear_it() {
    let now = Instant::now();
    let mut b = Bridge::rtp(now, Codec::Opus, 20, &[]);
    b.on_upstream(
        now,
        UpstreamEvent::Closed(LinkEnd::Refused {
            status: 401,
            code: Some("invalid_api_key".into()),
            message: Some("Incorrect API key provided: [upstream key].".into()),
        }),
    );
    assert!(b.is_over());
    assert!(!b.take_end(), "the channel is not open yet");
    b.on_channel_open();
    let out = to_caller(&mut b);
    assert_eq!(types(&out), ["error"]);
    assert_eq!(out[0]["error"]["code"], "upstream_unauthorized");
    assert_eq!(out[0]["error"]["type"], "server_error");
    let message = out[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("HTTP 401") && message.contains("invalid_api_key"),
        "{message}"
    );
    assert!(b.take_end());
    assert!(!b.take_end(), "once");
    b.on_rtp(now, &[0u8; 3]);
    assert!(sent_up(&mut b).is_empty(), "nothing goes up after the end");
}

#[test]
fn an_upstream_that_never_opens_the_session_times_out_and_a_dropped_one_ends_the_call() {
    let t0 = Instant::now();
    let mut b = Bridge::rtp(t0, Codec::Opus, 20, &[]);
    b.on_channel_open();
    let deadline = b.poll_timeout().unwrap();
    assert_eq!(deadline, t0 + CONNECT_TIMEOUT);
    b.on_timeout(deadline - MS);
    assert!(!b.is_over());
    b.on_timeout(deadline);
    let out = to_caller(&mut b);
    assert_eq!(out[0]["error"]["code"], "upstream_timeout");
    assert!(b.take_end());

    let mut b = open_call(t0);
    upstream(&mut b, t0, delta("resp_1", 500));
    b.on_upstream(
        t0,
        UpstreamEvent::Closed(LinkEnd::Dropped("the upstream connection ended".into())),
    );
    assert_eq!(
        play(&mut b, t0, 100 * MS),
        0,
        "the playout stops with the upstream"
    );
    let out = to_caller(&mut b);
    assert_eq!(out[0]["error"]["code"], "upstream_disconnected");
    assert!(b.take_end());
}

#[test]
fn on_a_websocket_everything_passes_as_it_is() {
    let now = Instant::now();
    let mut b = Bridge::stream(now, &[]);
    b.on_upstream(now, UpstreamEvent::Open);
    assert!(sent_up(&mut b).is_empty(), "no session of the edge's own");
    upstream(
        &mut b,
        now,
        json!({"type": "session.created", "event_id": "u1", "session": {"type": "realtime"}}),
    );
    upstream(&mut b, now, delta("resp_1", 20));
    let out = to_caller(&mut b);
    assert_eq!(
        types(&out),
        ["session.created", "response.output_audio.delta"]
    );
    assert_eq!(out[1]["delta"], delta_b64(20));
    let append = r#"{"type":"input_audio_buffer.append","audio":"AAAA"}"#;
    b.on_client_text(now, append);
    assert_eq!(b.poll_upstream().as_deref(), Some(append));
    assert!(b.welcome_frame().contains("session.created"));
}

/// The edge times a bridged turn as it times a stub's: arrival of the frame the upstream's VAD
/// says held the speech's end → the reply's first frame out; and a barge-in from the onset
/// frame's arrival to the last frame sent.
#[test]
fn turn_and_barge_in_latency_are_measured_from_the_frames_the_upstream_names() {
    let t0 = Instant::now();
    let mut b = open_call(t0);
    let frame = vec![0x55u8; 160];
    for n in 0..50u32 {
        b.on_rtp(t0 + 20 * n * MS, &frame); // 1 s of input, one frame per 20 ms
    }
    upstream(
        &mut b,
        t0,
        json!({"type": "session.updated", "event_id": "e", "session": {"audio": {"input":
            {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}}}),
    );
    to_caller(&mut b);
    // The VAD's end includes its 500 ms of silence: the speech ended at 600 ms.
    upstream(
        &mut b,
        t0,
        json!({"type": "input_audio_buffer.speech_stopped", "event_id": "e", "audio_end_ms": 1100, "item_id": "i"}),
    );
    let answered = t0 + 1500 * MS;
    upstream(&mut b, answered, delta("resp_1", 400));
    play(&mut b, answered, 100 * MS);
    let timings = b.timings();
    assert_eq!(
        timings.turn_ms,
        Some(900),
        "600 ms arrived at 600 ms; the reply left at 1500 ms"
    );
    assert_eq!(timings.turns_answered, 1);
    upstream(
        &mut b,
        answered,
        json!({"type": "input_audio_buffer.speech_started", "event_id": "e", "audio_start_ms": 960}),
    );
    let timings = b.timings();
    assert_eq!(timings.barge_ins, 1);
    assert_eq!(
        timings.barge_in_ms,
        Some(1600 - 960),
        "onset arrived at 960 ms, last frame at 1600 ms"
    );
}

/// While the upstream connects the caller's audio waits, its latest 3 s kept; once the link is
/// open it goes up in order, after the session.
#[test]
fn audio_before_the_link_opens_waits_and_only_the_latest_is_kept() {
    let now = Instant::now();
    let mut b = Bridge::rtp(now, Codec::Pcmu, 20, &[]);
    for n in 0..200u8 {
        b.on_rtp(now, &[n; 160]); // 4 s of G.711, each frame its own level
    }
    assert!(b.poll_upstream().is_none());
    b.on_upstream(now, UpstreamEvent::Open);
    let up = sent_up(&mut b);
    assert_eq!(types(&up)[0], "session.update");
    assert_eq!(up.len(), 1 + 150, "3 s of 20 ms appends");
    let first = base64::engine::general_purpose::STANDARD
        .decode(up[1]["audio"].as_str().unwrap())
        .unwrap();
    let level = |code: u8| {
        let mut d = Decoder::new(Codec::Pcmu);
        d.decode(&[code; 160]).unwrap()[0]
    };
    assert_eq!(
        i16::from_le_bytes([first[0], first[1]]),
        level(50),
        "the first 50 frames were dropped"
    );
}

/// A connect-time session the upstream refuses is the caller's to see, and the session
/// opens without it rather than timing out.
#[test]
fn a_refused_connect_time_session_reaches_the_caller_and_the_session_opens() {
    let now = Instant::now();
    let mut b = Bridge::rtp(
        now,
        Codec::Opus,
        20,
        &[json!({"type": "realtime", "instructons": "typo"})],
    );
    b.on_upstream(now, UpstreamEvent::Open);
    b.on_channel_open();
    let up = sent_up(&mut b);
    let bad_id = up[0]["event_id"].as_str().unwrap().to_owned();
    upstream(
        &mut b,
        now,
        json!({"type": "session.created", "event_id": "u1", "session": {"type": "realtime", "instructions": ""}}),
    );
    upstream(
        &mut b,
        now,
        json!({"type": "error", "event_id": "u2", "error": {"type": "invalid_request_error",
        "code": "unknown_parameter", "message": "Unknown parameter: 'session.instructons'.", "param": "session.instructons", "event_id": bad_id}}),
    );
    upstream(
        &mut b,
        now,
        json!({"type": "session.updated", "event_id": "u3", "session": {"type": "realtime", "instructions": ""}}),
    );
    let out = to_caller(&mut b);
    assert_eq!(types(&out), ["error", "session.created"]);
    assert_eq!(out[0]["error"]["code"], "unknown_parameter");
    assert_eq!(b.poll_timeout(), None, "open: no connect deadline");
}

/// Deltas still arriving for a response the caller interrupted are not played after it.
#[test]
fn late_deltas_of_an_interrupted_response_are_dropped() {
    let t0 = Instant::now();
    let mut b = open_call(t0);
    upstream(&mut b, t0, delta("resp_1", 200));
    play(&mut b, t0, 100 * MS);
    b.on_client_text(t0 + 100 * MS, r#"{"type":"output_audio_buffer.clear"}"#);
    upstream(&mut b, t0 + 100 * MS, delta("resp_1", 200));
    assert_eq!(play(&mut b, t0 + 100 * MS, 500 * MS), 0);
    upstream(&mut b, t0 + 600 * MS, delta("resp_2", 100));
    assert_eq!(
        play(&mut b, t0 + 600 * MS, 500 * MS),
        5,
        "the next response plays"
    );
}

/// A Live session bridged to a Live upstream: one `session.start` with the WebSocket's format,
/// `session.started` under the edge's id, audio appended and played as one stream with no
/// buffer events, and `session.closed` ending the call.
#[test]
fn a_live_session_starts_upstream_plays_its_stream_and_ends_with_it() {
    let t0 = Instant::now();
    let session = json!({"model": "gpt-live-1", "instructions": "hi"});
    let mut b = Bridge::live_rtp(t0, "live_edge1", Codec::Pcmu, 20, session);
    b.on_upstream(t0, UpstreamEvent::Open);
    b.on_channel_open();
    let up = sent_up(&mut b);
    assert_eq!(types(&up), ["session.start"]);
    assert_eq!(up[0]["session"]["model"], "gpt-live-1");
    assert_eq!(
        up[0]["session"]["audio"]["format"],
        json!({"type": "audio/pcm", "rate": 24000})
    );
    upstream(
        &mut b,
        t0,
        json!({"type": "session.started", "event_id": "u1", "session": {"id": "live_upstream9", "model": "gpt-live-1"}}),
    );
    let out = to_caller(&mut b);
    assert_eq!(types(&out), ["session.started"]);
    assert_eq!(
        out[0]["session"]["id"], "live_edge1",
        "the app's id, not the upstream's"
    );
    assert_eq!(b.poll_timeout(), None);

    b.on_rtp(t0, &[0x55; 160]);
    assert_eq!(types(&sent_up(&mut b)), ["session.input_audio.append"]);
    let live_delta =
        |ms| json!({"type": "session.output_audio.delta", "event_id": "d", "delta": delta_b64(ms)});
    upstream(&mut b, t0, live_delta(60));
    upstream(&mut b, t0, live_delta(40));
    assert_eq!(play(&mut b, t0, 300 * MS), 5);
    assert!(
        to_caller(&mut b).is_empty(),
        "no deltas, no buffer events on Live"
    );
    upstream(&mut b, t0, live_delta(20));
    assert_eq!(
        play(&mut b, t0 + 300 * MS, 100 * MS),
        1,
        "the stream goes on"
    );
    assert!(b.welcome_frame().contains("session.started"));

    upstream(
        &mut b,
        t0,
        json!({"type": "session.closed", "event_id": "e", "reason": "close_requested"}),
    );
    assert_eq!(types(&to_caller(&mut b)), ["session.closed"]);
    assert!(b.take_end());
}
