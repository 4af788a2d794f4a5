//! What the stub models say. No network and no weights: the reply is decided from the latest
//! unanswered user input, and its transcript says honestly what the model is doing.

use super::Behaviour;
use super::Reply;
use super::items::{Item, Origin};

/// Seconds with one decimal, as spoken ("2.4").
pub(super) fn seconds(ms: u64) -> String {
    format!("{:.1}", ms as f64 / 1000.0)
}

/// The user input a response answers.
pub(super) enum Prompt<'a> {
    /// A user item (from the conversation or an out-of-band `input`).
    User(&'a Item),
    /// No unanswered user input; `response.instructions` if any.
    Instructions(Option<&'a str>),
}

/// Picks the reply, which also fixes its transcript.
///
/// - Audio turn: echo plays it back ("Echoing your 2.4 second turn."); TTS has no recognizer,
///   so it says what it heard ("I heard you speak for 2.4 seconds.").
/// - Text: TTS speaks the text; echo says "You said: <text>".
/// - Nothing new: both speak `response.instructions` when given (the TTS "say this" path),
///   else a fixed line, so a `response.create` is always answered with audio.
/// - Idle timeout: "Are you still there?", the nudge the timeout exists for.
pub(super) fn choose(behaviour: Behaviour, prompt: Prompt<'_>) -> Reply {
    let text = |t: String| Reply::Text { text: t };
    match prompt {
        Prompt::User(item) => match (&item.origin, behaviour) {
            (Origin::Input { start_ms, end_ms }, Behaviour::Echo) => Reply::EchoInput {
                input_item_id: item.id().to_owned(),
                audio_start_ms: *start_ms,
                audio_end_ms: *end_ms,
            },
            (Origin::Input { start_ms, end_ms }, Behaviour::Tts) => text(format!(
                "I heard you speak for {} seconds.",
                seconds(end_ms - start_ms)
            )),
            (Origin::Idle { .. }, _) => text("Are you still there?".into()),
            (origin, b) => match (item.text(), b) {
                (Some(t), Behaviour::Tts) => text(t),
                (Some(t), Behaviour::Echo) => text(format!("You said: {t}")),
                (None, _) => match origin {
                    Origin::Appended { ms } => text(format!(
                        "I received {} seconds of audio as data, which I cannot play back.",
                        seconds(*ms)
                    )),
                    _ => text("I received your message, but it has nothing I can say back.".into()),
                },
            },
        },
        Prompt::Instructions(Some(i)) if !i.trim().is_empty() => text(i.to_owned()),
        Prompt::Instructions(_) => text("There is nothing new for me to answer.".into()),
    }
}

/// The transcript for a reply: the spoken text, or for an echo what it is doing.
pub(super) fn transcript(reply: &Reply) -> String {
    match reply {
        Reply::EchoInput {
            audio_start_ms,
            audio_end_ms,
            ..
        } => format!(
            "Echoing your {} second turn.",
            seconds(audio_end_ms - audio_start_ms)
        ),
        Reply::Text { text } => text.clone(),
    }
}
