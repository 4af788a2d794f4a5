//! Tool calls with a non-browser WebRTC client (webrtc-rs) and raw events: the stub calls the
//! declared tool as the GA API does, the client answers with `function_call_output`, and the
//! answer comes back spoken, over the real path (relay, transceiver, SRTP, SCTP).

use crate::common;

use std::time::Duration;

use common::{Client, response_types, start_local};
use serde_json::{Value, json};
use voice_edge::allinone::AllInOneConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_tool_is_called_answered_and_its_output_spoken() {
    let running = start_local(AllInOneConfig::default()).await;
    let mut c = Client::call(running.http_addr, "/v1/realtime/calls?model=tts").await;
    c.wait_connected(Duration::from_secs(10)).await;
    c.wait_for("session.created", 1).await;
    c.send_event(json!({"type": "session.update", "session": {"type": "realtime",
        "tools": [{"type": "function", "name": "lookup_order",
                   "description": "Find an order",
                   "parameters": {"type": "object",
                                  "properties": {"order_id": {"type": "string", "pattern": "^A[0-9]+$", "examples": ["A1234"]},
                                                 "include_items": {"type": "boolean", "default": true}},
                                  "required": ["order_id"]}}],
        "tool_choice": "required"}}))
    .await;
    c.wait_for("session.updated", 1).await;
    c.send_message("Where is my order?").await;
    let events = c.wait_for("response.done", 1).await;
    assert_eq!(
        response_types(&events, 0),
        [
            "response.created",
            "rate_limits.updated",
            "response.output_item.added",
            "conversation.item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done"
        ]
    );
    let done = events
        .iter()
        .find(|e| e["type"] == "response.function_call_arguments.done")
        .unwrap();
    assert_eq!(done["name"], "lookup_order");
    let args: Value = serde_json::from_str(done["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"order_id": "A1234", "include_items": true}));
    let call_id = done["call_id"].as_str().unwrap();

    // Nothing was played for the call itself.
    let mut before = 0;
    while c.rtp_rx.try_recv().is_ok() {
        before += 1;
    }
    c.send_event(
        json!({"type": "conversation.item.create", "item": {"type": "function_call_output",
        "call_id": call_id, "output": "shipped"}}),
    )
    .await;
    c.send_event(json!({"type": "response.create"})).await;
    let events = c.wait_for("response.done", 2).await;
    let done = events
        .iter()
        .filter(|e| e["type"] == "response.done")
        .nth(1)
        .unwrap();
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        "The lookup_order tool returned: shipped"
    );
    let mut spoken = 0;
    while c.rtp_rx.try_recv().is_ok() {
        spoken += 1;
    }
    assert!(before < 5, "{before} audio packets for a tool call alone");
    assert!(
        spoken > 30,
        "only {spoken} audio packets for the spoken answer"
    );
    running.shutdown().await;
}
