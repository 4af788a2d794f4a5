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

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::tool_args::arguments_for;
use super::{Plan, Prompt, Reply, ResponseContext, ToolCall};

/// A tool as a session or a response declares it: `RealtimeFunctionTool` or `McpTool` in the
/// `openai` package's types. A key outside them is refused (`deny_unknown_fields`), so a typo
/// in a tool shows up as an error, not as a tool that never fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Tool {
    Function(FunctionTool),
    Mcp(McpTool),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema, read by [`arguments_for`]; kept as the client sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// A remote MCP server whose tools the model may call. Only `server_label` is required by the
/// types; the server is reached at `server_url` (a `connector_id` names one of OpenAI's hosted
/// connectors, which an offline edge cannot reach).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpTool {
    pub server_label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Map<String, Value>>,
    /// A list of tool names or a filter object (`tool_names`, `read_only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Value>,
    /// `"always"`, `"never"`, or a filter object (`always`/`never` with `tool_names`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_approval: Option<Value>,
}

/// `tool_choice`: a mode, or one named function or MCP tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged, try_from = "Value")]
pub enum ToolChoice {
    Mode(ToolMode),
    Named(NamedTool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    Auto,
    None,
    Required,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum NamedTool {
    Function {
        name: String,
    },
    Mcp {
        server_label: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

impl Default for ToolChoice {
    fn default() -> Self {
        ToolChoice::Mode(ToolMode::Auto)
    }
}

/// Through `Value`, so a wrong choice is refused in the service's terms, not serde's "did not
/// match any variant".
impl TryFrom<Value> for ToolChoice {
    type Error = String;

    fn try_from(v: Value) -> Result<Self, String> {
        match &v {
            Value::String(_) => serde_json::from_value(v.clone())
                .map(ToolChoice::Mode)
                .map_err(|_| format!("{v} (expected 'auto', 'none' or 'required')")),
            Value::Object(_) => serde_json::from_value(v.clone())
                .map(ToolChoice::Named)
                .map_err(|e| format!("{v} ({e})")),
            _ => Err(format!("{v} (expected a mode or a named tool)")),
        }
    }
}

/// A stub's plan: the tool calls due for this response if any, else `reply`.
pub fn calls_or_say(ctx: &ResponseContext<'_>, reply: impl FnOnce() -> Reply) -> Plan {
    let tool_calls = calls_for(ctx);
    if tool_calls.is_empty() {
        Plan::say(reply())
    } else {
        Plan {
            tool_calls,
            ..Plan::default()
        }
    }
}

/// A tool the stub can call: a function the app declared, or a tool an MCP server listed.
struct Callable<'a> {
    name: &'a str,
    schema: Option<&'a Value>,
    server_label: Option<&'a str>,
}

/// The calls a stub makes for this response; empty when it should speak instead. MCP tools
/// are chosen by the same rules as functions, after them: named in the caller's words, or
/// forced by `tool_choice` (`required` falls back to the first function, else the first MCP
/// tool; `{"type": "mcp"}` names a server and optionally one of its tools).
pub fn calls_for(ctx: &ResponseContext<'_>) -> Vec<ToolCall> {
    let said = match &ctx.prompt {
        Prompt::Text(t) => Some(t.as_str()),
        Prompt::Audio { transcript, .. } => *transcript,
        Prompt::ToolOutputs(_) | Prompt::Nothing => return Vec::new(),
        Prompt::Idle | Prompt::AppendedAudio { .. } | Prompt::Unreadable => None,
    };
    let functions = ctx.tools.iter().filter_map(|t| match t {
        Tool::Function(f) => Some(Callable {
            name: &f.name,
            schema: f.parameters.as_ref(),
            server_label: None,
        }),
        Tool::Mcp(_) => None,
    });
    let mcp = ctx.mcp_tools.iter().map(|t| Callable {
        name: &t.name,
        schema: Some(&t.input_schema),
        server_label: Some(&t.server_label),
    });
    let callable: Vec<Callable> = functions.chain(mcp).collect();
    let named_in_text: Vec<&Callable> = match said {
        Some(text) => callable.iter().filter(|t| names(text, t.name)).collect(),
        None => Vec::new(),
    };
    let mut chosen: Vec<&Callable> = match ctx.tool_choice {
        ToolChoice::Mode(ToolMode::None) => return Vec::new(),
        ToolChoice::Mode(ToolMode::Required) => {
            if named_in_text.is_empty() {
                callable.first().into_iter().collect()
            } else {
                named_in_text
            }
        }
        ToolChoice::Named(NamedTool::Function { name }) => callable
            .iter()
            .filter(|t| t.server_label.is_none() && t.name == *name)
            .take(1)
            .collect(),
        ToolChoice::Named(NamedTool::Mcp { server_label, name }) => {
            let on_server: Vec<&Callable> = callable
                .iter()
                .filter(|t| t.server_label == Some(server_label.as_str()))
                .filter(|t| name.as_ref().is_none_or(|n| n == t.name))
                .collect();
            // The tool the caller named on that server, else its first.
            match on_server
                .iter()
                .find(|t| named_in_text.iter().any(|n| n.name == t.name))
            {
                Some(t) => vec![*t],
                None => on_server.into_iter().take(1).collect(),
            }
        }
        ToolChoice::Mode(ToolMode::Auto) => named_in_text,
    };
    if !ctx.parallel_tool_calls {
        chosen.truncate(1);
    }
    chosen
        .into_iter()
        .map(|t| ToolCall {
            name: t.name.to_owned(),
            arguments: arguments_for(t.schema.unwrap_or(&Value::Null)).to_string(),
            server_label: t.server_label.map(str::to_owned),
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

    fn ctx<'a>(
        prompt: Prompt<'a>,
        tools: &'a [Tool],
        choice: &'a ToolChoice,
    ) -> ResponseContext<'a> {
        ResponseContext {
            prompt,
            instructions: None,
            tools,
            tool_choice: choice,
            parallel_tool_calls: true,
            mcp_tools: &[],
            index: 0,
        }
    }

    fn tools() -> Vec<Tool> {
        serde_json::from_value(json!([
            {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "examples": ["Paris"]}}, "required": ["city"]}},
            {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}},
        ]))
        .unwrap()
    }

    fn choice(v: Value) -> ToolChoice {
        serde_json::from_value(v).unwrap()
    }

    fn names_of(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn required_calls_the_named_tools_else_the_first() {
        let (t, req) = (tools(), choice(json!("required")));
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
        let (t, auto) = (tools(), choice(json!("auto")));
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
        let named = choice(json!({"type": "function", "name": "get_time"}));
        assert_eq!(
            names_of(&calls_for(&ctx(Prompt::Idle, &t, &named))),
            ["get_time"]
        );
        let none = choice(json!("none"));
        assert!(calls_for(&ctx(Prompt::Text("get_time".into()), &t, &none)).is_empty());
        let outputs = Prompt::ToolOutputs(vec![]);
        assert!(calls_for(&ctx(outputs, &t, &choice(json!("required")))).is_empty());
        // Only function tools are called.
        let mcp: Vec<Tool> =
            serde_json::from_value(json!([{"type": "mcp", "server_label": "x"}])).unwrap();
        assert!(
            calls_for(&ctx(
                Prompt::Text("x".into()),
                &mcp,
                &choice(json!("required"))
            ))
            .is_empty()
        );
    }
}
