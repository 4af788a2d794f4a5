//! VAD turns, pacing, barge-in, idle timeout, transcription, manual input handling.

use serde_json::json;

use super::{Harness, deltas, of_type, types};
use crate::realtime::{Action, Reply};

const SECTION_4: &[&str] = &[
    "input_audio_buffer.speech_started",
    "input_audio_buffer.speech_stopped",
    "input_audio_buffer.committed",
    "conversation.item.added",
    "conversation.item.done",
    "response.created",
    "rate_limits.updated",
    "response.output_item.added",
    "conversation.item.added",
    "response.content_part.added",
    "output_audio_buffer.started",
];

const SECTION_4_END: &[&str] = &[
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
    "output_audio_buffer.stopped",
];

#[test]
fn vad_turn_follows_section_4_with_consistent_ids() {
    let mut h = Harness::open("echo");
    let (mut frames, speak) = h.vad_turn(1000, 3400);
    assert_eq!(types(&frames), SECTION_4);
    let user_id = frames[0]["item_id"].as_str().unwrap().to_owned();
    assert_eq!(frames[0]["audio_start_ms"], 1000);
    assert_eq!(frames[1]["item_id"], user_id.as_str());
    assert_eq!(frames[1]["audio_end_ms"], 3400);
    assert_eq!(frames[2]["item_id"], user_id.as_str());
    assert!(frames[2]["previous_item_id"].is_null());
    for f in &frames[3..5] {
        assert_eq!(f["item"]["id"], user_id.as_str());
        assert_eq!(f["item"]["role"], "user");
        assert_eq!(f["item"]["status"], "completed");
        assert_eq!(
            f["item"]["content"],
            json!([{"type": "input_audio", "transcript": null}])
        );
    }
    let (response_id, reply) = speak.expect("Speak action");
    assert_eq!(
        reply,
        Reply::EchoInput {
            input_item_id: user_id.clone(),
            audio_start_ms: 1000,
            audio_end_ms: 3400
        }
    );
    let created = &frames[5]["response"];
    assert_eq!(created["id"], response_id.as_str());
    assert_eq!(created["conversation_id"], "conv_test");
    assert_eq!(created["output_modalities"], json!(["audio"]));
    assert_eq!(created["max_output_tokens"], "inf");
    assert_eq!(created["audio"]["output"]["voice"], "alloy");
    let assistant_id = frames[7]["item"]["id"].as_str().unwrap().to_owned();
    assert_eq!(frames[7]["item"]["status"], "in_progress");
    assert_eq!(frames[7]["item"]["content"], json!([]));
    assert_eq!(frames[8]["item"], frames[7]["item"]);
    assert_eq!(frames[8]["previous_item_id"], user_id.as_str());
    assert_eq!(
        frames[9]["part"],
        json!({"type": "audio", "transcript": ""})
    );

    // Playback: deltas follow the audio, the rest arrive at done.
    for ms in (0..=2400).step_by(240) {
        h.c.on_audio_progress(&response_id, ms);
        frames.extend(h.frames());
    }
    h.c.on_audio_done(&response_id);
    frames.extend(h.frames());
    let n = SECTION_4.len();
    let delta_count = frames[n..]
        .iter()
        .take_while(|f| f["type"] == "response.output_audio_transcript.delta")
        .count();
    assert_eq!(delta_count, 5);
    assert_eq!(types(&frames[n + delta_count..]), SECTION_4_END);

    let transcript = "Echoing your 2.4 second turn.";
    assert_eq!(deltas(&frames), transcript);
    for f in &frames[5..] {
        if let Some(rid) = f.get("response_id") {
            assert_eq!(rid, response_id.as_str(), "{f}");
        }
        if let Some(iid) = f.get("item_id") {
            assert_eq!(iid, assistant_id.as_str(), "{f}");
        }
    }
    let done = of_type(&frames, "response.done")[0];
    assert_eq!(done["response"]["status"], "completed");
    assert!(done["response"]["status_details"].is_null());
    let output = &done["response"]["output"][0];
    assert_eq!(output["id"], assistant_id.as_str());
    assert_eq!(output["status"], "completed");
    assert_eq!(
        output["content"],
        json!([{"type": "output_audio", "transcript": transcript}])
    );
    assert_eq!(
        done["response"]["usage"]["output_token_details"]["audio_tokens"],
        48
    );
    let td = of_type(&frames, "response.output_audio_transcript.done")[0];
    assert_eq!(td["transcript"], transcript);
    assert_eq!(h.c.active_response(), None);
    assert_eq!(h.c.item_ids(), [user_id.as_str(), assistant_id.as_str()]);
}

