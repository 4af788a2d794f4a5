//! The Live engine in virtual time: the media side's VAD edges and playback progress are fed
//! by hand, the session clock is set with `tick`, and every frame is checked to be a Live
//! server event with a unique `event_id`.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::*;
use crate::live::config::check_start;
use crate::realtime::Transport;

/// The server event types of `ServerEvent` in the `openai` package's `resources/live/live.ts`.
const LIVE_SERVER_EVENTS: &[&str] = &[
    "session.started",
    "session.updated",
    "session.input_audio.muted",
    "session.input_audio.unmuted",
    "session.output_audio.fixture.playing",
    "session.output_audio.fixture.played",
    "session.instructions.appended",
    "session.thinking.appended",
    "session.commentary.appended",
    "session.input_audio.append",
    "session.output_audio.delta",
    "session.input_transcript.delta",
    "session.output_transcript.delta",
    "session.delegation.created",
    "decision.event",
    "decision.item.created",
    "decision.item.deleted",
    "response.event",
    "session.usage.updated",
    "session.closed",
    "error",
    "info",
];

struct Harness {
    s: LiveSession,
    seen: HashSet<String>,
}

impl Harness {
    fn open(model: &str, session: Value) -> Harness {
        let start = check_start(&session, Transport::WebRtc).expect("a valid config");
        let kind = ModelKind::parse(model).unwrap().unwrap();
        let mut h = Harness {
            s: LiveSession::new(
                "live_test".into(),
                &kind,
                start,
                1_900_000_000,
                Transport::WebRtc,
            ),
            seen: HashSet::new(),
        };
        h.s.on_channel_open();
        h
    }

    fn frames(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(text) = self.s.poll_frame() {
            let v: Value = serde_json::from_str(&text).unwrap();
            let kind = v["type"].as_str().unwrap();
            assert!(LIVE_SERVER_EVENTS.contains(&kind), "not a Live event: {v}");
            let id = v["event_id"].as_str().unwrap().to_owned();
            assert!(self.seen.insert(id), "duplicate event_id: {v}");
            out.push(v);
        }
        out
    }

    fn actions(&mut self) -> Vec<Action> {
        std::iter::from_fn(|| self.s.poll_action()).collect()
    }

    fn send(&mut self, event: Value) {
        self.s
            .on_client_text(&event.to_string(), EventSource::DataChannel);
    }

    /// A spoken turn from `start` to `end` (input ms); returns the frames and the reply's
    /// response id if it speaks.
    fn turn(&mut self, start: u64, end: u64) -> (Vec<Value>, Option<String>) {
        self.s.conversation_mut().on_speech_started(start);
        self.s.conversation_mut().on_speech_stopped(end);
        let frames = self.frames();
        let speak = self.actions().into_iter().find_map(|a| match a {
            Action::Speak { response_id, .. } => Some(response_id),
            _ => None,
        });
        (frames, speak)
    }

    /// Plays a response to its end, a word's worth at a time.
    fn play_out(&mut self, response_id: &str, until_ms: u64) -> Vec<Value> {
        let mut frames = Vec::new();
        for played in (0..=until_ms).step_by(200) {
            self.s.tick(10_000 + played);
            self.s
                .conversation_mut()
                .on_audio_progress(response_id, played);
            frames.extend(self.frames());
        }
        self.s.conversation_mut().on_audio_done(response_id);
        frames.extend(self.frames());
        frames
    }

    fn say_from_actions(&mut self) -> Option<String> {
        self.actions().into_iter().find_map(|a| match a {
            Action::Speak { response_id, .. } => Some(response_id),
            _ => None,
        })
    }
}

fn types(frames: &[Value]) -> Vec<&str> {
    frames.iter().map(|f| f["type"].as_str().unwrap()).collect()
}

fn of_type<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == kind).collect()
}

fn text_of(frames: &[Value], kind: &str) -> String {
    of_type(frames, kind)
        .iter()
        .map(|f| f["delta"].as_str().unwrap())
        .collect()
}

#[test]
fn session_started_comes_first_with_the_resource() {
    let mut h = Harness::open(
        "echo",
        json!({"model": "echo", "instructions": "Be brief."}),
    );
    let f = h.frames();
    assert_eq!(types(&f), ["session.started"]);
    let s = &f[0]["session"];
    assert_eq!(s["id"], "live_test");
    assert_eq!(s["status"], "active");
    assert_eq!(s["model"], "echo");
    assert_eq!(s["instructions"], "Be brief.");
    assert_eq!(s["audio"]["output"]["voice"], "marin");
    assert_eq!(s["expires_at"], 1_900_000_000);
}

