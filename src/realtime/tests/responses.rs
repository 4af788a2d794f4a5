//! response.create / cancel / output_audio_buffer.clear, the models' replies, text modality.

use serde_json::json;

use super::{Harness, deltas, of_type, types};
use crate::realtime::{Action, Reply};

const TEXT_TURN: &[&str] = &[
    "conversation.item.added",
    "conversation.item.done",
    "response.created",
    "rate_limits.updated",
    "response.output_item.added",
    "conversation.item.added",
    "response.content_part.added",
    "output_audio_buffer.started",
];

#[test]
fn tts_speaks_a_sent_message_with_deltas_that_match() {
    let mut h = Harness::open("tts");
    h.c.set_generation_pace(1.0);
    let text = "The quick brown fox jumps over the lazy dog";
    let out = h.send_message(text, 1);
    assert_eq!(types(&out), TEXT_TURN);
    assert_eq!(
        out[0]["item"]["content"],
        json!([{"type": "input_text", "text": text}])
    );
    let (rid, reply) = h.take_speak().unwrap();
    assert_eq!(reply, Reply::Text { text: text.into() });
    // 9 words paced at 400 ms each until the real length is known.
    h.c.on_audio_progress(&rid, 800);
    assert_eq!(deltas(&h.frames()), "The quick");
    // The synthesizer reports 9 s: now one word per second.
    h.c.on_audio_length(&rid, 9000);
    h.c.on_audio_progress(&rid, 4000);
    let mut all = h.frames();
    assert_eq!(deltas(&all), " brown fox");
    h.c.on_audio_done(&rid);
    all.extend(h.frames());
    let done = of_type(&all, "response.done")[0];
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        text
    );
    assert_eq!(
        of_type(&all, "response.output_audio_transcript.done")[0]["transcript"],
        text
    );
    assert_eq!(
        format!("The quick brown fox{}", deltas(&all[2..])),
        text,
        "all deltas arrive by on_audio_done"
    );
    assert_eq!(types(&all).last(), Some(&"output_audio_buffer.stopped"));
}

#[test]
fn echo_answers_text_with_you_said() {
    let mut h = Harness::open("echo");
    h.send_message("  hi   there ", 1);
    let (rid, reply) = h.take_speak().unwrap();
    assert_eq!(
        reply,
        Reply::Text {
            text: "You said: hi there".into()
        }
    );
    h.c.on_audio_done(&rid);
    let out = h.frames();
    assert_eq!(deltas(&out), "You said: hi there");
}

#[test]
fn tts_speaks_response_instructions_when_nothing_new_was_said() {
    let mut h = Harness::open("tts");
    let out = h.send(
        json!({"type": "response.create", "response": {"instructions": "Welcome to voice edge."}}),
    );
    assert_eq!(types(&out)[0], "response.created");
    let (rid, reply) = h.take_speak().unwrap();
    assert_eq!(
        reply,
        Reply::Text {
            text: "Welcome to voice edge.".into()
        }
    );
    h.c.on_audio_done(&rid);
    h.frames();
    // An already answered message is not spoken twice; bare response.create still answers.
    h.send(json!({"type": "response.create"}));
    let (_, reply) = h.take_speak().unwrap();
    assert_eq!(
        reply,
        Reply::Text {
            text: "There is nothing new for me to answer.".into()
        }
    );
}

#[test]
fn response_create_is_always_answered() {
    let mut h = Harness::open("tts");
    h.send_message("first", 1);
    let (rid, _) = h.take_speak().unwrap();
    // Busy: refused with the client's event_id, so the SDK's queue is released.
    let e = h.expect_error(
        json!({"type": "response.create", "event_id": "agents_js_response_create_2"}),
    );
    assert_eq!(e["code"], "conversation_already_has_active_response");
    // Invalid: also answered with an echo.
    h.c.on_audio_done(&rid);
    h.frames();
    let e = h.expect_error(json!({"type": "response.create", "event_id": "bad", "response": {"output_modalities": ["audio", "text"]}}));
    assert_eq!(e["param"], "response.output_modalities");
    let e = h.expect_error(json!({"type": "response.create", "event_id": "bad2", "response": {"conversation": "other"}}));
    assert_eq!(e["param"], "response.conversation");
    // Idle again: a new response is created.
    let out = h.send(json!({"type": "response.create", "event_id": "agents_js_response_create_3", "response": {"metadata": {"topic": "x"}}}));
    assert_eq!(out[0]["response"]["metadata"], json!({"topic": "x"}));
}

