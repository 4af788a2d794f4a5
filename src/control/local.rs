//! The in-process side: the all-in-one process (and a transceiver role's control listener) call
//! the transceiver's handle directly.

use serde_json::{Value, json};

use super::TransceiverControl;
use crate::transceiver::{
    CallCommand, CallError, CallId, CallInfo, CallReply, CreatedCall, TransceiverHandle,
};
use crate::websocket::{EventStream, SessionRequest};

#[async_trait::async_trait]
impl TransceiverControl for TransceiverHandle {
    fn cluster(&self) -> u16 {
        self.cluster
    }

    fn id(&self) -> u16 {
        self.id
    }

    fn load(&self) -> usize {
        TransceiverHandle::load(self)
    }

    fn is_draining(&self) -> bool {
        TransceiverHandle::is_draining(self)
    }

    fn admits_calls(&self) -> bool {
        TransceiverHandle::admits_calls(self)
    }

    fn reserve(&self) {
        TransceiverHandle::reserve(self)
    }

    fn describe(&self) -> Value {
        let (refused, saturated_windows) = self.admission_counts();
        json!({"cluster": self.cluster, "id": self.id, "addr": self.addr, "workers": self.workers(),
               "live_calls": self.live_calls(), "websocket_sessions": self.ws_sessions(),
               "draining": TransceiverHandle::is_draining(self),
               "admits_calls": TransceiverHandle::admits_calls(self), "refused": refused,
               "saturated_windows": saturated_windows, "where": "in-process"})
    }

    async fn create_call(
        &self,
        offer_sdp: String,
        setup: crate::transceiver::CallSetup,
    ) -> Result<CreatedCall, CallError> {
        TransceiverHandle::create_call(self, offer_sdp, setup).await
    }

    async fn call(
        &self,
        call_id: &CallId,
        command: CallCommand,
    ) -> Result<Option<CallReply>, CallError> {
        TransceiverHandle::call(self, call_id, command).await
    }

    async fn list_calls(&self) -> Result<Vec<CallInfo>, CallError> {
        Ok(TransceiverHandle::list_calls(self).await)
    }

    async fn drain(&self) -> Result<(), CallError> {
        TransceiverHandle::drain(self);
        Ok(())
    }

    async fn open_session(&self, request: SessionRequest) -> Result<EventStream, CallError> {
        TransceiverHandle::open_session(self, request)
    }

    async fn attach_sideband(&self, call_id: &CallId) -> Result<Option<EventStream>, CallError> {
        TransceiverHandle::attach_sideband(self, call_id).await
    }
}
