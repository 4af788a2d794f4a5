//! The Realtime WebSocket transport and sidebands over real sockets: a WebSocket client
//! (tokio-tungstenite) talks to the all-in-one process and to the split roles (where the
//! session runs on a transceiver reached through the control API), and a real WebRTC call
//! (the `webrtc` crate) is steered by a sideband attached with `?call_id=`.
//!
//! Prints the turn latency per audio format (speech end as the client sent it → first
//! `response.output_audio.delta`), the figure the closing note quotes.

use crate::common;

use std::time::{Duration, Instant};

use base64::Engine as _;
use common::Client;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use voice_edge::allinone::{AllInOneConfig, Running};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn start() -> Running {
    common::start_local(AllInOneConfig::default()).await
}

struct Ws {
    socket: Socket,
    /// Every event so far, with when it arrived.
    events: Vec<(Instant, Value)>,
    closed: bool,
}

impl Ws {
    async fn open(http: std::net::SocketAddr, query: &str) -> Ws {
        Ws::open_path(http, &format!("/v1/realtime?{query}")).await
    }

    async fn open_path(http: std::net::SocketAddr, path: &str) -> Ws {
        let mut req = format!("ws://{http}{path}").into_client_request().unwrap();
        req.headers_mut()
            .insert("sec-websocket-protocol", "realtime".parse().unwrap());
        let (socket, resp) = tokio_tungstenite::connect_async(req)
            .await
            .expect("upgrade");
        assert_eq!(
            resp.headers()["sec-websocket-protocol"],
            "realtime",
            "the sub-protocol is echoed"
        );
        Ws {
            socket,
            events: Vec::new(),
            closed: false,
        }
    }

    async fn send(&mut self, event: Value) {
        self.socket
            .send(Message::Text(event.to_string().into()))
            .await
            .unwrap();
    }

