//! The effective session object and the `session.update` rules.
//!
//! The config is kept as the JSON the client sees, because `session.created`/`session.updated`
//! must carry the *full effective* object and fields we do not act on (`prompt`, `reasoning`,
//! `turn_detection.model_version`, …) must survive a round trip. Typed views
//! ([`TurnDetection`], [`voice_name`]) are read from it on demand.
//!
//! What is kept is bounded: a key outside the session types is refused, as the service refuses
//! it (`unknown_parameter`), rather than stored for the life of the call, and the merged session
//! must fit the limits of [`super::session_limits`]. The one open object is `turn_detection`,
//! whose unknown keys the SDK passes through; the whole-session bound covers it.

use serde_json::{Map, Value, json};

use super::events::ClientError;
use super::session_limits::check_session;

/// The keys of a `session.update`'s session: `RealtimeSessionCreateRequest` in the `openai`
/// types (npm 7.59.0, `resources/realtime/realtime.d.ts`; the GA API). `@openai/agents-realtime`
/// 0.20.0 sends `type`, `model`, `instructions`, `output_modalities`, `audio`, `tool_choice`,
/// `tools`, `tracing`, and when configured `parallel_tool_calls`, `reasoning` and `prompt`.
const SESSION_KEYS: &[&str] = &[
    "type",
    "audio",
    "include",
    "instructions",
    "max_output_tokens",
    "model",
    "output_modalities",
    "parallel_tool_calls",
    "prompt",
    "reasoning",
    "tool_choice",
    "tools",
    "tracing",
    "truncation",
];

/// The server's fields of a session object (`RealtimeSessionCreateResponse`): accepted so that a
/// client may send back a session it was given, and ignored.
const SERVER_KEYS: &[&str] = &["id", "object", "expires_at"];

/// `RealtimeAudioConfig` and its `input`/`output`, the objects an update merges key by key.
const AUDIO_KEYS: &[&str] = &["input", "output"];
const AUDIO_INPUT_KEYS: &[&str] = &[
    "format",
    "noise_reduction",
    "transcription",
    "turn_detection",
];
const AUDIO_OUTPUT_KEYS: &[&str] = &["format", "speed", "voice"];

/// The turn-detection settings the media side's VAD should use.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnDetection {
    /// `"server_vad"` or `"semantic_vad"`.
    pub kind: String,
    pub threshold: f32,
    pub prefix_padding_ms: u32,
    pub silence_duration_ms: u32,
    pub create_response: bool,
    pub interrupt_response: bool,
    pub idle_timeout_ms: Option<u32>,
}

/// The real service's defaults (docs/realtime-protocol.md §5); no client package states the
/// `create_response`/`interrupt_response` defaults, so they are true, as the service is believed
/// to do.
fn server_vad_defaults() -> Value {
    json!({
        "type": "server_vad",
        "threshold": 0.5,
        "prefix_padding_ms": 300,
        "silence_duration_ms": 500,
        "create_response": true,
        "interrupt_response": true,
        "idle_timeout_ms": null
    })
}

fn semantic_vad_defaults() -> Value {
    json!({
        "type": "semantic_vad",
        "eagerness": "auto",
        "create_response": true,
        "interrupt_response": true
    })
}

pub(super) fn default_config(session_id: &str, model: &str) -> Value {
    json!({
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["audio"],
        "instructions": "",
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": null,
        "truncation": "auto",
        "prompt": null,
        "include": null,
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": null,
                "noise_reduction": null,
                "turn_detection": server_vad_defaults()
            },
            "output": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "voice": "alloy",
                "speed": 1.0
            }
        }
    })
}

/// Applies a `session.update` body and returns the new effective config, or an error and no
/// change at all (validation runs on the merged result before anything is committed).
///
/// Merge rules: the session, `audio`, `audio.input` and `audio.output` objects merge key by
/// key; every other value replaces (so `null` clears, `[]` empties `tools`, and a new `format`
/// does not inherit the old `rate`). `turn_detection` merges into the current settings when the
/// type is unchanged and starts from that type's defaults when it changes, so
/// `{type:"semantic_vad"}` becomes a complete semantic config. `id`, `object` and `expires_at`
/// are the server's and are ignored. A key outside the session types is refused. `voice_locked`
/// refuses a voice change once assistant audio exists, as the service documents.
pub(super) fn apply_update(
    current: &Value,
    update: &Value,
    voice_locked: bool,
) -> Result<Value, ClientError> {
    let Value::Object(update) = update else {
        return Err(ClientError::wrong_type("session", "an object"));
    };
    refuse_unknown_keys(update)?;
    let mut next = current.clone();
    let Value::Object(cfg) = &mut next else {
        unreachable!("the config is always an object");
    };
    for (key, value) in update {
        match key.as_str() {
            "id" | "object" | "expires_at" => {}
            "audio" => merge_audio(cfg, value)?,
            _ => {
                cfg.insert(key.clone(), value.clone());
            }
        }
    }
    validate(&next)?;
    if next["type"] != current["type"] {
        return Err(ClientError::invalid(
            "session.type",
            format!(
                "this connection's session is '{}'; its type cannot change",
                current["type"].as_str().unwrap_or("realtime")
            ),
        ));
    }
    check_session(&next)?;
    if voice_locked && current["audio"]["output"]["voice"] != next["audio"]["output"]["voice"] {
        return Err(ClientError::new(
            "cannot_update_voice",
            "Cannot update a conversation's voice if assistant audio is present.",
        )
        .param("session.audio.output.voice"));
    }
    Ok(next)
}

