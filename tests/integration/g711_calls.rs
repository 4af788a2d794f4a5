//! G.711 calls end to end: a real WebRTC client (the `webrtc` crate) offering PCMU or PCMA alone,
//! as a telephony client or a browser limited by `setCodecPreferences` does, calls the
//! all-in-one process through the relay, and every kind of model answers in that codec on its
//! 8 kHz RTP clock: loopback reflects frames, echo plays a spoken turn back, tts speaks text.

use crate::common;

use std::time::Duration;

use common::Client;
use voice_edge::allinone::{AllInOneConfig, Running};
use voice_edge::audio::{Codec, Decoder};

async fn start() -> Running {
    common::start_local(AllInOneConfig::default()).await
}

/// The answer's audio m-line names `codec` on its static payload type, and nothing else.
fn assert_answer_names(sdp: &str, codec: Codec) {
    let (pt, name) = match codec {
        Codec::Pcmu => (0, "PCMU"),
        Codec::Pcma => (8, "PCMA"),
        Codec::Opus | Codec::Pcm24 | Codec::Pcm16 => unreachable!(),
    };
    let m = sdp
        .lines()
        .find(|l| l.starts_with("m=audio"))
        .expect("an audio m-line");
    assert!(m.ends_with(&format!("SAVPF {pt}")), "{m}\n{sdp}");
    assert!(
        sdp.contains(&format!("a=rtpmap:{pt} {name}/8000")),
        "answer:\n{sdp}"
    );
    assert!(!sdp.to_ascii_lowercase().contains("opus"), "answer:\n{sdp}");
}

/// Every packet that arrives until none has for `quiet`.
async fn drain_packets(c: &mut Client, quiet: Duration) -> Vec<rtc::rtp::Packet> {
    let mut out = Vec::new();
    while let Ok(Some(p)) = tokio::time::timeout(quiet, c.packet_rx.recv()).await {
        out.push(p);
    }
    out
}

/// The packets are one stream of `codec`: its payload type, 160-byte frames, timestamps 160
/// ticks (20 ms at 8 kHz) per sequence number.
fn assert_g711_stream(packets: &[rtc::rtp::Packet], codec: Codec, frame_bytes: Option<usize>) {
    let pt = if codec == Codec::Pcmu { 0 } else { 8 };
    for p in packets {
        assert_eq!(p.header.payload_type, pt, "payload type");
        if let Some(n) = frame_bytes {
            assert_eq!(p.payload.len(), n, "frame size");
        }
    }
    for w in packets.windows(2) {
        let seq = w[1]
            .header
            .sequence_number
            .wrapping_sub(w[0].header.sequence_number);
        let ts = w[1].header.timestamp.wrapping_sub(w[0].header.timestamp);
        assert_eq!(
            ts,
            u32::from(seq) * 160,
            "timestamp step for {seq} packet(s)"
        );
    }
}

/// Decoded level of the packets' audio, dBFS.
fn level_dbfs(packets: &[rtc::rtp::Packet], codec: Codec) -> f64 {
    let mut dec = Decoder::new(codec);
    let mut pcm = Vec::new();
    for p in packets {
        pcm.extend_from_slice(dec.decode(&p.payload).unwrap());
    }
    let power = pcm.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / pcm.len().max(1) as f64;
    10.0 * (power / 32768f64.powi(2) + 1e-13).log10()
}

async fn session_created(c: &Client) -> serde_json::Value {
    let events = c.wait_for("session.created", 1).await;
    events
        .into_iter()
        .find(|e| e["type"] == "session.created")
        .unwrap()
}

