//! conversation.item.create / retrieve / delete / truncate, the item cap, malformed events.

use serde_json::json;

use super::{Harness, types};

fn user_text(text: &str) -> serde_json::Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

#[test]
fn create_assigns_ids_and_honours_previous_item_id() {
    let mut h = Harness::open("echo");
    let out = h.send(json!({"type": "conversation.item.create", "event_id": "agents_create_1", "item": user_text("a")}));
    assert_eq!(
        types(&out),
        ["conversation.item.added", "conversation.item.done"]
    );
    let a = out[0]["item"]["id"].as_str().unwrap().to_owned();
    assert!(a.starts_with("item_"));
    assert!(out[0]["previous_item_id"].is_null());
    assert_eq!(out[0]["item"]["status"], "completed");
    let out = h.send(json!({"type": "conversation.item.create", "item": {"id": "mine", "type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys"}]}}));
    assert_eq!(out[0]["previous_item_id"], a.as_str());
    let out = h.send(json!({"type": "conversation.item.create", "previous_item_id": "root", "item": user_text("first")}));
    assert!(out[0]["previous_item_id"].is_null());
    let first = out[0]["item"]["id"].as_str().unwrap().to_owned();
    let out = h.send(json!({"type": "conversation.item.create", "previous_item_id": a, "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}}));
    let fc = out[0]["item"]["id"].as_str().unwrap().to_owned();
    let out = h.send(json!({"type": "conversation.item.create", "previous_item_id": fc, "item": {"type": "function_call_output", "call_id": "c1", "output": "{}"}}));
    let fco = out[0]["item"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        h.c.item_ids(),
        [
            first.as_str(),
            a.as_str(),
            fc.as_str(),
            fco.as_str(),
            "mine"
        ]
    );
    // An output for a call the conversation does not hold is refused, as the service does.
    let out = h.send(json!({"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "nope", "output": "{}"}}));
    assert_eq!(types(&out), ["error"]);
    assert_eq!(out[0]["error"]["code"], "invalid_tool_call_id");
    assert_eq!(
        out[0]["error"]["message"],
        "Tool call ID 'nope' not found in conversation."
    );
    // A client input_audio part gets its transcript key and loses the audio bytes.
    let out = h.send(json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": [{"type": "input_audio", "audio": "AAAA"}]}}));
    assert_eq!(
        out[0]["item"]["content"],
        json!([{"type": "input_audio", "transcript": null}])
    );
}

#[test]
fn create_refuses_invalid_items() {
    let mut h = Harness::open("echo");
    h.send(json!({"type": "conversation.item.create", "item": {"id": "dup", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}}));
    let cases = [
        (
            json!({"item": {"type": "message", "role": "user", "content": [{"type": "output_text", "text": "x"}]}}),
            "invalid_value",
        ),
        (
            json!({"item": {"type": "message", "role": "system", "content": [{"type": "input_audio"}]}}),
            "invalid_value",
        ),
        (
            json!({"item": {"type": "message", "role": "assistant", "content": [{"type": "input_text", "text": "x"}]}}),
            "invalid_value",
        ),
        (
            json!({"item": {"type": "message", "role": "user"}}),
            "missing_required_parameter",
        ),
        (
            json!({"item": {"type": "message", "content": []}}),
            "missing_required_parameter",
        ),
        (
            json!({"item": {"type": "message", "role": "user", "content": [{"type": "input_text"}]}}),
            "missing_required_parameter",
        ),
        (
            json!({"item": {"type": "function_call_output", "call_id": "c"}}),
            "missing_required_parameter",
        ),
        (json!({"item": {"type": "reasoning"}}), "invalid_value"),
        (json!({}), "missing_required_parameter"),
        (
            json!({"item": user_text("x"), "previous_item_id": "item_unknown"}),
            "invalid_value",
        ),
        (
            json!({"item": {"id": "dup", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}}),
            "duplicate_item_id",
        ),
    ];
    for (i, (mut event, code)) in cases.into_iter().enumerate() {
        event["type"] = json!("conversation.item.create");
        event["event_id"] = json!(format!("agents_create_{i}"));
        let e = h.expect_error(event);
        assert_eq!(e["code"], code, "case {i}: {e}");
    }
    assert_eq!(h.c.item_ids(), ["dup"]);
}

#[test]
fn retrieve_delete_and_their_errors() {
    let mut h = Harness::open("echo");
    let out = h.send(json!({"type": "conversation.item.create", "item": user_text("keep")}));
    let id = out[0]["item"]["id"].as_str().unwrap().to_owned();
    let got = h.send(json!({"type": "conversation.item.retrieve", "item_id": id}));
    assert_eq!(types(&got), ["conversation.item.retrieved"]);
    assert_eq!(got[0]["item"], out[1]["item"]);
    let e = h.expect_error(
        json!({"type": "conversation.item.retrieve", "event_id": "r1", "item_id": "item_nope"}),
    );
    assert_eq!(e["code"], "item_not_found");
    let e = h.expect_error(json!({"type": "conversation.item.retrieve", "event_id": "r2"}));
    assert_eq!(
        (e["code"].as_str(), e["param"].as_str()),
        (Some("missing_required_parameter"), Some("item_id"))
    );
    let out = h.send(
        json!({"type": "conversation.item.delete", "event_id": "agents_delete_1", "item_id": id}),
    );
    assert_eq!(out[0]["type"], "conversation.item.deleted");
    assert_eq!(out[0]["item_id"], id.as_str());
    let e = h.expect_error(
        json!({"type": "conversation.item.delete", "event_id": "agents_delete_2", "item_id": id}),
    );
    assert_eq!(e["code"], "item_not_found");
    assert!(h.c.item_ids().is_empty());
}

#[test]
fn truncate_cuts_assistant_audio_to_what_was_heard() {
    let mut h = Harness::open("echo");
    let (_, speak) = h.vad_turn(0, 2400);
    let (rid, _) = speak.unwrap();
    // An in-progress item cannot be truncated or deleted.
    let assistant = h.c.item_ids()[1].to_owned();
    let e = h.expect_error(json!({"type": "conversation.item.truncate", "event_id": "t0", "item_id": assistant, "content_index": 0, "audio_end_ms": 100}));
    assert_eq!(e["code"], "item_in_progress");
    h.c.on_audio_done(&rid);
    h.frames();
    let e = h.expect_error(json!({"type": "conversation.item.truncate", "event_id": "t1", "item_id": assistant, "content_index": 0, "audio_end_ms": 5000}));
    assert_eq!(e["param"], "audio_end_ms");
    let user = h.c.item_ids()[0].to_owned();
    let e = h.expect_error(json!({"type": "conversation.item.truncate", "event_id": "t2", "item_id": user, "content_index": 0, "audio_end_ms": 0}));
    assert_eq!(e["param"], "content_index");
    let e = h.expect_error(json!({"type": "conversation.item.truncate", "event_id": "t3", "item_id": assistant, "content_index": 0}));
    assert_eq!(e["code"], "missing_required_parameter");
    let out = h.send(json!({"type": "conversation.item.truncate", "item_id": assistant, "content_index": 0, "audio_end_ms": 1000}));
    assert_eq!(types(&out), ["conversation.item.truncated"]);
    assert_eq!(out[0]["audio_end_ms"], 1000);
    // 5 words over 2.4 s: 2 are fully heard by 1.0 s.
    let got = h.send(json!({"type": "conversation.item.retrieve", "item_id": assistant}));
    assert_eq!(got[0]["item"]["content"][0]["transcript"], "Echoing your");
    // The audio is now 1000 ms long.
    let e = h.expect_error(json!({"type": "conversation.item.truncate", "event_id": "t4", "item_id": assistant, "content_index": 0, "audio_end_ms": 1200}));
    assert_eq!(e["param"], "audio_end_ms");
}

#[test]
fn conversation_is_capped() {
    let mut h = Harness::open("echo");
    for i in 0..510 {
        h.send(json!({"type": "conversation.item.create", "item": user_text(&format!("m{i}"))}));
    }
    let ids = h.c.item_ids();
    assert_eq!(ids.len(), 500);
    let first = h.c.item(ids[0]).unwrap();
    assert_eq!(first["content"][0]["text"], "m10");
}

#[test]
fn malformed_and_unknown_events_get_errors_and_the_session_goes_on() {
    let mut h = Harness::open("echo");
    let e = h.expect_error(json!({"type": "transcription_session.update", "event_id": "u1"}));
    assert_eq!(
        (e["type"].as_str(), e["code"].as_str(), e["param"].as_str()),
        (
            Some("invalid_request_error"),
            Some("invalid_value"),
            Some("type")
        )
    );
    let e = h.expect_error(json!({"event_id": "u2"}));
    assert_eq!(e["code"], "missing_required_parameter");
    h.c.on_client_text("{not json");
    let out = h.frames();
    assert_eq!(out[0]["error"]["code"], "invalid_json");
    assert!(out[0]["error"]["event_id"].is_null());
    h.c.on_client_text("[1,2]");
    assert_eq!(h.frames()[0]["error"]["code"], "invalid_json");
    let out = h.send(json!({"type": "session.update", "session": {"instructions": "still here"}}));
    assert_eq!(out[0]["type"], "session.updated");
    assert_eq!(out[0]["session"]["instructions"], "still here");
}
