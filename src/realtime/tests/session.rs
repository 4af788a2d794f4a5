//! session.created / session.update: full config, SDK payloads, merge and clear rules, errors.

use serde_json::json;

use super::{Harness, types};
use crate::model::ModelKind;
use crate::realtime::session_limits::{
    DATA_CHANNEL_MESSAGE_LIMIT, MAX_INSTRUCTIONS_BYTES, MAX_SESSION_BYTES,
    MAX_SESSION_UPDATE_BYTES, MAX_TOOL_BYTES, MAX_TOOLS, json_len,
};
use crate::realtime::{Conversation, TurnDetection};

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
    let mut c = Conversation::new("sess_abc".into(), &crate::model::ModelKind::Echo);
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
        (c.model(), c.voice(), c.model_kind()),
        ("echo", "alloy", ModelKind::Echo)
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
    assert_eq!(h.c.model_kind(), ModelKind::Echo);
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
    assert_eq!(h.c.model_kind(), ModelKind::Echo);
    h.send(json!({"type": "session.update", "session": {"model": "tts"}}));
    assert_eq!((h.c.model(), h.c.model_kind()), ("tts", ModelKind::Tts));
    h.send(json!({"type": "session.update", "session": {"model": "gpt-realtime-2.1"}}));
    assert_eq!(
        (h.c.model(), h.c.model_kind()),
        ("gpt-realtime-2.1", ModelKind::Tts)
    );
    h.send(json!({"type": "session.update", "session": {"model": "echo"}}));
    assert_eq!(h.c.model_kind(), ModelKind::Echo);
    assert_eq!(Harness::open("tts").c.model_kind(), ModelKind::Tts);
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
    // `type` is optional in the types: an empty noise reduction is taken, a wrong type is not.
    let out = h.send(
        json!({"type": "session.update", "session": {"audio": {"input": {"noise_reduction": {}}}}}),
    );
    assert_eq!(out[0]["type"], "session.updated");
    assert_eq!(
        out[0]["session"]["audio"]["input"]["noise_reduction"],
        json!({})
    );
    let out = h.send(json!({"type": "session.update", "session": {"audio": {"input": {"noise_reduction": {"type": "studio"}}}}}));
    assert_eq!(out[0]["type"], "error");
    assert_eq!(
        out[0]["error"]["param"],
        "session.audio.input.noise_reduction.type"
    );
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
    // Keys the SDK passes through inside turn_detection survive.
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
            "session.audio.input.format.type",
        ),
        (json!({"type": "transcription"}), "session.type"),
        (json!({"tracing": "on"}), "session.tracing"),
        (json!({"max_output_tokens": 0}), "session.max_output_tokens"),
        (json!({"audio": "loud"}), "session.audio"),
        (
            json!({"parallel_tool_calls": "yes"}),
            "session.parallel_tool_calls",
        ),
        (json!({"truncation": "sometimes"}), "session.truncation"),
        (json!({"tools": [3]}), "session.tools[0]"),
        (json!({"reasoning": "hard"}), "session.reasoning"),
        (json!({"include": [1]}), "session.include[0]"),
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

