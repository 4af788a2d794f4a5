//! An MCP call a response will make: apart from `mcp.rs`, which runs the MCP side of a
//! conversation, so that a response can name its call without importing that.

use serde_json::{Value, json};

use crate::mcp::McpError;

/// A call a response makes on an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PlannedMcp {
    pub item_id: String,
    pub server_label: String,
    pub name: String,
    pub arguments: String,
    /// The approval this call follows, when it needed one.
    pub approval_request_id: Option<String>,
    /// The response asks for approval instead of calling.
    pub needs_approval: bool,
}

impl PlannedMcp {
    /// The `mcp_call` item: in progress (no arguments yet), or done with `output` or `error`.
    pub fn call_item(&self, result: Option<&Result<String, McpError>>) -> Value {
        let (arguments, output, error) = match result {
            None => ("", Value::Null, Value::Null),
            Some(Ok(out)) => (
                self.arguments.as_str(),
                Value::from(out.as_str()),
                Value::Null,
            ),
            Some(Err(e)) => (
                self.arguments.as_str(),
                Value::Null,
                serde_json::to_value(e).unwrap_or_default(),
            ),
        };
        json!({
            "id": self.item_id,
            "object": "realtime.item",
            "type": "mcp_call",
            "server_label": self.server_label,
            "name": self.name,
            "arguments": arguments,
            "approval_request_id": self.approval_request_id,
            "output": output,
            "error": error,
        })
    }

    pub fn approval_item(&self) -> Value {
        json!({
            "id": self.item_id,
            "object": "realtime.item",
            "type": "mcp_approval_request",
            "server_label": self.server_label,
            "name": self.name,
            "arguments": self.arguments,
        })
    }
}
