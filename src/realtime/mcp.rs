//! A session's MCP tools on the wire, as the service shows them.
//!
//! - **Listing.** When a session's tools gain a `{"type": "mcp"}` server (at start or by
//!   `session.update`), an `mcp_list_tools` item is added (`tools: []`),
//!   `mcp_list_tools.in_progress` follows and [`Action::Mcp`] asks the host to list the server;
//!   its outcome ([`Conversation::on_mcp_outcome`]) brings `mcp_list_tools.completed` and the
//!   item's `conversation.item.done` with the tools `allowed_tools` lets through, or
//!   `mcp_list_tools.failed` and an `error` saying why. A server dropped from the tools is
//!   forgotten; one whose settings changed is listed again.
//! - **Calling.** A response whose plan calls a listed tool opens with an `mcp_call` item:
//!   `response.output_item.added`, `conversation.item.added`, the arguments' deltas and
//!   `.done`, `response.mcp_call.in_progress`, and [`Action::Mcp`]. The outcome brings
//!   `response.mcp_call.completed` (or `.failed`), the item with its `output` (or `error`),
//!   and then the same response goes on to say the result, as a message at output index 1.
//! - **Approval.** Unless `require_approval` says `never` for the tool, the response instead
//!   outputs an `mcp_approval_request` item and completes. The client's
//!   `mcp_approval_response` item (`approve: true`) starts the response that makes the call,
//!   with no `response.create`: the Agents SDK sends only the item. A refusal is recorded and
//!   nothing runs.

use serde_json::{Value, json};

use super::events::ClientError;
use super::items::{AudioSource, Item};
use super::planned_mcp::PlannedMcp;
use super::response::ResponseRequest;
use super::server_event::{ItemInPlace, OutputItem, OutputRef, RealtimeServerEvent as E};
use super::{Action, Conversation};
use crate::mcp::{ListedTool, McpError, McpOutcome, McpRequest, McpServer};
use crate::model::McpCallable;
use crate::model::tools::{McpTool, Tool};

/// What the conversation knows of its MCP servers and pending approvals.
#[derive(Debug, Default)]
pub(super) struct McpState {
    servers: Vec<ListedServer>,
    /// Approval requests the client has not answered, by item id.
    approvals: Vec<PlannedMcp>,
    /// Approved calls waiting for the active response to end.
    approved: Vec<PlannedMcp>,
}

#[derive(Debug)]
struct ListedServer {
    tool: McpTool,
    item_id: String,
    tools: Option<Vec<ListedTool>>,
}

/// Where `tool` is reached; `Err` says why it cannot be (a connector, a tunnel).
fn server_of(tool: &McpTool) -> Result<McpServer, String> {
    let Some(url) = tool.server_url.clone() else {
        return Err(format!(
            "MCP server '{}' has no server_url: OpenAI's connectors and tunnels cannot be \
             reached from voice-edge",
            tool.server_label
        ));
    };
    let headers = tool
        .headers
        .iter()
        .flatten()
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_str().map_or_else(|| v.to_string(), str::to_owned),
            )
        })
        .collect();
    Ok(McpServer {
        url,
        headers,
        authorization: tool.authorization.clone(),
    })
}

/// Whether a filter object (`tool_names`, `read_only`) matches the tool `name` (read-only
/// by its server's hint); all the conditions given must hold.
fn filter_matches(filter: &Value, name: &str, read_only: bool) -> bool {
    let names_ok = match filter.get("tool_names").and_then(Value::as_array) {
        Some(names) => names.iter().any(|n| n.as_str() == Some(name)),
        None => true,
    };
    let read_only_ok = match filter.get("read_only").and_then(Value::as_bool) {
        Some(want) => read_only == want,
        None => true,
    };
    names_ok && read_only_ok
}

/// `allowed_tools`: a list of names, or a filter object; absent lets every tool through.
fn allowed(tool: &McpTool, t: &ListedTool) -> bool {
    match &tool.allowed_tools {
        None | Some(Value::Null) => true,
        Some(Value::Array(names)) => names.iter().any(|n| n.as_str() == Some(t.name.as_str())),
        Some(filter) => filter_matches(filter, &t.name, t.read_only()),
    }
}

