//! session.created / session.update: full config, SDK payloads, merge and clear rules, errors.

use serde_json::json;

use super::{Harness, types};
use crate::realtime::{Behaviour, Conversation, TurnDetection};

/// The first update `RealtimeSession` sends (docs/realtime-protocol.md §2, as observed).
fn sdk_default_update() -> serde_json::Value {
    json!({"type": "session.update", "session": {
        "type": "realtime", "instructions": "You are a helpful assistant.", "model": "gpt-realtime-2.1",
        "output_modalities": ["audio"],
        "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": 24000}, "noise_reduction": null,
                      "transcription": {"model": "gpt-4o-mini-transcribe"},
                      "turn_detection": {"type": "semantic_vad"}},
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "speed": 1, "voice": "verse"}
        }
    }})
}

#[test]
fn session_created_carries_the_full_default_config() {
    let mut c = Conversation::new("sess_abc".into(), "echo");
    c.set_expires_at(1_900_000_000);
    c.on_channel_open();
    c.on_channel_open(); // once only
    let f: serde_json::Value = serde_json::from_str(&c.poll_frame().unwrap()).unwrap();
    assert!(c.poll_frame().is_none());
    assert_eq!(f["type"], "session.created");
    let s = &f["session"];
    assert_eq!(s["id"], "sess_abc");
    assert_eq!(s["expires_at"], 1_900_000_000);
    assert_eq!(s["model"], "echo");
    assert_eq!(s["output_modalities"], json!(["audio"]));
    assert_eq!(s["tool_choice"], "auto");
    assert!(s["tracing"].is_null());
    assert_eq!(
        s["audio"]["input"],
        json!({
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": null, "noise_reduction": null,
            "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                "silence_duration_ms": 500, "create_response": true, "interrupt_response": true,
                "idle_timeout_ms": null}
        })
    );
    assert_eq!(s["audio"]["output"]["voice"], "alloy");
    assert_eq!(s["audio"]["output"]["speed"], 1.0);
    assert_eq!(
        c.turn_detection(),
        Some(TurnDetection {
            kind: "server_vad".into(),
            threshold: 0.5,
            prefix_padding_ms: 300,
            silence_duration_ms: 500,
            create_response: true,
            interrupt_response: true,
            idle_timeout_ms: None
        })
    );
    assert_eq!(
        (c.model(), c.voice(), c.behaviour()),
        ("echo", "alloy", Behaviour::Echo)
    );
}

#[test]
fn sdk_default_update_and_tracing_follow_up_are_accepted() {
    let mut h = Harness::open("echo");
    let out = h.send(sdk_default_update());
    assert_eq!(types(&out), ["session.updated"]);
    let s = &out[0]["session"];
    assert_eq!(s["model"], "gpt-realtime-2.1");
    assert_eq!(s["instructions"], "You are a helpful assistant.");
    assert_eq!(
        s["audio"]["input"]["turn_detection"],
        json!({"type": "semantic_vad", "eagerness": "auto", "create_response": true, "interrupt_response": true})
    );
    assert_eq!(s["audio"]["output"]["voice"], "verse");
    assert_eq!(h.c.voice(), "verse");
    let td = h.c.turn_detection().unwrap();
    assert_eq!(
        (td.kind.as_str(), td.silence_duration_ms),
        ("semantic_vad", 500)
    );
    // Unknown model names are recorded but keep the behaviour.
    assert_eq!(h.c.model(), "gpt-realtime-2.1");
    assert_eq!(h.c.behaviour(), Behaviour::Echo);
    let out = h.send(
        json!({"type": "session.update", "session": {"type": "realtime", "tracing": "auto"}}),
    );
    assert_eq!(out[0]["session"]["tracing"], "auto");
    let out = h.send(json!({"type": "session.update", "session": {"type": "realtime", "tracing": {"workflow_name": "w"}}}));
    assert_eq!(out[0]["session"]["tracing"], json!({"workflow_name": "w"}));
    // The updated event carries no echo of the client's event_id, only its own.
    let out = h.send(json!({"type": "session.update", "event_id": "u1", "session": {}}));
    assert_ne!(out[0]["event_id"], "u1");
}

#[test]
fn model_names_switch_between_echo_and_tts() {
    let mut h = Harness::open("gpt-realtime-2.1");
    assert_eq!(h.c.behaviour(), Behaviour::Echo);
    h.send(json!({"type": "session.update", "session": {"model": "tts"}}));
    assert_eq!((h.c.model(), h.c.behaviour()), ("tts", Behaviour::Tts));
    h.send(json!({"type": "session.update", "session": {"model": "gpt-realtime-2.1"}}));
    assert_eq!(
        (h.c.model(), h.c.behaviour()),
        ("gpt-realtime-2.1", Behaviour::Tts)
    );
    h.send(json!({"type": "session.update", "session": {"model": "echo"}}));
    assert_eq!(h.c.behaviour(), Behaviour::Echo);
    assert_eq!(Harness::open("tts").c.behaviour(), Behaviour::Tts);
}

