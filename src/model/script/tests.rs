use super::*;
use crate::model::ToolOutput;
use serde_json::{Value, json};

fn model(text: &str) -> ScriptModel {
    let script = format::parse(text).unwrap();
    ScriptModel {
        name: "t".into(),
        answered: vec![false; script.turns.len()],
        script: Ok(Arc::new(script)),
    }
}

fn ctx<'a>(prompt: Prompt<'a>, index: u64, tools: &'a [Tool]) -> ResponseContext<'a> {
    static AUTO: crate::model::tools::ToolChoice =
        crate::model::tools::ToolChoice::Mode(crate::model::tools::ToolMode::Auto);
    ResponseContext {
        prompt,
        instructions: None,
        tools,
        tool_choice: &AUTO,
        parallel_tool_calls: true,
        mcp_tools: &[],
        index,
    }
}

#[test]
fn the_weather_conversation_plays_in_order() {
    let mut m = ScriptModel::load("weather");
    let heard = m.transcribe(&AudioTurn {
        what: Heard::Speech,
        ms: 1800,
        next_response: 0,
    });
    assert_eq!(
        heard,
        Transcription::Text("What's the weather in Paris?".into())
    );
    let spoken = Prompt::Audio {
        item_id: "item_1",
        start_ms: 0,
        end_ms: 1800,
        transcript: Some("What's the weather in Paris?"),
    };
    let plan = m.respond(&ctx(spoken, 0, &[]));
    assert_eq!(
        plan.reply,
        Some(Reply::text("Let me check the weather in Paris."))
    );
    assert_eq!(plan.tool_calls[0].name, "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(&plan.tool_calls[0].arguments).unwrap(),
        json!({"city": "Paris", "unit": "celsius"})
    );
    let outputs = Prompt::ToolOutputs(vec![ToolOutput {
        call_id: "call_1",
        name: Some("get_weather"),
        output: r#"{"temperature_c": 21}"#,
    }]);
    let plan = m.respond(&ctx(outputs, 1, &[]));
    assert_eq!(
        plan.reply,
        Some(Reply::text(
            r#"Here is the weather in Paris: {"temperature_c": 21}"#
        ))
    );
    let plan = m.respond(&ctx(Prompt::Text("Try again".into()), 2, &[]));
    assert!(matches!(plan.ending, Ending::Failed { ref code, .. } if code == "server_error"));
    assert_eq!((plan.delay_ms, plan.reply), (300, None));
    let plan = m.respond(&ctx(Prompt::Text("a long one".into()), 3, &[]));
    assert_eq!(plan.ending, Ending::Incomplete);
    // The fallback repeats.
    for i in 4..6 {
        let plan = m.respond(&ctx(Prompt::Text("hello".into()), i, &[]));
        assert_eq!(
            plan.reply,
            Some(Reply::text("That is all I know about the weather."))
        );
    }
}

#[test]
fn an_unmatched_input_fails_naming_it() {
    let mut m = model(r#"{"turns": [{"when": {"audio": true}, "steps": [{"say": "a"}]}]}"#);
    let plan = m.respond(&ctx(Prompt::Text("hi there".into()), 0, &[]));
    let Ending::Failed { code, message } = plan.ending else {
        panic!("{plan:?}")
    };
    assert_eq!(code, "script_no_match");
    assert!(message.contains("the message \"hi there\""), "{message}");
    // A turn answers once.
    let audio = || Prompt::Audio {
        item_id: "i",
        start_ms: 0,
        end_ms: 10,
        transcript: None,
    };
    assert!(m.respond(&ctx(audio(), 0, &[])).reply.is_some());
    assert!(matches!(
        m.respond(&ctx(audio(), 1, &[])).ending,
        Ending::Failed { .. }
    ));
}

#[test]
fn tool_outputs_match_by_name_and_content() {
    let mut m = model(
        r#"{"turns": [{"when": {"tool_output": {"name": "f", "contains": "OK"}}, "steps": [{"say": "good"}]}]}"#,
    );
    let out = |name, output| {
        Prompt::ToolOutputs(vec![ToolOutput {
            call_id: "c",
            name: Some(name),
            output,
        }])
    };
    assert!(m.respond(&ctx(out("g", "ok"), 0, &[])).reply.is_none());
    assert!(m.respond(&ctx(out("f", "fail"), 0, &[])).reply.is_none());
    assert_eq!(
        m.respond(&ctx(out("f", "all ok"), 0, &[])).reply,
        Some(Reply::text("good"))
    );
}

#[test]
fn undeclared_arguments_come_from_the_schema_and_transcription_can_fail() {
    let mut m = model(
        r#"{"turns": [{"transcription_fails": true, "steps": [{"tool_call": {"name": "f"}}, {"tool_call": {"name": "g"}}]}]}"#,
    );
    let tools: Vec<Tool> = serde_json::from_value(json!([
        {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"q": {"type": "string", "examples": ["x"]}}}},
    ]))
    .unwrap();
    assert!(matches!(
        m.transcribe(&AudioTurn {
            what: Heard::Speech,
            ms: 100,
            next_response: 0
        }),
        Transcription::Failed { .. }
    ));
    let plan = m.respond(&ctx(Prompt::Idle, 0, &tools));
    assert_eq!(plan.tool_calls[0].arguments, r#"{"q":"x"}"#);
    assert_eq!(plan.tool_calls[1].arguments, "{}");
}

#[test]
fn a_missing_script_says_so_on_every_turn() {
    let mut m = ScriptModel::load("does-not-exist");
    let plan = m.respond(&ctx(Prompt::Nothing, 0, &[]));
    assert!(
        matches!(plan.ending, Ending::Failed { ref code, .. } if code == "script_not_found"),
        "{plan:?}"
    );
}
