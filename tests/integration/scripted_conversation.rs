//! A scripted conversation over a real call (real WebRTC client, relay, transceiver), asserted
//! event by event from the call's event log: what an app's test against voice-edge looks like.
//!
//! `fixtures/scripts/weather.json` plays: the caller's audio (sent as data) is transcribed as
//! the script says, the model speaks and calls `get_weather`, the app's output is spoken back,
//! then a `server_error`, a response cut short (`incomplete`), and the fallback answer.
//! The log is also written to `target/scripted-conversation.jsonl` for reading.

use crate::common;

use std::time::Duration;

use base64::Engine;
use common::{Client, http_get, response_types, start_local};
use serde_json::{Value, json};
use voice_edge::allinone::AllInOneConfig;

fn response_done(server: &[&Value], nth: usize) -> Value {
    server
        .iter()
        .filter(|e| e["type"] == "response.done")
        .nth(nth)
        .map(|e| e["response"].clone())
        .unwrap_or_else(|| panic!("no response.done #{nth}"))
}

const MESSAGE_START: [&str; 5] = [
    "response.created",
    "rate_limits.updated",
    "response.output_item.added",
    "conversation.item.added",
    "response.content_part.added",
];

const SPOKEN_MESSAGE_END: [&str; 6] = [
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_weather_script_plays_over_a_real_call_and_the_log_shows_every_step() {
    let running = start_local(AllInOneConfig::default()).await;
    let h = running.http_addr;
    let mut c = Client::call(h, "/v1/realtime/calls?model=script:weather").await;
    c.wait_connected(Duration::from_secs(10)).await;
    c.wait_for("session.created", 1).await;
    let id = c.call_id();

    c.send_event(
        json!({"type": "session.update", "event_id": "setup", "session": {
        "type": "realtime",
        "tools": [{"type": "function", "name": "get_weather", "description": "Current weather",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}}],
        "audio": {"input": {"transcription": {"model": "gpt-4o-mini-transcribe"},
                            "turn_detection": null}}}}),
    )
    .await;
    c.wait_for("session.updated", 1).await;

    // Turn 0: one second of audio as data, committed; the script says what was heard.
    let pcm = vec![0u8; 48_000]; // 1 s of PCM16 at 24 kHz
    let audio = base64::engine::general_purpose::STANDARD.encode(&pcm);
    c.send_event(json!({"type": "input_audio_buffer.append", "audio": audio}))
        .await;
    c.send_event(json!({"type": "input_audio_buffer.commit", "event_id": "commit"}))
        .await;
    c.wait_for("conversation.item.input_audio_transcription.completed", 1)
        .await;
    c.send_event(json!({"type": "response.create", "event_id": "r0"}))
        .await;
    c.wait_for("response.function_call_arguments.done", 1).await;
    c.wait_for("response.done", 1).await;
    let call_id = {
        let events = c.events.lock().await;
        let done = events
            .iter()
            .map(|e| serde_json::from_str::<Value>(e).unwrap())
            .find(|e| e["type"] == "response.function_call_arguments.done")
            .unwrap();
        done["call_id"].as_str().unwrap().to_owned()
    };

    // Turn 1: the app answers the call; the model speaks the output.
    c.send_event(
        json!({"type": "conversation.item.create", "event_id": "output",
        "item": {"type": "function_call_output", "call_id": call_id,
                 "output": "{\"temperature_c\":21,\"conditions\":\"sunny\"}"}}),
    )
    .await;
    c.send_event(json!({"type": "response.create", "event_id": "r1"}))
        .await;
    c.wait_for("response.done", 2).await;

    // Turns 2-4 by text: a failure, a cut-short answer, the fallback.
    for (n, text) in ["Say that again", "The long forecast, please", "Thanks"]
        .iter()
        .enumerate()
    {
        c.send_event(
            json!({"type": "conversation.item.create", "event_id": format!("msg{}", n + 2),
            "item": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": text}]}}),
        )
        .await;
        c.send_event(json!({"type": "response.create", "event_id": format!("r{}", n + 2)}))
            .await;
        c.wait_for("response.done", n + 3).await;
    }
    // Audio came back: the spoken responses are real RTP.
    let mut audio_packets = 0;
    while c.rtp_rx.try_recv().is_ok() {
        audio_packets += 1;
    }
    assert!(
        audio_packets > 50,
        "only {audio_packets} audio packets back"
    );

    let r = c.hangup(h).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let log_response = http_get(h, &format!("/v1/realtime/calls/{id}/events")).await;
    assert_eq!(log_response.status, 200, "{}", log_response.body);
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = std::fs::write(
        target.join("scripted-conversation.jsonl"),
        &log_response.body,
    );
    let log: Vec<Value> = log_response
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let server: Vec<&Value> = log
        .iter()
        .filter(|l| l["dir"] == "server")
        .map(|l| &l["event"])
        .collect();

    // The transcript of turn 0: a delta per word, then completed with the script's words.
    let words: Vec<&str> = server
        .iter()
        .filter(|e| e["type"] == "conversation.item.input_audio_transcription.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(words, ["What's", " the", " weather", " in", " Paris?"]);
    let completed = server
        .iter()
        .find(|e| e["type"] == "conversation.item.input_audio_transcription.completed")
        .unwrap();
    assert_eq!(completed["transcript"], "What's the weather in Paris?");

    // Response 0: spoken, then the tool call at output index 1, then done.
    let mut expected: Vec<&str> = MESSAGE_START.to_vec();
    expected.extend([
        "output_audio_buffer.started",
        "response.output_audio_transcript.delta",
    ]);
    expected.extend(&SPOKEN_MESSAGE_END[..5]);
    expected.extend([
        "response.output_item.added",
        "conversation.item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "output_audio_buffer.stopped",
    ]);
    let mut got = response_types(server.iter().copied(), 0);
    got.push("output_audio_buffer.stopped".into());
    assert_eq!(got, expected);
    let r0 = response_done(&server, 0);
    assert_eq!(r0["status"], "completed");
    assert_eq!(
        r0["output"][0]["content"][0]["transcript"],
        "Let me check the weather in Paris."
    );
    assert_eq!(r0["output"][1]["type"], "function_call");
    assert_eq!(r0["output"][1]["name"], "get_weather");
    assert_eq!(
        r0["output"][1]["arguments"],
        r#"{"city":"Paris","unit":"celsius"}"#
    );

    // Response 1: the tool's output, spoken.
    let r1 = response_done(&server, 1);
    assert_eq!(r1["status"], "completed");
    assert_eq!(
        r1["output"][0]["content"][0]["transcript"],
        r#"Here is the weather in Paris: {"temperature_c":21,"conditions":"sunny"}"#
    );

    // Response 2: failed, after an error event naming a server_error.
    let mut expected: Vec<&str> = MESSAGE_START[..2].to_vec();
    expected.extend(["error", "response.done"]);
    assert_eq!(response_types(server.iter().copied(), 2), expected);
    let r2 = response_done(&server, 2);
    assert_eq!(r2["status"], "failed");
    assert_eq!(r2["status_details"]["error"]["type"], "server_error");

    // Response 3: spoken, then cut short.
    let r3 = response_done(&server, 3);
    assert_eq!(r3["status"], "incomplete");
    assert_eq!(r3["status_details"]["reason"], "max_output_tokens");
    assert_eq!(r3["output"][0]["status"], "incomplete");

    // Response 4: the fallback.
    let r4 = response_done(&server, 4);
    assert_eq!(
        r4["output"][0]["content"][0]["transcript"],
        "That is all I know about the weather."
    );
    assert_eq!(
        server
            .iter()
            .filter(|e| e["type"] == "response.done")
            .count(),
        5
    );
    // Every client event is in the log, in the order sent.
    let client_ids: Vec<&str> = log
        .iter()
        .filter(|l| l["dir"] == "client")
        .filter_map(|l| l["event"]["event_id"].as_str())
        .collect();
    assert_eq!(
        client_ids,
        [
            "setup", "commit", "r0", "output", "r1", "msg2", "r2", "msg3", "r3", "msg4", "r4"
        ]
    );
    running.shutdown().await;
}
