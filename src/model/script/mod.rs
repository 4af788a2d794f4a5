//! The scripted model: plays a conversation from a file, so an app's tool handling, transcripts
//! and failure paths can be tested deterministically (`?model=script:NAME`, `session.model`).
//!
//! Each response takes the first turn, in file order, whose `when` matches its input and that
//! has not answered yet (a `repeat` turn stays available). A spoken turn's transcript comes from
//! the turn that will answer it. A response with no input but `instructions` says them verbatim,
//! as the other stubs do. When no turn matches, the response fails with an `error`
//! (`script_no_match`) naming the input and the script, never silently.
//!
//! `format` is the file format and its checks, `library` where scripts are found.

pub mod format;
pub mod library;

use std::sync::Arc;

use serde_json::Value;

use format::{Failure, Script, Step, Turn, When};

use super::{
    AudioTurn, Ending, Heard, Model, ModelKind, Plan, Prompt, Reply, ResponseContext, ToolCall,
    Transcription, bracketed_note, tool_args, tools::Tool,
};

pub struct ScriptModel {
    name: String,
    /// The script, or why it could not be had (reported on every turn).
    script: Result<Arc<Script>, String>,
    answered: Vec<bool>,
}

impl ScriptModel {
    pub fn load(name: &str) -> ScriptModel {
        let script = library::find(name);
        let turns = script.as_ref().map_or(0, |s| s.turns.len());
        ScriptModel {
            name: name.to_owned(),
            script,
            answered: vec![false; turns],
        }
    }

    /// The first open turn that answers `prompt` as response number `index`.
    fn pick(&self, script: &Script, prompt: &Prompt<'_>, index: u64) -> Option<usize> {
        script
            .turns
            .iter()
            .enumerate()
            .find(|(i, t)| (t.repeat || !self.answered[*i]) && matches(&t.when, prompt, index))
            .map(|(i, _)| i)
    }
}

impl Model for ScriptModel {
    fn kind(&self) -> ModelKind {
        ModelKind::Script(self.name.clone())
    }

    fn respond(&mut self, ctx: &ResponseContext<'_>) -> Plan {
        // A response with no input and instructions is told what to say (a Live session's
        // acknowledgements and commentary): said verbatim, as the other stubs do, rather than
        // taking a turn the script wrote for the caller.
        if let (Prompt::Nothing, Some(say)) = (&ctx.prompt, ctx.instructions)
            && !say.trim().is_empty()
        {
            return Plan::say(Reply::text(say));
        }
        let script = match &self.script {
            Ok(s) => s.clone(),
            Err(e) => return Plan::fail("script_not_found", e.clone()),
        };
        let Some(i) = self.pick(&script, &ctx.prompt, ctx.index) else {
            return Plan::fail(
                "script_no_match",
                format!(
                    "Script '{}' has no turn left for response {} ({}).",
                    self.name,
                    ctx.index,
                    describe(&ctx.prompt)
                ),
            );
        };
        self.answered[i] = true;
        plan_turn(&script.turns[i], ctx)
    }

    fn transcribe(&mut self, turn: &AudioTurn) -> Transcription {
        let Ok(script) = &self.script else {
            return bracketed_note(turn);
        };
        let answering = script.turns.iter().enumerate().find(|(i, t)| {
            let prompt = match turn.what {
                Heard::Appended => Prompt::AppendedAudio { ms: turn.ms },
                _ => Prompt::Audio {
                    item_id: "",
                    start_ms: 0,
                    end_ms: turn.ms,
                    transcript: t.user_transcript.as_deref(),
                },
            };
            (t.repeat || !self.answered[*i]) && matches(&t.when, &prompt, turn.next_response)
        });
        match answering {
            Some((_, t)) if t.transcription_fails => Transcription::Failed {
                code: "transcription_failed".into(),
                message: format!("Script '{}' fails this turn's transcription.", self.name),
            },
            // Speech, or audio sent as data: both are the caller talking.
            Some((_, t)) if turn.what != Heard::Silence && t.user_transcript.is_some() => {
                Transcription::Text(t.user_transcript.clone().unwrap_or_default())
            }
            _ => bracketed_note(turn),
        }
    }
}

