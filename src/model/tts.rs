//! The TTS model: speaks the text it is given (a user message, `instructions`, a tool's output).
//! It has no recognizer, so an audio turn is answered with how long the caller spoke.

use super::echo::common_reply;
use super::{ModelKind, Plan, Prompt, Reply, ResponseContext, seconds, tools};

pub struct Tts;

impl super::Model for Tts {
    fn kind(&self) -> ModelKind {
        ModelKind::Tts
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
                start_ms, end_ms, ..
            } => Reply::text(format!(
                "I heard you speak for {} seconds.",
                seconds(end_ms - start_ms)
            )),
            Prompt::Text(t) => Reply::text(t.clone()),
            other => common_reply(other, ctx.instructions),
        })
    }
}