#[test]
fn response_cancel_then_clear_gives_one_response_done() {
    let mut h = Harness::open("echo");
    h.c.set_generation_pace(1.0);
    let (_, speak) = h.vad_turn(0, 2000);
    let (rid, _) = speak.unwrap();
    h.c.on_audio_progress(&rid, 800);
    h.frames();
    // The SDK's interrupt(): response.cancel, then output_audio_buffer.clear.
    let out = h.send(json!({"type": "response.cancel"}));
    assert_eq!(
        h.actions(),
        [Action::StopAudio {
            response_id: rid.clone()
        }]
    );
    assert_eq!(
        types(&out),
        [
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
            "output_audio_buffer.cleared",
        ]
    );
    let r = &out[5]["response"];
    assert_eq!(r["status"], "cancelled");
    assert_eq!(r["status_details"]["reason"], "client_cancelled");
    let out = h.send(json!({"type": "output_audio_buffer.clear"}));
    assert_eq!(types(&out), ["output_audio_buffer.cleared"]);
    assert_eq!(out[0]["response_id"], rid.as_str());
    assert!(h.actions().is_empty());
    let e = h.expect_error(json!({"type": "response.cancel", "event_id": "again"}));
    assert_eq!(e["code"], "response_cancel_not_active");
    // Still usable.
    let out = h.send(json!({"type": "response.create"}));
    assert_eq!(types(&out)[0], "response.created");
}

#[test]
fn clear_then_cancel_gives_one_response_done() {
    let mut h = Harness::open("tts");
    h.send_message("stop me", 1);
    let (rid, _) = h.take_speak().unwrap();
    let out = h.send(json!({"type": "output_audio_buffer.clear"}));
    assert_eq!(
        h.actions(),
        [Action::StopAudio {
            response_id: rid.clone()
        }]
    );
    assert_eq!(of_type(&out, "response.done").len(), 1);
    assert_eq!(types(&out).last(), Some(&"output_audio_buffer.cleared"));
    let e =
        h.expect_error(json!({"type": "response.cancel", "event_id": "late", "response_id": rid}));
    assert_eq!(e["code"], "response_cancel_not_active");
    h.c.on_audio_done(&rid);
    assert!(h.frames().is_empty());
}

/// The media side could not make the audio (the synthesis pool was full): an `error` says why,
/// the response ends `failed` with nothing heard, and the session takes the next response.
#[test]
fn a_response_whose_audio_fails_ends_failed_after_an_error() {
    let mut h = Harness::open("tts");
    h.send_message("say this", 1);
    let (rid, _) = h.take_speak().unwrap();
    h.c.on_audio_failed(
        &rid,
        "speech_synthesis_busy",
        "Speech synthesis is at capacity.",
    );
    let out = h.frames();
    assert_eq!(
        types(&out),
        [
            "error",
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
            "output_audio_buffer.stopped",
        ]
    );
    let e = &out[0]["error"];
    assert_eq!(
        (&e["type"], &e["code"], &e["message"]),
        (
            &json!("server_error"),
            &json!("speech_synthesis_busy"),
            &json!("Speech synthesis is at capacity.")
        )
    );
    assert!(e["event_id"].is_null());
    let r = &out[6]["response"];
    assert_eq!(r["status"], "failed");
    assert_eq!(
        r["status_details"],
        json!({"type": "failed", "error": {"type": "server_error",
            "code": "speech_synthesis_busy", "message": "Speech synthesis is at capacity."}})
    );
    assert_eq!(r["output"][0]["status"], "incomplete");
    assert_eq!(deltas(&out), "");
    assert_eq!(h.c.active_response(), None);
    // Late reports about it change nothing; the next response is made as usual.
    h.c.on_audio_failed(&rid, "speech_synthesis_busy", "again");
    h.c.on_audio_done(&rid);
    assert!(h.frames().is_empty());
    let out = h.send(json!({"type": "response.create", "event_id": "next"}));
    assert_eq!(types(&out)[0], "response.created");
}

/// The transcript is cut where the synthesizer stops (whole words within its byte bound), so
/// the client never reads words it will not hear.
#[test]
fn a_long_reply_is_cut_to_what_the_synthesizer_says() {
    let mut h = Harness::open("tts");
    let long = "seven ".repeat(900);
    h.send(json!({"type": "response.create", "response": {"instructions": long}}));
    let (rid, reply) = h.take_speak().unwrap();
    let Reply::Text { text } = reply else {
        panic!("{reply:?}")
    };
    assert!(
        text.len() <= crate::audio::tts::MAX_TEXT_BYTES,
        "{}",
        text.len()
    );
    assert_eq!(crate::audio::tts::bounded(&text), text);
    assert_eq!(text.split(' ').count(), 4096 / 6);
    h.c.on_audio_done(&rid);
    let out = h.frames();
    assert_eq!(deltas(&out), text);
}