/// `require_approval`: `"never"`, `"always"` (the default, as on the service), or
/// `{never: filter, always: filter}`, where a tool neither filter names needs approval.
fn needs_approval(tool: &McpTool, name: &str, listed: Option<&ListedTool>) -> bool {
    match &tool.require_approval {
        Some(Value::String(s)) => s != "never",
        Some(Value::Object(o)) => {
            let read_only = listed.is_some_and(ListedTool::read_only);
            let matches = |key: &str| {
                o.get(key)
                    .is_some_and(|f| filter_matches(f, name, read_only))
            };
            !matches("never") || matches("always")
        }
        _ => true,
    }
}

impl Conversation {
    /// Follows the session's MCP servers after its tools changed (see the module docs).
    pub(super) fn sync_mcp(&mut self) {
        let wanted: Vec<McpTool> = self
            .config
            .tools
            .iter()
            .filter_map(|t| match t {
                Tool::Mcp(m) => Some(m.clone()),
                Tool::Function(_) => None,
            })
            .collect();
        self.mcp.servers.retain(|s| wanted.contains(&s.tool));
        for tool in wanted {
            if self.mcp.servers.iter().any(|s| s.tool == tool) {
                continue;
            }
            // One listing per label: a changed server replaces the old one.
            self.mcp
                .servers
                .retain(|s| s.tool.server_label != tool.server_label);
            let item_id = self.new_id("mcpl");
            let value = list_item(&item_id, &tool.server_label, &[]);
            let previous = self.items.push(Item {
                value: value.clone(),
                origin: AudioSource::Client,
            });
            self.out.emit(E::ConversationItemAdded(ItemInPlace {
                previous_item_id: previous,
                item: value,
            }));
            self.out.emit(E::McpListToolsInProgress {
                item_id: item_id.clone(),
            });
            let server = server_of(&tool);
            self.mcp.servers.push(ListedServer {
                tool,
                item_id: item_id.clone(),
                tools: None,
            });
            match server {
                Ok(server) => self.out.act(Action::Mcp {
                    key: item_id,
                    request: McpRequest::ListTools { server },
                }),
                Err(why) => self.on_mcp_outcome(
                    &item_id,
                    McpOutcome::Listed(Err(McpError::HttpError {
                        code: 400,
                        message: why,
                    })),
                ),
            }
        }
    }

    /// What the host's MCP request `key` came back with (see [`Action::Mcp`]). Ignored when
    /// nobody waits for it any more (the server was dropped, the response cancelled).
    pub fn on_mcp_outcome(&mut self, key: &str, outcome: McpOutcome) {
        match outcome {
            McpOutcome::Listed(result) => self.on_listed(key, result),
            McpOutcome::Called(result) => self.on_called(key, result),
        }
    }

    fn on_listed(&mut self, item_id: &str, result: Result<Vec<ListedTool>, McpError>) {
        let Some(s) = self
            .mcp
            .servers
            .iter_mut()
            .find(|s| s.item_id == item_id && s.tools.is_none())
        else {
            return;
        };
        let label = s.tool.server_label.clone();
        let tools: Vec<ListedTool> = match &result {
            Ok(tools) => tools
                .iter()
                .filter(|t| allowed(&s.tool, t))
                .cloned()
                .collect(),
            Err(_) => Vec::new(),
        };
        s.tools = Some(tools.clone());
        let value = list_item(item_id, &label, &tools);
        if let Some(stored) = self.items.get_mut(item_id) {
            stored.value = value.clone();
        }
        match result {
            Ok(_) => self.out.emit(E::McpListToolsCompleted {
                item_id: item_id.to_owned(),
            }),
            Err(e) => {
                self.out.emit(E::McpListToolsFailed {
                    item_id: item_id.to_owned(),
                });
                self.out.error(ClientError::server(
                    "mcp_list_tools_failed",
                    format!(
                        "Listing the tools of MCP server '{label}' failed: {}",
                        e.message()
                    ),
                ));
            }
        }
        let previous = self.items.previous_of(item_id);
        self.out.emit(E::ConversationItemDone(ItemInPlace {
            previous_item_id: previous,
            item: value,
        }));
    }

    /// The listed tools a response may call: those of the servers among `tools` (the
    /// response's or the session's) that have been listed.
    pub(super) fn mcp_callables(&self, tools: &[Tool]) -> Vec<McpCallable> {
        let mut out = Vec::new();
        for t in tools {
            let Tool::Mcp(m) = t else { continue };
            let Some(s) = self.mcp.servers.iter().find(|s| s.tool == *m) else {
                continue;
            };
            for listed in s.tools.iter().flatten() {
                out.push(McpCallable {
                    server_label: m.server_label.clone(),
                    name: listed.name.clone(),
                    input_schema: listed.input_schema.clone(),
                });
            }
        }
        out
    }