    /// Reads whatever arrives within `d`.
    async fn pump(&mut self, d: Duration) {
        let until = tokio::time::Instant::now() + d;
        while !self.closed {
            match tokio::time::timeout_at(until, self.socket.next()).await {
                Err(_) => return,
                Ok(Some(Ok(Message::Text(t)))) => self
                    .events
                    .push((Instant::now(), serde_json::from_str(&t).unwrap())),
                Ok(Some(Ok(Message::Close(_)))) | Ok(None) | Ok(Some(Err(_))) => self.closed = true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    async fn wait_for(&mut self, kind: &str, within: Duration) -> Value {
        let until = Instant::now() + within;
        loop {
            if let Some((_, e)) = self.events.iter().find(|(_, e)| e["type"] == kind) {
                return e.clone();
            }
            assert!(
                Instant::now() < until && !self.closed,
                "no {kind} within {within:?}; got {:?}",
                self.types()
            );
            self.pump(Duration::from_millis(50)).await;
        }
    }

    fn types(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|(_, e)| e["type"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    fn audio_bytes(&self) -> usize {
        self.events
            .iter()
            .filter(|(_, e)| e["type"] == "response.output_audio.delta")
            .map(|(_, e)| b64(e["delta"].as_str().unwrap()).len())
            .sum()
    }

    fn first_at(&self, kind: &str) -> Option<Instant> {
        self.events
            .iter()
            .find(|(_, e)| e["type"] == kind)
            .map(|(t, _)| *t)
    }
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// fixtures/speech.wav (48 kHz) in `rate` Hz PCM.
fn speech(rate: u32) -> Vec<i16> {
    let wav = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav")).unwrap();
    let (r, pcm) = voice_edge::audio::wav::parse_wav(&wav).unwrap();
    assert_eq!(r, 48_000);
    voice_edge::audio::resample::resample(&pcm, 48_000, rate)
}

/// Appends `audio` in real-time 20 ms chunks (as a microphone would), reading events as it
/// goes; returns when the last chunk was sent.
async fn stream_audio(ws: &mut Ws, audio: &[u8], bytes_per_20ms: usize) -> Instant {
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    for chunk in audio.chunks(bytes_per_20ms) {
        tick.tick().await;
        let audio = base64::engine::general_purpose::STANDARD.encode(chunk);
        ws.send(json!({"type": "input_audio_buffer.append", "audio": audio}))
            .await;
        ws.pump(Duration::ZERO).await;
    }
    Instant::now()
}

/// A spoken turn in `format`: speech, then silence until the echo is back. Returns the echoed
/// audio's length, the turn latency (last speech chunk sent → first audio delta) and the
/// engine's part of it (`speech_stopped` → first audio delta, both as received).
async fn spoken_turn(ws: &mut Ws, format: &str) -> (f64, Duration, Duration, f64) {
    let (speech_bytes, silence, per_20ms, per_ms) = match format {
        "audio/pcm" => {
            let b: Vec<u8> = speech(24_000)
                .iter()
                .flat_map(|s| s.to_le_bytes())
                .collect();
            (b, vec![0u8; 48 * 1500], 960, 48.0)
        }
        "audio/pcmu" => {
            let law = voice_edge::audio::g711::Law::Mu;
            let b: Vec<u8> = speech(8_000).iter().map(|&s| law.encode(s)).collect();
            (b, vec![law.silence(); 8 * 1500], 160, 8.0)
        }
        _ => unreachable!(),
    };
    // fixtures/speech.wav ends in about a second of its own silence: speech ends there.
    let trailing_ms = 1000.0;
    let sent_all = stream_audio(ws, &speech_bytes, per_20ms).await;
    let speech_end = sent_all - Duration::from_millis(trailing_ms as u64);
    stream_audio(ws, &silence, per_20ms).await;
    ws.wait_for("response.done", Duration::from_secs(10)).await;
    let echoed_ms = ws.audio_bytes() as f64 / per_ms;
    let first = ws
        .first_at("response.output_audio.delta")
        .expect("audio deltas");
    let stopped = ws
        .first_at("input_audio_buffer.speech_stopped")
        .expect("speech_stopped");
    let spoken_ms = speech_bytes.len() as f64 / per_ms - trailing_ms;
    (echoed_ms, first - speech_end, first - stopped, spoken_ms)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoken_turns_come_back_as_audio_deltas_in_each_format() {
    let server = start().await;
    let mut table = Vec::new();
    for format in ["audio/pcm", "audio/pcmu"] {
        let mut ws = Ws::open(server.http_addr, "model=echo").await;
        let created = ws.wait_for("session.created", Duration::from_secs(5)).await;
        assert_eq!(created["session"]["type"], "realtime");
        if format != "audio/pcm" {
            ws.send(
                json!({"type": "session.update", "session": {"type": "realtime", "audio": {
                "input": {"format": {"type": format}}, "output": {"format": {"type": format}}}}}),
            )
            .await;
            let updated = ws.wait_for("session.updated", Duration::from_secs(5)).await;
            assert_eq!(
                updated["session"]["audio"]["output"]["format"]["type"],
                format
            );
        }
        let (echoed_ms, latency, engine, spoken_ms) = spoken_turn(&mut ws, format).await;
        let types = ws.types();
        for want in [
            "input_audio_buffer.speech_started",
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
            "response.created",
            "response.output_audio.done",
        ] {
            assert!(
                types.iter().any(|t| t == want),
                "{format}: no {want}: {types:?}"
            );
        }
        assert!(
            !types.iter().any(|t| t.starts_with("output_audio_buffer.")),
            "{format}: WebRTC-only events on a WebSocket"
        );
        assert!(
            echoed_ms > spoken_ms * 0.6 && echoed_ms < spoken_ms + 2000.0,
            "{format}: echo of {echoed_ms:.0} ms for about {spoken_ms:.0} ms of speech"
        );
        table.push((format, echoed_ms, latency, Some(engine)));
    }
    // The same turn over WebRTC through the relay, for comparison: speech end as sent → the
    // first audio packet of the reply.
    for codec in [
        voice_edge::audio::Codec::Opus,
        voice_edge::audio::Codec::Pcmu,
    ] {
        let mut call =
            Client::call_codec(server.http_addr, "/v1/realtime/calls?model=echo", codec).await;
        call.wait_connected(Duration::from_secs(10)).await;
        let pcm = speech(48_000);
        let speech_only = &pcm[..pcm.len() - 48_000]; // without its trailing second of silence
        let (end, first) = call
            .talk_and_listen(speech_only, &vec![0; 48_000 * 2])
            .await;
        let first = first.expect("the echo came back over RTP");
        let name = if codec == voice_edge::audio::Codec::Opus {
            "webrtc/opus"
        } else {
            "webrtc/pcmu"
        };
        table.push((name, f64::NAN, first.into_std() - end.into_std(), None));
    }
    println!("\nTurn latency, echo model (speech end as the client sent it → first reply audio)");
    println!(
        "{:<12} {:>10} {:>12} {:>26}",
        "transport", "echoed ms", "latency ms", "speech_stopped→audio ms"
    );
    for (format, echoed, latency, engine) in table {
        let engine = engine.map_or("—".to_owned(), |d| {
            format!("{:.1}", d.as_secs_f64() * 1e3)
        });
        println!(
            "{format:<12} {echoed:>10.0} {:>12} {engine:>26}",
            latency.as_millis()
        );
    }
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_turns_transcription_and_bad_urls() {
    let server = start().await;
    let mut ws = Ws::open(server.http_addr, "model=echo").await;
    ws.wait_for("session.created", Duration::from_secs(5)).await;
    ws.send(
        json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "hello there"}]}}),
    )
    .await;
    ws.send(json!({"type": "response.create"})).await;
    let done = ws.wait_for("response.done", Duration::from_secs(10)).await;
    assert_eq!(done["response"]["status"], "completed");
    ws.wait_for(
        "response.output_audio_transcript.done",
        Duration::from_secs(1),
    )
    .await;
    assert!(ws.audio_bytes() > 48 * 300, "the text was spoken");

    let mut t = Ws::open(server.http_addr, "intent=transcription").await;
    let created = t.wait_for("session.created", Duration::from_secs(5)).await;
    assert_eq!(created["session"]["type"], "transcription");
    let b: Vec<u8> = speech(24_000)
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect();
    stream_audio(&mut t, &b, 960).await;
    stream_audio(&mut t, &vec![0u8; 48 * 1000], 960).await;
    t.wait_for(
        "conversation.item.input_audio_transcription.completed",
        Duration::from_secs(5),
    )
    .await;
    assert!(!t.types().iter().any(|k| k == "response.created"));

    for (query, status) in [
        ("", 400),
        ("model=echo&call_id=rtc_x", 400),
        ("intent=translate", 400),
        ("model=script:nope", 400),
        ("call_id=rtc_000000000000000000000000000000", 404),
    ] {
        let req = format!("ws://{}/v1/realtime?{query}", server.http_addr)
            .into_client_request()
            .unwrap();
        match tokio_tungstenite::connect_async(req).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
                assert_eq!(r.status().as_u16(), status, "{query}")
            }
            other => panic!("{query}: {:?}", other.map(|_| ())),
        }
    }
    drop(server);
}

/// A server attaches to a live WebRTC call, sets tools and instructions and asks for a
/// response; the caller hears it and sees every event; the sideband closes with the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sideband_steers_a_live_call() {
    let server = start().await;
    let mut call = Client::call(server.http_addr, "/v1/realtime/calls?model=echo").await;
    call.wait_connected(Duration::from_secs(10)).await;
    call.wait_for("session.created", 1).await;
    let id = call.call_id();
    let mut side = Ws::open(server.http_addr, &format!("call_id={id}")).await;
    let created = side
        .wait_for("session.created", Duration::from_secs(5))
        .await;
    assert_eq!(created["session"]["model"], "echo");
    side.send(
        json!({"type": "session.update", "session": {"type": "realtime",
        "instructions": "You are a weather bot.",
        "tools": [{"type": "function", "name": "get_weather", "description": "weather",
                   "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                                  "required": ["location"]}}],
        "tool_choice": "required"}}),
    )
    .await;
    let updated = side
        .wait_for("session.updated", Duration::from_secs(5))
        .await;
    assert_eq!(updated["session"]["tools"][0]["name"], "get_weather");
    // The caller saw the same update.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !call.received().await.iter().any(|e| {
        e["type"] == "session.updated" && e["session"]["instructions"] == "You are a weather bot."
    }) {
        assert!(Instant::now() < deadline, "the caller never saw the update");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    side.send(
        json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "what's the weather in Paris"}]}}),
    )
    .await;
    side.send(json!({"type": "response.create"})).await;
    let args = side
        .wait_for(
            "response.function_call_arguments.done",
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(args["name"], "get_weather");
    call.wait_for("response.function_call_arguments.done", 1)
        .await;
    side.wait_for("response.done", Duration::from_secs(5)).await;
    side.send(
        json!({"type": "conversation.item.create", "item": {"type": "function_call_output",
        "call_id": args["call_id"], "output": "{\"temperature\": 21}"}}),
    )
    .await;
    side.send(json!({"type": "response.create"})).await;
    // The caller hears the answer (its RTP arrives) and sees it end; so does the sideband.
    while call.rtp_rx.try_recv().is_ok() {}
    let events = call.wait_for("response.done", 2).await;
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.done")
        .collect();
    assert_eq!(done[1]["response"]["status"], "completed", "{done:?}");
    // Made ahead of playback, the answer completes while it still plays: its playout ends later.
    call.wait_for("output_audio_buffer.stopped", 1).await;
    let mut packets = 0;
    while call.rtp_rx.try_recv().is_ok() {
        packets += 1;
    }
    assert!(
        packets > 50,
        "the caller got {packets} audio packets of the answer"
    );
    side.pump(Duration::from_millis(200)).await;
    let side_done = side
        .events
        .iter()
        .filter(|(_, e)| e["type"] == "response.done")
        .count();
    assert_eq!(side_done, 2);
    // A fifth sideband is refused; the call ending closes the sideband.
    let mut more = Vec::new();
    for _ in 0..3 {
        more.push(Ws::open(server.http_addr, &format!("call_id={id}")).await);
    }
    let req = format!("ws://{}/v1/realtime?call_id={id}", server.http_addr)
        .into_client_request()
        .unwrap();
    match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 409),
        other => panic!("fifth sideband: {:?}", other.map(|_| ())),
    }
    call.hangup(server.http_addr).await;
    side.pump(Duration::from_secs(3)).await;
    assert!(side.closed, "the sideband closes with the call");
    drop(server);
}

