//! The session's end by its time limit: the real service closes a Realtime session at its
//! maximum duration (60 minutes) and tells the client first. Here the transport triggers it
//! (a test's `session_expired` fault), so clients can rehearse that path without waiting an
//! hour) or a script's `session_expired` step does.

use super::events::ClientError;
use super::{Action, Conversation};

/// The Realtime API's message when a session reaches its maximum duration.
const SESSION_EXPIRED: &str = "Your session hit the maximum duration of 60 minutes.";

impl Conversation {
    /// Emits the `error` event the real service sends when a session hits its maximum duration,
    /// fails a response in progress with it (every `response.created` still gets its
    /// `response.done`), and asks the transport to end the call ([`Action::EndCall`]) once these
    /// frames are out.
    pub fn expire_session(&mut self) {
        self.close_with(ClientError::new("session_expired", SESSION_EXPIRED));
    }

    /// Ends the session the way expiry does, for another reason the transport has (an idle
    /// WebSocket): the `error`, a response in progress failed with it, then the end.
    pub fn close_with(&mut self, error: ClientError) {
        self.out.error(error.clone());
        self.fail_active(&error);
        self.out.act(Action::EndCall);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_the_real_services_error_event() {
        let mut c = Conversation::new("sess_x".into(), &crate::model::ModelKind::Echo);
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
        assert_eq!(c.poll_action(), Some(Action::EndCall));
    }
}