    /// The planned call for a model's choice of `name` on server `label`.
    pub(super) fn plan_mcp(&mut self, label: &str, name: &str, arguments: String) -> PlannedMcp {
        let needs = self
            .mcp
            .servers
            .iter()
            .find(|s| s.tool.server_label == label)
            .is_none_or(|s| {
                let listed = s.tools.iter().flatten().find(|t| t.name == name);
                needs_approval(&s.tool, name, listed)
            });
        PlannedMcp {
            item_id: self.new_id(if needs { "mcpr" } else { "mcp" }),
            server_label: label.to_owned(),
            name: name.to_owned(),
            arguments,
            approval_request_id: None,
            needs_approval: needs,
        }
    }

    /// Opens the active response's MCP call: its item, arguments and `in_progress`, then the
    /// request to the host.
    pub(super) fn open_mcp_call(&mut self, m: &PlannedMcp) {
        let Some(r) = self.active.as_mut() else {
            return;
        };
        r.awaiting_mcp = true;
        let (response_id, in_conversation) = (r.id.clone(), r.in_conversation);
        let item = m.call_item(None);
        self.out.emit(E::OutputItemAdded(OutputItem {
            response_id: response_id.clone(),
            output_index: 0,
            item: item.clone(),
        }));
        if in_conversation {
            let previous = self.items.push(Item {
                value: item.clone(),
                origin: AudioSource::Client,
            });
            self.out.emit(E::ConversationItemAdded(ItemInPlace {
                previous_item_id: previous,
                item,
            }));
        }
        let at = OutputRef {
            response_id,
            item_id: m.item_id.clone(),
            output_index: 0,
        };
        self.out.emit(E::McpCallArgumentsDelta {
            at: at.clone(),
            delta: m.arguments.clone(),
        });
        self.out.emit(E::McpCallArgumentsDone {
            at,
            arguments: m.arguments.clone(),
        });
        self.out.emit(E::McpCallInProgress {
            item_id: m.item_id.clone(),
            output_index: 0,
        });
        let server = self
            .mcp
            .servers
            .iter()
            .find(|s| s.tool.server_label == m.server_label)
            .map(|s| server_of(&s.tool));
        match server {
            Some(Ok(server)) => self.out.act(Action::Mcp {
                key: m.item_id.clone(),
                request: McpRequest::CallTool {
                    server,
                    name: m.name.clone(),
                    arguments: m.arguments.clone(),
                },
            }),
            other => {
                let message = match other {
                    Some(Err(why)) => why,
                    _ => format!(
                        "MCP server '{}' is no longer in the session",
                        m.server_label
                    ),
                };
                self.on_called(&m.item_id, Err(McpError::HttpError { code: 400, message }));
            }
        }
    }

    fn on_called(&mut self, item_id: &str, result: Result<String, McpError>) {
        let Some(r) = self
            .active
            .as_mut()
            .filter(|r| r.awaiting_mcp && r.mcp.as_ref().is_some_and(|m| m.item_id == item_id))
        else {
            return;
        };
        r.awaiting_mcp = false;
        let Some(m) = r.mcp.clone() else { return };
        let (response_id, in_conversation) = (r.id.clone(), r.in_conversation);
        let item = m.call_item(Some(&result));
        r.lead.push(item.clone());
        r.message_index = 1;
        self.out.emit(match &result {
            Ok(_) => E::McpCallCompleted {
                item_id: item_id.to_owned(),
                output_index: 0,
            },
            Err(_) => E::McpCallFailed {
                item_id: item_id.to_owned(),
                output_index: 0,
            },
        });
        self.out.emit(E::OutputItemDone(OutputItem {
            response_id,
            output_index: 0,
            item: item.clone(),
        }));
        if in_conversation {
            if let Some(stored) = self.items.get_mut(item_id) {
                stored.value = item.clone();
            }
            let previous = self.items.previous_of(item_id);
            self.out.emit(E::ConversationItemDone(ItemInPlace {
                previous_item_id: previous,
                item,
            }));
        }
        let output = match &result {
            Ok(out) => out.clone(),
            Err(e) => format!("an error: {}", e.message()),
        };
        self.say_after_mcp(&m.name, &m.item_id, &output);
    }