/// The service's answer to a key it does not know, for the first such key in `update`.
fn refuse_unknown_keys(update: &Map<String, Value>) -> Result<(), ClientError> {
    let unknown = |param: String| Err(ClientError::unknown_parameter(param));
    for key in update.keys() {
        if !SESSION_KEYS.contains(&key.as_str()) && !SERVER_KEYS.contains(&key.as_str()) {
            return unknown(format!("session.{key}"));
        }
    }
    // Wrong types here are left for the merge to name.
    let Some(Value::Object(audio)) = update.get("audio") else {
        return Ok(());
    };
    for (dir, fields) in audio {
        if !AUDIO_KEYS.contains(&dir.as_str()) {
            return unknown(format!("session.audio.{dir}"));
        }
        let known = if dir == "input" {
            AUDIO_INPUT_KEYS
        } else {
            AUDIO_OUTPUT_KEYS
        };
        if let Value::Object(fields) = fields
            && let Some(key) = fields.keys().find(|k| !known.contains(&k.as_str()))
        {
            return unknown(format!("session.audio.{dir}.{key}"));
        }
    }
    Ok(())
}

fn merge_audio(cfg: &mut Map<String, Value>, update: &Value) -> Result<(), ClientError> {
    let Value::Object(update) = update else {
        return Err(ClientError::wrong_type("session.audio", "an object"));
    };
    let audio = cfg
        .entry("audio")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("audio is an object");
    for (dir, value) in update {
        let Value::Object(fields) = value else {
            return Err(ClientError::wrong_type(
                &format!("session.audio.{dir}"),
                "an object",
            ));
        };
        let target = audio
            .entry(dir.clone())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| ClientError::wrong_type(&format!("session.audio.{dir}"), "an object"))?;
        for (key, v) in fields {
            if key == "turn_detection" && dir == "input" {
                let merged = merge_turn_detection(target.get(key), v);
                target.insert(key.clone(), merged);
            } else {
                target.insert(key.clone(), v.clone());
            }
        }
    }
    Ok(())
}

fn merge_turn_detection(current: Option<&Value>, update: &Value) -> Value {
    let Value::Object(fields) = update else {
        return update.clone();
    };
    let current_type = current.and_then(|c| c["type"].as_str());
    let new_type = fields.get("type").and_then(Value::as_str).or(current_type);
    let mut base = match (current, new_type) {
        (Some(c), Some(t)) if c.is_object() && current_type == Some(t) => c.clone(),
        (_, Some("semantic_vad")) => semantic_vad_defaults(),
        (_, Some("server_vad")) | (_, None) => server_vad_defaults(),
        // An unknown type: keep what was sent so validation can name it.
        (_, Some(_)) => json!({}),
    };
    let obj = base.as_object_mut().expect("turn detection is an object");
    for (k, v) in fields {
        obj.insert(k.clone(), v.clone());
    }
    base
}

