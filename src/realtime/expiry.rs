//! The session's end by its time limit: the real service closes a Realtime session at its
//! maximum duration (60 minutes) and tells the client first. Here the transport triggers it
//! (a test's `session_expired` fault), so clients can rehearse that path without waiting an
//! hour.

use super::Conversation;
use super::events::ClientError;

impl Conversation {
    /// Emits the `error` event the real service sends when a session hits its maximum duration.
    /// The transport ends the call once the frame is out; the engine keeps no state about it.
    pub fn expire_session(&mut self) {
        self.out.error(ClientError::new(
            "session_expired",
            "Your session hit the maximum duration of 60 minutes.",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_the_real_services_error_event() {
        let mut c = Conversation::new("sess_x".into(), "echo");
        c.expire_session();
        let frame: serde_json::Value = serde_json::from_str(&c.poll_frame().unwrap()).unwrap();
        assert_eq!(frame["type"], "error");
        assert_eq!(frame["error"]["type"], "invalid_request_error");
        assert_eq!(frame["error"]["code"], "session_expired");
        assert_eq!(
            frame["error"]["message"],
            "Your session hit the maximum duration of 60 minutes."
        );
        assert!(frame["event_id"].is_string());
        assert!(c.poll_frame().is_none());
    }
}
