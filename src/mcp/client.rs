//! Runs [`McpRequest`]s with the official Rust SDK (`rmcp`) over MCP's Streamable HTTP
//! transport, on one process-wide runtime thread: the transceiver's workers are socket loops
//! that must never wait on a remote server, and rmcp's client is a tokio task.
//!
//! Each request opens its own MCP session (initialize, the one operation, close): a voice
//! session lists a server once and calls a tool a few times, so a per-request handshake costs
//! one round trip on a path that is already a network call, and nothing is left open when a
//! call ends. Every request is bounded by [`TIMEOUT`] and the number in flight by
//! [`MAX_IN_FLIGHT`], so a slow or hung server ends in a failure the client sees, never in a
//! response that waits forever or a pile of tasks.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::{ClientInitializeError, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

use super::{ListedTool, McpError, McpOutcome, McpRequest, McpServer};

/// How long one request (handshake included) may take before it fails with 504.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Requests in flight across the process; one more fails at once rather than queueing.
pub const MAX_IN_FLIGHT: usize = 64;

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| crate::background::runtime("mcp"))
}

/// Starts `request` off the calling thread; `deliver` gets its outcome unless `cancelled()`
/// says nobody waits for it any more.
pub fn start(
    request: McpRequest,
    cancelled: impl Fn() -> bool + Send + 'static,
    deliver: impl FnOnce(McpOutcome) + Send + 'static,
) {
    if IN_FLIGHT.fetch_add(1, Ordering::Relaxed) >= MAX_IN_FLIGHT {
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
        let busy = McpError::HttpError {
            code: 503,
            message: format!("too many MCP requests in flight (at most {MAX_IN_FLIGHT})"),
        };
        return deliver(failed(&request, busy));
    }
    runtime().spawn(async move {
        let outcome = match tokio::time::timeout(TIMEOUT, run(&request)).await {
            Ok(outcome) => outcome,
            Err(_) => failed(
                &request,
                McpError::HttpError {
                    code: 504,
                    message: format!(
                        "MCP server {} did not answer within {} s",
                        request.server().url,
                        TIMEOUT.as_secs()
                    ),
                },
            ),
        };
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
        if !cancelled() {
            deliver(outcome);
        }
    });
}

fn failed(request: &McpRequest, e: McpError) -> McpOutcome {
    match request {
        McpRequest::ListTools { .. } => McpOutcome::Listed(Err(e)),
        McpRequest::CallTool { .. } => McpOutcome::Called(Err(e)),
    }
}

async fn run(request: &McpRequest) -> McpOutcome {
    let server = request.server();
    let transport = match config(server) {
        Ok(c) => StreamableHttpClientTransport::from_config(c),
        Err(e) => return failed(request, e),
    };
    let client = match ().serve(transport).await {
        Ok(c) => c,
        Err(e) => {
            return failed(
                request,
                McpError::HttpError {
                    code: 502,
                    message: format!(
                        "could not open an MCP session with {}: {}",
                        server.url,
                        match &e {
                            ClientInitializeError::TransportError { error, .. } => {
                                root_cause(error.error.as_ref())
                            }
                            other => root_cause(other),
                        }
                    ),
                },
            );
        }
    };
    let outcome = match request {
        McpRequest::ListTools { .. } => McpOutcome::Listed(
            client
                .list_all_tools()
                .await
                .map(|tools| tools.into_iter().map(listed).collect())
                .map_err(|e| service_error(server, e)),
        ),
        McpRequest::CallTool {
            name, arguments, ..
        } => McpOutcome::Called(call(&client, server, name, arguments).await),
    };
    let _ = client.cancel().await;
    outcome
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    server: &McpServer,
    name: &str,
    arguments: &str,
) -> Result<String, McpError> {
    let arguments = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => map,
        _ => {
            return Err(McpError::ProtocolError {
                code: -32602,
                message: "the arguments are not a JSON object".into(),
            });
        }
    };
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = Some(arguments);
    let result = client
        .call_tool(params)
        .await
        .map_err(|e| service_error(server, e))?;
    let text = output_text(&result.content, result.structured_content.as_ref());
    if result.is_error == Some(true) {
        return Err(McpError::ToolExecutionError { message: text });
    }
    Ok(text)
}

/// A call's output as the `mcp_call` item's `output` string: its text blocks joined, else the
/// structured content as JSON, else each block as JSON (an image, a resource).
fn output_text(content: &[ContentBlock], structured: Option<&Value>) -> String {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    if let Some(s) = structured {
        return s.to_string();
    }
    serde_json::to_string(content).unwrap_or_default()
}

/// The innermost cause of `e` ("Connection refused"), which says what happened; the outer
/// layers name the SDK's transport types.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

fn listed(tool: rmcp::model::Tool) -> ListedTool {
    ListedTool {
        name: tool.name.into_owned(),
        description: tool.description.map(|d| d.into_owned()),
        input_schema: Value::Object((*tool.input_schema).clone()),
        annotations: tool
            .annotations
            .and_then(|a| serde_json::to_value(a).ok())
            .filter(|a| a.as_object().is_some_and(|o| !o.is_empty())),
    }
}

fn service_error(server: &McpServer, e: ServiceError) -> McpError {
    match e {
        ServiceError::McpError(e) => McpError::ProtocolError {
            code: i64::from(e.code.0),
            message: e.message.into_owned(),
        },
        ServiceError::Timeout { .. } => McpError::HttpError {
            code: 504,
            message: format!("MCP server {} timed out", server.url),
        },
        ServiceError::TransportSend(e) => McpError::HttpError {
            code: 502,
            message: format!(
                "MCP server {}: {}",
                server.url,
                root_cause(e.error.as_ref())
            ),
        },
        other => McpError::HttpError {
            code: 502,
            message: format!("MCP server {}: {other}", server.url),
        },
    }
}

/// The transport's settings for `server`; a header the tool declared that HTTP cannot carry is
/// refused here, before anything is sent.
fn config(server: &McpServer) -> Result<StreamableHttpClientTransportConfig, McpError> {
    let bad = |what: String| McpError::HttpError {
        code: 400,
        message: what,
    };
    let mut headers = HashMap::new();
    for (k, v) in &server.headers {
        let name = axum::http::HeaderName::try_from(k.as_str())
            .map_err(|_| bad(format!("'{k}' is not a valid header name")))?;
        let value = axum::http::HeaderValue::try_from(v.as_str())
            .map_err(|_| bad(format!("the value of header '{k}' is not valid")))?;
        headers.insert(name, value);
    }
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(server.url.clone()).custom_headers(headers);
    if let Some(token) = &server.authorization {
        config = config.auth_header(token.clone());
    }
    Ok(config)
}
