//! The `oai-events` data channel: every text message a client sends becomes a client event in
//! [`Conversation::on_client_text`], which parses, validates and applies it (`session.update`
//! included), on the transceiver's socket loop.
//!
//! Input is one message per line, as the transport would hand them over one by one (JSON text
//! never holds a raw newline, so a line is a whole message). A line starting with `#` is not a
//! message but what the media side reports between messages, so responses can be in flight, cut
//! short or finished when the next message arrives:
//!
//! ```text
//! #speech_started <ms>   #speech_stopped <ms>   #input <ms>   #idle <start_ms> <end_ms>
//! #progress <ms>         #length <ms>           #done         (of the last response spoken)
//! ```
//!
//! Invariants, from the engine's own contract: every server frame is a JSON object with a
//! `type` and a fresh `event_id`; a refused event yields exactly one `error`, echoing the
//! client's `event_id`, and changes neither the session, the items nor the active response;
//! `session.updated` carries the effective config; responses open and close one at a time, each
//! `response.created` answered by one `response.done`; an echoed span never ends before it starts.

use serde_json::Value;

use crate::model::Reply;
use crate::realtime::{Action, Conversation};

/// What a refused event must leave as it was.
#[derive(PartialEq, Debug)]
struct Snapshot {
    config: crate::realtime::SessionConfig,
    items: Vec<(String, Value)>,
    active: Option<String>,
}

fn snapshot(conv: &Conversation) -> Snapshot {
    Snapshot {
        config: conv.config().clone(),
        items: conv
            .item_ids()
            .into_iter()
            .map(|id| (id.to_owned(), conv.item(id).cloned().unwrap_or_default()))
            .collect(),
        active: conv.active_response().map(str::to_owned),
    }
}

#[derive(Default)]
struct Checker {
    last_event: u64,
    open_response: Option<String>,
    last_spoken: Option<String>,
}

impl Checker {
    /// Drains and checks what the engine queued; returns the frames as JSON.
    fn drain(&mut self, conv: &mut Conversation) -> (Vec<Value>, usize) {
        let mut frames = Vec::new();
        while let Some(text) = conv.poll_frame() {
            let v: Value = serde_json::from_str(&text).expect("server frames are JSON");
            let kind = v["type"].as_str().expect("every frame has a type");
            let n: u64 = v["event_id"]
                .as_str()
                .and_then(|id| id.strip_prefix("event_"))
                .and_then(|n| n.parse().ok())
                .expect("every frame has an event_id");
            assert!(n > self.last_event, "event_id reused");
            self.last_event = n;
            let response_id = || v["response"]["id"].as_str().map(str::to_owned);
            match kind {
                "response.created" => {
                    assert_eq!(self.open_response, None, "two responses at once");
                    self.open_response = Some(response_id().expect("response.created has an id"));
                }
                "response.done" => {
                    assert_eq!(
                        self.open_response.take(),
                        response_id(),
                        "response.done for a response that is not open"
                    );
                }
                "session.updated" => assert_eq!(v["session"], conv.session_object()),
                _ => {}
            }
            frames.push(v);
        }
        let mut actions = 0;
        while let Some(a) = conv.poll_action() {
            if let Action::Speak {
                response_id, reply, ..
            } = a
            {
                // Release builds wrap instead of panicking on underflow; a backwards span is
                // how such a bug shows there (and in the stable corpus replay).
                if let Reply::EchoInput {
                    audio_start_ms,
                    audio_end_ms,
                    ..
                } = reply
                {
                    assert!(
                        audio_start_ms <= audio_end_ms,
                        "an echo of a backwards span"
                    );
                }
                self.last_spoken = Some(response_id);
            }
            actions += 1;
        }
        (frames, actions)
    }
}

pub fn client_events(data: &[u8]) {
    let mut conv = Conversation::new("sess_fuzz".to_owned(), &crate::model::ModelKind::Echo);
    let mut check = Checker::default();
    conv.on_channel_open();
    let (opened, _) = check.drain(&mut conv);
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["type"], "session.created");

    for line in data.split(|&b| b == b'\n') {
        if let Some(media) = line.strip_prefix(b"#") {
            media_event(&mut conv, &check, media);
            check.drain(&mut conv);
            continue;
        }
        let before = snapshot(&conv);
        // As the transport does it: lossy, so invalid UTF-8 still gets an answer.
        let text = String::from_utf8_lossy(line);
        conv.on_client_text(&text);
        let (frames, actions) = check.drain(&mut conv);
        if let Some(err) = frames.iter().find(|f| f["type"] == "error") {
            assert_eq!(
                frames.len(),
                1,
                "a refused event emitted more than its error"
            );
            assert_eq!(actions, 0, "a refused event acted");
            assert_eq!(snapshot(&conv), before, "a refused event changed state");
            let sent_id = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["event_id"].as_str().map(str::to_owned));
            if let Some(id) = sent_id {
                assert_eq!(
                    err["error"]["event_id"],
                    id.as_str(),
                    "error must echo event_id"
                );
            }
        }
        // The transport reconfigures the media side from these after every message.
        let _ = (conv.turn_detection(), conv.voice(), conv.model_kind());
        assert!(conv.item_ids().len() <= crate::realtime::MAX_ITEMS);
    }
}

/// Feeds the engine what the media side would report; numbers that do not parse read as 0.
fn media_event(conv: &mut Conversation, check: &Checker, line: &[u8]) {
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or("");
    let mut num = || {
        words
            .next()
            .and_then(|w| w.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let spoken = check.last_spoken.clone().unwrap_or_default();
    match verb {
        "speech_started" => conv.on_speech_started(num()),
        "speech_stopped" => conv.on_speech_stopped(num()),
        "input" => conv.on_input_audio(num()),
        "idle" => {
            let (start, end) = (num(), num());
            conv.on_idle_timeout(start, end)
        }
        "progress" => conv.on_audio_progress(&spoken, num()),
        "length" => conv.on_audio_length(&spoken, num()),
        "done" => conv.on_audio_done(&spoken),
        _ => {}
    }
}