#[test]
fn cancel_of_another_response_id_is_refused() {
    let mut h = Harness::open("tts");
    h.send_message("hello", 1);
    let (rid, _) = h.take_speak().unwrap();
    let e = h.expect_error(
        json!({"type": "response.cancel", "event_id": "x", "response_id": "resp_nope"}),
    );
    assert_eq!(e["code"], "response_cancel_not_active");
    assert_eq!(h.c.active_response(), Some(rid.as_str()));
    // With nothing ever played, a clear is still acknowledged.
    let mut fresh = Harness::open("echo");
    let out = fresh.send(json!({"type": "output_audio_buffer.clear"}));
    assert_eq!(types(&out), ["output_audio_buffer.cleared"]);
    assert!(out[0]["response_id"].is_null());
}

#[test]
fn text_modality_completes_at_once_without_audio() {
    let mut h = Harness::open("tts");
    h.send(json!({"type": "session.update", "session": {"output_modalities": ["text"]}}));
    let out = h.send_message("just text please", 1);
    assert!(h.actions().is_empty(), "no Speak for text");
    assert_eq!(
        types(&out),
        [
            "conversation.item.added",
            "conversation.item.done",
            "response.created",
            "rate_limits.updated",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ]
    );
    assert_eq!(out[6]["part"], json!({"type": "text", "text": ""}));
    assert_eq!(deltas(&out), "just text please");
    assert_eq!(out[10]["text"], "just text please");
    let r = &out[14]["response"];
    assert_eq!(r["output_modalities"], json!(["text"]));
    assert_eq!(
        r["output"][0]["content"],
        json!([{"type": "output_text", "text": "just text please"}])
    );
    assert_eq!(r["usage"]["output_token_details"]["audio_tokens"], 0);
    assert_eq!(h.c.active_response(), None);
    // A per-response override back to audio speaks.
    h.send(json!({"type": "response.create", "response": {"output_modalities": ["audio"]}}));
    assert!(h.take_speak().is_some());
}

#[test]
fn text_override_on_an_audio_session() {
    let mut h = Harness::open("echo");
    let (_, speak) = h.vad_turn(0, 1000);
    let (rid, _) = speak.unwrap();
    h.c.on_audio_done(&rid);
    h.frames();
    h.send(json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and in text?"}]}}));
    let out =
        h.send(json!({"type": "response.create", "response": {"output_modalities": ["text"]}}));
    assert!(of_type(&out, "output_audio_buffer.started").is_empty());
    assert_eq!(deltas(&out), "You said: and in text?");
    assert_eq!(of_type(&out, "response.done").len(), 1);
}

#[test]
fn out_of_band_response_stays_out_of_the_conversation() {
    let mut h = Harness::open("tts");
    let out = h.send(json!({"type": "response.create", "response": {
        "conversation": "none", "output_modalities": ["text"],
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "classify this"}]}]
    }}));
    assert!(out[0]["response"]["conversation_id"].is_null());
    assert!(of_type(&out, "conversation.item.added").is_empty());
    assert!(of_type(&out, "conversation.item.done").is_empty());
    assert_eq!(deltas(&out), "classify this");
    assert!(h.c.item_ids().is_empty());
    let e = h.expect_error(json!({"type": "response.create", "event_id": "ref", "response": {"input": [{"type": "item_reference", "id": "item_missing"}]}}));
    assert_eq!(e["code"], "item_not_found");
}

