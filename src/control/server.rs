//! The transceiver role's control listener: the control API over HTTP, for signaling only.
//!
//! It lives on its own listener (never the public one) and every request must carry the
//! cluster secret as `Authorization: Bearer …`; there is no CORS, so no web page can reach it
//! through a browser either.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use super::wire::{self, PREFIX};
use super::{TransceiverControl, secret_matches};
use crate::transceiver::{CallCommand, CallError, CallId};

#[derive(Clone)]
struct Ctx {
    transceiver: Arc<dyn TransceiverControl>,
    secret: Arc<[u8]>,
}

/// The control API in front of `transceiver`, for requests that carry `secret`.
pub fn router(transceiver: Arc<dyn TransceiverControl>, secret: &str) -> Router {
    let ctx = Ctx {
        transceiver,
        secret: secret.as_bytes().into(),
    };
    Router::new()
        .route(&format!("{PREFIX}/calls"), post(create).get(list))
        .route(&format!("{PREFIX}/calls/{{id}}/command"), post(command))
        .route(&format!("{PREFIX}/drain"), post(drain))
        .route(&format!("{PREFIX}/status"), get(status))
        .route(&format!("{PREFIX}/sessions"), get(open_session))
        .route(&format!("{PREFIX}/calls/{{id}}/sideband"), get(sideband))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such control path") })
        .layer(DefaultBodyLimit::max(
            crate::sdp_offer::MAX_OFFER_BYTES + 1024,
        ))
        .layer(middleware::from_fn_with_state(ctx.clone(), authenticate))
        .with_state(ctx)
}

async fn authenticate(State(ctx): State<Ctx>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !secret_matches(presented.as_bytes(), &ctx.secret) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the control API needs the cluster secret",
        );
    }
    next.run(req).await
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(wire::Error {
            error: wire::ErrorBody {
                code: code.into(),
                message: message.into(),
            },
        }),
    )
        .into_response()
}

/// The call is not on this transceiver (or the id is none of ours).
fn call_not_here() -> Response {
    error(StatusCode::NOT_FOUND, "call_not_found", "no such call here")
}

fn call_error(e: CallError) -> Response {
    let (status, code) = wire::error_parts(&e);
    error(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        code,
        &e.to_string(),
    )
}

/// A malformed body is the caller's bug (signaling's), reported in the API's error shape.
fn bad_body(e: JsonRejection) -> Response {
    error(StatusCode::BAD_REQUEST, "bad_request", &e.body_text())
}

async fn create(
    State(ctx): State<Ctx>,
    body: Result<Json<wire::CreateCall>, JsonRejection>,
) -> Response {
    let req = match body {
        Ok(Json(r)) => r,
        Err(e) => return bad_body(e),
    };
    if ctx.transceiver.is_draining() {
        return call_error(CallError::Unavailable(ctx.transceiver.id()));
    }
    ctx.transceiver.reserve();
    match ctx.transceiver.create_call(req.offer_sdp, req.setup).await {
        Ok(c) => {
            let created = wire::Created {
                load: ctx.transceiver.load(),
                at_ms: crate::unix_time::now_ms(),
                ..wire::Created::from(c)
            };
            (StatusCode::CREATED, Json(created)).into_response()
        }
        Err(e) => call_error(e),
    }
}

/// Every per-call operation, one route: the body is a [`CallCommand`], the answer its
/// [`crate::transceiver::CallReply`] (see [`crate::transceiver::call_command`]).
async fn command(
    State(ctx): State<Ctx>,
    Path(id): Path<String>,
    body: Result<Json<CallCommand>, JsonRejection>,
) -> Response {
    let command = match body {
        Ok(Json(c)) => c,
        Err(e) => return bad_body(e),
    };
    let Some(id) = CallId::parse(&id) else {
        return call_not_here();
    };
    match ctx.transceiver.call(&id, command).await {
        Ok(Some(reply)) => Json(reply).into_response(),
        Ok(None) => call_not_here(),
        Err(e) => call_error(e),
    }
}

async fn list(State(ctx): State<Ctx>) -> Response {
    match ctx.transceiver.list_calls().await {
        Ok(calls) => Json(wire::Calls { calls }).into_response(),
        Err(e) => call_error(e),
    }
}

async fn drain(State(ctx): State<Ctx>) -> Response {
    match ctx.transceiver.drain().await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => call_error(e),
    }
}

async fn status(State(ctx): State<Ctx>) -> Json<wire::Status> {
    let t = &ctx.transceiver;
    let d = t.describe();
    Json(wire::Status {
        cluster: t.cluster(),
        id: t.id(),
        live_calls: d["live_calls"].as_u64().unwrap_or(0) as usize,
        load: t.load(),
        draining: t.is_draining(),
        workers: d["workers"].as_u64().unwrap_or(1) as usize,
    })
}