/// Open WebSocket sessions count against `--max-calls-per-client` while they are open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_count_against_the_per_client_cap_while_open() {
    let server = common::start_local(AllInOneConfig {
        call_limits: voice_edge::signaling::call_limits::CallLimits {
            max_calls: 0,
            max_calls_per_client: 2,
        },
        ..Default::default()
    })
    .await;
    let mut a = Ws::open(server.http_addr, "model=echo").await;
    let _b = Ws::open(server.http_addr, "model=echo").await;
    let req = format!("ws://{}/v1/realtime?model=echo", server.http_addr)
        .into_client_request()
        .unwrap();
    match tokio_tungstenite::connect_async(req.clone()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 429),
        other => panic!("a third session: {:?}", other.map(|_| ())),
    }
    a.socket.close(None).await.unwrap();
    a.pump(Duration::from_millis(200)).await;
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match tokio_tungstenite::connect_async(req.clone()).await {
            Ok(_) => break,
            Err(e) => assert!(
                Instant::now() < deadline,
                "still refused after a close: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client event over the size limit (16 MiB, the service's 15 MiB append with room for its
/// JSON) closes the socket with 1009, as RFC 6455 says, not a dropped connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_limit_is_closed_with_1009() {
    let server = start().await;
    let mut ws = Ws::open(server.http_addr, "model=echo").await;
    ws.wait_for("session.created", Duration::from_secs(5)).await;
    let big = format!(
        r#"{{"type":"input_audio_buffer.append","audio":"{}"}}"#,
        "A".repeat(17 * 1024 * 1024)
    );
    let _ = ws.socket.send(Message::Text(big.into())).await;
    let close = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match ws.socket.next().await {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                other => panic!("the connection ended without a close frame: {other:?}"),
            }
        }
    })
    .await
    .expect("a close frame within 10 s");
    let frame = close.expect("a close code");
    assert_eq!(u16::from(frame.code), 1009, "{frame:?}");
}

