//! Live sessions over real sockets: a WebRTC peer (the `webrtc` crate) posts its offer to
//! `POST /v1/live/sessions` as JSON, as an app's server does, and talks to the all-in-one
//! process through the relay. The model owns the turn: the caller speaks, pauses, and gets
//! audio and transcripts back without sending anything.
//!
//! Prints the Live turn latency next to Realtime's for the same audio (speech end as the
//! client sent it → first audio packet back), the figure the closing note quotes.

use crate::common;

use std::time::Duration;

use common::Client;
use common::{http_get, http_post};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use voice_edge::allinone::{AllInOneConfig, Running};

async fn start() -> Running {
    common::start_local(AllInOneConfig::default()).await
}

/// fixtures/speech.wav (48 kHz) without its trailing second of silence: ~3.1 s of speech.
fn speech() -> Vec<i16> {
    let wav = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav")).unwrap();
    let pcm = voice_edge::audio::wav::parse_wav(&wav).unwrap().1;
    pcm[..pcm.len() - 48_000].to_vec()
}

fn silence(ms: usize) -> Vec<i16> {
    vec![0; 48 * ms]
}

async fn live(server: &Running, session: Value) -> Client {
    let mut c = Client::live(server.http_addr, session).await;
    c.wait_connected(Duration::from_secs(10)).await;
    c.wait_for("session.started", 1).await;
    c
}