/// `max_output_tokens` cuts the reply by the estimate `usage` reports: a text response keeps
/// the words that fit, a spoken one fewer (its audio counts too), and both end `incomplete`.
#[test]
fn max_output_tokens_cuts_the_reply_and_ends_it_incomplete() {
    let text = "one two three four five six seven eight nine ten eleven twelve";
    let mut h = Harness::open("tts");
    h.send(json!({"type": "session.update", "session": {"output_modalities": ["text"]}}));
    h.send(
        json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": text}]}}),
    );
    let out = h.send(json!({"type": "response.create", "response": {"max_output_tokens": 5}}));
    let done = &of_type(&out, "response.done")[0]["response"];
    assert_eq!(done["status"], "incomplete");
    assert_eq!(
        done["status_details"],
        json!({"type": "incomplete", "reason": "max_output_tokens"})
    );
    let said = deltas(&out);
    assert!(
        text.starts_with(&said) && said.len() < text.len(),
        "{said:?}"
    );
    assert!(
        done["usage"]["output_tokens"].as_u64().unwrap() <= 5,
        "{}",
        done["usage"]
    );

    // Spoken, from the session's limit: 8 tokens hold one word of audio (400 ms = 8 tokens)
    // less its text, so nothing; 20 hold a couple of words.
    h.send(json!({"type": "session.update", "session": {"output_modalities": ["audio"], "max_output_tokens": 20}}));
    h.send(json!({"type": "response.create"}));
    let (rid, reply) = h.take_speak().expect("a spoken reply");
    let Reply::Text { text: spoken } = reply else {
        panic!("{reply:?}")
    };
    assert!(
        !spoken.is_empty() && spoken.split(' ').count() <= 2,
        "{spoken:?}"
    );
    h.c.on_audio_done(&rid);
    let all = h.frames();
    let done = &of_type(&all, "response.done")[0]["response"];
    assert_eq!(done["status"], "incomplete");
    // Without a limit the whole reply is said and completes.
    h.send(json!({"type": "session.update", "session": {"max_output_tokens": "inf"}}));
    h.send(
        json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": text}]}}),
    );
    h.send(json!({"type": "response.create"}));
    let (rid, reply) = h.take_speak().unwrap();
    assert_eq!(reply, Reply::Text { text: text.into() });
    h.c.on_audio_done(&rid);
    let all = h.frames();
    assert_eq!(
        of_type(&all, "response.done")[0]["response"]["status"],
        "completed"
    );
}

/// An out-of-band text response runs beside the spoken one, as the service runs them: it
/// completes at once, stays out of the conversation, carries its metadata, and the spoken
/// response plays on and ends by itself. One that would need playback is still refused.
#[test]
fn an_out_of_band_text_response_runs_beside_the_active_one() {
    let mut h = Harness::open("tts");
    h.send_message("tell me a long story please", 1);
    let (spoken, _) = h.take_speak().expect("the spoken reply plays");
    h.frames();
    let out = h.send(json!({"type": "response.create", "response": {
        "conversation": "none", "output_modalities": ["text"], "metadata": {"purpose": "classify"},
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "is this a question"}]}]
    }}));
    let created = &of_type(&out, "response.created")[0]["response"];
    assert_ne!(created["id"], spoken.as_str());
    assert!(created["conversation_id"].is_null());
    assert_eq!(created["metadata"], json!({"purpose": "classify"}));
    let done = &of_type(&out, "response.done")[0]["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["id"], created["id"]);
    assert_eq!(deltas(&out), "is this a question");
    assert!(of_type(&out, "conversation.item.added").is_empty());
    assert_eq!(
        h.c.active_response(),
        Some(spoken.as_str()),
        "the spoken one is still active"
    );

    let e =
        h.expect_error(json!({"type": "response.create", "response": {"conversation": "none"}}));
    assert_eq!(e["code"], "conversation_already_has_active_response");

    h.c.on_audio_done(&spoken);
    let all = h.frames();
    let done = of_type(&all, "response.done");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["response"]["id"], spoken.as_str());
    assert_eq!(done[0]["response"]["status"], "completed");
}

/// `response.create`'s own fields are checked as `session.update`'s are: an unknown key is
/// refused with its path, and `parallel_tool_calls` applies to that response alone.
#[test]
fn response_fields_unknown_keys_refused_and_parallel_tool_calls_per_response() {
    let mut h = Harness::open("tts");
    for (response, param) in [
        (json!({"modalities": ["text"]}), "response.modalities"),
        (
            json!({"audio": {"output": {"speed": 1.2}}}),
            "response.audio.output.speed",
        ),
        (json!({"audio": {"input": {}}}), "response.audio.input"),
    ] {
        let e = h.expect_error(json!({"type": "response.create", "response": response}));
        assert_eq!(e["code"], "unknown_parameter");
        assert_eq!(e["param"], param);
    }
    let e = h.expect_error(
        json!({"type": "response.create", "response": {"parallel_tool_calls": "no"}}),
    );
    assert_eq!(e["param"], "response.parallel_tool_calls");

    let tool =
        |name: &str| json!({"type": "function", "name": name, "parameters": {"type": "object"}});
    h.send(json!({"type": "session.update", "session": {"tools": [tool("get_weather"), tool("get_time")]}}));
    let calls = |h: &mut Harness, parallel: bool| {
        h.send(
            json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "call get_weather and get_time"}]}}),
        );
        let out = h.send(
            json!({"type": "response.create", "response": {"parallel_tool_calls": parallel}}),
        );
        let done = &of_type(&out, "response.done")[0]["response"];
        done["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["type"] == "function_call")
            .count()
    };
    assert_eq!(calls(&mut h, false), 1);
    assert_eq!(calls(&mut h, true), 2);
}