/// The session.update `RealtimeSession` sends with every option configured
/// (`_getMergedSessionConfig` in `@openai/agents-realtime` 0.20.0): every key is one of the types'.
#[test]
fn every_key_the_agents_sdk_sends_is_accepted() {
    let mut h = Harness::open("echo");
    let update = json!({"type": "session.update", "session": {
        "type": "realtime", "instructions": "Be brief.", "model": "gpt-realtime-2.1",
        "output_modalities": ["audio"],
        "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": 24000}, "noise_reduction": null,
                      "transcription": {"model": "gpt-4o-mini-transcribe"},
                      "turn_detection": {"type": "server_vad", "create_response": true,
                          "interrupt_response": true, "prefix_padding_ms": 300,
                          "silence_duration_ms": 500, "idle_timeout_ms": 6000,
                          "model_version": "default", "threshold": 0.5}},
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "verse", "speed": 1}
        },
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "low"},
        "prompt": {"id": "pmpt_123", "version": "2", "variables": {"city": "Paris"}},
        "tools": [
            {"type": "function", "name": "weather", "description": "The weather.",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
            {"type": "mcp", "server_label": "docs", "server_url": "https://example.com/mcp",
             "allowed_tools": ["search"], "require_approval": "never"}
        ]
    }});
    let out = h.send(update.clone());
    // The MCP server is listed as it is added (see tests/mcp.rs).
    assert_eq!(
        types(&out),
        [
            "session.updated",
            "conversation.item.added",
            "mcp_list_tools.in_progress"
        ],
        "{out:?}"
    );
    let s = &out[0]["session"];
    for key in [
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "prompt",
        "tools",
    ] {
        assert_eq!(s[key], update["session"][key], "{key}");
    }
    // The tracing follow-ups, and the fields the types have that the SDK does not send.
    for session in [
        json!({"type": "realtime", "tracing": "auto"}),
        json!({"type": "realtime", "tracing": null}),
        json!({"type": "realtime", "tracing": {"workflow_name": "w", "group_id": "g", "metadata": {"k": "v"}}}),
        json!({"include": ["item.input_audio_transcription.logprobs"], "truncation": "disabled",
               "max_output_tokens": 4096}),
        json!({"truncation": {"type": "retention_ratio", "retention_ratio": 0.5}}),
        // A session object sent back as received: the server's own fields are ignored.
        json!({"id": "sess_other", "object": "realtime.session", "expires_at": 1}),
    ] {
        let out = h.send(json!({"type": "session.update", "session": session}));
        assert_eq!(types(&out), ["session.updated"], "{session}: {out:?}");
    }
    assert_eq!(h.c.config().id, "sess_test");
}

/// A key the session types do not have is refused as the service refuses it, the whole update
/// with it: nothing is stored, so updates cannot grow the session with keys of their choosing.
#[test]
fn unknown_keys_are_refused_whole_and_never_stored() {
    let mut h = Harness::open("echo");
    let before = h.c.config().clone();
    let cases = [
        (
            json!({"instructions": "changed", "memo": "x"}),
            "session.memo",
        ),
        // The beta API's top-level fields are not the GA session's.
        (json!({"voice": "ash"}), "session.voice"),
        (json!({"turn_detection": null}), "session.turn_detection"),
        (json!({"audio": {"speakers": {}}}), "session.audio.speakers"),
        (
            json!({"audio": {"input": {"noise_reduction": null, "gain": 2}}}),
            "session.audio.input.gain",
        ),
        (
            json!({"audio": {"output": {"voice": "ash", "volume": 11}}}),
            "session.audio.output.volume",
        ),
    ];
    for (i, (session, param)) in cases.into_iter().enumerate() {
        let id = format!("unknown_{i}");
        let e =
            h.expect_error(json!({"type": "session.update", "event_id": id, "session": session}));
        assert_eq!(e["type"], "invalid_request_error");
        assert_eq!(e["code"], "unknown_parameter");
        assert_eq!(e["param"], param);
        assert_eq!(e["message"], format!("Unknown parameter: '{param}'."));
        assert_eq!(h.c.config(), &before, "case {i} changed the config");
    }
    assert_eq!(
        types(&h.send(json!({"type": "session.update", "session": {"instructions": "ok"}}))),
        ["session.updated"]
    );
}

/// The size bounds are the data channel's: a WebSocket session takes more tools, larger tools,
/// longer instructions and a larger update than one message of the channel holds.
#[test]
fn a_websocket_session_is_not_held_to_the_data_channel_bounds() {
    let mut h = Harness::open("echo");
    h.c.set_transport(crate::realtime::Transport::WebSocket);
    let tool = |name: &str, bytes: usize| json!({"type": "function", "name": name, "description": "d".repeat(bytes), "parameters": {}});
    let tools: Vec<_> = (0..=MAX_TOOLS)
        .map(|i| tool(&format!("f{i}"), MAX_TOOL_BYTES))
        .collect();
    let session = json!({"type": "realtime", "tools": tools,
                         "instructions": "x".repeat(MAX_SESSION_UPDATE_BYTES)});
    let out = h.send(json!({"type": "session.update", "session": session}));
    assert_eq!(types(&out), ["session.updated"]);
    assert_eq!(h.c.config().tools.len(), MAX_TOOLS + 1);
}