    /// The client answered approval request `request_id`: an approved call runs in a response
    /// of its own (now, or when the active one ends); a refused one is only recorded.
    pub(super) fn on_approval(&mut self, request_id: &str, approve: bool) {
        let Some(i) = self
            .mcp
            .approvals
            .iter()
            .position(|a| a.item_id == request_id)
        else {
            return;
        };
        let request = self.mcp.approvals.remove(i);
        if !approve {
            return;
        }
        let call = PlannedMcp {
            item_id: self.new_id("mcp"),
            approval_request_id: Some(request.item_id.clone()),
            needs_approval: false,
            ..request
        };
        self.mcp.approved.push(call);
        self.run_approved();
    }

    /// Starts the next approved call's response if none is active.
    pub(super) fn run_approved(&mut self) {
        if self.active.is_some() || self.mcp.approved.is_empty() {
            return;
        }
        let call = self.mcp.approved.remove(0);
        self.start_response(ResponseRequest {
            approved_mcp: Some(call),
            ..ResponseRequest::default()
        });
    }

    /// Whether `request_id` names an approval request this conversation is waiting on.
    pub(super) fn awaits_approval(&self, request_id: &str) -> bool {
        self.mcp.approvals.iter().any(|a| a.item_id == request_id)
    }

    /// A response's `mcp_approval_request` output at `output_index`, remembered for the
    /// client's answer; returns the item for `response.done`.
    pub(super) fn emit_approval_request(
        &mut self,
        response_id: &str,
        m: &PlannedMcp,
        output_index: usize,
        in_conversation: bool,
    ) -> Value {
        let item = m.approval_item();
        self.out.emit(E::OutputItemAdded(OutputItem {
            response_id: response_id.to_owned(),
            output_index,
            item: item.clone(),
        }));
        let mut previous = None;
        if in_conversation {
            previous = self.items.push(Item {
                value: item.clone(),
                origin: AudioSource::Client,
            });
            self.out.emit(E::ConversationItemAdded(ItemInPlace {
                previous_item_id: previous.clone(),
                item: item.clone(),
            }));
        }
        self.out.emit(E::OutputItemDone(OutputItem {
            response_id: response_id.to_owned(),
            output_index,
            item: item.clone(),
        }));
        if in_conversation {
            self.out.emit(E::ConversationItemDone(ItemInPlace {
                previous_item_id: previous,
                item: item.clone(),
            }));
        }
        self.mcp.approvals.push(m.clone());
        item
    }
}

fn list_item(item_id: &str, label: &str, tools: &[ListedTool]) -> Value {
    json!({
        "id": item_id,
        "object": "realtime.item",
        "type": "mcp_list_tools",
        "server_label": label,
        "tools": tools,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(v: Value) -> McpTool {
        serde_json::from_value(v).unwrap()
    }

    fn listed(name: &str, read_only: bool) -> ListedTool {
        ListedTool {
            name: name.into(),
            description: None,
            input_schema: json!({"type": "object"}),
            annotations: Some(json!({"readOnlyHint": read_only})),
        }
    }

    #[test]
    fn allowed_tools_take_names_or_a_filter() {
        let echo = listed("echo", true);
        let sum = listed("get-sum", false);
        let all = tool(json!({"server_label": "s", "server_url": "http://x"}));
        assert!(allowed(&all, &echo) && allowed(&all, &sum));
        let names = tool(json!({"server_label": "s", "allowed_tools": ["echo"]}));
        assert!(allowed(&names, &echo) && !allowed(&names, &sum));
        let ro = tool(json!({"server_label": "s", "allowed_tools": {"read_only": true}}));
        assert!(allowed(&ro, &echo) && !allowed(&ro, &sum));
    }

    #[test]
    fn approval_is_required_unless_never_says_otherwise() {
        let echo = listed("echo", true);
        let default = tool(json!({"server_label": "s"}));
        assert!(needs_approval(&default, "echo", Some(&echo)));
        let never = tool(json!({"server_label": "s", "require_approval": "never"}));
        assert!(!needs_approval(&never, "echo", Some(&echo)));
        let filter = tool(json!({"server_label": "s",
            "require_approval": {"never": {"tool_names": ["echo"]}}}));
        assert!(!needs_approval(&filter, "echo", Some(&echo)));
        assert!(needs_approval(
            &filter,
            "get-sum",
            Some(&listed("get-sum", false))
        ));
    }

    #[test]
    fn a_server_without_a_url_is_named_in_the_refusal() {
        let connector =
            tool(json!({"server_label": "drive", "connector_id": "connector_googledrive"}));
        let why = server_of(&connector).unwrap_err();
        assert!(
            why.contains("'drive'") && why.contains("server_url"),
            "{why}"
        );
    }
}
