//! The response lifecycle, in the order of docs/realtime-protocol.md §4: `response.created`,
//! `rate_limits.updated`, the assistant item and content part, `Speak` + `output_audio_buffer.started`,
//! transcript deltas paced by playback, then on `on_audio_done` the `.done` events, `response.done`
//! and `output_audio_buffer.stopped`. A cancelled response (client cancel, clear, barge-in) sends
//! the same `.done` events with what was heard, status `incomplete`/`cancelled`, and so does one
//! whose audio could not be made (status `failed`, after an `error` saying why), so every
//! `response.created` is followed by exactly one `response.done`.
//!
//! The model's plan decides the output: a message (index 0) when it says something, then its
//! function calls (see `tool_calls`) once the message is complete, then how the response ends.
//! A response with nothing to play completes at once.

use serde_json::{Value, json};

use super::events::ClientError;
use super::items::{AudioSource, Item, assistant_item};
use super::prompt::prompt_of;
use super::response::{
    ActiveResponse, MS_PER_WORD, Playout, ResponseRequest, input_tokens, rate_limits, words,
};
use super::server_event::{ItemInPlace, OutputItem, RealtimeServerEvent as E};
use super::tool_calls::PlannedCall;
use super::{Action, Conversation};
use crate::model::{Ending, Plan, Reply, ResponseContext};