/// A session that hears nothing from its client for the idle limit (`--ws-idle-timeout`, 1 s
/// here) is told so and closed, giving its slot back; one that keeps talking is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_closed_and_a_busy_one_is_not() {
    let mut cfg = AllInOneConfig::default();
    cfg.capacity.ws_idle_timeout_secs = 1;
    let server = common::start_local(cfg).await;
    let mut idle = Ws::open(server.http_addr, "model=echo").await;
    let mut busy = Ws::open(server.http_addr, "model=echo").await;
    let opened = Instant::now();
    idle.wait_for("session.created", Duration::from_secs(5))
        .await;
    busy.wait_for("session.created", Duration::from_secs(5))
        .await;
    while opened.elapsed() < Duration::from_millis(2500) {
        busy.send(json!({"type": "input_audio_buffer.clear"})).await;
        busy.pump(Duration::from_millis(300)).await;
        idle.pump(Duration::from_millis(100)).await;
    }
    let error = idle.wait_for("error", Duration::from_secs(1)).await;
    assert_eq!(error["error"]["code"], "session_idle_timeout", "{error}");
    idle.pump(Duration::from_secs(2)).await;
    assert!(idle.closed, "the idle socket was closed");
    assert!(!busy.closed, "the busy one stays: {:?}", busy.types());
    assert!(
        !busy.types().contains(&"error".to_string()),
        "{:?}",
        busy.types()
    );
    server.shutdown().await;
}