fn validate(cfg: &Value) -> Result<(), ClientError> {
    if cfg["type"] != "realtime" && cfg["type"] != "transcription" {
        return Err(ClientError::invalid(
            "session.type",
            "a session is 'realtime' or 'transcription'",
        ));
    }
    if !cfg["model"].is_string() {
        return Err(ClientError::wrong_type("session.model", "a string"));
    }
    if !cfg["instructions"].is_string() {
        return Err(ClientError::wrong_type("session.instructions", "a string"));
    }
    validate_modalities(&cfg["output_modalities"], "session.output_modalities")?;
    let Some(tools) = cfg["tools"].as_array() else {
        return Err(ClientError::wrong_type("session.tools", "an array"));
    };
    if let Some(i) = tools.iter().position(|t| !t.is_object()) {
        return Err(ClientError::wrong_type(
            &format!("session.tools[{i}]"),
            "an object",
        ));
    }
    // A tool the model cannot name is no tool: refused as the service refuses it, rather than
    // accepted and never called.
    for (i, tool) in tools.iter().enumerate() {
        let field = |f: &str| format!("session.tools[{i}].{f}");
        match &tool["type"] {
            Value::Null => return Err(ClientError::missing(&field("type"))),
            Value::String(t) if t == "function" => {
                if tool["name"].is_null() {
                    return Err(ClientError::missing(&field("name")));
                }
                if !tool["name"].is_string() {
                    return Err(ClientError::wrong_type(&field("name"), "a string"));
                }
            }
            Value::String(_) => {}
            _ => return Err(ClientError::wrong_type(&field("type"), "a string")),
        }
    }
    if !matches!(cfg["parallel_tool_calls"], Value::Null | Value::Bool(_)) {
        return Err(ClientError::wrong_type(
            "session.parallel_tool_calls",
            "a boolean",
        ));
    }
    for key in ["prompt", "reasoning"] {
        if !matches!(cfg[key], Value::Null | Value::Object(_)) {
            return Err(ClientError::wrong_type(
                &format!("session.{key}"),
                "an object or null",
            ));
        }
    }
    match &cfg["truncation"] {
        Value::String(s) if s == "auto" || s == "disabled" => {}
        Value::Object(_) => {}
        other => return Err(ClientError::invalid("session.truncation", other)),
    }
    match &cfg["include"] {
        Value::Null => {}
        Value::Array(a) if a.iter().all(Value::is_string) => {}
        other => return Err(ClientError::invalid("session.include", other)),
    }
    match &cfg["tool_choice"] {
        Value::String(s) if ["auto", "none", "required"].contains(&s.as_str()) => {}
        Value::Object(_) => {}
        other => return Err(ClientError::invalid("session.tool_choice", other)),
    }
    validate_max_tokens(&cfg["max_output_tokens"], "session.max_output_tokens")?;
    match &cfg["tracing"] {
        Value::Null | Value::Object(_) => {}
        Value::String(s) if s == "auto" => {}
        other => return Err(ClientError::invalid("session.tracing", other)),
    }
    let input = &cfg["audio"]["input"];
    let output = &cfg["audio"]["output"];
    validate_format(&input["format"], "session.audio.input.format")?;
    validate_format(&output["format"], "session.audio.output.format")?;
    match &input["transcription"] {
        Value::Null => {}
        Value::Object(t) => {
            if t.get("model").is_some_and(|m| !m.is_string()) {
                return Err(ClientError::wrong_type(
                    "session.audio.input.transcription.model",
                    "a string",
                ));
            }
        }
        _ => {
            return Err(ClientError::wrong_type(
                "session.audio.input.transcription",
                "an object or null",
            ));
        }
    }
    // The types make `type` optional (`{}` is a valid noise reduction); only a wrong one is
    // refused.
    match &input["noise_reduction"] {
        Value::Null => {}
        Value::Object(n)
            if matches!(n.get("type"), None | Some(Value::Null))
                || matches!(
                    n.get("type").and_then(Value::as_str),
                    Some("near_field" | "far_field")
                ) => {}
        other => {
            return Err(ClientError::invalid(
                "session.audio.input.noise_reduction",
                other,
            ));
        }
    }
    validate_turn_detection(&input["turn_detection"])?;
    match &output["voice"] {
        Value::String(s) if !s.is_empty() => {}
        Value::Object(v) if v.get("id").is_some_and(Value::is_string) => {}
        other => return Err(ClientError::invalid("session.audio.output.voice", other)),
    }
    match output["speed"].as_f64() {
        Some(s) if (0.25..=1.5).contains(&s) => {}
        _ => {
            return Err(ClientError::invalid(
                "session.audio.output.speed",
                format!("{} (must be between 0.25 and 1.5)", output["speed"]),
            ));
        }
    }
    Ok(())
}

/// Exactly one of `audio`/`text`: the service never produces both at once.
pub(super) fn validate_modalities(v: &Value, param: &str) -> Result<(), ClientError> {
    match v.as_array().map(Vec::as_slice) {
        Some([m]) if m == "audio" || m == "text" => Ok(()),
        _ => Err(ClientError::invalid(
            param,
            format!("{v} (expected [\"audio\"] or [\"text\"])"),
        )),
    }
}

pub(super) fn validate_max_tokens(v: &Value, param: &str) -> Result<(), ClientError> {
    match v {
        Value::String(s) if s == "inf" => Ok(()),
        Value::Number(n) if n.as_u64().is_some_and(|n| (1..=4096).contains(&n)) => Ok(()),
        other => Err(ClientError::invalid(
            param,
            format!("{other} (expected 1..4096 or \"inf\")"),
        )),
    }
}

