//! What a response answers, read from the conversation for the model: the unanswered user
//! input, or the outputs the app returned for the model's tool calls.

use crate::model::{Prompt, ToolOutput};

use super::items::{AudioSource, Item};

/// Walks back from the newest item: tool outputs after the model's calls, else the latest
/// user message with no assistant output after it (system messages are skipped), else nothing.
pub(super) fn prompt_of<'a>(items: &[&'a Item]) -> Prompt<'a> {
    let mut outputs: Vec<ToolOutput<'a>> = Vec::new();
    for item in items.iter().rev() {
        match item.value["type"].as_str() {
            Some("function_call_output") => outputs.push(ToolOutput {
                call_id: item.value["call_id"].as_str().unwrap_or_default(),
                name: None,
                output: item.value["output"].as_str().unwrap_or_default(),
            }),
            // The model's call: its outputs (if any) were collected above.
            Some("function_call") => break,
            // A server's tool list and an approval answer are not something to reply to.
            Some("mcp_list_tools" | "mcp_approval_response") => continue,
            _ => match item.role() {
                Some("system") => continue,
                Some("user") if outputs.is_empty() => return user_prompt(item),
                _ => break,
            },
        }
    }
    if outputs.is_empty() {
        return Prompt::Nothing;
    }
    outputs.reverse();
    for o in &mut outputs {
        o.name = items
            .iter()
            .rev()
            .find(|i| i.value["type"] == "function_call" && i.value["call_id"] == o.call_id)
            .and_then(|i| i.value["name"].as_str());
    }
    Prompt::ToolOutputs(outputs)
}

fn user_prompt(item: &Item) -> Prompt<'_> {
    match &item.origin {
        AudioSource::Input { start_ms, end_ms } => Prompt::Audio {
            item_id: item.id(),
            start_ms: *start_ms,
            end_ms: *end_ms,
            transcript: item.value["content"][0]["transcript"].as_str(),
        },
        AudioSource::Idle { .. } => Prompt::Idle,
        origin => match (item.text(), origin) {
            (Some(t), _) => Prompt::Text(t),
            (None, AudioSource::Appended { ms }) => Prompt::AppendedAudio { ms: *ms },
            (None, _) => Prompt::Unreadable,
        },
    }
}