#[test]
fn the_sessions_voice_reaches_the_engine_that_speaks() {
    let mut h = Harness::open(
        "echo",
        json!({"model": "gpt-live-1", "audio": {"output": {"voice": "cedar"}}}),
    );
    assert_eq!(h.s.conversation_mut().voice(), "cedar");
    // Live's default voice, not Realtime's.
    let mut plain = Harness::open("echo", json!({"model": "gpt-live-1"}));
    assert_eq!(plain.s.conversation_mut().voice(), "marin");
}

#[test]
fn the_model_owns_the_turn_and_transcripts_are_timed_deltas() {
    let mut h = Harness::open("echo", json!({"model": "gpt-live-1"}));
    h.frames();
    let (frames, speak) = h.turn(1000, 3000);
    // The stub has no recognizer: its note, one delta per word, spread over the turn.
    let input = of_type(&frames, "session.input_transcript.delta");
    assert_eq!(
        text_of(&frames, "session.input_transcript.delta"),
        "[speech, 2.0 s]"
    );
    assert_eq!(input.len(), 3);
    assert_eq!(input[0]["start_ms"], 1000);
    assert_eq!(input[2]["end_ms"], 3000);
    assert!(input.windows(2).all(|w| w[0]["end_ms"] == w[1]["start_ms"]));
    // Nothing of Realtime's turn machinery leaks out.
    assert!(
        !types(&frames)
            .iter()
            .any(|t| t.starts_with("response.") || t.starts_with("input_audio"))
    );
    let rid = speak.expect("echo answers without being asked");
    let out = h.play_out(&rid, 2000);
    assert_eq!(
        text_of(&out, "session.output_transcript.delta"),
        "Echoing your 2.0 second turn."
    );
    let first = of_type(&out, "session.output_transcript.delta")[0];
    assert!(first["end_ms"].as_u64() > first["start_ms"].as_u64());
    let usage = of_type(&out, "session.usage.updated");
    assert_eq!(usage.len(), 1);
    assert!(usage[0]["usage"]["seconds"].as_f64().unwrap() > 10.0);
}

#[test]
fn talking_over_the_model_stops_its_audio() {
    let mut h = Harness::open("echo", json!({"model": "gpt-live-1"}));
    let (_, speak) = h.turn(1000, 3000);
    let rid = speak.unwrap();
    h.s.conversation_mut().on_audio_progress(&rid, 400);
    h.frames();
    h.s.conversation_mut().on_speech_started(3600);
    assert!(
        h.actions()
            .contains(&Action::StopAudio { response_id: rid })
    );
    // No Realtime truncation events reach a Live client.
    let f = h.frames();
    assert!(f.iter().all(|e| e["type"] != "error"), "{f:?}");
}

#[test]
fn acknowledgements_echo_the_client_event_id() {
    let mut h = Harness::open("echo", json!({"model": "gpt-live-1"}));
    h.frames();
    h.send(json!({"type": "session.input_audio.mute", "event_id": "m1"}));
    assert!(h.s.input_muted());
    h.send(json!({"type": "session.input_audio.unmute", "event_id": "m2"}));
    assert!(!h.s.input_muted());
    h.s.tick(1234);
    h.send(json!({"type": "session.instructions.append", "content": "Speak French.", "delegation_id": null, "event_id": "i1"}));
    h.send(json!({"type": "session.thinking.append", "content": "The user is in a hurry.", "delegation_id": null}));
    let f = h.frames();
    assert_eq!(
        types(&f),
        [
            "session.input_audio.muted",
            "session.input_audio.unmuted",
            "session.instructions.appended",
            "session.thinking.appended"
        ]
    );
    assert_eq!(f[0]["client_event_id"], "m1");
    assert_eq!(f[2]["client_event_id"], "i1");
    assert_eq!(f[2]["start_ms"], 1234);
    assert!(f[3].get("client_event_id").is_none());
}

