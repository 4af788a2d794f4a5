//! Every per-call operation signaling can ask of the transceiver that owns the call, as one
//! request/reply pair (mini-redis's `Command` is the model).
//!
//! In-process a [`CallCommand`] rides the owning worker's mailbox; across processes it is the
//! JSON body of one control-API route (`POST /control/v1/calls/{id}/command`) and the
//! [`CallReply`] its answer. Nothing between signaling and the endpoint knows one operation
//! from another, so a new operation is a variant here, the endpoint method that does it and its
//! arm in [`super::endpoint::Endpoint::command`]; the compiler points at each.

use serde::{Deserialize, Serialize};

use super::CallError;
use super::faults::{Fault, FaultState};

/// What to do to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CallCommand {
    /// Ends the call (clients get a DTLS close_notify).
    Hangup,
    /// A new offer on the live call (an ICE restart); the reply carries the answer.
    Renegotiate { offer_sdp: String },
    /// The call's event log from sequence number `since`, as JSON Lines: a live call's from its
    /// worker, an ended one's for a few minutes after (see [`crate::call::event_log`]).
    Events { since: u64 },
    /// Injects a fault (see [`super::faults`]); the reply is the call's fault state after it.
    Fault { fault: Fault },
    /// An ended Live session's recording (see [`crate::call::recording`]).
    Recording,
}

/// The answer to a [`CallCommand`] that found its call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum CallReply {
    Ended,
    Answer {
        answer_sdp: String,
    },
    Events {
        jsonl: String,
    },
    Fault {
        state: FaultState,
    },
    /// A stereo WAV; base64 on the wire, where JSON has no bytes.
    Recording {
        #[serde(with = "base64_bytes")]
        wav: Vec<u8>,
    },
}

impl CallReply {
    /// For a caller that got another operation's reply: a bug on the control path, reported
    /// as a control failure rather than passed on as if it were an answer.
    pub fn unexpected(self, asked: &str) -> CallError {
        let got = match self {
            CallReply::Ended => "ended",
            CallReply::Answer { .. } => "answer",
            CallReply::Events { .. } => "events",
            CallReply::Fault { .. } => "fault",
            CallReply::Recording { .. } => "recording",
        };
        CallError::Control(format!("asked for {asked}, the transceiver answered {got}"))
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire form is the same value in the other process: every command and reply survives
    /// JSON, the recording's bytes included.
    #[test]
    fn commands_and_replies_cross_the_wire_unchanged() {
        let commands = [
            CallCommand::Hangup,
            CallCommand::Renegotiate {
                offer_sdp: "v=0\r\n".into(),
            },
            CallCommand::Events { since: 7 },
            CallCommand::Fault {
                fault: Fault::ClearNetwork,
            },
            CallCommand::Recording,
        ];
        for c in commands {
            let text = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<CallCommand>(&text).unwrap(), c);
        }
        let replies = [
            CallReply::Ended,
            CallReply::Answer {
                answer_sdp: "v=0\r\n".into(),
            },
            CallReply::Events {
                jsonl: "{}\n".into(),
            },
            CallReply::Fault {
                state: FaultState::default(),
            },
            CallReply::Recording {
                wav: b"RIFF\0\x01\xff".to_vec(),
            },
        ];
        for r in replies {
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<CallReply>(&text).unwrap(), r);
        }
        assert_eq!(
            serde_json::to_string(&CallCommand::Events { since: 3 }).unwrap(),
            r#"{"op":"events","since":3}"#
        );
    }

    #[test]
    fn an_unknown_operation_is_refused_by_name() {
        let e = serde_json::from_str::<CallCommand>(r#"{"op":"explode"}"#).unwrap_err();
        assert!(e.to_string().contains("explode"), "{e}");
    }
}
