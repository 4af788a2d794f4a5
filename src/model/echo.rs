//! The echo model: says the caller's audio turn back; answers text with "You said: …".
//!
//! No network and no weights: the reply is decided from the latest unanswered input, and its
//! transcript says honestly what the model is doing. Tool calls follow [`super::tools`].

use super::{ModelKind, Plan, Prompt, Reply, ResponseContext, ToolOutput, seconds, tools};

pub struct Echo;

impl super::Model for Echo {
    fn kind(&self) -> ModelKind {
        ModelKind::Echo
    }

    fn respond(&mut self, ctx: &ResponseContext<'_>) -> Plan {
        let calls = tools::calls_for(ctx);
        if !calls.is_empty() {
            return Plan {
                tool_calls: calls,
                ..Plan::default()
            };
        }
        Plan::say(match &ctx.prompt {
            Prompt::Audio {
                item_id,
                start_ms,
                end_ms,
                ..
            } => Reply::EchoInput {
                input_item_id: (*item_id).to_owned(),
                audio_start_ms: *start_ms,
                audio_end_ms: *end_ms,
            },
            Prompt::Text(t) => Reply::text(format!("You said: {t}")),
            other => common_reply(other, ctx.instructions),
        })
    }
}

/// The replies echo and TTS share: everything but an audio turn and a text message.
///
/// - Idle timeout: "Are you still there?", the nudge the timeout exists for.
/// - Tool outputs: what each tool returned, so an app's test hears its own result.
/// - Nothing new: `response.instructions` when given (the "say this" path), else a fixed line,
///   so a `response.create` is always answered with audio.
pub(super) fn common_reply(prompt: &Prompt<'_>, instructions: Option<&str>) -> Reply {
    match prompt {
        Prompt::Idle => Reply::text("Are you still there?"),
        Prompt::AppendedAudio { ms } => Reply::text(format!(
            "I received {} seconds of audio as data, which I cannot play back.",
            seconds(*ms)
        )),
        Prompt::Unreadable => {
            Reply::text("I received your message, but it has nothing I can say back.")
        }
        Prompt::ToolOutputs(outputs) if !outputs.is_empty() => Reply::text(tool_results(outputs)),
        _ => match instructions {
            Some(i) if !i.trim().is_empty() => Reply::text(i),
            _ => Reply::text("There is nothing new for me to answer."),
        },
    }
}

/// "The get_weather tool returned: {…}." for each output, in order.
pub(super) fn tool_results(outputs: &[ToolOutput<'_>]) -> String {
    outputs
        .iter()
        .map(|o| match o.name {
            Some(name) => format!("The {name} tool returned: {}", o.output.trim()),
            None => format!("Tool call {} returned: {}", o.call_id, o.output.trim()),
        })
        .collect::<Vec<_>>()
        .join(" ")
}