/// Packets that arrive within `window`.
async fn packets_within(c: &mut Client, window: Duration) -> usize {
    let mut n = 0;
    let end = tokio::time::Instant::now() + window;
    while let Ok(Some(_)) = tokio::time::timeout_at(end, c.rtp_rx.recv()).await {
        n += 1;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoken_turn_is_answered_with_audio_and_transcripts() {
    let server = start().await;
    let mut c = live(
        &server,
        json!({"model": "gpt-live-1", "instructions": "Be brief."}),
    )
    .await;
    let id = c.call_id();
    assert!(id.starts_with("live_"), "{id}");
    let started = c.received().await;
    assert_eq!(started[0]["type"], "session.started");
    assert_eq!(started[0]["session"]["id"], id.as_str());
    assert_eq!(started[0]["session"]["status"], "active");
    assert_eq!(started[0]["session"]["instructions"], "Be brief.");

    let (speech_end, first) = c.talk_and_listen(&speech(), &silence(1500)).await;
    let first = first.expect("the echo came back without being asked for");
    let events = c.wait_for("session.usage.updated", 1).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(
        kinds
            .iter()
            .all(|k| k.starts_with("session.") || *k == "error"),
        "only Live events: {kinds:?}"
    );
    assert!(!kinds.contains(&"error"), "{events:?}");
    let input: String = events
        .iter()
        .filter(|e| e["type"] == "session.input_transcript.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(input.starts_with("[speech, "), "{input}");
    let output: String = events
        .iter()
        .filter(|e| e["type"] == "session.output_transcript.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(output.starts_with("Echoing your "), "{output}");
    let audio = packets_within(&mut c, Duration::from_millis(500)).await;
    println!(
        "live turn: speech end → first audio {} ms; {audio} more packets after usage",
        (first - speech_end).as_millis()
    );

    // session.close: session.closed, then the call ends from the server's side.
    c.send_event(json!({"type": "session.close", "event_id": "bye"}))
        .await;
    let events = c.wait_for("session.closed", 1).await;
    let closed = events
        .iter()
        .find(|e| e["type"] == "session.closed")
        .unwrap();
    assert_eq!(closed["reason"], "close_requested");
    assert_eq!(closed["client_event_id"], "bye");
    assert!(closed["usage"]["seconds"].as_f64().unwrap() > 3.0);
    c.wait_told_closed(Duration::from_secs(10)).await;
    // The event log outlives the session, under the Live path.
    let log = http_get(server.http_addr, &format!("/v1/live/sessions/{id}/events")).await;
    assert_eq!(log.status, 200);
    assert!(log.body.contains("session.closed"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn talking_over_the_model_stops_it_and_mute_silences_the_caller() {
    let server = start().await;
    let mut c = live(&server, json!({"model": "echo"})).await;
    // A turn, then talking over its echo: the echo stops well before its 3.9 s.
    c.talk(&speech()).await;
    c.talk(&silence(700)).await;
    c.wait_for("session.output_transcript.delta", 1).await;
    let before = packets_within(&mut c, Duration::from_millis(300)).await;
    assert!(before > 5, "the echo is playing ({before} packets)");
    // Half a second of talking over it, then another second: the packets queued during that
    // second are what still played after the barge-in (about 50 if nothing stopped it).
    let talk_over = speech();
    c.talk(&talk_over[..48 * 500]).await;
    while c.rtp_rx.try_recv().is_ok() {}
    c.talk(&talk_over[48 * 500..48 * 1500]).await;
    let mut after = 0;
    while c.rtp_rx.try_recv().is_ok() {
        after += 1;
    }
    assert!(
        after < 5,
        "the echo stopped when talked over ({after} packets)"
    );

    // Muted, a turn gets no answer; unmuted, the next one does.
    // The interrupted response and the answer to the talking-over turn have both ended.
    let answered = 2;
    c.wait_for("session.usage.updated", answered).await;
    c.send_event(json!({"type": "session.input_audio.mute", "event_id": "m"}))
        .await;
    c.wait_for("session.input_audio.muted", 1).await;
    while c.rtp_rx.try_recv().is_ok() {}
    c.talk(&speech()).await;
    c.talk(&silence(1500)).await;
    let usage_now = c
        .received()
        .await
        .iter()
        .filter(|e| e["type"] == "session.usage.updated")
        .count();
    assert_eq!(usage_now, answered, "a muted caller is not answered");
    c.send_event(json!({"type": "session.input_audio.unmute"}))
        .await;
    c.wait_for("session.input_audio.unmuted", 1).await;
    c.talk(&speech()).await;
    c.talk(&silence(800)).await;
    c.wait_for("session.usage.updated", answered + 1).await;
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commentary_is_spoken_and_delegation_reaches_the_app() {
    let server = start().await;
    let mut c = live(
        &server,
        json!({"model": "script:weather", "delegation": {"type": "client", "acknowledgement_delay_ms": 200}}),
    )
    .await;
    // The script hears a question about Paris, says it will check and delegates.
    c.talk(&speech()).await;
    c.talk(&silence(800)).await;
    let events = c.wait_for("session.delegation.created", 1).await;
    let created = events
        .iter()
        .find(|e| e["type"] == "session.delegation.created")
        .unwrap();
    assert_eq!(created["delegation"]["target"], "client");
    let del = created["delegation"]["id"].as_str().unwrap().to_owned();
    c.send_event(
        json!({"type": "session.commentary.append", "content": "18 degrees and sunny",
                        "delegation_id": del, "event_id": "c1"}),
    )
    .await;
    c.wait_for("session.commentary.appended", 1).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let spoken = loop {
        let spoken: String = c
            .received()
            .await
            .iter()
            .filter(|e| e["type"] == "session.output_transcript.delta")
            .map(|e| e["delta"].as_str().unwrap().to_owned())
            .collect();
        if spoken.ends_with("18 degrees and sunny") || tokio::time::Instant::now() > deadline {
            break spoken;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        spoken,
        "Let me check the weather in Paris.Here is the weather in Paris: 18 degrees and sunny",
        "the commentary replaced the acknowledgement and was spoken through the script"
    );
    assert!(packets_within(&mut c, Duration::from_millis(300)).await > 0);
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_before_a_session_exists() {
    let server = start().await;
    let post = |body: String, ctype: &'static str| {
        let addr = server.http_addr;
        async move { http_post(addr, "/v1/live/sessions", ctype, body.as_bytes()).await }
    };
    let offer = include_str!("../../fixtures/sdp/chromium-offer.sdp");
    let cases = [
        (
            json!({"session": {"model": "gpt-live-1", "voice": "marin"}, "transport": {"type": "webrtc", "sdp": offer}}),
            400,
            "unknown_parameter",
            "session.voice",
        ),
        (
            json!({"session": {}, "transport": {"type": "webrtc", "sdp": offer}}),
            400,
            "missing_required_parameter",
            "session.model",
        ),
        (
            json!({"session": {"model": "m", "audio": {"output": {"voice": "nobody"}}}, "transport": {"type": "webrtc", "sdp": offer}}),
            400,
            "invalid_value",
            "session.audio.output.voice",
        ),
        (
            json!({"session": {"model": "m"}, "transport": {"type": "webrtc", "sdp": "v=0\r\n"}}),
            400,
            "no_audio",
            "",
        ),
        (
            json!({"session": {"model": "script:nope"}, "transport": {"type": "webrtc", "sdp": offer}}),
            400,
            "unknown_script",
            "",
        ),
    ];
    for (body, status, code, param) in cases {
        let r = post(body.to_string(), "application/json").await;
        assert_eq!(r.status, status, "{body}: {}", r.body);
        let e: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(e["error"]["code"], code, "{}", r.body);
        assert_eq!(e["error"]["type"], "invalid_request_error");
        if !param.is_empty() {
            assert_eq!(e["error"]["param"], param, "{}", r.body);
        }
    }
    let sdp = post(offer.to_owned(), "application/sdp").await;
    assert_eq!(sdp.status, 415, "{}", sdp.body);
    let garbage = post("{".into(), "application/json").await;
    assert_eq!(garbage.status, 400);
    assert_eq!(common::sessions(&server).await, 0, "nothing was placed");
    server.shutdown().await;
}

/// Live and Realtime turns with the same audio, side by side: the engine is one, so the turn
/// latency should be too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_and_realtime_turn_latency_side_by_side() {
    let server = start().await;
    let mut rows = Vec::new();
    for round in 0..3 {
        let mut l = live(&server, json!({"model": "echo"})).await;
        let (end, first) = l.talk_and_listen(&speech(), &silence(1500)).await;
        rows.push(("live", round, first.map(|f| (f - end).as_millis())));
        l.pc.close().await.unwrap();
        let mut r = Client::call(server.http_addr, "/v1/realtime/calls?model=echo").await;
        r.wait_connected(Duration::from_secs(10)).await;
        r.wait_for("session.created", 1).await;
        let (end, first) = r.talk_and_listen(&speech(), &silence(1500)).await;
        rows.push(("realtime", round, first.map(|f| (f - end).as_millis())));
        r.pc.close().await.unwrap();
    }
    println!(
        "\n{:<10} {:>5} {:>22}",
        "protocol", "round", "speech end → audio ms"
    );
    for (p, round, ms) in &rows {
        println!(
            "{p:<10} {round:>5} {:>22}",
            ms.map_or("none".into(), |m| m.to_string())
        );
    }
    let median = |p: &str| {
        let mut v: Vec<u128> = rows
            .iter()
            .filter(|r| r.0 == p)
            .filter_map(|r| r.2)
            .collect();
        v.sort();
        v.get(v.len() / 2).copied()
    };
    println!(
        "median: live {:?} ms, realtime {:?} ms",
        median("live"),
        median("realtime")
    );
    assert!(
        rows.iter().all(|r| r.2.is_some()),
        "every turn was answered"
    );
    server.shutdown().await;
}

/// A sideband on a Live session (`/v1/live/sessions/{id}/attach`, as the app's backend opens it):
/// `session.started` first, then the same events as the data channel; its commentary is spoken
/// to the caller, and its `session.close` ends the session for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_sideband_steers_the_session() {
    let server = start().await;
    let mut c = live(&server, json!({"model": "gpt-live-1"})).await;
    let id = c.call_id();
    let url = format!("ws://{}/v1/live/sessions/{id}/attach", server.http_addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("attach");
    let first: Value = loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("a sideband event in time")
            .expect("the sideband is open")
            .unwrap();
        if let Message::Text(t) = msg {
            break serde_json::from_str(&t).unwrap();
        }
    };
    assert_eq!(first["type"], "session.started");
    assert_eq!(first["session"]["id"], id.as_str());
    ws.send(Message::Text(
        json!({"type": "session.commentary.append", "content": "Hello from the backend.",
               "delegation_id": null, "event_id": "sb1"})
        .to_string()
        .into(),
    ))
    .await
    .unwrap();
    // Both see the acknowledgement and hear the words.
    let events = c.wait_for("session.usage.updated", 1).await;
    let acked = events
        .iter()
        .find(|e| e["type"] == "session.commentary.appended")
        .expect("the data channel sees the sideband's command acknowledged");
    assert_eq!(acked["client_event_id"], "sb1");
    let spoken: String = events
        .iter()
        .filter(|e| e["type"] == "session.output_transcript.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(spoken, "Hello from the backend.");
    let mut mirrored = Vec::new();
    while mirrored
        .last()
        .is_none_or(|e: &Value| e["type"] != "session.usage.updated")
    {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(t) = msg {
            mirrored.push(serde_json::from_str::<Value>(&t).unwrap());
        }
    }
    // Besides the events, a Live sideband hears the call's audio reflected, without event ids.
    let (events_only, reflected): (Vec<Value>, Vec<Value>) = mirrored
        .into_iter()
        .partition(|e| e.get("event_id").is_some());
    assert!(
        reflected
            .iter()
            .all(|e| e["type"] == "session.input_audio.append"
                || (e["type"] == "session.output_audio.delta" && e["start_ms"].is_u64())),
        "only reflected audio comes without an event id: {reflected:?}"
    );
    let mirrored = events_only;
    let ids = |evs: &[Value]| -> Vec<String> {
        evs.iter()
            .filter(|e| e["type"] != "session.started")
            .map(|e| e["event_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(&mirrored),
        ids(&events),
        "the sideband gets the data channel's events"
    );
    // A Realtime sideband URL is not for a Live session.
    let wrong = format!("ws://{}/v1/realtime?call_id={id}", server.http_addr);
    assert!(
        tokio_tungstenite::connect_async(wrong.as_str())
            .await
            .is_err()
    );
    // session.close from the backend ends the session for both.
    ws.send(Message::Text(
        json!({"type": "session.close"}).to_string().into(),
    ))
    .await
    .unwrap();
    c.wait_for("session.closed", 1).await;
    c.wait_told_closed(Duration::from_secs(10)).await;
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Close(frame) = m {
                return frame.map(|f| f.reason.to_string());
            }
        }
        None
    })
    .await
    .expect("the sideband closes with the session");
    assert_eq!(end.as_deref(), Some("session ended"));
    server.shutdown().await;
}

/// `store: true` records the session: once it has ended, `GET /v1/live/sessions/{id}/content` is
/// a stereo WAV with the caller on the left and the model's echo on the right, each where it
/// happened. A session that was not stored has no recording.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_session_can_be_downloaded_as_stereo_wav() {
    let server = start().await;
    let mut c = live(&server, json!({"model": "echo", "store": true})).await;
    let id = c.call_id();
    c.talk(&speech()).await;
    c.talk(&silence(800)).await;
    c.wait_for("session.usage.updated", 1).await;
    let path = format!("/v1/live/sessions/{id}/content");
    let live_now = http_get(server.http_addr, &path).await;
    assert_eq!(
        live_now.status, 404,
        "recordings are served once the session ended"
    );
    c.send_event(json!({"type": "session.close"})).await;
    c.wait_told_closed(Duration::from_secs(10)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let wav = loop {
        let r = common::http_get_bytes(server.http_addr, &path).await;
        if r.0 == 200 {
            break r.1;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no recording: {}",
            r.0
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(&wav[..4], b"RIFF");
    assert_eq!(u16::from_le_bytes([wav[22], wav[23]]), 2, "stereo");
    assert_eq!(
        u32::from_le_bytes([wav[24], wav[25], wav[26], wav[27]]),
        24_000
    );
    let frames: Vec<(i16, i16)> = wav[44..]
        .chunks_exact(4)
        .map(|f| {
            (
                i16::from_le_bytes([f[0], f[1]]),
                i16::from_le_bytes([f[2], f[3]]),
            )
        })
        .collect();
    // Loudness per 100 ms window, left (caller) and right (model).
    let loud = |ch: fn(&(i16, i16)) -> i16| -> Vec<bool> {
        frames
            .chunks(2400)
            .map(|w| w.iter().map(|f| i64::from(ch(f)).abs()).sum::<i64>() / w.len() as i64 > 200)
            .collect()
    };
    let (left, right) = (loud(|f| f.0), loud(|f| f.1));
    let first = |v: &[bool]| v.iter().position(|&x| x).unwrap_or(usize::MAX);
    let count = |v: &[bool]| v.iter().filter(|&&x| x).count();
    println!(
        "recording: {:.1} s; caller loud in {} windows from {} ms, model in {} from {} ms",
        frames.len() as f64 / 24_000.0,
        count(&left),
        first(&left) * 100,
        count(&right),
        first(&right) * 100
    );
    assert!(count(&left) >= 15, "the caller's speech is on the left");
    assert!(count(&right) >= 15, "the echo is on the right");
    assert!(
        first(&right) > first(&left) + 25,
        "the echo starts after the turn (≥ 2.5 s later)"
    );
    // A session that was not stored has none.
    let mut other = live(&server, json!({"model": "echo"})).await;
    let other_id = other.call_id();
    other.send_event(json!({"type": "session.close"})).await;
    other.wait_told_closed(Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let none = http_get(
        server.http_addr,
        &format!("/v1/live/sessions/{other_id}/content"),
    )
    .await;
    assert_eq!(none.status, 404);
    assert!(none.body.contains("recording_not_found"), "{}", none.body);
    server.shutdown().await;
}
