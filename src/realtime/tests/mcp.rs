//! MCP tools in the engine: listing on session.update, a call with the server's answer spoken
//! after it in the same response, approval, and failures; the server is the test (it answers
//! the engine's `Action::Mcp` by hand), so every order is checked without a network.

use serde_json::{Value, json};

use super::{Harness, of_type, types};
use crate::mcp::{ListedTool, McpError, McpOutcome, McpRequest};
use crate::realtime::Action;

fn mcp_requests(h: &mut Harness) -> Vec<(String, McpRequest)> {
    h.actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::Mcp { key, request } => Some((key, request)),
            _ => None,
        })
        .collect()
}

fn echo_tool() -> ListedTool {
    ListedTool {
        name: "echo".into(),
        description: Some("Echoes back the input".into()),
        input_schema: json!({"type": "object", "properties": {"message": {"type": "string"}},
                             "required": ["message"]}),
        annotations: None,
    }
}

/// A text session with one MCP server, listed; returns the list item's id.
fn listed(h: &mut Harness, approval: Value) -> String {
    let out = h.send(json!({"type": "session.update", "session": {
        "type": "realtime", "output_modalities": ["text"],
        "tools": [{"type": "mcp", "server_label": "everything",
                   "server_url": "http://127.0.0.1:9/mcp", "require_approval": approval}]}}));
    assert_eq!(
        types(&out),
        [
            "session.updated",
            "conversation.item.added",
            "mcp_list_tools.in_progress"
        ]
    );
    let item_id = out[2]["item_id"].as_str().unwrap().to_owned();
    assert_eq!(out[1]["item"]["type"], "mcp_list_tools");
    assert_eq!(out[1]["item"]["id"], item_id.as_str());
    let requests = mcp_requests(h);
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].0, item_id);
    assert!(
        matches!(&requests[0].1, McpRequest::ListTools { server } if server.url == "http://127.0.0.1:9/mcp")
    );
    h.c.on_mcp_outcome(&item_id, McpOutcome::Listed(Ok(vec![echo_tool()])));
    let out = h.frames();
    assert_eq!(
        types(&out),
        ["mcp_list_tools.completed", "conversation.item.done"]
    );
    assert_eq!(out[1]["item"]["tools"][0]["name"], "echo");
    assert_eq!(
        out[1]["item"]["tools"][0]["input_schema"]["required"][0],
        "message"
    );
    // A second identical update lists nothing again.
    let again = h.send(
        json!({"type": "session.update", "session": {"type": "realtime",
        "tools": [{"type": "mcp", "server_label": "everything",
                   "server_url": "http://127.0.0.1:9/mcp", "require_approval": approval}]}}),
    );
    assert_eq!(types(&again), ["session.updated"]);
    item_id
}

