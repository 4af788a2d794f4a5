//! The control API's streams: a WebSocket session or a sideband on a transceiver in another
//! process, as the same [`EventStream`] signaling gets in-process.
//!
//! Signaling dials the transceiver's control listener with the cluster secret
//! (`GET /control/v1/sessions?request=…`, `GET /control/v1/calls/{id}/sideband`); the
//! transceiver side pipes the socket into the local stream exactly as signaling pipes a
//! client's (see [`crate::websocket::pipe`]). A refusal before the upgrade comes
//! back as the control API's usual error body.

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::wire;
use crate::call::event_stream::frames;
use crate::transceiver::CallError;
use crate::websocket::EventStream;

/// Opens `url` with `authorization`; `Ok(None)` when the transceiver answers 404.
pub async fn dial(
    id: u16,
    url: &str,
    authorization: &str,
    timeout: std::time::Duration,
) -> Result<Option<EventStream>, CallError> {
    let failed = |e: &dyn std::fmt::Display| CallError::Control(format!("transceiver {id}: {e}"));
    let mut req = url.into_client_request().map_err(|e| failed(&e))?;
    req.headers_mut().insert(
        "authorization",
        authorization.parse().map_err(|_| failed(&"bad secret"))?,
    );
    let connected = tokio::time::timeout(timeout, tokio_tungstenite::connect_async(req))
        .await
        .map_err(|_| failed(&format!("no answer within {timeout:?}")))?;
    let (socket, _) = match connected {
        Ok(ok) => ok,
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let status = resp.status().as_u16();
            if status == 404 {
                return Ok(None);
            }
            let body = resp
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            return Err(wire::call_error(id, status, &body));
        }
        Err(e) => return Err(failed(&e)),
    };
    let (to_session, mut from_client) = frames();
    let (to_client, from_session) = frames();
    let (mut sink, mut source) = socket.split();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                text = from_client.recv() => match text {
                    Some(t) => if sink.send(Message::Text(t.into_text().into())).await.is_err() { break },
                    None => {
                        let _ = sink.send(Message::Close(None)).await;
                        break;
                    }
                },
                msg = source.next() => match msg {
                    Some(Ok(Message::Text(t))) => {
                        if to_client.send(t.to_string()).await.is_err() { break }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => {}
                },
            }
        }
    });
    Ok(Some(EventStream {
        to_session,
        from_session,
    }))
}
