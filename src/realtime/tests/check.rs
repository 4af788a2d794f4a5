//! Required fields per server event (docs/realtime-protocol.md §4) and the SDK's strict message-item rules.

use serde_json::Value;

fn num(v: &Value, key: &str) {
    assert!(v[key].is_number(), "`{key}` must be a number in {v}");
}

fn string(v: &Value, key: &str) {
    assert!(v[key].is_string(), "`{key}` must be a string in {v}");
}

fn present(v: &Value, key: &str) {
    assert!(v.get(key).is_some(), "`{key}` must be present in {v}");
}

fn locator(ev: &Value) {
    string(ev, "response_id");
    string(ev, "item_id");
    num(ev, "output_index");
    num(ev, "content_index");
}

pub(super) fn fields(ev: &Value) {
    let kind = ev["type"].as_str().expect("string type");
    match kind {
        "session.created" | "session.updated" => session(&ev["session"]),
        "input_audio_buffer.speech_started" => {
            string(ev, "item_id");
            num(ev, "audio_start_ms");
        }
        "input_audio_buffer.speech_stopped" => {
            string(ev, "item_id");
            num(ev, "audio_end_ms");
        }
        "input_audio_buffer.committed" => {
            string(ev, "item_id");
            present(ev, "previous_item_id");
        }
        "input_audio_buffer.cleared" => {}
        "input_audio_buffer.timeout_triggered" => {
            string(ev, "item_id");
            num(ev, "audio_start_ms");
            num(ev, "audio_end_ms");
        }
        "conversation.item.added" | "conversation.item.done" => {
            present(ev, "previous_item_id");
            assert!(ev["previous_item_id"].is_string() || ev["previous_item_id"].is_null());
            item(&ev["item"]);
        }
        "conversation.item.retrieved" => item(&ev["item"]),
        "conversation.item.deleted" => string(ev, "item_id"),
        "conversation.item.truncated" => {
            string(ev, "item_id");
            num(ev, "content_index");
            num(ev, "audio_end_ms");
        }
        "conversation.item.input_audio_transcription.completed" => {
            string(ev, "item_id");
            num(ev, "content_index");
            string(ev, "transcript");
            assert_eq!(ev["usage"]["type"], "duration");
            num(&ev["usage"], "seconds");
        }
        "conversation.item.input_audio_transcription.delta" => {
            string(ev, "item_id");
            num(ev, "content_index");
            string(ev, "delta");
        }
        "conversation.item.input_audio_transcription.failed" => {
            string(ev, "item_id");
            num(ev, "content_index");
            string(&ev["error"], "type");
            string(&ev["error"], "code");
            string(&ev["error"], "message");
        }
        "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
            for key in ["response_id", "item_id", "call_id"] {
                string(ev, key);
            }
            num(ev, "output_index");
            if kind.ends_with("delta") {
                string(ev, "delta");
            } else {
                string(ev, "name");
                let args = ev["arguments"].as_str().unwrap();
                assert!(
                    serde_json::from_str::<Value>(args).is_ok_and(|a| a.is_object()),
                    "arguments must be a JSON object: {args}"
                );
            }
        }
        "mcp_list_tools.in_progress" | "mcp_list_tools.completed" | "mcp_list_tools.failed" => {
            string(ev, "item_id")
        }
        "response.mcp_call_arguments.delta" | "response.mcp_call_arguments.done" => {
            string(ev, "response_id");
            string(ev, "item_id");
            num(ev, "output_index");
            string(
                ev,
                if kind.ends_with("delta") {
                    "delta"
                } else {
                    "arguments"
                },
            );
        }
        "response.mcp_call.in_progress"
        | "response.mcp_call.completed"
        | "response.mcp_call.failed" => {
            string(ev, "item_id");
            num(ev, "output_index");
        }
        "response.created" | "response.done" => response(kind, &ev["response"]),
        "rate_limits.updated" => {
            let limits = ev["rate_limits"].as_array().expect("rate_limits array");
            for l in limits {
                assert!(l["name"] == "requests" || l["name"] == "tokens");
                num(l, "limit");
                num(l, "remaining");
                num(l, "reset_seconds");
            }
        }
        "response.output_item.added" | "response.output_item.done" => {
            string(ev, "response_id");
            num(ev, "output_index");
            item(&ev["item"]);
        }
        "response.content_part.added" | "response.content_part.done" => {
            locator(ev);
            let t = &ev["part"]["type"];
            assert!(t == "audio" || t == "text", "part type {t}");
        }
        "response.output_audio_transcript.delta" | "response.output_text.delta" => {
            locator(ev);
            string(ev, "delta");
        }
        "response.output_audio_transcript.done" => {
            locator(ev);
            string(ev, "transcript");
        }
        "response.output_text.done" => {
            locator(ev);
            string(ev, "text");
        }
        "response.output_audio.done" => locator(ev),
        "output_audio_buffer.started" | "output_audio_buffer.stopped" => string(ev, "response_id"),
        "output_audio_buffer.cleared" => present(ev, "response_id"),
        "error" => {
            let e = &ev["error"];
            string(e, "type");
            string(e, "message");
            for key in ["code", "param", "event_id"] {
                present(e, key);
            }
        }
        other => panic!("unexpected server event type {other}"),
    }
}

