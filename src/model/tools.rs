//! Which tools a stub model calls, decided from `tool_choice` and the caller's words alone.
//!
//! - `"required"`, or a named function: the stub calls a tool on every user turn, the named
//!   one, or those the user's text names, else the first declared.
//! - `"auto"`: only the tools the user's text names ("get_weather" or "get weather"), so a test
//!   can ask for a call by saying so and gets none otherwise.
//! - `"none"`: never.
//!
//! A response that follows tool outputs answers with them instead of calling again, even
//! under `"required"`: the stub has what it asked for, and an app that keeps `required` on
//! would otherwise loop forever. With `parallel_tool_calls: false` at most one tool is called.

use serde_json::Value;

use super::tool_args::arguments_for;
use super::{Prompt, ResponseContext, ToolCall};

/// The calls a stub makes for this response; empty when it should speak instead.
pub fn calls_for(ctx: &ResponseContext<'_>) -> Vec<ToolCall> {
    let said = match &ctx.prompt {
        Prompt::Text(t) => Some(t.as_str()),
        Prompt::Audio { transcript, .. } => *transcript,
        Prompt::ToolOutputs(_) | Prompt::Nothing => return Vec::new(),
        Prompt::Idle | Prompt::AppendedAudio { .. } | Prompt::Unreadable => None,
    };
    let functions: Vec<&Value> = ctx
        .tools
        .iter()
        .filter(|t| t["type"].as_str().is_none_or(|k| k == "function") && t["name"].is_string())
        .collect();
    let named_in_text: Vec<&Value> = match said {
        Some(text) => functions
            .iter()
            .copied()
            .filter(|t| names(text, t["name"].as_str().unwrap_or_default()))
            .collect(),
        None => Vec::new(),
    };
    let mut chosen: Vec<&Value> = match ctx.tool_choice {
        Value::String(s) if s == "none" => return Vec::new(),
        Value::String(s) if s == "required" => {
            if named_in_text.is_empty() {
                functions.first().copied().into_iter().collect()
            } else {
                named_in_text
            }
        }
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
            functions
                .iter()
                .copied()
                .filter(|t| t["name"] == name)
                .take(1)
                .collect()
        }
        _ => named_in_text,
    };
    if !ctx.parallel_tool_calls {
        chosen.truncate(1);
    }
    chosen
        .into_iter()
        .map(|t| ToolCall {
            name: t["name"].as_str().unwrap_or_default().to_owned(),
            arguments: arguments_for(&t["parameters"]).to_string(),
        })
        .collect()
}

/// Whether `text` names the tool, as written or with `_`/`-` read as spaces.
fn names(text: &str, tool: &str) -> bool {
    if tool.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let tool = tool.to_lowercase();
    text.contains(&tool) || text.contains(&tool.replace(['_', '-'], " "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx<'a>(prompt: Prompt<'a>, tools: &'a [Value], choice: &'a Value) -> ResponseContext<'a> {
        ResponseContext {
            prompt,
            instructions: None,
            tools,
            tool_choice: choice,
            parallel_tool_calls: true,
            index: 0,
        }
    }

    fn tools() -> Vec<Value> {
        vec![
            json!({"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "examples": ["Paris"]}}, "required": ["city"]}}),
            json!({"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}),
        ]
    }

    fn names_of(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn required_calls_the_named_tools_else_the_first() {
        let (t, req) = (tools(), json!("required"));
        let calls = calls_for(&ctx(Prompt::Text("hello".into()), &t, &req));
        assert_eq!(names_of(&calls), ["get_weather"]);
        assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
        let calls = calls_for(&ctx(
            Prompt::Text("get time and get weather".into()),
            &t,
            &req,
        ));
        assert_eq!(names_of(&calls), ["get_weather", "get_time"]);
        let mut c = ctx(Prompt::Text("get time and get weather".into()), &t, &req);
        c.parallel_tool_calls = false;
        assert_eq!(names_of(&calls_for(&c)), ["get_weather"]);
    }

    #[test]
    fn auto_calls_only_what_the_user_names() {
        let (t, auto) = (tools(), json!("auto"));
        assert!(calls_for(&ctx(Prompt::Text("hello".into()), &t, &auto)).is_empty());
        let calls = calls_for(&ctx(
            Prompt::Text("What does GET_TIME say?".into()),
            &t,
            &auto,
        ));
        assert_eq!(names_of(&calls), ["get_time"]);
        let spoken = Prompt::Audio {
            item_id: "i",
            start_ms: 0,
            end_ms: 1,
            transcript: Some("please get weather"),
        };
        assert_eq!(
            names_of(&calls_for(&ctx(spoken, &t, &auto))),
            ["get_weather"]
        );
    }

    #[test]
    fn a_named_function_none_and_tool_outputs() {
        let t = tools();
        let named = json!({"type": "function", "name": "get_time"});
        assert_eq!(
            names_of(&calls_for(&ctx(Prompt::Idle, &t, &named))),
            ["get_time"]
        );
        let none = json!("none");
        assert!(calls_for(&ctx(Prompt::Text("get_time".into()), &t, &none)).is_empty());
        let outputs = Prompt::ToolOutputs(vec![]);
        assert!(calls_for(&ctx(outputs, &t, &json!("required"))).is_empty());
        // Only function tools are called.
        let mcp = [json!({"type": "mcp", "server_label": "x"})];
        assert!(calls_for(&ctx(Prompt::Text("x".into()), &mcp, &json!("required"))).is_empty());
    }
}
