//! Tool calls: the GA event sequence, the app's output answered, choice rules per response.

use serde_json::{Value, json};

use super::{Harness, deltas, of_type, types};
use crate::model::Reply;

fn weather_tool() -> Value {
    json!({"type": "function", "name": "get_weather", "description": "Current weather",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "examples": ["Paris"]},
               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
               "required": ["city", "unit"]}})
}

fn time_tool() -> Value {
    json!({"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}})
}

/// Plays a spoken response to its end, as the media side would.
fn play_out(h: &mut Harness) -> Vec<Value> {
    let (rid, _) = h.take_speak().expect("a spoken response");
    h.c.on_audio_done(&rid);
    h.frames()
}

#[test]
fn required_tool_choice_calls_the_tool_in_the_ga_sequence_and_speaks_its_output() {
    let mut h = Harness::open("tts");
    h.send(json!({"type": "session.update", "session": {
        "tools": [weather_tool()], "tool_choice": "required"}}));
    let out = h.send_message("How is it outside?", 1);
    let mut t = types(&out);
    t.dedup(); // the arguments arrive in a few deltas
    assert_eq!(
        t,
        [
            "conversation.item.added",
            "conversation.item.done",
            "response.created",
            "rate_limits.updated",
            "response.output_item.added",
            "conversation.item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ]
    );
    assert!(h.take_speak().is_none(), "a tool call alone plays nothing");
    let added = &out[4]["item"];
    assert_eq!(
        (&added["type"], &added["status"], &added["arguments"]),
        (&json!("function_call"), &json!("in_progress"), &json!(""))
    );
    let done = of_type(&out, "response.function_call_arguments.done")[0];
    let call_id = done["call_id"].as_str().unwrap().to_owned();
    assert_eq!(done["name"], "get_weather");
    assert_eq!(done["item_id"], added["id"]);
    assert_eq!(done["output_index"], 0);
    let args: Value = serde_json::from_str(done["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris", "unit": "celsius"}));
    let delta: String = of_type(&out, "response.function_call_arguments.delta")
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(delta, done["arguments"].as_str().unwrap());
    let response = &of_type(&out, "response.done")[0]["response"];
    assert_eq!(response["status"], "completed");
    assert_eq!(response["output"][0]["type"], "function_call");
    assert_eq!(response["output"][0]["call_id"], call_id.as_str());
    assert_eq!(response["output"][0]["status"], "completed");
    // The call is in the conversation, complete.
    let got = h.send(json!({"type": "conversation.item.retrieve", "item_id": added["id"]}));
    assert_eq!(got[0]["item"]["arguments"], done["arguments"]);

    // The app answers; the next response speaks the result instead of calling again.
    h.send(json!({"type": "conversation.item.create", "item": {
        "type": "function_call_output", "call_id": call_id, "output": "{\"temperature_c\":21}"}}));
    let out = h.send(json!({"type": "response.create"}));
    assert!(of_type(&out, "response.function_call_arguments.done").is_empty());
    let (rid, reply) = h.take_speak().expect("spoken");
    assert_eq!(
        reply,
        Reply::text("The get_weather tool returned: {\"temperature_c\":21}")
    );
    h.c.on_audio_done(&rid);
    let end = h.frames();
    assert_eq!(
        deltas(&end),
        "The get_weather tool returned: {\"temperature_c\":21}"
    );
    assert_eq!(
        of_type(&end, "response.done")[0]["response"]["status"],
        "completed"
    );
}

#[test]
fn auto_calls_what_the_user_names_in_parallel_unless_told_not_to() {
    let mut h = Harness::open("echo");
    h.send(json!({"type": "session.update", "session": {"tools": [weather_tool(), time_tool()]}}));
    // auto, nothing named: the echo answers.
    h.send_message("hello", 1);
    play_out(&mut h);
    let out = h.send_message("get_time and get_weather please", 2);
    let calls = of_type(&out, "response.function_call_arguments.done");
    let names: Vec<&str> = calls.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["get_weather", "get_time"]);
    assert_eq!(
        (&calls[0]["output_index"], &calls[1]["output_index"]),
        (&json!(0), &json!(1))
    );
    assert_ne!(calls[0]["call_id"], calls[1]["call_id"]);
    let done = &of_type(&out, "response.done")[0]["response"];
    assert_eq!(done["output"].as_array().unwrap().len(), 2);
    // Both outputs are answered together.
    for (c, out) in calls.iter().zip(["sunny", "noon"]) {
        h.send(json!({"type": "conversation.item.create", "item": {
            "type": "function_call_output", "call_id": c["call_id"], "output": out}}));
    }
    h.send(json!({"type": "response.create"}));
    let (_, reply) = h.take_speak().unwrap();
    assert_eq!(
        reply,
        Reply::text("The get_weather tool returned: sunny The get_time tool returned: noon")
    );

    let mut h = Harness::open("echo");
    h.send(json!({"type": "session.update", "session": {
        "tools": [weather_tool(), time_tool()], "parallel_tool_calls": false}}));
    let out = h.send_message("get_time and get_weather please", 1);
    assert_eq!(
        of_type(&out, "response.function_call_arguments.done").len(),
        1
    );
}

#[test]
fn response_create_can_name_its_own_tools_and_choice() {
    let mut h = Harness::open("echo");
    h.send(json!({"type": "session.update", "session": {"tools": [weather_tool()]}}));
    h.send(json!({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}}));
    let out = h.send(json!({"type": "response.create", "response": {
        "tools": [time_tool()], "tool_choice": {"type": "function", "name": "get_time"}}}));
    let calls = of_type(&out, "response.function_call_arguments.done");
    assert_eq!(calls[0]["name"], "get_time");
    assert_eq!(calls[0]["arguments"], "{}");
    // Bad values are refused whole.
    let e = h.expect_error(json!({"type": "response.create", "event_id": "x",
        "response": {"tool_choice": "sometimes"}}));
    assert_eq!(e["param"], "response.tool_choice");
    let e = h.expect_error(json!({"type": "response.create", "event_id": "y",
        "response": {"tools": [1]}}));
    assert_eq!(e["param"], "response.tools[0]");
    // tool_choice none on the session: never a call, even when named.
    h.send(json!({"type": "session.update", "session": {"tool_choice": "none"}}));
    let out = h.send_message("get_weather now", 2);
    assert!(of_type(&out, "response.function_call_arguments.done").is_empty());
}

#[test]
fn a_cancelled_spoken_response_never_makes_its_calls() {
    // A script that speaks, then calls: cancelling the speech drops the call.
    let mut h = Harness::open("script:weather");
    let out = h.send_message("hello", 1);
    assert!(of_type(&out, "response.output_item.added").len() == 1);
    let out = h.send(json!({"type": "response.cancel"}));
    assert!(of_type(&out, "response.function_call_arguments.done").is_empty());
    let done = &of_type(&out, "response.done")[0]["response"];
    assert_eq!(done["status"], "cancelled");
    assert_eq!(done["output"].as_array().unwrap().len(), 1);
}