fn session(s: &Value) {
    string(s, "id");
    assert_eq!(s["object"], "realtime.session");
    assert_eq!(s["type"], "realtime");
    string(s, "model");
    string(s, "instructions");
    assert!(s["output_modalities"].is_array());
    assert!(s["tools"].is_array());
    present(s, "tool_choice");
    present(s, "tracing");
    let input = &s["audio"]["input"];
    string(&input["format"], "type");
    for key in ["transcription", "noise_reduction", "turn_detection"] {
        present(input, key);
    }
    let output = &s["audio"]["output"];
    string(&output["format"], "type");
    present(output, "voice");
    num(output, "speed");
}

fn response(kind: &str, r: &Value) {
    assert!(r["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(r["object"], "realtime.response");
    let status = r["status"].as_str().unwrap();
    assert!(
        [
            "completed",
            "cancelled",
            "failed",
            "incomplete",
            "in_progress"
        ]
        .contains(&status)
    );
    assert!(r["output"].is_array());
    present(r, "conversation_id");
    assert!(r["output_modalities"].is_array());
    present(r, "max_output_tokens");
    present(r, "metadata");
    string(&r["audio"]["output"], "voice");
    for item_value in r["output"].as_array().unwrap() {
        item(item_value);
    }
    if kind == "response.created" {
        assert_eq!(status, "in_progress");
        assert!(r["usage"].is_null());
        assert!(r["output"].as_array().unwrap().is_empty());
        return;
    }
    assert_ne!(status, "in_progress");
    let u = &r["usage"];
    for key in ["total_tokens", "input_tokens", "output_tokens"] {
        num(u, key);
    }
    let i = &u["input_token_details"];
    for key in [
        "text_tokens",
        "audio_tokens",
        "image_tokens",
        "cached_tokens",
    ] {
        num(i, key);
    }
    for key in ["text_tokens", "audio_tokens", "image_tokens"] {
        num(&i["cached_tokens_details"], key);
    }
    for key in ["text_tokens", "audio_tokens"] {
        num(&u["output_token_details"], key);
    }
    assert_eq!(
        u["total_tokens"].as_u64(),
        Some(u["input_tokens"].as_u64().unwrap() + u["output_tokens"].as_u64().unwrap())
    );
}

/// `realtimeMessageItemSchema` rules; `.parse()` throws in the SDK when these fail.
pub(super) fn item(i: &Value) {
    string(i, "id");
    assert_eq!(i["object"], "realtime.item");
    // The MCP items have no `status` (`RealtimeMcpListTools`, `RealtimeMcpToolCall`, …).
    match i["type"].as_str().unwrap() {
        "mcp_list_tools" => {
            string(i, "server_label");
            assert!(i["tools"].is_array(), "tools must be an array: {i}");
            return;
        }
        "mcp_call" | "mcp_approval_request" => {
            for key in ["server_label", "name", "arguments"] {
                string(i, key);
            }
            return;
        }
        "mcp_approval_response" => {
            string(i, "approval_request_id");
            assert!(i["approve"].is_boolean(), "approve must be a boolean: {i}");
            return;
        }
        _ => {}
    }
    let status = i["status"].as_str().unwrap();
    assert!(["completed", "incomplete", "in_progress"].contains(&status));
    if i["type"] == "function_call" {
        for key in ["name", "call_id", "arguments"] {
            string(i, key);
        }
        return;
    }
    if i["type"] != "message" {
        return;
    }
    let content = i["content"].as_array().expect("content array");
    for part in content {
        match (i["role"].as_str().unwrap(), part["type"].as_str().unwrap()) {
            ("user", "input_text") | ("system", "input_text") | ("assistant", "output_text") => {
                string(part, "text")
            }
            ("user", "input_audio") => {
                present(part, "transcript");
                assert!(part["transcript"].is_string() || part["transcript"].is_null());
            }
            ("assistant", "output_audio") => {
                assert!(part.get("transcript").is_none_or(Value::is_string));
            }
            ("user", "input_image") => {}
            (role, t) => panic!("{role} message may not hold {t} content: {i}"),
        }
    }
}