/// A connected call offering only `codec`, its answer checked to name only that; returns the
/// client and its `session.created`.
async fn g711_call(server: &Running, model: &str, codec: Codec) -> (Client, serde_json::Value) {
    let path = format!("/v1/realtime/calls?model={model}");
    let mut c = Client::call_codec(server.http_addr, &path, codec).await;
    assert_answer_names(&c.response.body, codec);
    c.wait_connected(Duration::from_secs(10)).await;
    let created = session_created(&c).await;
    (c, created)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_reflects_pcmu_frames_on_the_8_khz_clock() {
    let server = start().await;
    let (mut c, created) = g711_call(&server, "loopback", Codec::Pcmu).await;
    assert_eq!(
        created["session"]["audio"]["input"]["format"]["type"],
        "audio/pcmu"
    );
    assert_eq!(
        created["session"]["audio"]["output"]["format"]["type"],
        "audio/pcmu"
    );

    let back = c.echo_round(0xA7, 50).await;
    assert!(back >= 45, "only {back} of 50 frames came back");
    let mut packets = drain_packets(&mut c, Duration::from_millis(300)).await;
    packets.retain(|p| p.payload.first() == Some(&0xA7));
    assert!(packets.len() >= 45, "{} packets", packets.len());
    // The first frame too: 160 ticks, not Opus's 960.
    assert_g711_stream(&packets, Codec::Pcmu, Some(60));
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_plays_a_spoken_pcma_turn_back_in_pcma() {
    let server = start().await;
    let (mut c, created) = g711_call(&server, "echo", Codec::Pcma).await;
    assert_eq!(
        created["session"]["audio"]["output"]["format"]["type"],
        "audio/pcma"
    );

    // fixtures/speech.wav: ~3.1 s of speech, then 1 s of silence that ends the turn.
    let wav = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav")).unwrap();
    let (rate, speech) = voice_edge::audio::wav::parse_wav(&wav).unwrap();
    assert_eq!(rate, 48_000);
    c.talk(&speech).await;
    let events = c.wait_for("response.done", 1).await;
    let stopped = events
        .iter()
        .find(|e| e["type"] == "input_audio_buffer.speech_stopped")
        .expect("speech_stopped");
    let end = stopped["audio_end_ms"].as_u64().unwrap();
    assert!((3300..=3900).contains(&end), "audio_end_ms {end}");
    let done = events
        .iter()
        .find(|e| e["type"] == "response.done")
        .unwrap();
    assert_eq!(done["response"]["status"], "completed", "{done}");

    let packets = drain_packets(&mut c, Duration::from_millis(500)).await;
    // The echo is the turn (≈ 3.1 s of speech + 300 ms padding + 500 ms silence), in PCMA.
    assert!(
        (150..=230).contains(&packets.len()),
        "{} packets came back",
        packets.len()
    );
    assert_g711_stream(&packets, Codec::Pcma, Some(160));
    let level = level_dbfs(&packets, Codec::Pcma);
    assert!(level > -40.0, "the echo is silent: {level:.1} dBFS");
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tts_speaks_a_text_message_in_g711() {
    let server = start().await;
    for codec in [Codec::Pcmu, Codec::Pcma] {
        let (mut c, _) = g711_call(&server, "tts", codec).await;
        c.send_message("Say hello to the telephone.").await;
        let events = c.wait_for("response.done", 1).await;
        let done = events
            .iter()
            .find(|e| e["type"] == "response.done")
            .unwrap();
        assert_eq!(done["response"]["status"], "completed", "{done}");
        assert_eq!(
            done["response"]["audio"]["output"]["format"]["type"],
            codec.realtime_format(),
            "{done}"
        );
        let packets = drain_packets(&mut c, Duration::from_millis(500)).await;
        assert!(packets.len() >= 25, "{codec:?}: {} packets", packets.len());
        assert_g711_stream(&packets, codec, Some(160));
        let level = level_dbfs(&packets, codec);
        assert!(
            level > -40.0,
            "{codec:?}: speech is silent: {level:.1} dBFS"
        );
        c.pc.close().await.unwrap();
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_speaks_in_pcmu() {
    let server = start().await;
    let (mut c, _) = g711_call(&server, "script:weather", Codec::Pcmu).await;
    c.send_message("How is the weather?").await;
    // Turn 0 of fixtures/scripts/weather.json: "Let me check the weather in Paris.", then a call.
    let events = c.wait_for("response.done", 1).await;
    let done = events
        .iter()
        .find(|e| e["type"] == "response.done")
        .unwrap();
    let transcript = done["response"]["output"][0]["content"][0]["transcript"].clone();
    assert_eq!(transcript, "Let me check the weather in Paris.", "{done}");
    let packets = drain_packets(&mut c, Duration::from_millis(500)).await;
    assert!(packets.len() >= 25, "{} packets", packets.len());
    assert_g711_stream(&packets, Codec::Pcmu, Some(160));
    let level = level_dbfs(&packets, Codec::Pcmu);
    assert!(level > -40.0, "speech is silent: {level:.1} dBFS");
    c.pc.close().await.unwrap();
    server.shutdown().await;
}