/// Live recordings are counted in bytes (`--recording-budget-mb 4`: on each transceiver, one
/// client may hold 1 MiB, about 10 s of stereo 24 kHz). A stored session that outgrows its client's share is told
/// `recording_budget_exceeded` once and goes on, and its recording keeps what fit; a second
/// stored session from the same client is refused at `session.start` while the first holds
/// the share (a session without `store` still starts). Once the first has ended, its kept
/// recording counts until it expires, or until the same client needs the room: its next
/// stored session starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recordings_are_held_to_their_byte_budget() {
    let mut cfg = AllInOneConfig::default();
    cfg.capacity.recording_budget_mb = 4;
    // The budget is each transceiver's: one, so every session lands in the same.
    cfg.transceivers = 1;
    let server = common::start_local(cfg).await;
    let start = |store: bool| json!({"type": "session.start", "session": {"model": "echo", "store": store}});

    let mut first = Ws::open_path(server.http_addr, "/v1/live/sessions").await;
    first.send(start(true)).await;
    let started = first
        .wait_for("session.started", Duration::from_secs(5))
        .await;
    let id = started["session"]["id"].as_str().unwrap().to_owned();
    // 12 s of a tone at 24 kHz, in appends of 1,500 bytes (Live's limit is 2,000 characters).
    let tone: Vec<u8> = (0..24_000 * 12)
        .flat_map(|i| (((i as f32 * 0.05).sin() * 6000.0) as i16).to_le_bytes())
        .collect();
    for chunk in tone.chunks(1500) {
        let audio = base64::engine::general_purpose::STANDARD.encode(chunk);
        first
            .send(json!({"type": "session.input_audio.append", "audio": audio}))
            .await;
    }
    let error = first.wait_for("error", Duration::from_secs(10)).await;
    assert_eq!(
        error["error"]["code"], "recording_budget_exceeded",
        "{error}"
    );
    assert!(!first.closed, "the session goes on");

    let mut second = Ws::open_path(server.http_addr, "/v1/live/sessions").await;
    second.send(start(true)).await;
    let refused = second.wait_for("error", Duration::from_secs(5)).await;
    assert_eq!(
        refused["error"]["code"], "recording_budget_exceeded",
        "{refused}"
    );
    second.send(start(false)).await;
    second
        .wait_for("session.started", Duration::from_secs(5))
        .await;

    first.send(json!({"type": "session.close"})).await;
    first
        .wait_for("session.closed", Duration::from_secs(5))
        .await;
    let path = format!("/v1/live/sessions/{id}/content");
    let deadline = Instant::now() + Duration::from_secs(5);
    let wav = loop {
        let (status, body) = common::http_get_bytes(server.http_addr, &path).await;
        if status == 200 {
            break body;
        }
        assert!(Instant::now() < deadline, "no recording: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let seconds = (wav.len() - 44) as f64 / 4.0 / 24_000.0;
    println!("recording kept {seconds:.2} s of the 12 s sent");
    assert!(
        (9.9..=10.01).contains(&seconds),
        "the first 10 s: {seconds}"
    );

    // The kept recording gives way to the same client's next stored session.
    let mut third = Ws::open_path(server.http_addr, "/v1/live/sessions").await;
    third.send(start(true)).await;
    third
        .wait_for("session.started", Duration::from_secs(5))
        .await;
    server.shutdown().await;
}

/// A flood of the largest messages on sockets that never read (the queues fill and the
/// sockets stop being read) leaves a WebRTC call on the same server its audio: every echo
/// round comes back while the flood runs, and a new WebSocket session still opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_flood_leaves_other_calls_their_audio() {
    let server = start().await;
    let mut call = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    call.wait_connected(Duration::from_secs(10)).await;
    assert!(call.echo_round(0x21, 10).await >= 9, "before the flood");
    let message = format!(
        r#"{{"type":"input_audio_buffer.append","audio":"{}"}}"#,
        "A".repeat(15 * 1024 * 1024 - 64)
    );
    let mut flooders = Vec::new();
    for _ in 0..3 {
        let mut ws = Ws::open(server.http_addr, "model=echo").await;
        ws.wait_for("session.created", Duration::from_secs(5)).await;
        let message = message.clone();
        flooders.push(tokio::spawn(async move {
            // Bounded: 8 messages each, or 20 s.
            let until = tokio::time::Instant::now() + Duration::from_secs(20);
            for _ in 0..8 {
                let send = ws.socket.send(Message::Text(message.clone().into()));
                if tokio::time::timeout_at(until, send).await.is_err() {
                    break;
                }
            }
            ws
        }));
    }
    for round in 0..5u8 {
        let got = call.echo_round(0x30 + round, 10).await;
        assert!(got >= 9, "round {round} during the flood: {got} of 10");
    }
    let mut fresh = Ws::open(server.http_addr, "model=echo").await;
    fresh
        .wait_for("session.created", Duration::from_secs(5))
        .await;
    for f in flooders {
        drop(f.await.unwrap());
    }
    server.shutdown().await;
}
