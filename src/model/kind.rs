//! Which model answers a call, parsed from its name in exactly one place.
//!
//! A name arrives from `?model=`, a session's `model` (multipart body, a client secret's session,
//! `session.update`) or the demo page. Names that are not ours (`gpt-realtime-2.1`, the SDK's
//! default) are not errors: SDKs repeat their configured model in every request, so such a name
//! leaves the current model in place. Only `script:` names can be malformed.

use std::fmt;

/// The stub models this server implements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ModelKind {
    /// Says the caller's audio turn back; answers text with "You said: …".
    #[default]
    Echo,
    /// Speaks the text it is given (a user text message, `instructions`, a tool's output).
    Tts,
    /// Reflects every audio frame at once with no turns: the network reference.
    Loopback,
    /// Plays a conversation script (`fixtures/scripts/NAME.json` or `--script FILE`).
    Script(String),
}

/// A `script:` name that cannot name a script.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad model name {name:?}: {why}")]
pub struct BadModelName {
    pub name: String,
    pub why: &'static str,
}

/// Script names are file stems: short and plain, so they never carry a path.
pub const MAX_SCRIPT_NAME: usize = 64;

impl ModelKind {
    /// `Ok(None)` for a name that is not one of ours; see the module docs.
    pub fn parse(name: &str) -> Result<Option<ModelKind>, BadModelName> {
        let trimmed = name.trim();
        if let Some(script) = strip_prefix_ignore_case(trimmed, "script:") {
            let bad = |why| BadModelName {
                name: trimmed.to_owned(),
                why,
            };
            if script.is_empty() || script.len() > MAX_SCRIPT_NAME {
                return Err(bad("a script name has 1 to 64 characters"));
            }
            if !script
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(bad("a script name has only letters, digits, '_' and '-'"));
            }
            return Ok(Some(ModelKind::Script(script.to_owned())));
        }
        Ok(match trimmed.to_ascii_lowercase().as_str() {
            "echo" => Some(ModelKind::Echo),
            "tts" => Some(ModelKind::Tts),
            "loopback" => Some(ModelKind::Loopback),
            _ => None,
        })
    }

    /// Frame-level models take audio frames, not turns: the engine's responses are answered
    /// without audio and the media side skips voice detection.
    pub fn is_frame_level(&self) -> bool {
        matches!(self, ModelKind::Loopback)
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelKind::Echo => f.write_str("echo"),
            ModelKind::Tts => f.write_str("tts"),
            ModelKind::Loopback => f.write_str("loopback"),
            ModelKind::Script(name) => write!(f, "script:{name}"),
        }
    }
}

/// On the control API's wire a model is its name.
impl serde::Serialize for ModelKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ModelKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        match ModelKind::parse(&name) {
            Ok(Some(kind)) => Ok(kind),
            Ok(None) => Err(serde::de::Error::custom(format!(
                "unknown model {name:?} (echo, tts, loopback or script:NAME)"
            ))),
            Err(e) => Err(serde::de::Error::custom(e)),
        }
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in [
            ModelKind::Echo,
            ModelKind::Tts,
            ModelKind::Loopback,
            ModelKind::Script("weather-tool".into()),
        ] {
            assert_eq!(ModelKind::parse(&kind.to_string()), Ok(Some(kind)));
        }
        assert_eq!(ModelKind::parse(" TTS "), Ok(Some(ModelKind::Tts)));
        assert_eq!(
            ModelKind::parse("Script:abc"),
            Ok(Some(ModelKind::Script("abc".into())))
        );
    }

    #[test]
    fn foreign_names_are_not_errors() {
        assert_eq!(ModelKind::parse("gpt-realtime-2.1"), Ok(None));
        assert_eq!(ModelKind::parse(""), Ok(None));
    }

    #[test]
    fn script_names_never_carry_a_path() {
        for bad in [
            "script:",
            "script:../etc/passwd",
            "script:a/b",
            "script:a b",
        ] {
            assert!(ModelKind::parse(bad).is_err(), "{bad}");
        }
        let long = format!("script:{}", "a".repeat(65));
        assert!(ModelKind::parse(&long).is_err());
    }
}