#[test]
fn commentary_is_spoken_verbatim_by_the_stubs() {
    for model in ["echo", "tts"] {
        let mut h = Harness::open(model, json!({"model": "gpt-live-1"}));
        h.frames();
        h.send(json!({"type": "session.commentary.append", "content": "Your order has shipped.", "delegation_id": null}));
        let f = h.frames();
        assert_eq!(types(&f), ["session.commentary.appended"]);
        let rid = h.say_from_actions().expect("commentary is spoken");
        let out = h.play_out(&rid, 1600);
        assert_eq!(
            text_of(&out, "session.output_transcript.delta"),
            "Your order has shipped.",
            "{model}"
        );
    }
}

#[test]
fn bad_events_get_live_errors() {
    let mut h = Harness::open("echo", json!({"model": "gpt-live-1"}));
    h.frames();
    let cases = [
        (
            json!({"type": "session.commentary.append", "content": "x", "event_id": "c1"}),
            "missing_required_parameter",
        ),
        (
            json!({"type": "session.commentary.append", "content": "x", "delegation_id": "del_9"}),
            "invalid_value",
        ),
        (
            json!({"type": "input_audio_buffer.commit"}),
            "invalid_value",
        ),
        (json!({"type": "response.create"}), "delegation_required"),
        (
            json!({"type": "session.start", "session": {"model": "m"}}),
            "session_already_started",
        ),
        (
            json!({"type": "session.input_audio.append", "audio": ""}),
            "invalid_transport",
        ),
        (
            json!({"type": "session.update", "session": {"instructions": "x"}}),
            "immutable_parameter",
        ),
        (
            json!({"type": "decision.create", "event_id": "d"}),
            "unsupported_event",
        ),
    ];
    for (event, code) in cases {
        let id = event["event_id"].clone();
        h.send(event.clone());
        let f = h.frames();
        assert_eq!(types(&f), ["error"], "{event}");
        assert_eq!(f[0]["error"]["code"], code, "{event}");
        assert_eq!(f[0]["error"]["type"], "invalid_request_error");
        if !id.is_null() {
            assert_eq!(f[0]["client_event_id"], id);
            assert_eq!(f[0]["error"]["client_event_id"], id);
        }
    }
    h.s.on_client_text("{not json", EventSource::DataChannel);
    assert_eq!(h.frames()[0]["error"]["code"], "invalid_json");
}

#[test]
fn session_close_reports_and_ends_the_call() {
    let mut h = Harness::open("echo", json!({"model": "gpt-live-1"}));
    h.frames();
    h.s.tick(4500);
    h.send(json!({"type": "session.close", "event_id": "bye"}));
    let f = h.frames();
    assert_eq!(types(&f), ["session.closed"]);
    assert_eq!(f[0]["reason"], "close_requested");
    assert_eq!(f[0]["client_event_id"], "bye");
    assert_eq!(f[0]["usage"]["seconds"], 4.5);
    assert_eq!(f[0]["session"]["id"], "live_test");
    assert!(h.actions().contains(&Action::EndCall));
    // Closed means closed.
    h.send(json!({"type": "session.input_audio.mute"}));
    assert_eq!(h.frames()[0]["error"]["code"], "session_closed");
}

#[test]
fn expiry_closes_with_reason_expired() {
    let mut h = Harness::open("echo", json!({"model": "gpt-live-1"}));
    h.frames();
    h.s.expire();
    let f = h.frames();
    assert_eq!(f[0]["type"], "session.closed");
    assert_eq!(f[0]["reason"], "expired");
    assert!(h.actions().contains(&Action::EndCall));
}

#[test]
fn a_scripted_turn_delegates_to_the_client_and_speaks_its_commentary() {
    let mut h = Harness::open(
        "script:weather",
        json!({"model": "script:weather", "delegation": {"type": "client"}}),
    );
    h.frames();
    let (frames, speak) = h.turn(1000, 2800);
    assert_eq!(
        text_of(&frames, "session.input_transcript.delta"),
        "What's the weather in Paris?"
    );
    let rid = speak.unwrap();
    h.s.tick(9000);
    let out = h.play_out(&rid, 1600);
    assert_eq!(
        text_of(&out, "session.output_transcript.delta"),
        "Let me check the weather in Paris."
    );
    let created = of_type(&out, "session.delegation.created");
    assert_eq!(created.len(), 1);
    let d = &created[0]["delegation"];
    assert_eq!(d["target"], "client");
    assert_eq!(d["type"], "delegation");
    assert!(d.get("response_id").is_none());
    assert!(created[0]["offset_ms"].as_u64().unwrap() >= 9000);
    let del_id = d["id"].as_str().unwrap().to_owned();
    // acknowledgement_delay_ms defaults to 0: the model acknowledges at once.
    let ack = h.say_from_actions().expect("an acknowledgement");
    let out = h.play_out(&ack, 400);
    assert_eq!(
        text_of(&out, "session.output_transcript.delta"),
        ACKNOWLEDGEMENT
    );
    // The app's result, for that delegation: the script's tool_output turn says it.
    h.send(json!({"type": "session.commentary.append", "content": "18 C and sunny", "delegation_id": del_id}));
    assert_eq!(types(&h.frames()), ["session.commentary.appended"]);
    let rid = h.say_from_actions().expect("the result is spoken");
    let out = h.play_out(&rid, 3000);
    assert_eq!(
        text_of(&out, "session.output_transcript.delta"),
        "Here is the weather in Paris: 18 C and sunny"
    );
}

