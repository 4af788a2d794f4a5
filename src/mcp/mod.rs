//! MCP tools: a session's `{"type": "mcp"}` tools, listed and called on a real MCP server.
//!
//! The turn engine decides *when* a server is listed or a tool called and what the client sees
//! of it (`realtime::mcp`); this module holds what crosses from the engine to the network and
//! back ([`McpRequest`], [`McpOutcome`]), and [`client`] runs a request off the worker thread
//! with the official Rust SDK over MCP's Streamable HTTP transport. The engine stays free of
//! sockets and clocks: a request is an action it emits, its outcome an input it is fed.

pub mod client;

use serde::Serialize;
use serde_json::Value;

/// Where a session's MCP server is and what to send it, from the tool's `server_url`,
/// `headers` and `authorization`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// An OAuth access token, sent as `Authorization: Bearer`.
    pub authorization: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpRequest {
    ListTools {
        server: McpServer,
    },
    /// `arguments` is the JSON object as text, as the `mcp_call` item carries it.
    CallTool {
        server: McpServer,
        name: String,
        arguments: String,
    },
}

impl McpRequest {
    pub fn server(&self) -> &McpServer {
        match self {
            McpRequest::ListTools { server } | McpRequest::CallTool { server, .. } => server,
        }
    }
}

/// One tool of an `mcp_list_tools` item, as the `openai` package's
/// `RealtimeMcpListTools.Tool` has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedTool {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

impl ListedTool {
    /// The server's `readOnlyHint`, which `allowed_tools` and `require_approval` filters
    /// match with `read_only`.
    pub fn read_only(&self) -> bool {
        self.annotations
            .as_ref()
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// What a request came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum McpOutcome {
    Listed(Result<Vec<ListedTool>, McpError>),
    /// The tool's text output.
    Called(Result<String, McpError>),
}

/// Why a list or a call failed, in the shape of the `mcp_call` item's `error`
/// (`RealtimeMcpProtocolError`, `RealtimeMcpToolExecutionError`, `RealtimeMcphttpError`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum McpError {
    /// A JSON-RPC error from the server (unknown tool, bad arguments).
    ProtocolError { code: i64, message: String },
    /// The tool ran and reported an error (`isError: true`).
    ToolExecutionError { message: String },
    /// The server answered with an HTTP error, or could not be reached or answered too late
    /// (502 and 504, as a gateway says it, since the edge is the one calling out).
    HttpError { code: u16, message: String },
}

impl McpError {
    pub fn message(&self) -> &str {
        match self {
            McpError::ProtocolError { message, .. }
            | McpError::ToolExecutionError { message }
            | McpError::HttpError { message, .. } => message,
        }
    }
}