fn matches(when: &When, prompt: &Prompt<'_>, index: u64) -> bool {
    if when.turn.is_some_and(|n| n != index) {
        return false;
    }
    if let Some(audio) = when.audio
        && audio != matches!(prompt, Prompt::Audio { .. })
    {
        return false;
    }
    if let Some(want) = &when.text {
        let said = match prompt {
            Prompt::Text(t) => Some(t.as_str()),
            Prompt::Audio { transcript, .. } => *transcript,
            _ => None,
        };
        if !said.is_some_and(|s| contains(s, want)) {
            return false;
        }
    }
    if let Some(m) = &when.tool_output {
        let Prompt::ToolOutputs(outputs) = prompt else {
            return false;
        };
        let hit = outputs.iter().any(|o| {
            m.name.as_deref().is_none_or(|n| o.name == Some(n))
                && m.contains.as_deref().is_none_or(|c| contains(o.output, c))
        });
        if !hit {
            return false;
        }
    }
    true
}

fn contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// The input, as an error message names it.
fn describe(prompt: &Prompt<'_>) -> String {
    let cut = |s: &str| s.chars().take(80).collect::<String>();
    match prompt {
        Prompt::Audio {
            transcript: Some(t),
            ..
        } => format!("a spoken turn: \"{}\"", cut(t)),
        Prompt::Audio {
            start_ms, end_ms, ..
        } => format!(
            "a spoken turn of {} s",
            super::seconds(end_ms.saturating_sub(*start_ms))
        ),
        Prompt::Idle => "an idle timeout".into(),
        Prompt::Text(t) => format!("the message \"{}\"", cut(t)),
        Prompt::AppendedAudio { .. } => "appended audio".into(),
        Prompt::Unreadable => "a message with no text".into(),
        Prompt::ToolOutputs(outputs) => {
            let names: Vec<&str> = outputs.iter().map(|o| o.name.unwrap_or("?")).collect();
            format!("tool output of {}", names.join(", "))
        }
        Prompt::Nothing => "no new input".into(),
    }
}

fn plan_turn(turn: &Turn, ctx: &ResponseContext<'_>) -> Plan {
    let mut plan = Plan::default();
    let mut said: Vec<String> = Vec::new();
    for step in &turn.steps {
        match step {
            Step::Say(text) => said.push(fill(text, &ctx.prompt)),
            Step::WaitMs(ms) => plan.delay_ms += ms,
            Step::ToolCall(call) => plan.tool_calls.push(ToolCall {
                name: call.name.clone(),
                arguments: match &call.arguments {
                    Some(args) => args.to_string(),
                    None => declared_arguments(ctx, &call.name),
                },
                server_label: None,
            }),
            Step::Fail(f) => {
                plan.ending = match f {
                    Failure::ServerError => Ending::Failed {
                        code: "server_error".into(),
                        message: "The server had an error while processing your request (a scripted failure).".into(),
                    },
                    Failure::Incomplete => Ending::Incomplete,
                    Failure::SessionExpired => Ending::SessionExpired,
                }
            }
        }
    }
    if !said.is_empty() {
        plan.reply = Some(Reply::text(said.join(" ")));
    }
    plan
}

/// Arguments from the declared tool's schema; `{}` for a tool the session does not declare.
fn declared_arguments(ctx: &ResponseContext<'_>, name: &str) -> String {
    ctx.tools
        .iter()
        .find_map(|t| match t {
            Tool::Function(f) if f.name == name => Some(f),
            _ => None,
        })
        .map(|f| {
            tool_args::arguments_for(f.parameters.as_ref().unwrap_or(&Value::Null)).to_string()
        })
        .unwrap_or_else(|| "{}".into())
}

/// `{{tool_output}}` and `{{user_text}}` from the input this turn answers.
fn fill(text: &str, prompt: &Prompt<'_>) -> String {
    let mut out = text.to_owned();
    if out.contains("{{tool_output}}") {
        let outputs = match prompt {
            Prompt::ToolOutputs(o) => o.iter().map(|o| o.output).collect::<Vec<_>>().join(" "),
            _ => String::new(),
        };
        out = out.replace("{{tool_output}}", &outputs);
    }
    if out.contains("{{user_text}}") {
        let said = match prompt {
            Prompt::Text(t) => t.as_str(),
            Prompt::Audio {
                transcript: Some(t),
                ..
            } => t,
            _ => "",
        };
        out = out.replace("{{user_text}}", said);
    }
    out
}

#[cfg(test)]
mod tests;
