//! Errors in the OpenAI Realtime shape, `{"error":{"message","type","code"}}`: the SDKs read
//! `error.message` and show it, so every refusal says exactly what was wrong.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    /// Seconds a refused client should wait (`Retry-After`), for refusals that pass.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_request_error",
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "server_error",
            code: "no_capacity",
            message: message.into(),
            retry_after: None,
        }
    }

    /// A refusal that passes: the client may try again after `d` (at least a second, as
    /// `Retry-After` counts whole seconds).
    pub fn with_retry_after(mut self, d: std::time::Duration) -> Self {
        self.retry_after = Some(d.as_secs_f64().ceil().max(1.0) as u64);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"message": self.message, "type": self.kind, "code": self.code, "param": null}});
        let mut resp = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}
