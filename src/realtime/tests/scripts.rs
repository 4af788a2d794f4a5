//! The scripted model through the engine: transcripts, a spoken answer with a tool call, the
//! app's output, failures, and the errors a wrong script name gets.

use serde_json::json;

use super::{Harness, deltas, of_type, types};
use crate::realtime::Action;

fn transcription_on(h: &mut Harness) {
    h.send(
        json!({"type": "session.update", "session": {"audio": {"input": {
        "transcription": {"model": "gpt-4o-mini-transcribe"}}}}}),
    );
}

#[test]
fn the_weather_script_plays_event_by_event() {
    let mut h = Harness::open("script:weather");
    transcription_on(&mut h);
    // Turn 0, spoken: the script's words are the transcript, one delta per word.
    let (frames, speak) = h.vad_turn(1000, 2800);
    let words: Vec<&str> = of_type(&frames, "conversation.item.input_audio_transcription.delta")
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(words, ["What's", " the", " weather", " in", " Paris?"]);
    let completed = of_type(
        &frames,
        "conversation.item.input_audio_transcription.completed",
    );
    assert_eq!(completed[0]["transcript"], "What's the weather in Paris?");
    let (rid, _) = speak.expect("the first step is spoken");
    h.c.on_audio_done(&rid);
    let end = h.frames();
    assert_eq!(deltas(&end), "Let me check the weather in Paris.");
    // The message closes, then the call follows at index 1, then response.done.
    let t = types(&end);
    let msg_done = t
        .iter()
        .position(|t| *t == "response.output_item.done")
        .unwrap();
    let call_done = t
        .iter()
        .position(|t| *t == "response.function_call_arguments.done")
        .unwrap();
    assert!(msg_done < call_done);
    let call = &end[call_done];
    assert_eq!(
        (&call["name"], &call["output_index"]),
        (&json!("get_weather"), &json!(1))
    );
    assert_eq!(call["arguments"], r#"{"city":"Paris","unit":"celsius"}"#);
    let response = &of_type(&end, "response.done")[0]["response"];
    assert_eq!(response["output"][0]["type"], "message");
    assert_eq!(response["output"][1]["type"], "function_call");

    // Turn 1: the app's output is spoken back.
    h.send(
        json!({"type": "conversation.item.create", "item": {"type": "function_call_output",
        "call_id": call["call_id"], "output": "21 C and sunny"}}),
    );
    h.send(json!({"type": "response.create"}));
    let (rid, _) = h.take_speak().unwrap();
    h.c.on_audio_done(&rid);
    assert_eq!(
        deltas(&h.frames()),
        "Here is the weather in Paris: 21 C and sunny"
    );

    // "again": a server_error, after an error event, nothing played.
    let out = h.send_message("Say that again", 2);
    assert!(h.take_speak().is_none());
    let errors = of_type(&out, "error");
    assert_eq!(errors[0]["error"]["code"], "server_error");
    let done = &of_type(&out, "response.done")[0]["response"];
    assert_eq!(done["status"], "failed");
    assert_eq!(done["status_details"]["error"]["code"], "server_error");

    // "long": spoken, then cut: incomplete for max_output_tokens.
    h.send_message("the long forecast", 3);
    let (rid, _) = h.take_speak().unwrap();
    h.c.on_audio_done(&rid);
    let out = h.frames();
    let done = &of_type(&out, "response.done")[0]["response"];
    assert_eq!(done["status"], "incomplete");
    assert_eq!(
        done["status_details"],
        json!({"type": "incomplete", "reason": "max_output_tokens"})
    );
    assert_eq!(done["output"][0]["status"], "incomplete");

    // Anything else: the repeating fallback.
    for n in 4..6 {
        h.send_message("thanks", n);
        let (rid, _) = h.take_speak().unwrap();
        h.c.on_audio_done(&rid);
        assert_eq!(deltas(&h.frames()), "That is all I know about the weather.");
    }
}

#[test]
fn wrong_script_names_are_refused_and_a_switch_takes_effect() {
    let mut h = Harness::open("echo");
    let e = h.expect_error(json!({"type": "session.update", "event_id": "a",
        "session": {"model": "script:nope"}}));
    assert_eq!(e["param"], "session.model");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("no script named 'nope'")
    );
    let e = h.expect_error(json!({"type": "session.update", "event_id": "b",
        "session": {"model": "script:../etc"}}));
    assert_eq!(e["param"], "session.model");
    // The refused updates changed nothing; a good one switches.
    assert_eq!(h.c.model(), "echo");
    h.send(json!({"type": "session.update", "session": {"model": "script:weather"}}));
    assert_eq!(h.c.model_kind().to_string(), "script:weather");
    h.send_message("hi", 1);
    let (_, reply) = h.take_speak().unwrap();
    assert_eq!(
        reply,
        crate::model::Reply::text("Let me check the weather in Paris.")
    );
}

#[test]
fn an_unmatched_turn_and_a_session_expiry_say_so() {
    let dir = std::env::temp_dir().join(format!("ve-engine-scripts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("expire-test.json");
    std::fs::write(
        &path,
        r#"{"turns": [{"when": {"text": "bye"}, "steps": [{"fail": "session_expired"}]}]}"#,
    )
    .unwrap();
    crate::model::script::library::load_file(&path).unwrap();
    let mut h = Harness::open("script:expire-test");
    let out = h.send_message("hello", 1);
    let e = &of_type(&out, "error")[0]["error"];
    assert_eq!(e["code"], "script_no_match");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("the message \"hello\"")
    );
    assert_eq!(
        of_type(&out, "response.done")[0]["response"]["status"],
        "failed"
    );

    let out = h.send_message("bye now", 2);
    let e = &of_type(&out, "error")[0]["error"];
    assert_eq!(e["code"], "session_expired");
    assert_eq!(e["type"], "invalid_request_error");
    assert!(h.actions().contains(&Action::EndCall));
    let _ = std::fs::remove_dir_all(dir);
}