/// Each bound refuses the update whole, naming its limit; the session goes on unchanged.
#[test]
fn oversize_updates_are_refused_naming_the_limit() {
    let mut h = Harness::open("echo");
    let before = h.c.config().clone();
    let tool = |name: &str, bytes: usize| json!({"type": "function", "name": name, "description": "d".repeat(bytes), "parameters": {}});
    let cases = [
        (
            json!({"instructions": "x".repeat(MAX_SESSION_UPDATE_BYTES)}),
            "event_too_large",
            MAX_SESSION_UPDATE_BYTES,
        ),
        (
            json!({"instructions": "x".repeat(MAX_INSTRUCTIONS_BYTES + 1)}),
            "string_above_max_length",
            MAX_INSTRUCTIONS_BYTES,
        ),
        (
            json!({"tools": (0..=MAX_TOOLS).map(|i| tool(&format!("f{i}"), 10)).collect::<Vec<_>>()}),
            "array_above_max_length",
            MAX_TOOLS,
        ),
        (
            json!({"tools": [tool("small", 10), tool("big", MAX_TOOL_BYTES)]}),
            "tool_too_large",
            MAX_TOOL_BYTES,
        ),
    ];
    for (i, (session, code, limit)) in cases.into_iter().enumerate() {
        let id = format!("big_{i}");
        let e =
            h.expect_error(json!({"type": "session.update", "event_id": id, "session": session}));
        assert_eq!(e["type"], "invalid_request_error");
        assert_eq!(e["code"], code, "{e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(&limit.to_string()), "{message}");
        assert_eq!(h.c.config(), &before, "case {i} changed the config");
    }
    // At the bound is fine.
    let out = h.send(json!({"type": "session.update", "session": {
        "instructions": "x".repeat(MAX_INSTRUCTIONS_BYTES),
        "tools": [tool("f", 2000)]
    }}));
    assert_eq!(types(&out), ["session.updated"]);
    assert!(json_len(&out[0]) <= DATA_CHANNEL_MESSAGE_LIMIT);
    // Every field within its bound, a small update, and the whole too large for one message.
    let before = h.c.config().clone();
    let tools: Vec<_> = (0..6).map(|i| tool(&format!("f{i}"), 3000)).collect();
    let e = h.expect_error(
        json!({"type": "session.update", "event_id": "whole", "session": {"tools": tools}}),
    );
    assert_eq!(
        (&e["code"], &e["param"]),
        (&json!("session_too_large"), &json!("session"))
    );
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(&MAX_SESSION_BYTES.to_string())
            && message.contains(&DATA_CHANNEL_MESSAGE_LIMIT.to_string()),
        "{message}"
    );
    assert_eq!(h.c.config(), &before);
}