#[test]
fn user_item_transcript_key_is_present_and_null_on_the_wire() {
    let mut h = Harness::open("echo");
    h.c.on_speech_started(0);
    h.c.on_speech_stopped(1000);
    let mut raw = Vec::new();
    while let Some(f) = h.c.poll_frame() {
        raw.push(f);
    }
    let added = raw
        .iter()
        .find(|f| f.contains("conversation.item.added"))
        .unwrap();
    assert!(
        added.contains(r#"{"transcript":null,"type":"input_audio"}"#),
        "{added}"
    );
}

#[test]
fn deltas_are_released_by_playback_progress() {
    // At playback pace (a slow model, or Live); generation ahead is tested below.
    let mut h = Harness::open("echo");
    h.c.set_generation_pace(1.0);
    let (_, speak) = h.vad_turn(0, 5000);
    let (rid, _) = speak.unwrap();
    // 5 words over 5 s: one word per second of audio played.
    h.c.on_audio_progress(&rid, 999);
    assert!(h.frames().is_empty());
    h.c.on_audio_progress(&rid, 2000);
    assert_eq!(deltas(&h.frames()), "Echoing your");
    h.c.on_audio_progress(&rid, 1500); // stale progress never goes back
    assert!(h.frames().is_empty());
    h.c.on_audio_progress("resp_other", 5000); // another response's progress is ignored
    assert!(h.frames().is_empty());
    h.c.on_audio_done(&rid);
    let rest = h.frames();
    assert_eq!(deltas(&rest), " 5.0 second turn.");
    // A late done for a finished response does nothing.
    h.c.on_audio_done(&rid);
    assert!(h.frames().is_empty());
}

#[test]
fn barge_in_cancels_clears_and_truncates_to_what_was_played() {
    // At playback pace the response is still being made when the caller speaks.
    let mut h = Harness::open("echo");
    h.c.set_generation_pace(1.0);
    let (_, speak) = h.vad_turn(1000, 3400);
    let (rid, _) = speak.unwrap();
    let assistant_id = h.c.item_ids()[1].to_owned();
    h.c.on_audio_progress(&rid, 1200);
    assert_eq!(deltas(&h.frames()), "Echoing your");

    h.c.on_speech_started(6000);
    let frames = h.frames();
    assert_eq!(
        types(&frames),
        [
            "input_audio_buffer.speech_started",
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
            "output_audio_buffer.cleared",
            "conversation.item.truncated",
        ]
    );
    assert_eq!(
        h.actions(),
        [Action::StopAudio {
            response_id: rid.clone()
        }]
    );
    assert_eq!(frames[2]["transcript"], "Echoing your");
    assert_eq!(frames[4]["item"]["status"], "incomplete");
    let r = &frames[6]["response"];
    assert_eq!(r["id"], rid.as_str());
    assert_eq!(r["status"], "cancelled");
    assert_eq!(
        r["status_details"],
        json!({"type": "cancelled", "reason": "turn_detected"})
    );
    assert_eq!(frames[7]["response_id"], rid.as_str());
    assert_eq!(
        frames[8],
        json!({
            "type": "conversation.item.truncated", "event_id": frames[8]["event_id"],
            "item_id": assistant_id, "content_index": 0, "audio_end_ms": 1200
        })
    );
    let stored = h.c.item(&assistant_id).unwrap();
    assert_eq!(stored["content"][0]["transcript"], "Echoing your");
    assert_eq!(stored["status"], "incomplete");

    // The media side's late report for the stopped response changes nothing.
    h.c.on_audio_done(&rid);
    assert!(h.frames().is_empty());
    // The interrupting turn is answered normally.
    h.c.on_speech_stopped(7000);
    let frames = h.frames();
    assert_eq!(types(&frames), SECTION_4[1..]);
    let user2 = frames[0]["item_id"].as_str().unwrap();
    assert_eq!(frames[1]["previous_item_id"], assistant_id.as_str());
    match h.take_speak().unwrap().1 {
        Reply::EchoInput { input_item_id, .. } => assert_eq!(input_item_id, user2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_interrupt_response_a_turn_waits_for_the_current_reply() {
    let mut h = Harness::open("echo");
    h.send(json!({"type": "session.update", "session": {"audio": {"input": {"turn_detection": {"interrupt_response": false}}}}}));
    let (_, speak) = h.vad_turn(0, 1000);
    let (first, _) = speak.unwrap();
    let (frames, speak) = h.vad_turn(1500, 2500);
    assert!(speak.is_none());
    assert!(of_type(&frames, "response.done").is_empty());
    assert!(of_type(&frames, "response.created").is_empty());
    h.c.on_audio_done(&first);
    let frames = h.frames();
    let done = of_type(&frames, "response.done");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["response"]["status"], "completed");
    assert_eq!(of_type(&frames, "response.created").len(), 1);
    let (second, reply) = h.take_speak().unwrap();
    assert_ne!(second, first);
    assert!(matches!(
        reply,
        Reply::EchoInput {
            audio_start_ms: 1500,
            audio_end_ms: 2500,
            ..
        }
    ));
}

#[test]
fn create_response_false_commits_without_answering() {
    let mut h = Harness::open("echo");
    h.send(json!({"type": "session.update", "session": {"audio": {"input": {"turn_detection": {"create_response": false}}}}}));
    let (frames, speak) = h.vad_turn(0, 1000);
    assert_eq!(types(&frames), SECTION_4[..5]);
    assert!(speak.is_none());
}

#[test]
fn turn_detection_null_means_manual_commits_only() {
    let mut h = Harness::open("echo");
    h.send(json!({"type": "session.update", "session": {"audio": {"input": {"turn_detection": null}}}}));
    assert_eq!(h.c.turn_detection(), None);
    h.c.on_speech_started(500);
    h.c.on_speech_stopped(1500);
    h.c.on_speech_started(2000);
    h.c.on_speech_stopped(2600);
    assert!(
        h.frames().is_empty(),
        "no VAD events with turn detection off"
    );
    let frames = h.send(json!({"type": "input_audio_buffer.commit", "event_id": "c1"}));
    assert_eq!(
        types(&frames),
        [
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done"
        ]
    );
    assert!(h.take_speak().is_none(), "a manual commit does not answer");
    let user_id = frames[0]["item_id"].as_str().unwrap().to_owned();
    let frames = h.send(json!({"type": "response.create", "event_id": "r1"}));
    assert_eq!(types(&frames)[0], "response.created");
    let (_, reply) = h.take_speak().unwrap();
    assert_eq!(
        reply,
        Reply::EchoInput {
            input_item_id: user_id,
            audio_start_ms: 500,
            audio_end_ms: 2600
        }
    );
    // Everything was taken: a second commit is empty.
    let e = h.expect_error(json!({"type": "input_audio_buffer.commit", "event_id": "c2"}));
    assert_eq!(e["code"], "input_audio_buffer_commit_empty");
}

/// Found by the client_events fuzz target: with turn detection off, a second turn reported
/// with earlier times than the first closed an uncommitted span that ended before it began, and
/// the commit's length underflowed.
#[test]
fn manual_commit_spans_turns_reported_out_of_order() {
    let mut h = Harness::open("echo");
    h.send(json!({"type": "session.update", "session": {"audio": {"input": {"turn_detection": null}}}}));
    h.c.on_speech_started(2000);
    h.c.on_speech_stopped(2600);
    h.c.on_speech_started(500);
    h.c.on_speech_stopped(1500);
    let frames = h.send(json!({"type": "input_audio_buffer.commit"}));
    assert_eq!(types(&frames)[0], "input_audio_buffer.committed");
    h.send(json!({"type": "response.create"}));
    let (_, reply) = h.take_speak().unwrap();
    let Reply::EchoInput {
        audio_start_ms,
        audio_end_ms,
        ..
    } = reply
    else {
        panic!("expected an echo of the committed turns, got {reply:?}");
    };
    assert_eq!((audio_start_ms, audio_end_ms), (500, 2600));
}

#[test]
fn commit_and_clear_of_the_input_buffer() {
    let mut h = Harness::open("echo");
    let e = h.expect_error(json!({"type": "input_audio_buffer.commit", "event_id": "c0"}));
    assert_eq!(e["code"], "input_audio_buffer_commit_empty");
    // Audio heard but never closed by VAD is committed as buffer time.
    h.c.on_input_audio(800);
    let frames = h.send(json!({"type": "input_audio_buffer.commit"}));
    assert_eq!(types(&frames)[0], "input_audio_buffer.committed");
    // Speech in progress with VAD on: the commit takes it under the announced id.
    h.c.on_speech_started(1000);
    let started = h.frames();
    h.c.on_input_audio(1600);
    let frames = h.send(json!({"type": "input_audio_buffer.commit"}));
    assert_eq!(frames[0]["item_id"], started[0]["item_id"]);
    h.c.on_speech_stopped(1800); // already committed
    assert!(h.frames().is_empty());
    // Clear drops buffered audio and tells the media side.
    h.c.on_input_audio(3000);
    let frames = h.send(json!({"type": "input_audio_buffer.clear"}));
    assert_eq!(types(&frames), ["input_audio_buffer.cleared"]);
    assert_eq!(h.actions(), [Action::ClearInput]);
    let e = h.expect_error(json!({"type": "input_audio_buffer.commit", "event_id": "c3"}));
    assert_eq!(e["code"], "input_audio_buffer_commit_empty");
    // Appended audio (PCM16 24 kHz: 48 bytes per ms) is accepted silently and can be committed.
    let audio = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        vec![0u8; 48 * 200],
    );
    assert!(
        h.send(json!({"type": "input_audio_buffer.append", "audio": audio}))
            .is_empty()
    );
    let frames = h.send(json!({"type": "input_audio_buffer.commit"}));
    assert_eq!(types(&frames)[0], "input_audio_buffer.committed");
    let e = h.expect_error(
        json!({"type": "input_audio_buffer.append", "audio": "@@@", "event_id": "a1"}),
    );
    assert_eq!(e["param"], "audio");
}

#[test]
fn speech_cleared_mid_turn_is_forgotten() {
    let mut h = Harness::open("echo");
    h.c.on_speech_started(0);
    h.frames();
    h.send(json!({"type": "input_audio_buffer.clear"}));
    h.c.on_speech_stopped(900);
    assert!(h.frames().is_empty());
}

#[test]
fn idle_timeout_commits_silence_and_answers() {
    let mut h = Harness::open("tts");
    h.c.on_idle_timeout(3000, 8000);
    let frames = h.frames();
    assert_eq!(
        types(&frames)[..5],
        [
            "input_audio_buffer.timeout_triggered",
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done",
            "response.created"
        ]
    );
    assert_eq!(frames[0]["item_id"], frames[1]["item_id"]);
    let (_, reply) = h.take_speak().unwrap();
    assert_eq!(
        reply,
        Reply::Text {
            text: "Are you still there?".into()
        }
    );
}

#[test]
fn input_transcription_reports_honestly_and_updates_the_item() {
    let mut h = Harness::open("echo");
    h.send(json!({"type": "session.update", "session": {"audio": {"input": {"transcription": {"model": "gpt-4o-mini-transcribe"}}}}}));
    let (frames, _) = h.vad_turn(1000, 3400);
    let t = types(&frames);
    let done = t
        .iter()
        .position(|t| *t == "conversation.item.done")
        .unwrap();
    // A delta per word, then completed.
    let delta = "conversation.item.input_audio_transcription.delta";
    assert_eq!(
        t[done + 1..done + 5],
        [
            delta,
            delta,
            delta,
            "conversation.item.input_audio_transcription.completed"
        ]
    );
    let deltas: Vec<&str> = (1..4)
        .map(|i| frames[done + i]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["[speech,", " 2.4", " s]"]);
    let ev = &frames[done + 4];
    let user_id = frames[0]["item_id"].as_str().unwrap();
    assert_eq!(ev["item_id"], user_id);
    assert_eq!(ev["transcript"], "[speech, 2.4 s]");
    assert_eq!(ev["usage"], json!({"type": "duration", "seconds": 2.4}));
    // The added/done events carried null; a retrieve (which the SDK sends next) has the note.
    assert!(frames[done]["item"]["content"][0]["transcript"].is_null());
    let got = h.send(json!({"type": "conversation.item.retrieve", "item_id": user_id}));
    assert_eq!(
        got[0]["item"]["content"][0]["transcript"],
        "[speech, 2.4 s]"
    );
}

/// Generation runs ahead of playback, as the service's does: the whole transcript and a
/// `completed` response arrive while the audio still plays, and a barge-in after that clears
/// the buffer and truncates the item to what was heard, cancelling nothing.
#[test]
fn a_reply_completes_ahead_of_its_playout_and_a_barge_in_then_truncates_it() {
    let mut h = Harness::open("echo");
    let (_, speak) = h.vad_turn(0, 4000);
    let (rid, _) = speak.unwrap();
    let assistant_id = h.c.item_ids()[1].to_owned();
    // 5 words over 4 s of audio, made 4 times faster than it plays.
    h.c.on_audio_progress(&rid, 500);
    assert_eq!(deltas(&h.frames()), "Echoing your");
    h.c.on_audio_progress(&rid, 1000);
    let frames = h.frames();
    assert_eq!(deltas(&frames), " 4.0 second turn.");
    let done = of_type(&frames, "response.done");
    assert_eq!(done[0]["response"]["status"], "completed");
    assert_eq!(
        of_type(&frames, "response.output_audio_transcript.done")[0]["transcript"],
        "Echoing your 4.0 second turn."
    );
    assert!(
        of_type(&frames, "output_audio_buffer.stopped").is_empty(),
        "the audio still plays: {:?}",
        types(&frames)
    );
    // The playout goes on; a new response could start now (none is active).
    h.c.on_audio_progress(&rid, 2000);
    assert!(h.frames().is_empty());
    assert!(h.c.active_response().is_none());

    h.c.on_speech_started(5000);
    let frames = h.frames();
    assert_eq!(
        types(&frames),
        [
            "input_audio_buffer.speech_started",
            "output_audio_buffer.cleared",
            "conversation.item.truncated",
        ]
    );
    assert_eq!(frames[1]["response_id"], rid.as_str());
    assert_eq!(frames[2]["item_id"], assistant_id.as_str());
    assert_eq!(frames[2]["audio_end_ms"], 2000);
    assert_eq!(
        h.actions(),
        [Action::StopAudio {
            response_id: rid.clone()
        }]
    );
    // What stays in the conversation is what was heard.
    let stored = h.c.item(&assistant_id).unwrap();
    assert_eq!(stored["content"][0]["transcript"], "Echoing your");
    assert_eq!(stored["status"], "completed");
    // The stopped playout's late end says nothing more.
    h.c.on_audio_done(&rid);
    assert!(h.frames().is_empty());
}

/// A playout that runs to its end is reported then; a response made meanwhile queues its
/// audio behind it, and its `output_audio_buffer.started` waits for that end.
#[test]
fn a_playout_ends_with_stopped_and_the_next_reply_starts_after_it() {
    let mut h = Harness::open("echo");
    let (_, speak) = h.vad_turn(0, 2000);
    let (first, _) = speak.unwrap();
    h.c.on_audio_progress(&first, 600);
    let frames = h.frames();
    assert_eq!(of_type(&frames, "response.done").len(), 1);
    // A second turn while the first still plays, with interruption off.
    h.send(json!({"type": "session.update", "session": {"type": "realtime",
        "audio": {"input": {"turn_detection": {"type": "server_vad", "interrupt_response": false}}}}}));
    h.frames();
    let (frames, speak) = h.vad_turn(2500, 3500);
    let (second, _) = speak.expect("the next reply is made while the first plays");
    assert!(
        of_type(&frames, "output_audio_buffer.started").is_empty(),
        "{:?}",
        types(&frames)
    );
    h.c.on_audio_done(&first);
    let frames = h.frames();
    assert_eq!(
        types(&frames),
        ["output_audio_buffer.stopped", "output_audio_buffer.started"]
    );
    assert_eq!(frames[0]["response_id"], first.as_str());
    assert_eq!(frames[1]["response_id"], second.as_str());
}

/// On a WebSocket the client plays the audio: the response follows what was sent, as before.
#[test]
fn a_websocket_reply_is_not_generated_ahead() {
    let mut h = Harness::open("echo");
    h.c.set_transport(crate::realtime::Transport::WebSocket);
    let (_, speak) = h.vad_turn(0, 4000);
    let (rid, _) = speak.unwrap();
    h.c.on_audio_progress(&rid, 1000);
    let frames = h.frames();
    assert!(
        of_type(&frames, "response.done").is_empty(),
        "{:?}",
        types(&frames)
    );
    h.c.on_audio_done(&rid);
    assert_eq!(of_type(&h.frames(), "response.done").len(), 1);
}
