//! The script file format: a conversation as JSON, checked completely when it is loaded so a
//! mistake is reported with the file, never discovered mid-call.
//!
//! ```json
//! {
//!   "description": "what this conversation tests",
//!   "turns": [
//!     {"when": {"turn": 0}, "user_transcript": "What's the weather in Paris?",
//!      "steps": [{"say": "Let me check."},
//!                {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
//!     {"when": {"tool_output": {"name": "get_weather", "contains": "temperature"}},
//!      "steps": [{"say": "Here it is: {{tool_output}}"}]},
//!     {"when": {"text": "again"}, "steps": [{"wait_ms": 500}, {"fail": "server_error"}]},
//!     {"repeat": true, "steps": [{"say": "That is all."}]}
//!   ]
//! }
//! ```
//!
//! A turn answers one response. `when` says which input it answers (every condition given must
//! hold; none given matches anything): `turn` (the response's index in the call, from 0),
//! `audio` (a spoken turn), `text` (a substring of the user's message or of the transcript, any
//! case), `tool_output` (the app's answer to a tool call, optionally by name and content).

use serde::Deserialize;
use serde_json::Value;

/// Bounds that keep a script's work per turn small whatever file is given.
pub const MAX_TURNS: usize = 256;
pub const MAX_STEPS: usize = 32;
pub const MAX_TEXT: usize = 4096;
pub const MAX_WAIT_MS: u64 = 60_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default)]
    pub description: String,
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub when: When,
    /// What the caller said in the spoken turn this answers: sent as the input transcription.
    #[serde(default)]
    pub user_transcript: Option<String>,
    /// The spoken turn's transcription fails (`…input_audio_transcription.failed`).
    #[serde(default)]
    pub transcription_fails: bool,
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Stays available after answering (a fallback); otherwise a turn answers once.
    #[serde(default)]
    pub repeat: bool,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct When {
    pub turn: Option<u64>,
    pub audio: Option<bool>,
    pub text: Option<String>,
    pub tool_output: Option<ToolOutputMatch>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolOutputMatch {
    pub name: Option<String>,
    pub contains: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Spoken (or text) output. `{{tool_output}}` and `{{user_text}}` are replaced by the input.
    Say(String),
    /// A function call; without `arguments` they are made from the declared tool's schema.
    ToolCall(ScriptedCall),
    /// Silence before the response's audio starts (a slow model).
    WaitMs(u64),
    /// How the response ends instead of `completed`; must be the last step.
    Fail(Failure),
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Value>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// `failed` with a `server_error`.
    ServerError,
    /// `incomplete`, reason `max_output_tokens`: the output stops where this step is.
    Incomplete,
    /// `error` `session_expired`, then the call ends.
    SessionExpired,
}

/// Parses and checks a script; the error names what is wrong and where.
pub fn parse(text: &str) -> Result<Script, String> {
    let script: Script = serde_json::from_str(text).map_err(|e| e.to_string())?;
    check(&script)?;
    Ok(script)
}

fn check(s: &Script) -> Result<(), String> {
    if s.turns.is_empty() {
        return Err("a script needs at least one turn".into());
    }
    if s.turns.len() > MAX_TURNS {
        return Err(format!("a script has at most {MAX_TURNS} turns"));
    }
    for (i, t) in s.turns.iter().enumerate() {
        let at = |what: String| format!("turns[{i}]: {what}");
        if t.steps.len() > MAX_STEPS {
            return Err(at(format!("at most {MAX_STEPS} steps")));
        }
        if t.user_transcript
            .as_ref()
            .is_some_and(|u| u.len() > MAX_TEXT)
        {
            return Err(at(format!("user_transcript is over {MAX_TEXT} bytes")));
        }
        for (j, step) in t.steps.iter().enumerate() {
            let at = |what: &str| format!("turns[{i}].steps[{j}]: {what}");
            match step {
                Step::Say(text) if text.len() > MAX_TEXT => {
                    return Err(at(&format!("say is over {MAX_TEXT} bytes")));
                }
                Step::ToolCall(c) if c.name.trim().is_empty() => {
                    return Err(at("tool_call needs a name"));
                }
                Step::ToolCall(c) if c.arguments.as_ref().is_some_and(|a| !a.is_object()) => {
                    return Err(at("tool_call arguments must be an object"));
                }
                Step::WaitMs(ms) if *ms > MAX_WAIT_MS => {
                    return Err(at(&format!("wait_ms is at most {MAX_WAIT_MS}")));
                }
                Step::Fail(_) if j + 1 != t.steps.len() => {
                    return Err(at("fail must be the last step"));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mistakes_are_named() {
        let err = |t: &str| parse(t).unwrap_err();
        assert!(err(r#"{"turns": []}"#).contains("at least one turn"));
        assert!(err(r#"{"turns": [{"steps": [{"shout": "x"}]}]}"#).contains("unknown variant"));
        assert!(err(r#"{"turns": [{"when": {"turns": 1}}]}"#).contains("unknown field"));
        assert!(
            err(r#"{"turns": [{"steps": [{"fail": "server_error"}, {"say": "x"}]}]}"#)
                .contains("turns[0].steps[0]: fail must be the last step")
        );
        assert!(
            err(r#"{"turns": [{"steps": [{"tool_call": {"name": "f", "arguments": [1]}}]}]}"#)
                .contains("arguments must be an object")
        );
        assert!(err(r#"{"turns": [{"steps": [{"wait_ms": 60001}]}]}"#).contains("wait_ms"));
    }

    #[test]
    fn a_full_script_parses() {
        let s = parse(
            r#"{"description": "d", "turns": [
                {"when": {"turn": 0, "audio": true}, "user_transcript": "hi",
                 "steps": [{"wait_ms": 10}, {"say": "a"}, {"tool_call": {"name": "f"}}]},
                {"when": {"tool_output": {"name": "f", "contains": "x"}}, "steps": [{"fail": "incomplete"}]},
                {"repeat": true, "transcription_fails": true}
            ]}"#,
        )
        .unwrap();
        assert_eq!(s.turns.len(), 3);
        assert_eq!(s.turns[0].steps[0], Step::WaitMs(10));
        assert_eq!(s.turns[1].steps[0], Step::Fail(Failure::Incomplete));
        assert!(s.turns[2].repeat && s.turns[2].when == When::default());
    }
}