/// 600 updates with large fields, unknown keys and turn-detection keys that accumulate: the
/// session (and every `session.updated`) stays within one data-channel message throughout, an
/// update that would break that is refused whole, and unknown keys never get in.
#[test]
fn six_hundred_large_updates_keep_the_session_within_one_message() {
    let mut h = Harness::open("echo");
    let (mut updated, mut too_large, mut unknown, mut largest) = (0, 0, 0, 0);
    for i in 0..600usize {
        let mut session = json!({
            "type": "realtime",
            "instructions": format!("{i} ").repeat((20_000 + (i % 25) * 1000) / (i.to_string().len() + 1)),
            "tools": (0..4).map(|k| json!({"type": "function", "name": format!("f{i}_{k}"),
                "description": "d".repeat(2500), "parameters": {"type": "object"}})).collect::<Vec<_>>(),
            "tracing": {"workflow_name": format!("w{i}"), "metadata": {"n": "m".repeat(500)}},
            // Passed through and merged, so these add up until the session bound stops them.
            "audio": {"input": {"turn_detection": {"type": "server_vad", format!("extra_{i}"): "y".repeat(300)}}},
        });
        if i % 7 == 0 {
            session[format!("memo_{i}")] = json!("z".repeat(5000));
        }
        if i % 100 == 99 {
            session["audio"]["input"]["turn_detection"] = json!(null);
        }
        let before = h.c.config().clone();
        let event =
            json!({"type": "session.update", "event_id": format!("u{i}"), "session": session});
        let out = h.send(event);
        assert_eq!(out.len(), 1);
        match out[0]["type"].as_str().unwrap() {
            "session.updated" => {
                updated += 1;
                assert!(json_len(&out[0]) <= DATA_CHANNEL_MESSAGE_LIMIT);
            }
            "error" => {
                match out[0]["error"]["code"].as_str().unwrap() {
                    "session_too_large" => too_large += 1,
                    "unknown_parameter" => unknown += 1,
                    other => panic!("update {i}: {other}"),
                }
                assert_eq!(
                    h.c.config(),
                    &before,
                    "a refused update {i} changed the session"
                );
            }
            other => panic!("update {i}: {other}"),
        }
        let len = json_len(h.c.config());
        assert!(
            len <= MAX_SESSION_BYTES,
            "update {i}: the session is {len} bytes"
        );
        largest = largest.max(len);
        assert!(h.c.session_object().get(format!("memo_{i}")).is_none());
    }
    println!(
        "600 updates: {updated} applied, {too_large} too large, {unknown} unknown keys; \
         largest session {largest} bytes"
    );
    assert_eq!(unknown, 86);
    assert!(
        updated > 100 && too_large > 0,
        "{updated} applied, {too_large} too large"
    );
}

/// Tools and tool choices are typed: a misspelt key in a tool, an unknown tool type or a
/// choice naming no kind of tool is refused with its path, not kept as a tool that never fires.
#[test]
fn tools_and_tool_choice_are_checked_as_types() {
    let mut h = Harness::open("echo");
    let before = h.c.config().clone();
    let cases = [
        (
            json!({"tools": [{"type": "function", "name": "f", "paramters": {}}]}),
            "unknown_parameter",
            "session.tools[0].paramters",
        ),
        (
            json!({"tools": [{"type": "function"}]}),
            "missing_required_parameter",
            "session.tools[0].name",
        ),
        (
            json!({"tools": [{"name": "f"}]}),
            "missing_required_parameter",
            "session.tools[0].type",
        ),
        (
            json!({"tools": [{"type": "web_search"}]}),
            "invalid_value",
            "session.tools[0].type",
        ),
        (
            json!({"tool_choice": "always"}),
            "invalid_value",
            "session.tool_choice",
        ),
        (
            json!({"tool_choice": {"type": "function"}}),
            "invalid_value",
            "session.tool_choice",
        ),
        (
            json!({"audio": {"output": {"voice": ""}}}),
            "invalid_value",
            "session.audio.output.voice",
        ),
    ];
    for (i, (session, code, param)) in cases.into_iter().enumerate() {
        let e = h.expect_error(json!({"type": "session.update", "session": session}));
        assert_eq!(
            (e["code"].as_str(), e["param"].as_str()),
            (Some(code), Some(param)),
            "case {i}: {e}"
        );
        assert_eq!(h.c.config(), &before, "case {i} changed the config");
    }
    let out = h.send(json!({"type": "session.update", "session": {
        "tools": [{"type": "mcp", "server_label": "docs", "server_url": "http://127.0.0.1:1/mcp"}],
        "tool_choice": {"type": "mcp", "server_label": "docs"}
    }}));
    assert_eq!(types(&out)[0], "session.updated", "{out:?}");
    assert_eq!(
        out[0]["session"]["tool_choice"],
        json!({"type": "mcp", "server_label": "docs"})
    );
}