/// A WebSocket session for signaling to pipe a client into (see [`super::stream`]).
async fn open_session(
    State(ctx): State<Ctx>,
    Query(q): Query<wire::SessionQuery>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let request = match serde_json::from_str(&q.request) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, "bad_request", &e.to_string()),
    };
    // As for a call: `open_session` releases a reservation, and signaling's own is on its side.
    ctx.transceiver.reserve();
    match ctx.transceiver.open_session(request).await {
        Ok(stream) => upgrade
            .on_upgrade(move |socket| crate::websocket::pipe(socket, stream, "session ended")),
        Err(e) => call_error(e),
    }
}

async fn sideband(
    State(ctx): State<Ctx>,
    Path(id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let Some(id) = CallId::parse(&id) else {
        return call_not_here();
    };
    match ctx.transceiver.attach_sideband(&id).await {
        Ok(Some(stream)) => {
            upgrade.on_upgrade(move |socket| crate::websocket::pipe(socket, stream, "call ended"))
        }
        Ok(None) => call_not_here(),
        Err(e) => call_error(e),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use axum::body::Body;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use super::*;
    use crate::transceiver::{AnswerError, CallInfo, CallReply, CreatedCall};

    /// A call of the fake transceiver (cluster 0, transceiver 3), and one it does not hold.
    const X: &str = "rtc_0000000300aabbccddeeff001122";
    const Y: &str = "rtc_0000000300ffffffffffffffffff";

    /// A transceiver that answers from a script instead of a socket loop.
    #[derive(Default)]
    struct Fake {
        draining: AtomicBool,
    }

    #[async_trait::async_trait]
    impl TransceiverControl for Fake {
        fn cluster(&self) -> u16 {
            0
        }
        fn id(&self) -> u16 {
            3
        }
        fn load(&self) -> usize {
            0
        }
        fn is_draining(&self) -> bool {
            self.draining.load(Ordering::Relaxed)
        }
        fn admits_calls(&self) -> bool {
            true
        }
        fn reserve(&self) {}
        fn describe(&self) -> Value {
            json!({"live_calls": 0, "workers": 1})
        }
        async fn create_call(
            &self,
            offer: String,
            _: crate::transceiver::CallSetup,
        ) -> Result<CreatedCall, CallError> {
            match offer.as_str() {
                "no audio" => Err(AnswerError::NoAudio.into()),
                "stopped" => Err(CallError::Unavailable(3)),
                _ => Ok(CreatedCall {
                    call_id: "rtc_x".into(),
                    answer_sdp: "v=0".into(),
                    cluster: 0,
                    transceiver: 3,
                    worker: 0,
                    candidate: "192.0.2.1:3478".parse().unwrap(),
                }),
            }
        }
        async fn call(
            &self,
            id: &CallId,
            command: CallCommand,
        ) -> Result<Option<CallReply>, CallError> {
            if id.as_str() != X {
                return Ok(None);
            }
            Ok(Some(match command {
                CallCommand::Hangup => CallReply::Ended,
                CallCommand::Renegotiate { .. } => CallReply::Answer {
                    answer_sdp: "v=0".into(),
                },
                CallCommand::Events { since } => CallReply::Events {
                    jsonl: format!("{{\"seq\":{since}}}\n"),
                },
                CallCommand::Fault { .. } => {
                    return Err(CallError::FaultRefused("no client yet".into()));
                }
                CallCommand::Recording => CallReply::Recording {
                    wav: b"RIFF".to_vec(),
                },
            }))
        }
        async fn list_calls(&self) -> Result<Vec<CallInfo>, CallError> {
            Ok(vec![])
        }
        async fn drain(&self) -> Result<(), CallError> {
            self.draining.store(true, Ordering::Relaxed);
            Ok(())
        }
    }

    async fn send(
        app: &Router,
        method: &str,
        path: &str,
        secret: Option<&str>,
        body: &str,
    ) -> (u16, Value) {
        let mut req = axum::http::Request::builder()
            .method(method)
            .uri(format!("{PREFIX}{path}"))
            .header("content-type", "application/json");
        if let Some(s) = secret {
            req = req.header("authorization", format!("Bearer {s}"));
        }
        let resp = app
            .clone()
            .oneshot(req.body(Body::from(body.to_owned())).unwrap())
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    fn code(v: &Value) -> &str {
        v["error"]["code"].as_str().unwrap_or("")
    }

    #[tokio::test]
    async fn every_request_needs_the_cluster_secret() {
        let app = router(Arc::new(Fake::default()), "sekrit");
        for secret in [None, Some("wrong"), Some("sekri"), Some("sekrit2")] {
            let (status, body) = send(&app, "GET", "/status", secret, "").await;
            assert_eq!((status, code(&body)), (401, "unauthorized"), "{secret:?}");
            let (status, _) = send(
                &app,
                "POST",
                "/calls",
                secret,
                r#"{"offer_sdp":"","model":"echo"}"#,
            )
            .await;
            assert_eq!(status, 401);
        }
        let (status, body) = send(&app, "GET", "/status", Some("sekrit"), "").await;
        assert_eq!(status, 200);
        assert_eq!(body["id"], 3);
    }

    #[tokio::test]
    async fn errors_are_json_with_codes_the_client_maps_back() {
        let app = router(Arc::new(Fake::default()), "s");
        let s = Some("s");
        let (status, body) = send(&app, "POST", "/calls", s, "{not json").await;
        assert_eq!((status, code(&body)), (400, "bad_request"));
        let (status, body) = send(
            &app,
            "POST",
            "/calls",
            s,
            r#"{"offer_sdp":"no audio","model":"echo"}"#,
        )
        .await;
        assert_eq!((status, code(&body)), (400, "no_audio"));
        let (status, body) = send(
            &app,
            "POST",
            "/calls",
            s,
            r#"{"offer_sdp":"stopped","model":"echo"}"#,
        )
        .await;
        assert_eq!((status, code(&body)), (503, "unavailable"));
        let (status, body) = send(
            &app,
            "POST",
            "/calls",
            s,
            r#"{"offer_sdp":"v=0","model":"echo"}"#,
        )
        .await;
        assert_eq!(status, 201);
        assert_eq!(body["call_id"], "rtc_x");
        let (status, body) = send(
            &app,
            "POST",
            &format!("/calls/{Y}/command"),
            s,
            r#"{"op":"hangup"}"#,
        )
        .await;
        assert_eq!((status, code(&body)), (404, "call_not_found"));
        let (status, body) = send(
            &app,
            "POST",
            &format!("/calls/{Y}/command"),
            s,
            r#"{"op":"renegotiate","offer_sdp":"v=0"}"#,
        )
        .await;
        assert_eq!((status, code(&body)), (404, "call_not_found"));
        let (status, body) = send(
            &app,
            "POST",
            &format!("/calls/{X}/command"),
            s,
            r#"{"op":"nope"}"#,
        )
        .await;
        assert_eq!((status, code(&body)), (400, "bad_request"));
        let (status, body) = send(
            &app,
            "POST",
            &format!("/calls/{X}/command"),
            s,
            r#"{"op":"fault","fault":{"type":"clear_network"}}"#,
        )
        .await;
        assert_eq!((status, code(&body)), (409, "fault_refused"));
        let (status, body) = send(
            &app,
            "POST",
            "/calls/rtc_../command",
            s,
            r#"{"op":"hangup"}"#,
        )
        .await;
        assert_eq!(
            (status, code(&body)),
            (404, "call_not_found"),
            "not an id of ours"
        );
        let (status, body) = send(&app, "GET", "/nowhere", s, "").await;
        assert_eq!((status, code(&body)), (404, "not_found"));
    }

    #[tokio::test]
    async fn per_call_operations_share_one_route() {
        let app = router(Arc::new(Fake::default()), "s");
        let s = Some("s");
        let events = r#"{"op":"events","since":3}"#;
        let (status, body) = send(&app, "POST", &format!("/calls/{X}/command"), s, events).await;
        assert_eq!(status, 200);
        assert_eq!(body["reply"], "events");
        assert_eq!(body["jsonl"], "{\"seq\":3}\n");
        let (status, body) = send(
            &app,
            "POST",
            &format!("/calls/{X}/command"),
            s,
            r#"{"op":"hangup"}"#,
        )
        .await;
        assert_eq!((status, body["reply"].as_str()), (200, Some("ended")));
        let (status, body) = send(
            &app,
            "POST",
            &format!("/calls/{X}/command"),
            s,
            r#"{"op":"recording"}"#,
        )
        .await;
        assert_eq!((status, body["wav"].as_str()), (200, Some("UklGRg==")));
        let (status, body) = send(&app, "POST", &format!("/calls/{Y}/command"), s, events).await;
        assert_eq!((status, code(&body)), (404, "call_not_found"));
        let (status, _) = send(&app, "POST", &format!("/calls/{X}/command"), None, events).await;
        assert_eq!(status, 401);
    }

    #[tokio::test]
    async fn a_draining_transceiver_refuses_new_calls() {
        let app = router(Arc::new(Fake::default()), "s");
        let (status, _) = send(&app, "POST", "/drain", Some("s"), "").await;
        assert_eq!(status, 204);
        let (status, body) = send(
            &app,
            "POST",
            "/calls",
            Some("s"),
            r#"{"offer_sdp":"v=0","model":"echo"}"#,
        )
        .await;
        assert_eq!((status, code(&body)), (503, "unavailable"));
        let (_, st) = send(&app, "GET", "/status", Some("s"), "").await;
        assert_eq!(st["draining"], true);
    }
}
