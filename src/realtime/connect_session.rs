//! The session a call starts with, given before it connects: an ephemeral key's (minted with
//! `POST /v1/realtime/client_secrets`), then the call's own (the `session` part of a multipart
//! `POST /v1/realtime/calls`). On OpenAI such a session is in force from the first
//! `session.created`, and a bad one is refused before any media is set up; so here each layer
//! goes over the last with `session.update`'s rules, in signaling, where a refusal is still a
//! `400`, and the result travels to the transceiver as the call's starting config.

use serde_json::Value;

use super::{ClientError, Conversation};
use crate::model::ModelKind;

/// The effective session of a call that starts with `model` and these layers, in order (each
/// a `session` object as the client sent it), or the first layer's first refusal, its `param`
/// naming the field (`session.tools[0].name`). The first layer's `type` decides the session's
/// (`transcription`, else `realtime`); a later layer cannot change it.
pub fn check(model: &ModelKind, layers: &[&Value]) -> Result<Value, ClientError> {
    let mut conv = Conversation::new("sess_connect".into(), model);
    start(&mut conv, layers)?;
    Ok(conv.session_object())
}

/// Starts `conv` with these layers (see [`check`]): a transcription session first becomes one.
pub fn start(conv: &mut Conversation, layers: &[&Value]) -> Result<(), ClientError> {
    if is_transcription(layers) {
        conv.set_transcription_only();
    }
    for layer in layers {
        conv.start_session(layer)?;
    }
    Ok(())
}

/// Starts `conv` with the effective session signaling checked (what [`check`] returned). A
/// refusal here means the two ran different rules (a version skew across the control API): it
/// is logged under `id`, and the call keeps the defaults, the safe start.
pub fn start_checked(conv: &mut Conversation, session: &Value, id: &str) {
    if let Err(e) = start(conv, &[session]) {
        log::warn!("{id}: starting session refused ({}): {}", e.code, e.message);
    }
}

/// Whether these layers start a transcription session (the first layer's `type` says).
pub fn is_transcription(layers: &[&Value]) -> bool {
    layers.first().is_some_and(|l| l["type"] == "transcription")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn layers_merge_as_updates_and_a_bad_one_names_its_field() {
        let key = json!({"type": "realtime", "instructions": "be brief",
            "audio": {"output": {"voice": "marin"}}});
        let part = json!({"type": "realtime", "tools": [{"type": "function", "name": "get_weather",
            "parameters": {"type": "object"}}], "audio": {"input": {"turn_detection": null}}});
        let cfg = check(&ModelKind::Echo, &[&key, &part]).unwrap();
        assert_eq!(cfg["instructions"], "be brief");
        assert_eq!(cfg["audio"]["output"]["voice"], "marin");
        assert_eq!(cfg["tools"][0]["name"], "get_weather");
        assert!(cfg["audio"]["input"]["turn_detection"].is_null());
        assert_eq!(cfg["audio"]["input"]["format"]["type"], "audio/pcm");

        let typo = json!({"type": "realtime", "instructons": "x"});
        let e = check(&ModelKind::Echo, &[&typo]).unwrap_err();
        assert_eq!(e.code, "unknown_parameter");
        assert_eq!(e.param.as_deref(), Some("session.instructons"));
        let bad_tool = json!({"tools": [{"type": "function"}]});
        assert!(check(&ModelKind::Echo, &[&key, &bad_tool]).is_err());
    }

    #[test]
    fn a_transcription_key_starts_a_transcription_session_that_a_realtime_part_cannot_turn() {
        let key = json!({"type": "transcription",
            "audio": {"input": {"transcription": {"model": "gpt-4o-transcribe", "language": "en"}}}});
        let cfg = check(&ModelKind::Echo, &[&key]).unwrap();
        assert_eq!(cfg["type"], "transcription");
        assert_eq!(cfg["object"], "realtime.transcription_session");
        assert_eq!(cfg["audio"]["input"]["transcription"]["language"], "en");
        assert!(
            cfg.get("instructions").is_none(),
            "only a transcription session's fields"
        );
        let part = json!({"type": "realtime"});
        let e = check(&ModelKind::Echo, &[&key, &part]).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("session.type"));
    }
}
