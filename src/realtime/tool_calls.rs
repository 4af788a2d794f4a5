//! A response's function calls on the wire, in the GA order for each call:
//! `response.output_item.added` (`in_progress`, empty arguments), `conversation.item.added`,
//! `response.function_call_arguments.delta`…, `.done` (with `name`), `response.output_item.done`
//! (`completed`) and `conversation.item.done`. The stored item is the completed call, so the
//! app's `function_call_output` can name its `call_id` and a retrieve shows the arguments.

use serde_json::{Value, json};

use super::Conversation;
use super::items::{AudioSource, Item};
use super::server_event::{CallRef, ItemInPlace, OutputItem, RealtimeServerEvent as E};

#[derive(Debug, Clone)]
pub(super) struct PlannedCall {
    pub item_id: String,
    pub call_id: String,
    pub name: String,
    pub arguments: String,
}

impl PlannedCall {
    pub fn item(&self, status: &str) -> Value {
        let arguments = if status == "in_progress" {
            ""
        } else {
            self.arguments.as_str()
        };
        json!({
            "id": self.item_id,
            "object": "realtime.item",
            "type": "function_call",
            "status": status,
            "name": self.name,
            "call_id": self.call_id,
            "arguments": arguments
        })
    }
}

/// The arguments as a model streams them: a few chunks, cut at character boundaries.
fn chunks(arguments: &str) -> Vec<&str> {
    let size = (arguments.len().div_ceil(8)).max(16);
    let mut out = Vec::new();
    let mut rest = arguments;
    while !rest.is_empty() {
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (head, tail) = rest.split_at(end);
        out.push(head);
        rest = tail;
    }
    out
}

impl Conversation {
    /// Emits the calls of response `response_id` from `first_index` on; returns their completed
    /// items for `response.done`'s `output`.
    pub(super) fn emit_tool_calls(
        &mut self,
        response_id: &str,
        calls: &[PlannedCall],
        first_index: usize,
        in_conversation: bool,
    ) -> Vec<Value> {
        let mut done_items = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let output_index = first_index + i;
            self.out.emit(E::OutputItemAdded(OutputItem {
                response_id: response_id.to_owned(),
                output_index,
                item: call.item("in_progress"),
            }));
            let done = call.item("completed");
            let mut previous = None;
            if in_conversation {
                previous = self.items.push(Item {
                    value: done.clone(),
                    origin: AudioSource::Client,
                });
                self.out.emit(E::ConversationItemAdded(ItemInPlace {
                    previous_item_id: previous.clone(),
                    item: call.item("in_progress"),
                }));
            }
            let at = CallRef {
                response_id: response_id.to_owned(),
                item_id: call.item_id.clone(),
                output_index,
                call_id: call.call_id.clone(),
            };
            for delta in chunks(&call.arguments) {
                self.out.emit(E::FunctionCallArgumentsDelta {
                    at: at.clone(),
                    delta: delta.to_owned(),
                });
            }
            self.out.emit(E::FunctionCallArgumentsDone {
                at,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            self.out.emit(E::OutputItemDone(OutputItem {
                response_id: response_id.to_owned(),
                output_index,
                item: done.clone(),
            }));
            if in_conversation {
                self.out.emit(E::ConversationItemDone(ItemInPlace {
                    previous_item_id: previous,
                    item: done.clone(),
                }));
            }
            done_items.push(done);
        }
        done_items
    }
}

#[cfg(test)]
mod tests {
    use super::chunks;

    #[test]
    fn chunks_concatenate_to_the_arguments() {
        for args in [
            "",
            "{}",
            r#"{"city":"Paris","unit":"celsius"}"#,
            &"é".repeat(100),
        ] {
            let c = chunks(args);
            assert_eq!(c.concat(), args);
            assert!(c.len() <= 9, "{}", c.len());
        }
    }
}
