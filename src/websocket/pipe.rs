//! Joins a WebSocket to an [`EventStream`]: the client-facing socket in signaling, and the
//! control API's socket on a transceiver in split roles.

use axum::extract::ws::{CloseFrame, Message, WebSocket};

use super::EventStream;

/// How long a closing handshake may take before the connection is dropped.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Pipes text frames both ways until either side ends. Binary frames are read as UTF-8 text
/// (Realtime events are JSON; the engine answers anything else with an `error`). When the
/// session ends the socket is closed normally (1000) with `reason`.
pub async fn pipe(mut socket: WebSocket, stream: EventStream, reason: &'static str) {
    let EventStream {
        to_session,
        mut from_session,
    } = stream;
    loop {
        tokio::select! {
            frame = from_session.recv() => match frame {
                Some(frame) => {
                    if socket.send(Message::Text(frame.into_text().into())).await.is_err() {
                        return;
                    }
                }
                None => return close(socket, reason).await,
            },
            msg = socket.recv() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t.to_string(),
                    Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) => {
                        // The reply to a close is queued when it is read and sent by the next
                        // read, which then ends the stream: that completes the handshake.
                        let _ = tokio::time::timeout(CLOSE_GRACE, socket.recv()).await;
                        return;
                    }
                    Some(Err(e)) => {
                        // A message over the limit: say so (1009), as RFC 6455 asks, rather
                        // than drop the connection.
                        if is_too_big(e) {
                            let _ = socket
                                .send(Message::Close(Some(CloseFrame {
                                    code: 1009,
                                    reason: "message too big".into(),
                                })))
                                .await;
                        }
                        return;
                    }
                    None => return,
                };
                if to_session.send(text).await.is_err() {
                    break; // the session ended: send what it said last, then close
                }
            }
        }
    }
    while let Some(frame) = from_session.recv().await {
        if socket
            .send(Message::Text(frame.into_text().into()))
            .await
            .is_err()
        {
            return;
        }
    }
    close(socket, reason).await;
}

/// Whether reading failed because a message or frame was over the socket's size limit.
fn is_too_big(e: axum::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error;
    e.into_inner()
        .downcast_ref::<Error>()
        .is_some_and(|e| matches!(e, Error::Capacity(_)))
}

/// Closes normally (1000) and waits, within [`CLOSE_GRACE`], for the client's reply: dropping
/// the connection right after our close frame makes browsers report the close as unclean.
async fn close(mut socket: WebSocket, reason: &'static str) {
    let frame = CloseFrame {
        code: 1000,
        reason: reason.into(),
    };
    if socket.send(Message::Close(Some(frame))).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        // Frames still in flight are dropped; the stream ends once the reply is read.
        while let Some(Ok(m)) = socket.recv().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}