/// The formats describe base64 audio in events, not RTP, but clients send them anyway.
fn validate_format(v: &Value, param: &str) -> Result<(), ClientError> {
    match v["type"].as_str() {
        Some("audio/pcm") => match &v["rate"] {
            Value::Null => Ok(()),
            r if r.as_u64() == Some(24000) => Ok(()),
            r => Err(ClientError::invalid(
                &format!("{param}.rate"),
                format!("{r} (only 24000 is supported)"),
            )),
        },
        Some("audio/pcmu" | "audio/pcma") => Ok(()),
        _ => Err(ClientError::invalid(param, v)),
    }
}

fn validate_turn_detection(td: &Value) -> Result<(), ClientError> {
    const P: &str = "session.audio.input.turn_detection";
    let Value::Object(fields) = td else {
        return if td.is_null() {
            Ok(())
        } else {
            Err(ClientError::wrong_type(P, "an object or null"))
        };
    };
    let kind = fields.get("type").and_then(Value::as_str);
    if !matches!(kind, Some("server_vad" | "semantic_vad")) {
        return Err(ClientError::invalid(
            &format!("{P}.type"),
            format!(
                "{} (expected 'server_vad' or 'semantic_vad')",
                fields.get("type").unwrap_or(&Value::Null)
            ),
        ));
    }
    for key in ["create_response", "interrupt_response"] {
        if fields.get(key).is_some_and(|v| !v.is_boolean()) {
            return Err(ClientError::wrong_type(&format!("{P}.{key}"), "a boolean"));
        }
    }
    if let Some(t) = fields.get("threshold")
        && t.as_f64().is_none_or(|t| !(0.0..=1.0).contains(&t))
    {
        return Err(ClientError::invalid(&format!("{P}.threshold"), t));
    }
    for key in ["prefix_padding_ms", "silence_duration_ms"] {
        if let Some(v) = fields.get(key)
            && v.as_u64().is_none_or(|ms| ms > 10_000)
        {
            return Err(ClientError::invalid(&format!("{P}.{key}"), v));
        }
    }
    if let Some(v) = fields.get("idle_timeout_ms")
        && !v.is_null()
        && v.as_u64()
            .is_none_or(|ms| ms == 0 || ms > u64::from(u32::MAX))
    {
        return Err(ClientError::invalid(&format!("{P}.idle_timeout_ms"), v));
    }
    if let Some(v) = fields.get("eagerness")
        && !matches!(v.as_str(), Some("low" | "medium" | "high" | "auto"))
    {
        return Err(ClientError::invalid(&format!("{P}.eagerness"), v));
    }
    Ok(())
}

/// Reads the effective turn detection. `semantic_vad` is served by the same energy VAD, with
/// its eagerness mapped to a silence wait (high 300 ms, medium/auto 500 ms, low 1000 ms): the
/// real semantic model ends turns by meaning within 2/4/8 s caps that a VAD cannot reproduce,
/// so the mapping keeps the ordering of eagerness levels and the server_vad default feel.
pub(super) fn turn_detection(cfg: &Value) -> Option<TurnDetection> {
    let td = cfg["audio"]["input"]["turn_detection"].as_object()?;
    let kind = td.get("type")?.as_str()?.to_owned();
    let num = |k: &str, d: u64| td.get(k).and_then(Value::as_u64).unwrap_or(d) as u32;
    let flag = |k: &str| td.get(k).and_then(Value::as_bool).unwrap_or(true);
    let silence = if kind == "semantic_vad" {
        match td.get("eagerness").and_then(Value::as_str) {
            Some("high") => 300,
            Some("low") => 1000,
            _ => 500,
        }
    } else {
        num("silence_duration_ms", 500)
    };
    Some(TurnDetection {
        threshold: td.get("threshold").and_then(Value::as_f64).unwrap_or(0.5) as f32,
        prefix_padding_ms: num("prefix_padding_ms", 300),
        silence_duration_ms: silence,
        create_response: flag("create_response"),
        interrupt_response: flag("interrupt_response"),
        idle_timeout_ms: td
            .get("idle_timeout_ms")
            .and_then(Value::as_u64)
            .map(|v| v as u32),
        kind,
    })
}

/// A voice is a name or `{id}`; responses carry it as a string (the SDK's schema wants one).
pub(super) fn voice_name(v: &Value) -> &str {
    v.as_str().or_else(|| v["id"].as_str()).unwrap_or("alloy")
}
