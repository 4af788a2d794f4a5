//! How large a session may grow. `session.created` and `session.updated` carry the whole effective
//! session in one data-channel message, and the SDK waits for `session.updated` after every
//! update, so a session too large to send would leave the client unconfirmed for good. Every
//! update is therefore measured after it is merged and before it is applied, and refused whole
//! when the result would not fit.
//!
//! All bounds derive from [`DATA_CHANNEL_MESSAGE_LIMIT`]. The per-field ones name the field a
//! client overdid; the bound on the whole session is the guarantee.

use serde::Serialize;

use super::events::ClientError;

/// The largest message the transceiver sends or accepts on `oai-events`: the SCTP
/// max-message-size it negotiates, the smaller of the client's (browsers offer 256 KiB or more)
/// and its own, which it leaves at rtc's RFC 8841 default of 64 KiB. `transceiver::peer` checks
/// this against rtc's constant at compile time.
pub const DATA_CHANNEL_MESSAGE_LIMIT: usize = 64 * 1024;

/// Room for the event around the session: `{"type":"session.updated","event_id":"event_…",
/// "session":…}` with a 20-digit counter is under 100 bytes, and `expires_at`, which the
/// transport sets after the session is measured, under 30 more.
const ENVELOPE_BYTES: usize = 256;

/// The effective session as JSON at most, so that `session.updated` always fits one message.
pub const MAX_SESSION_BYTES: usize = DATA_CHANNEL_MESSAGE_LIMIT - ENVELOPE_BYTES;

/// A `session.update` event at most: one message is all the data channel delivers, so a larger
/// one did not come from a WebRTC client and is refused before anything else is looked at.
pub const MAX_SESSION_UPDATE_BYTES: usize = DATA_CHANNEL_MESSAGE_LIMIT;

/// `instructions` at most, in bytes of UTF-8: three quarters of a message, room for a long prompt
/// with the rest of the session (the defaults take under 1 KB) and a few tools.
pub const MAX_INSTRUCTIONS_BYTES: usize = DATA_CHANNEL_MESSAGE_LIMIT * 3 / 4;

/// Tools at most, and each one's size as JSON: a sixteenth of a message holds any realistic
/// function schema, and 32 tools are more than a voice agent offers. Together they could exceed
/// a message; the whole-session bound decides then.
pub const MAX_TOOLS: usize = 32;
pub const MAX_TOOL_BYTES: usize = DATA_CHANNEL_MESSAGE_LIMIT / 16;

/// Refuses a `session.update` event of `len` bytes beyond [`MAX_SESSION_UPDATE_BYTES`].
pub(super) fn check_update_size(len: usize) -> Result<(), ClientError> {
    if len <= MAX_SESSION_UPDATE_BYTES {
        return Ok(());
    }
    Err(ClientError::new(
        "event_too_large",
        format!(
            "The session.update event is {len} bytes; at most {MAX_SESSION_UPDATE_BYTES} \
             (one data-channel message) are accepted."
        ),
    ))
}

/// Checks a merged session (its instructions, its tools, and the whole of it) against every
/// bound, naming the first one it breaks.
pub(super) fn check_session(
    instructions: &str,
    tools: &[impl Serialize],
    next: &impl Serialize,
) -> Result<(), ClientError> {
    let s = instructions;
    if s.len() > MAX_INSTRUCTIONS_BYTES {
        return Err(ClientError::new(
            "string_above_max_length",
            format!(
                "Invalid 'session.instructions': string too long. Expected a string of at most \
                 {MAX_INSTRUCTIONS_BYTES} bytes, but got {} bytes instead.",
                s.len()
            ),
        )
        .param("session.instructions"));
    }
    {
        if tools.len() > MAX_TOOLS {
            return Err(ClientError::new(
                "array_above_max_length",
                format!(
                    "Invalid 'session.tools': array too long. Expected an array with maximum \
                     length {MAX_TOOLS}, but got an array with length {} instead.",
                    tools.len()
                ),
            )
            .param("session.tools"));
        }
        for (i, tool) in tools.iter().enumerate() {
            let len = json_len(tool);
            if len > MAX_TOOL_BYTES {
                let param = format!("session.tools[{i}]");
                return Err(ClientError::new(
                    "tool_too_large",
                    format!(
                        "Invalid '{param}': the tool is {len} bytes as JSON; at most \
                         {MAX_TOOL_BYTES} are allowed per tool."
                    ),
                )
                .param(param));
            }
        }
    }
    let len = json_len(next);
    if len > MAX_SESSION_BYTES {
        return Err(ClientError::new(
            "session_too_large",
            format!(
                "The session would be {len} bytes as JSON, more than the {MAX_SESSION_BYTES} \
                 that let session.updated fit in one {DATA_CHANNEL_MESSAGE_LIMIT}-byte \
                 data-channel message; shorten the instructions, tools or other fields."
            ),
        )
        .param("session"));
    }
    Ok(())
}

/// The length of `v` as compact JSON, without building the string.
pub(super) fn json_len(v: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, v).expect("sessions and events serialise");
    n.0
}

/// How long the service keeps a session: `expires_at` says so, and a WebSocket session is closed
/// with `session_expired` then.
pub const MAX_SESSION_DURATION: std::time::Duration = std::time::Duration::from_secs(3600);

/// The `expires_at` (unix seconds) of a session starting now.
pub fn expires_at_unix() -> u64 {
    crate::unix_time::now_secs() + MAX_SESSION_DURATION.as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_serialized_length() {
        let v = serde_json::json!({"a": "é\n\"", "b": [1, null, {"c": true}]});
        assert_eq!(json_len(&v), v.to_string().len());
    }
}