#[test]
fn merge_and_clear_rules() {
    let mut h = Harness::open("echo");
    h.send(sdk_default_update());
    h.send(json!({"type": "session.update", "session": {
        "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {}}],
        "audio": {"input": {"noise_reduction": {"type": "near_field"}}}
    }}));
    let out = h.send(json!({"type": "session.update", "session": {
        "instructions": "", "tools": [],
        "audio": {"input": {"turn_detection": null, "noise_reduction": null}}
    }}));
    let s = &out[0]["session"];
    assert_eq!(s["instructions"], "");
    assert_eq!(s["tools"], json!([]));
    assert!(s["audio"]["input"]["turn_detection"].is_null());
    assert!(s["audio"]["input"]["noise_reduction"].is_null());
    // Untouched siblings keep their values.
    assert_eq!(
        s["audio"]["input"]["transcription"]["model"],
        "gpt-4o-mini-transcribe"
    );
    assert_eq!(s["audio"]["output"]["voice"], "verse");
    assert_eq!(h.c.turn_detection(), None);
    // Turning VAD back on with a bare type fills that type's defaults; same-type updates merge.
    h.send(json!({"type": "session.update", "session": {"audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 6000}}}}}));
    let out = h.send(json!({"type": "session.update", "session": {"audio": {"input": {"turn_detection": {"silence_duration_ms": 800}}}}}));
    let td = h.c.turn_detection().unwrap();
    assert_eq!(
        (td.threshold, td.silence_duration_ms, td.idle_timeout_ms),
        (0.5, 800, Some(6000))
    );
    assert_eq!(
        out[0]["session"]["audio"]["input"]["turn_detection"]["prefix_padding_ms"],
        300
    );
    // A new format replaces the old one whole (no stale `rate` on G.711).
    let out = h.send(json!({"type": "session.update", "session": {"audio": {"output": {"format": {"type": "audio/pcmu"}}}}}));
    assert_eq!(
        out[0]["session"]["audio"]["output"]["format"],
        json!({"type": "audio/pcmu"})
    );
    // Unknown keys the SDK passes through survive.
    let out = h.send(json!({"type": "session.update", "session": {"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "high", "model_version": "x"}}}}}));
    assert_eq!(
        out[0]["session"]["audio"]["input"]["turn_detection"]["model_version"],
        "x"
    );
    assert_eq!(h.c.turn_detection().unwrap().silence_duration_ms, 300);
}

#[test]
fn invalid_updates_are_refused_whole_with_the_event_id_echoed() {
    let mut h = Harness::open("echo");
    let before = h.c.config().clone();
    let cases = [
        (
            json!({"output_modalities": ["audio", "text"], "instructions": "changed"}),
            "session.output_modalities",
        ),
        (
            json!({"audio": {"output": {"speed": 2.0}}}),
            "session.audio.output.speed",
        ),
        (
            json!({"audio": {"output": {"speed": 0.1}}}),
            "session.audio.output.speed",
        ),
        (
            json!({"audio": {"input": {"turn_detection": {"type": "push_to_talk"}}}}),
            "session.audio.input.turn_detection.type",
        ),
        (
            json!({"audio": {"input": {"turn_detection": {"threshold": 1.5}}}}),
            "session.audio.input.turn_detection.threshold",
        ),
        (
            json!({"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "eager"}}}}),
            "session.audio.input.turn_detection.eagerness",
        ),
        (
            json!({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}),
            "session.audio.input.format.rate",
        ),
        (
            json!({"audio": {"input": {"format": {"type": "audio/opus"}}}}),
            "session.audio.input.format",
        ),
        (json!({"type": "transcription"}), "session.type"),
        (json!({"tracing": "on"}), "session.tracing"),
        (json!({"max_output_tokens": 0}), "session.max_output_tokens"),
        (json!({"audio": "loud"}), "session.audio"),
    ];
    for (i, (session, param)) in cases.into_iter().enumerate() {
        let id = format!("bad_{i}");
        let e =
            h.expect_error(json!({"type": "session.update", "event_id": id, "session": session}));
        assert_eq!(e["type"], "invalid_request_error");
        assert_eq!(e["param"], param, "{e}");
        assert_eq!(h.c.config(), &before, "case {i} changed the config");
    }
    let e = h.expect_error(json!({"type": "session.update", "event_id": "no_session"}));
    assert_eq!(e["code"], "missing_required_parameter");
    // Still usable.
    assert_eq!(
        types(&h.send(json!({"type": "session.update", "session": {}}))),
        ["session.updated"]
    );
}

#[test]
fn voice_is_fixed_once_assistant_audio_exists() {
    let mut h = Harness::open("tts");
    h.send(json!({"type": "session.update", "session": {"audio": {"output": {"voice": {"id": "voice_custom"}}}}}));
    assert_eq!(h.c.voice(), "voice_custom");
    h.send(json!({"type": "session.update", "session": {"audio": {"output": {"voice": "ash"}}}}));
    let out = h.send_message("hello", 1);
    assert_eq!(of_voice(&out), "ash");
    let e = h.expect_error(json!({"type": "session.update", "event_id": "v", "session": {"audio": {"output": {"voice": "coral"}}}}));
    assert_eq!(e["code"], "cannot_update_voice");
    // Repeating the same voice (the SDK resends its whole config) is fine.
    assert_eq!(
        types(&h.send(
            json!({"type": "session.update", "session": {"audio": {"output": {"voice": "ash"}}}})
        )),
        ["session.updated"]
    );
}

fn of_voice(frames: &[serde_json::Value]) -> &str {
    frames
        .iter()
        .find(|f| f["type"] == "response.created")
        .and_then(|f| f["response"]["audio"]["output"]["voice"].as_str())
        .unwrap()
}