/// How a response ends, for its `.done` events.
enum End<'a> {
    Completed,
    /// The model stopped early (`max_output_tokens`): what was said stays.
    Incomplete,
    /// `status_details.reason`: `client_cancelled` or `turn_detected`.
    Cancelled(&'a str),
    /// Its audio could not be made; the error is also sent as an `error` event.
    Failed(&'a ClientError),
}

/// What a cancellation stopped, for the events that follow it.
pub(super) struct Stopped {
    pub item_id: String,
    pub played_ms: u64,
    /// Its message is in the conversation (and may be truncated to what was heard).
    pub in_conversation: bool,
}

impl Conversation {
    /// Audio of `response_id` sent so far. The transcript follows what the model has made by
    /// then, which on WebRTC runs ahead of playback (see [`super::GENERATION_PACE`]): once all
    /// of it is made, the response completes while its audio plays on.
    pub fn on_audio_progress(&mut self, response_id: &str, played_ms: u64) {
        if let Some(p) = self
            .playout
            .as_mut()
            .filter(|p| p.response_id == response_id)
        {
            p.played_ms = p.played_ms.max(played_ms);
            return;
        }
        let ahead = self.generates_ahead();
        let pace = if ahead { self.generation_pace } else { 1.0 };
        let Some(r) = self
            .active
            .as_mut()
            .filter(|r| r.id == response_id && r.audio)
        else {
            return;
        };
        r.played_ms = r.played_ms.max(played_ms);
        // Made at `pace` times what played, never past the whole reply nor behind playback.
        let generated = ((r.played_ms as f64 * pace) as u64)
            .min(r.total_ms)
            .max(r.played_ms);
        r.generated_ms = r.generated_ms.max(generated);
        let made = ahead && r.length_known && r.generated_ms >= r.total_ms;
        self.send_due_deltas(false);
        if made {
            self.complete_ahead();
        }
    }

    /// Whether replies are generated ahead of playback here: on WebRTC, where the server plays
    /// the audio, with a pace above real time.
    fn generates_ahead(&self) -> bool {
        self.transport == super::Transport::WebRtc && self.generation_pace > 1.0
    }

    /// The active response's audio is all made while it still plays: it completes now (its
    /// `.done` events, its tool calls, `response.done`) and its playout goes on, reported by
    /// `output_audio_buffer.stopped` when it ends.
    fn complete_ahead(&mut self) {
        let Some(r) = self.active.as_ref() else {
            return;
        };
        self.playout = Some(Playout {
            response_id: r.id.clone(),
            item_id: r.item_id.clone(),
            played_ms: r.played_ms,
            in_conversation: r.in_conversation && r.message,
        });
        self.complete_active();
        self.after_response();
    }

    /// The real length of `response_id`'s audio, once the media side knows it (a TTS render);
    /// replaces the 400 ms-per-word estimate used for pacing.
    pub fn on_audio_length(&mut self, response_id: &str, total_ms: u64) {
        let Some(r) = self
            .active
            .as_mut()
            .filter(|r| r.id == response_id && r.audio)
        else {
            return;
        };
        r.total_ms = total_ms;
        r.length_known = true;
        self.send_due_deltas(false);
    }

    /// All audio of `response_id` has been sent: the response completes, or, when it already
    /// did (generated ahead), its playout ends. Ignored for a response that was stopped.
    pub fn on_audio_done(&mut self, response_id: &str) {
        if self
            .active
            .as_ref()
            .is_some_and(|r| r.id == response_id && r.audio)
        {
            self.complete_active();
            self.after_response();
        } else if self
            .playout
            .as_ref()
            .is_some_and(|p| p.response_id == response_id)
        {
            self.playout = None;
            self.emit_output_buffer(E::OutputBufferStopped {
                response_id: Some(response_id.to_owned()),
            });
            self.start_waiting_buffer();
        }
    }

    /// The media side could not make `response_id`'s audio (the synthesizer refused or failed):
    /// an `error` saying why, then the response ends `failed` with nothing heard, and the call
    /// goes on. Ignored for a response that already ended.
    pub fn on_audio_failed(&mut self, response_id: &str, code: &'static str, message: &str) {
        if !self
            .active
            .as_ref()
            .is_some_and(|r| r.id == response_id && r.audio)
        {
            return;
        }
        let error = ClientError::server(code, message);
        self.out.error(error.clone());
        self.finish(End::Failed(&error));
        self.after_response();
    }

    /// Opens a response (the caller has checked none is active): the `.created` events, then
    /// its MCP call (see `super::mcp`) or its output.
    pub(super) fn start_response(&mut self, req: ResponseRequest) {
        let (r, reply, delay_ms) = self.plan_response(&req);
        let delay_ms = if req.beside { 0 } else { delay_ms };
        let id = r.id.clone();
        let response = r.object("in_progress", Value::Null, Vec::new());
        self.out.emit(E::ResponseCreated { response });
        let used = r.input_tokens["text_tokens"].as_u64().unwrap_or(0)
            + r.input_tokens["audio_tokens"].as_u64().unwrap_or(0);
        self.out.emit(E::RateLimitsUpdated {
            rate_limits: rate_limits(used),
        });
        self.last_response_id = Some(id);
        let call = r.mcp.clone().filter(|m| !m.needs_approval);
        self.active = Some(r);
        match call {
            Some(m) => self.open_mcp_call(&m),
            None => self.open_output(reply, delay_ms),
        }
    }

    /// The active response's message: its `.added` events, then `Speak` for audio, or the whole
    /// response at once when nothing plays.
    fn open_output(&mut self, reply: Option<Reply>, delay_ms: u64) {
        let Some(r) = self.active.as_ref() else {
            return;
        };
        let (id, item_id, audio, message) = (r.id.clone(), r.item_id.clone(), r.audio, r.message);
        let (voice, codec) = (r.voice.clone(), r.codec);
        let (in_conversation, output_index) = (r.in_conversation, r.message_index);
        if message {
            let (at, part) = (r.locator(), r.part(""));
            let item = assistant_item(&item_id);
            self.out.emit(E::OutputItemAdded(OutputItem {
                response_id: id.clone(),
                output_index,
                item: item.value.clone(),
            }));
            if in_conversation {
                let value = item.value.clone();
                let previous = self.items.push(item);
                self.out.emit(E::ConversationItemAdded(ItemInPlace {
                    previous_item_id: previous,
                    item: value,
                }));
            }
            self.out.emit(E::ContentPartAdded { at, part });
        }
        if let (true, true, Some(reply)) = (message, audio, reply) {
            self.sync_item("in_progress");
            self.audio_produced = true;
            self.out.act(Action::Speak {
                response_id: id.clone(),
                item_id,
                reply,
                delay_ms,
                voice,
                codec,
            });
            // Behind a finished response still playing, its audio waits its turn, and so
            // does its `output_audio_buffer.started`.
            if self.playout.is_some() {
                self.buffer_waiting = Some(id.clone());
            } else {
                self.emit_output_buffer(E::OutputBufferStarted {
                    response_id: Some(id.clone()),
                });
            }
            self.send_due_deltas(false);
        } else if delay_ms > 0 {
            // A slow model: the output comes when the media side says the delay is over.
            if let Some(r) = self.active.as_mut() {
                r.holding = true;
            }
            self.out.act(Action::Hold {
                response_id: id,
                delay_ms,
            });
        } else {
            // Text, tool calls alone, or nothing: no playback to wait for.
            self.complete_active();
            self.after_response();
        }
    }

    /// The active response's MCP call came back with `output`: the model says the result,
    /// as the message after the call.
    pub(super) fn say_after_mcp(&mut self, name: &str, item_id: &str, output: &str) {
        let Some(r) = self.active.as_ref() else {
            return;
        };
        let (audio, limit) = (r.audio, r.token_limit);
        let auto = crate::model::tools::ToolChoice::default();
        let plan = self.model.respond(&ResponseContext {
            prompt: crate::model::Prompt::ToolOutputs(vec![crate::model::ToolOutput {
                call_id: item_id,
                name: Some(name),
                output,
            }]),
            instructions: None,
            tools: &[],
            tool_choice: &auto,
            parallel_tool_calls: true,
            mcp_tools: &[],
            index: self.responses_started.saturating_sub(1),
        });
        let shaped = shape_reply(plan.reply, audio, limit);
        let Some(r) = self.active.as_mut() else {
            return;
        };
        r.message = shaped.reply.is_some();
        r.words = shaped.words;
        r.total_ms = shaped.total_ms;
        r.length_known = shaped.length_known;
        if shaped.cut {
            r.ending = Ending::Incomplete;
        }
        self.open_output(shaped.reply, plan.delay_ms);
    }

    /// A held response's delay is over (see [`Action::Hold`]): its output comes now. Ignored
    /// for a response that already ended (cancelled meanwhile).
    pub fn on_hold_over(&mut self, response_id: &str) {
        if self
            .active
            .as_ref()
            .is_some_and(|r| r.id == response_id && r.holding)
        {
            self.complete_active();
            self.after_response();
        }
    }

    /// Asks the model what the response does and fixes its ids and `response` object fields.
    fn plan_response(&mut self, req: &ResponseRequest) -> (ActiveResponse, Option<Reply>, u64) {
        let index = self.responses_started;
        self.responses_started += 1;
        let tools = req.tools.as_deref().unwrap_or(&self.config.tools);
        let mcp_tools = self.mcp_callables(tools);
        let plan = if req.approved_mcp.is_some() {
            Plan::default()
        } else {
            let items: Vec<&Item> = match &req.input {
                Some(input) => input.iter().collect(),
                None => self.items.iter().collect(),
            };
            let ctx = ResponseContext {
                prompt: prompt_of(&items),
                instructions: req.instructions.as_deref(),
                tools,
                tool_choice: req.tool_choice.as_ref().unwrap_or(&self.config.tool_choice),
                parallel_tool_calls: req
                    .parallel_tool_calls
                    .or(self.config.parallel_tool_calls)
                    .unwrap_or(true),
                mcp_tools: &mcp_tools,
                index,
            };
            self.model.respond(&ctx)
        };
        let Plan {
            delay_ms,
            reply,
            mut tool_calls,
            mut ending,
        } = plan;
        // An MCP call takes the response: its message comes once the server has answered.
        // Not beside another response, which must complete at once.
        let mut mcp = req.approved_mcp.clone();
        let first_mcp = tool_calls.iter().position(|c| c.server_label.is_some());
        if let (None, Some(i), false) = (&mcp, first_mcp, req.beside) {
            let c = tool_calls.remove(i);
            let label = c.server_label.unwrap_or_default();
            mcp = Some(self.plan_mcp(&label, &c.name, c.arguments));
        }
        tool_calls.retain(|c| c.server_label.is_none());
        let reply = if mcp.is_some() {
            tool_calls.clear();
            None
        } else {
            reply
        };
        let audio = !req.text_only.unwrap_or(self.config.text_only());
        let max_tokens = req
            .max_output_tokens
            .unwrap_or(self.config.max_output_tokens);
        let token_limit = max_tokens.limit();
        let Shaped {
            reply,
            words,
            total_ms,
            length_known,
            cut,
        } = shape_reply(reply, audio, token_limit);
        if cut {
            // Cut by the limit: the response stops where the output does, before any call.
            tool_calls.clear();
            ending = Ending::Incomplete;
        }
        let in_conversation = !req.out_of_band;
        let id = self.new_id("resp");
        let item_id = self.new_id("item");
        let calls = tool_calls
            .into_iter()
            .map(|c| PlannedCall {
                item_id: self.new_id("item"),
                call_id: self.new_id("call"),
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        let session_format = self.config.audio.output.format;
        let format = req.format.unwrap_or(session_format);
        // Only a WebSocket carries audio in a format: WebRTC's RTP codec is the call's.
        let codec = (self.transport == super::Transport::WebSocket && format != session_format)
            .then(|| format.codec());
        let voice = req.voice.clone().unwrap_or_else(|| self.voice().to_owned());
        let shell = json!({
            "id": id,
            "object": "realtime.response",
            "conversation_id": if in_conversation { Value::from(self.conversation_id.as_str()) } else { Value::Null },
            "output_modalities": [if audio { "audio" } else { "text" }],
            "max_output_tokens": max_tokens,
            "audio": {"output": {"format": format, "voice": voice}},
            "metadata": req.metadata.clone(),
        });
        let input_tokens = self.context_tokens(req.instructions.as_deref());
        let r = ActiveResponse {
            id,
            item_id,
            audio,
            message: reply.is_some(),
            message_index: 0,
            mcp,
            awaiting_mcp: false,
            lead: Vec::new(),
            token_limit,
            calls,
            ending,
            holding: false,
            in_conversation,
            words,
            sent: 0,
            total_ms,
            length_known,
            played_ms: 0,
            voice: voice.clone(),
            codec,
            generated_ms: 0,
            shell,
            input_tokens,
        };
        (r, reply, delay_ms)
    }

    /// Input token details over the conversation (text by characters, audio by duration).
    fn context_tokens(&self, extra_instructions: Option<&str>) -> Value {
        let mut chars = self.config.instructions.len() as u64;
        chars += extra_instructions.map_or(0, str::len) as u64;
        let mut audio_ms = 0u64;
        for item in self.items.iter_rev() {
            match &item.origin {
                AudioSource::Input { start_ms, end_ms }
                | AudioSource::Idle { start_ms, end_ms } => {
                    audio_ms += end_ms - start_ms;
                }
                AudioSource::Appended { ms } => audio_ms += ms,
                AudioSource::Assistant { audio_ms: ms, .. } => audio_ms += ms,
                AudioSource::Client => chars += item.text().map_or(0, |t| t.len()) as u64,
            }
        }
        input_tokens(chars, audio_ms)
    }

    fn send_due_deltas(&mut self, all: bool) {
        let Some(r) = self.active.as_mut() else {
            return;
        };
        let deltas = r.take_due(all);
        if deltas.is_empty() {
            return;
        }
        let audio = r.audio;
        let at = r.locator();
        for delta in deltas {
            let at = at.clone();
            self.out.emit(if audio {
                E::OutputTranscriptDelta { at, delta }
            } else {
                E::OutputTextDelta { at, delta }
            });
        }
        self.sync_item("in_progress");
    }

    /// Keeps the stored assistant item equal to what the client has seen, so a retrieve
    /// mid-response or after a cancel shows the same text.
    fn sync_item(&mut self, status: &str) {
        let Some(r) = self.active.as_ref().filter(|r| r.in_conversation) else {
            return;
        };
        let value = r.item(status);
        let origin = AudioSource::Assistant {
            words: r.words[..r.sent].to_vec(),
            audio_ms: r.generated_ms.max(r.played_ms),
        };
        if let Some(stored) = self.items.get_mut(&r.item_id) {
            stored.value = value;
            stored.origin = origin;
        }
    }

    /// The `.done` events for the message (text/audio, part, item), the function calls when
    /// the response got that far, then `response.done`.
    fn finish(&mut self, end: End<'_>) {
        let (status, item_status, details) = match end {
            End::Completed => ("completed", "completed", Value::Null),
            End::Incomplete => (
                "incomplete",
                "incomplete",
                json!({"type": "incomplete", "reason": "max_output_tokens"}),
            ),
            End::Cancelled(reason) => (
                "cancelled",
                "incomplete",
                json!({"type": "cancelled", "reason": reason}),
            ),
            End::Failed(e) => (
                "failed",
                "incomplete",
                json!({"type": "failed", "error": {"type": e.kind, "code": e.code, "message": e.message}}),
            ),
        };
        let output_done = matches!(end, End::Completed | End::Incomplete);
        if output_done {
            self.send_due_deltas(true);
        }
        let Some(r) = self.active.as_ref() else {
            return;
        };
        let (id, audio, message, in_conversation, item_id) = (
            r.id.clone(),
            r.audio,
            r.message,
            r.in_conversation,
            r.item_id.clone(),
        );
        let calls = if output_done {
            r.calls.clone()
        } else {
            Vec::new()
        };
        let mut output = r.lead.clone();
        let message_index = r.message_index;
        let approval = r.mcp.clone().filter(|m| m.needs_approval && output_done);
        if message {
            let text = r.transcript_so_far();
            let at = r.locator();
            let part = r.part(&text);
            let item = r.item(item_status);
            if audio {
                self.out.emit(E::OutputAudioDone { at: at.clone() });
                self.out.emit(E::OutputTranscriptDone {
                    at: at.clone(),
                    transcript: text,
                });
            } else {
                self.out.emit(E::OutputTextDone {
                    at: at.clone(),
                    text,
                });
            }
            self.out.emit(E::ContentPartDone { at, part });
            self.out.emit(E::OutputItemDone(OutputItem {
                response_id: id.clone(),
                output_index: message_index,
                item: item.clone(),
            }));
            if in_conversation {
                self.sync_item(item_status);
                let previous = self.items.previous_of(&item_id);
                // The item may have been dropped by the cap meanwhile; the event still closes it.
                self.out.emit(E::ConversationItemDone(ItemInPlace {
                    previous_item_id: previous,
                    item: item.clone(),
                }));
            }
            output.push(item);
        }
        let first_call = message_index + usize::from(message);
        output.extend(self.emit_tool_calls(&id, &calls, first_call, in_conversation));
        if let Some(m) = approval {
            output.push(self.emit_approval_request(&id, &m, output.len(), in_conversation));
        }
        let Some(r) = self.active.take() else {
            return;
        };
        let response = r.object(status, details, output);
        self.out.emit(E::ResponseDone { response });
        // A cancel drops the buffer (the caller sends `cleared`); otherwise it has run dry,
        // empty when the audio failed, unless it still plays (generated ahead): then the
        // playout's end says so.
        let still_playing = self.playout.as_ref().is_some_and(|p| p.response_id == id);
        if message && audio && !matches!(end, End::Cancelled(_)) && !still_playing {
            self.emit_output_buffer(E::OutputBufferStopped {
                response_id: Some(id),
            });
        }
    }

    /// The active response's output is all out: it ends as its plan says.
    fn complete_active(&mut self) {
        let Some(r) = self.active.as_mut() else {
            return;
        };
        // The audio is all made: usage and later truncation use its full length.
        if r.length_known {
            r.generated_ms = r.generated_ms.max(r.total_ms);
        } else if r.generated_ms == 0 {
            r.generated_ms = r.total_ms;
        }
        r.played_ms = r.played_ms.max(r.generated_ms);
        match r.ending.clone() {
            Ending::Completed => self.finish(End::Completed),
            Ending::Incomplete => self.finish(End::Incomplete),
            Ending::Failed { code, message } => {
                let error = ClientError::server(code, message);
                self.out.error(error.clone());
                self.finish(End::Failed(&error));
            }
            Ending::SessionExpired => self.expire_session(),
        }
    }

    /// Ends the active response `failed` with `error` (already sent as an `error` event).
    pub(super) fn fail_active(&mut self, error: &ClientError) {
        self.finish(End::Failed(error));
    }

    /// Stops and cancels the active response: `StopAudio`, the cancelled `.done` events, then
    /// `output_audio_buffer.cleared` for audio, since its buffer was dropped rather than drained
    /// (every `output_audio_buffer.started` ends with exactly one `stopped` or `cleared`).
    pub(super) fn cancel_and_clear(&mut self, reason: &str) -> Option<Stopped> {
        let r = self.active.as_ref()?;
        let stopped = Stopped {
            item_id: r.item_id.clone(),
            played_ms: r.played_ms,
            in_conversation: r.in_conversation && r.message,
        };
        // Only a spoken message started the output buffer.
        let (id, audio) = (r.id.clone(), r.audio && r.message);
        if audio {
            self.out.act(Action::StopAudio {
                response_id: id.clone(),
            });
        }
        self.finish(End::Cancelled(reason));
        // Queued behind a playout, its buffer never started: there is nothing to clear.
        let started = self.buffer_waiting.take_if(|w| *w == id).is_none();
        if audio && started {
            self.emit_output_buffer(E::OutputBufferCleared {
                response_id: Some(id),
            });
        }
        Some(stopped)
    }

    /// Stops a finished response that is still playing (barge-in, `output_audio_buffer.clear`):
    /// its buffer is cleared and its item truncated to what the caller heard, and nothing is
    /// cancelled, since the response had completed. False when nothing was playing.
    pub(super) fn clear_playout(&mut self) -> bool {
        let Some(p) = self.playout.take() else {
            return false;
        };
        self.out.act(Action::StopAudio {
            response_id: p.response_id.clone(),
        });
        self.emit_output_buffer(E::OutputBufferCleared {
            response_id: Some(p.response_id),
        });
        if p.in_conversation {
            // The item may have been deleted meanwhile; then there is nothing to truncate.
            let _ = self.truncate_item(&p.item_id, 0, p.played_ms);
        }
        self.start_waiting_buffer();
        true
    }

    /// The playout ended or was cleared: the response whose audio was queued behind it plays
    /// now, and its `output_audio_buffer.started` goes out.
    fn start_waiting_buffer(&mut self) {
        if let Some(next) = self.buffer_waiting.take() {
            self.emit_output_buffer(E::OutputBufferStarted {
                response_id: Some(next),
            });
        }
    }

    /// Starts a VAD turn's response that had to wait for the previous one.
    /// An out-of-band response while another is active, as the service runs them (a classifier
    /// or a summary beside the spoken reply). Only one that needs no playback runs beside: it
    /// completes at once, so the active response is set aside for that moment and comes back
    /// untouched, still the one a clear or a cancel names.
    pub(super) fn respond_beside(&mut self, mut req: ResponseRequest) {
        req.beside = true;
        let active = self.active.take();
        let last = self.last_response_id.clone();
        let queued = std::mem::take(&mut self.auto_response_queued);
        self.start_response(req);
        debug_assert!(
            self.active.is_none(),
            "a response beside must complete at once"
        );
        self.active = active;
        self.last_response_id = last;
        self.auto_response_queued = queued;
    }

    pub(super) fn after_response(&mut self) {
        if self.active.is_none() && std::mem::take(&mut self.auto_response_queued) {
            self.start_response(ResponseRequest::default());
        }
        self.run_approved();
    }
}

/// A reply made ready to play: its words, its length, and whether the token limit cut it.
struct Shaped {
    reply: Option<Reply>,
    words: Vec<String>,
    total_ms: u64,
    length_known: bool,
    cut: bool,
}

/// Splits `reply` into the words its deltas carry and cuts it to `limit` output tokens.
fn shape_reply(mut reply: Option<Reply>, audio: bool, limit: Option<u64>) -> Shaped {
    let mut words = reply
        .as_ref()
        .map(|r| words(&r.transcript()))
        .unwrap_or_default();
    let cut = limit.is_some_and(|limit| cut_to_tokens(&mut reply, &mut words, audio, limit));
    if cut {
        // An echo's transcript names its (now shorter) length.
        words = reply
            .as_ref()
            .map(|r| super::response::words(&r.transcript()))
            .unwrap_or_default();
    }
    let (reply, total_ms, length_known) = match reply {
        Some(Reply::EchoInput {
            audio_start_ms,
            audio_end_ms,
            ..
        }) => (reply, audio_end_ms - audio_start_ms, true),
        Some(Reply::Text { .. }) => (
            Some(Reply::text(words.join(" "))),
            words.len() as u64 * MS_PER_WORD,
            false,
        ),
        None => (None, 0, true),
    };
    Shaped {
        reply,
        words,
        total_ms,
        length_known,
        cut,
    }
}

/// Output tokens as `usage` counts them: text at ~4 characters a token, audio at 20 a second.
fn output_tokens(text_chars: usize, audio_ms: u64, audio: bool) -> u64 {
    (text_chars as u64).div_ceil(4) + if audio { audio_ms / 50 } else { 0 }
}

/// Cuts a planned reply to what `limit` output tokens hold, by the estimate `usage` reports
/// (a spoken word is [`MS_PER_WORD`] of audio until the synthesizer says otherwise); true when
/// it cut anything. An echo keeps its transcript and loses audio from the end.
fn cut_to_tokens(
    reply: &mut Option<Reply>,
    words: &mut Vec<String>,
    audio: bool,
    limit: u64,
) -> bool {
    match reply {
        None => false,
        Some(Reply::Text { .. }) => {
            // Tokens only grow with each word, so the first word that does not fit is the cut.
            let mut chars = 0;
            let n = (1..=words.len())
                .take_while(|&n| {
                    chars += words[n - 1].len() + usize::from(n > 1);
                    output_tokens(chars, n as u64 * MS_PER_WORD, audio) <= limit
                })
                .count();
            if n == words.len() {
                return false;
            }
            words.truncate(n);
            // Not even a word fits: the response ends before it says anything.
            *reply = (n > 0).then(|| Reply::text(words.join(" ")));
            true
        }
        Some(Reply::EchoInput {
            audio_start_ms,
            audio_end_ms,
            ..
        }) => {
            let text = words.iter().map(|w| w.len() + 1).sum::<usize>();
            let text_tokens = output_tokens(text, 0, false);
            let allowed_ms = if audio {
                limit.saturating_sub(text_tokens) * 50
            } else {
                u64::MAX
            };
            if *audio_end_ms - *audio_start_ms <= allowed_ms {
                return false;
            }
            *audio_end_ms = *audio_start_ms + allowed_ms;
            if allowed_ms == 0 {
                *reply = None;
            }
            true
        }
    }
}