#[test]
fn a_named_mcp_tool_is_called_and_its_answer_said_in_the_same_response() {
    let mut h = Harness::open("echo");
    listed(&mut h, json!("never"));
    let out = h.send_message("Please use the echo tool.", 1);
    assert_eq!(
        types(&out)[2..],
        [
            "response.created",
            "rate_limits.updated",
            "response.output_item.added",
            "conversation.item.added",
            "response.mcp_call_arguments.delta",
            "response.mcp_call_arguments.done",
            "response.mcp_call.in_progress",
        ]
    );
    let call_id = out[4]["item"]["id"].as_str().unwrap().to_owned();
    assert_eq!(out[4]["item"]["type"], "mcp_call");
    let (key, request) = mcp_requests(&mut h).remove(0);
    assert_eq!(key, call_id);
    let McpRequest::CallTool {
        name, arguments, ..
    } = request
    else {
        panic!("{request:?}")
    };
    assert_eq!(name, "echo");
    assert_eq!(arguments, r#"{"message":""}"#);
    h.c.on_mcp_outcome(&call_id, McpOutcome::Called(Ok("Echo: hi".into())));
    let out = h.frames();
    let t = types(&out);
    assert_eq!(
        t[..3],
        [
            "response.mcp_call.completed",
            "response.output_item.done",
            "conversation.item.done"
        ]
    );
    assert_eq!(out[1]["item"]["output"], "Echo: hi");
    assert_eq!(*t.last().unwrap(), "response.done");
    let added = of_type(&out, "response.output_item.added");
    assert_eq!(added[0]["output_index"], 1, "the message follows the call");
    let done = &out.last().unwrap()["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["type"], "mcp_call");
    assert_eq!(done["output"][1]["type"], "message");
    let text = done["output"][1]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Echo: hi"), "{text}");
}

#[test]
fn approval_comes_first_and_the_approval_item_alone_runs_the_call() {
    let mut h = Harness::open("echo");
    listed(&mut h, json!("always"));
    let out = h.send_message("Please use the echo tool.", 1);
    let done = &of_type(&out, "response.done")[0]["response"];
    assert_eq!(done["output"][0]["type"], "mcp_approval_request");
    assert!(
        mcp_requests(&mut h).is_empty(),
        "nothing runs before approval"
    );
    let request_id = done["output"][0]["id"].as_str().unwrap().to_owned();
    // An answer to nothing is refused.
    let e = h.expect_error(json!({"type": "conversation.item.create", "event_id": "e1",
        "item": {"type": "mcp_approval_response", "approval_request_id": "nope", "approve": true}}));
    assert_eq!(e["code"], "invalid_approval_request_id");
    let out = h.send(json!({"type": "conversation.item.create",
        "item": {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": true}}));
    assert!(
        types(&out).contains(&"response.mcp_call.in_progress"),
        "{out:?}"
    );
    let call = &of_type(&out, "response.output_item.added")[0]["item"];
    assert_eq!(call["approval_request_id"], request_id.as_str());
    let (key, _) = mcp_requests(&mut h).remove(0);
    h.c.on_mcp_outcome(&key, McpOutcome::Called(Ok("Echo: ok".into())));
    assert!(types(&h.frames()).contains(&"response.done"));
}

#[test]
fn a_refused_approval_runs_nothing() {
    let mut h = Harness::open("echo");
    listed(&mut h, Value::Null);
    let out = h.send_message("use echo", 1);
    let request_id = of_type(&out, "response.done")[0]["response"]["output"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = h.send(json!({"type": "conversation.item.create",
        "item": {"type": "mcp_approval_response", "approval_request_id": request_id,
                 "approve": false, "reason": "not now"}}));
    assert_eq!(
        types(&out),
        ["conversation.item.added", "conversation.item.done"]
    );
    assert!(mcp_requests(&mut h).is_empty());
}

#[test]
fn a_failed_call_and_a_failed_listing_say_why() {
    let mut h = Harness::open("echo");
    listed(&mut h, json!("never"));
    h.send_message("use echo", 1);
    let (key, _) = mcp_requests(&mut h).remove(0);
    let down = McpError::HttpError {
        code: 502,
        message: "connection refused".into(),
    };
    h.c.on_mcp_outcome(&key, McpOutcome::Called(Err(down)));
    let out = h.frames();
    assert_eq!(types(&out)[0], "response.mcp_call.failed");
    let item = &out[1]["item"];
    assert_eq!(item["error"]["type"], "http_error");
    assert_eq!(item["error"]["code"], 502);
    assert_eq!(
        of_type(&out, "response.done")[0]["response"]["status"],
        "completed"
    );

    let mut h = Harness::open("echo");
    h.send(
        json!({"type": "session.update", "session": {"type": "realtime",
        "tools": [{"type": "mcp", "server_label": "s", "server_url": "http://127.0.0.1:9/mcp"}]}}),
    );
    let (key, _) = mcp_requests(&mut h).remove(0);
    h.c.on_mcp_outcome(
        &key,
        McpOutcome::Listed(Err(McpError::HttpError {
            code: 504,
            message: "no answer".into(),
        })),
    );
    let out = h.frames();
    assert_eq!(
        types(&out),
        ["mcp_list_tools.failed", "error", "conversation.item.done"]
    );
    assert_eq!(out[1]["error"]["code"], "mcp_list_tools_failed");
    assert!(
        out[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no answer")
    );
    // Without listed tools the model just answers.
    let out = h.send_message("use echo", 1);
    assert!(!types(&out).contains(&"response.mcp_call.in_progress"));
}

#[test]
fn a_server_without_a_url_fails_its_listing_at_once() {
    let mut h = Harness::open("echo");
    let out = h.send(json!({"type": "session.update", "session": {"type": "realtime",
        "tools": [{"type": "mcp", "server_label": "drive", "connector_id": "connector_googledrive"}]}}));
    assert!(types(&out).contains(&"mcp_list_tools.failed"), "{out:?}");
    assert!(mcp_requests(&mut h).is_empty());
}