#[test]
fn commentary_within_the_acknowledgement_delay_replaces_it() {
    let mut h = Harness::open(
        "script:weather",
        json!({"model": "script:weather", "delegation": {"type": "client", "acknowledgement_delay_ms": 500}}),
    );
    let (_, speak) = h.turn(1000, 2800);
    let out = h.play_out(&speak.unwrap(), 1600);
    let del_id = of_type(&out, "session.delegation.created")[0]["delegation"]["id"].clone();
    assert!(
        h.actions().is_empty(),
        "no acknowledgement before the delay"
    );
    assert!(h.s.poll_timeout().is_some());
    h.send(json!({"type": "session.thinking.append", "content": "Looking it up.", "delegation_id": del_id}));
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "thinking cancels the pending acknowledgement"
    );
    h.s.tick(60_000);
    h.s.on_timeout();
    assert!(h.actions().is_empty());
}

fn responses_session(model: &str) -> Harness {
    Harness::open(
        model,
        json!({"model": "gpt-live-1", "delegation": {"type": "responses", "responses": {
            "model": "gpt-5-mini",
            "tools": [{"type": "function", "name": "get_weather",
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]}}}),
    )
}

fn nested_types(frames: &[Value]) -> Vec<&str> {
    of_type(frames, "response.event")
        .iter()
        .map(|e| e["event"]["type"].as_str().unwrap())
        .collect()
}

#[test]
fn a_spoken_turn_delegates_to_the_responses_backend() {
    let mut h = responses_session("script:weather");
    h.frames();
    let (_, speak) = h.turn(1000, 2800);
    let out = h.play_out(&speak.unwrap(), 1600);
    let created = of_type(&out, "session.delegation.created");
    assert_eq!(created.len(), 1, "{out:?}");
    let d = created[0]["delegation"].clone();
    assert_eq!(d["target"], "responses");
    let response_id = d["response_id"].as_str().unwrap();
    assert_eq!(
        nested_types(&out),
        [
            "response.created",
            "response.output_item.added",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let wrapped = of_type(&out, "response.event");
    assert!(wrapped.iter().all(|e| e["delegation_id"] == d["id"]));
    assert_eq!(wrapped[0]["event"]["response"]["id"], response_id);
    assert_eq!(wrapped[0]["event"]["response"]["model"], "gpt-5-mini");
    let call = &wrapped[3]["event"]["item"];
    assert_eq!(call["name"], "get_weather");
    let call_id = call["call_id"].as_str().unwrap().to_owned();
    // Delegation ids are for client delegation only.
    h.send(json!({"type": "session.commentary.append", "content": "x", "delegation_id": d["id"]}));
    assert_eq!(h.frames()[0]["error"]["param"], "delegation_id");
    // The acknowledgement plays; the app returns the tool's result and the backend goes on.
    let ack = h.say_from_actions().unwrap();
    h.play_out(&ack, 400);
    h.send(json!({"type": "response.item.create", "item": {"type": "function_call_output", "call_id": call_id, "output": "18 C"}}));
    h.send(json!({"type": "response.create", "event_id": "r2"}));
    let mut out = h.frames();
    let rid = h
        .say_from_actions()
        .expect("the backend's answer is spoken");
    out.extend(h.play_out(&rid, 3000));
    let spoken = text_of(&out, "session.output_transcript.delta");
    assert_eq!(spoken, "Here is the weather in Paris: 18 C");
    let wrapped = of_type(&out, "response.event");
    assert!(
        wrapped
            .iter()
            .all(|e| e["delegation_id"] == d["id"] && e["client_event_id"] == "r2")
    );
    let nested = nested_types(&out);
    assert_eq!(nested.first(), Some(&"response.created"));
    assert_eq!(nested.last(), Some(&"response.completed"));
    let last = &wrapped.last().unwrap()["event"];
    assert_eq!(last["response"]["output"][0]["content"][0]["text"], spoken);
}

#[test]
fn the_app_can_ask_the_backend_and_it_calls_tools() {
    let mut h = responses_session("tts");
    h.frames();
    // A user message naming the tool: the stub's backend calls it within this response.
    h.send(json!({"type": "response.item.create", "item": {"role": "user", "content": "get_weather for Paris"}}));
    h.send(json!({"type": "response.create", "event_id": "r1"}));
    let f = h.frames();
    assert!(
        of_type(&f, "session.delegation.created").is_empty(),
        "the app asked: not a delegation"
    );
    assert_eq!(
        nested_types(&f),
        [
            "response.created",
            "response.output_item.added",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let wrapped = of_type(&f, "response.event");
    assert!(
        wrapped
            .iter()
            .all(|e| e["client_event_id"] == "r1" && e["delegation_id"].is_null())
    );
    assert_eq!(
        wrapped[4]["event"]["response"]["output"][0]["type"],
        "function_call"
    );
    // A second response.create while one runs is refused.
    let call_id = wrapped[3]["event"]["item"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    h.send(json!({"type": "response.item.create", "item": {"type": "function_call_output", "call_id": call_id, "output": "{\"temp\":18}"}}));
    h.send(json!({"type": "response.create"}));
    assert!(h.frames().iter().all(|e| e["type"] != "error"));
    h.send(json!({"type": "response.create", "event_id": "again"}));
    let f = h.frames();
    assert_eq!(
        of_type(&f, "error")[0]["error"]["code"],
        "response_in_progress"
    );
    let rid = h.say_from_actions().unwrap();
    let out = h.play_out(&rid, 3000);
    let spoken = text_of(&out, "session.output_transcript.delta");
    assert!(
        spoken.contains("get_weather") && spoken.contains("18"),
        "{spoken}"
    );
}

#[test]
fn data_channel_permissions_are_enforced_for_the_frontend_only() {
    let mut h = Harness::open(
        "echo",
        json!({"model": "gpt-live-1", "client": {"data_channel": {
            "allowed_client_events": ["session.close"],
            "allowed_server_events": [{"type": "session.started"}, {"type": "session.output_transcript.delta"}]}}}),
    );
    let f = h.frames();
    assert_eq!(types(&f), ["session.started", "info"]);
    assert_eq!(f[1]["code"], "data_channel_permissions");
    h.send(json!({"type": "session.input_audio.mute"}));
    let refused = h.frames();
    assert_eq!(refused[0]["error"]["code"], "event_not_permitted");
    assert!(!h.s.data_channel_receives(&refused[0].to_string()));
    assert!(h.s.data_channel_receives(&f[0].to_string()));
    // A sideband is trusted.
    h.s.on_client_text(
        r#"{"type":"session.input_audio.mute"}"#,
        EventSource::Sideband,
    );
    assert_eq!(types(&h.frames()), ["session.input_audio.muted"]);
}

#[test]
fn startup_history_ending_with_the_user_is_answered() {
    let mut h = Harness::open(
        "tts",
        json!({"model": "gpt-live-1", "input": [
            {"role": "developer", "content": [{"text": "You are a bank."}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Hello there."}]}]}),
    );
    assert_eq!(types(&h.frames()), ["session.started"]);
    let rid = h
        .say_from_actions()
        .expect("the user's message is answered");
    let out = h.play_out(&rid, 1000);
    assert_eq!(
        text_of(&out, "session.output_transcript.delta"),
        "Hello there."
    );
}

#[test]
fn session_update_changes_delegation_and_reports_it() {
    let mut h = Harness::open("echo", json!({"model": "gpt-live-1"}));
    h.frames();
    h.send(json!({"type": "session.update", "event_id": "u1", "session": {"delegation": {"type": "client", "acknowledgement_delay_ms": 250}}}));
    let f = h.frames();
    assert_eq!(types(&f), ["session.updated"]);
    assert_eq!(f[0]["client_event_id"], "u1");
    assert_eq!(
        f[0]["session"]["delegation"]["acknowledgement_delay_ms"],
        250
    );
}
