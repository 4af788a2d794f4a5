//! Errors in the OpenAI Realtime shape, `{"error":{"message","type","code","param"}}`: the SDKs
//! read `error.message` and show it, so every refusal says exactly what was wrong.
//!
//! Handlers return [`ApiError`]; what axum answers by itself (no route, wrong method, an
//! extractor's rejection, a body over the limit) is plain text or empty, so [`json_errors`]
//! rewrites any such response into the same shape on the way out. A client then never has to
//! handle two error formats from one base URL.

use std::time::Duration;

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    /// Ours are static; the Live engine's checks (shared with the data channel) may not be.
    pub code: std::borrow::Cow<'static, str>,
    pub message: String,
    /// Seconds after which the same request may succeed (`Retry-After`), for refusals that are
    /// about capacity rather than the request.
    pub retry_after: Option<u64>,
    /// The request parameter that was wrong, when one was (`error.param`).
    pub param: Option<String>,
}

impl ApiError {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_request_error",
            code: code.into(),
            message: message.into(),
            retry_after: None,
            param: None,
        }
    }

    /// A refused config (a session's, checked with the engine's own rules), as the service
    /// reports it over HTTP: a `400` with the engine's code and the parameter's path.
    pub fn from_client(e: crate::realtime::ClientError) -> Self {
        let mut err = ApiError::invalid("invalid_value", e.message);
        err.code = e.code;
        err.param = e.param;
        err
    }

    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        if status.is_server_error() {
            self.kind = "server_error";
        }
        self
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "server_error",
            code: "no_capacity".into(),
            message: message.into(),
            retry_after: None,
            param: None,
        }
    }

    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"message": self.message, "type": self.kind, "code": self.code, "param": self.param}});
        let mut resp = (self.status, Json(body)).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        resp
    }
}

/// The `code` for an error response axum produced on its own, by status.
fn code_for(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_content_type",
        s if s.is_server_error() => "server_error",
        _ => "invalid_request",
    }
}

/// Error responses larger than this are not axum's short rejections; they pass untouched.
const MAX_REWRITTEN_BODY: usize = 4096;

/// Middleware: any 4xx or 5xx that is not JSON already becomes an [`ApiError`] with the same
/// status and headers (`Allow` on a 405 survives), its text as the message.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let Ok(text) = axum::body::to_bytes(body, MAX_REWRITTEN_BODY).await else {
        return ApiError::invalid(code_for(status), status.to_string())
            .with_status(status)
            .into_response();
    };
    let text = String::from_utf8_lossy(&text).trim().to_owned();
    let message = match status {
        StatusCode::METHOD_NOT_ALLOWED => {
            let allow = parts
                .headers
                .get(header::ALLOW)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            format!("{method} is not allowed on {path} (allowed: {allow})")
        }
        StatusCode::NOT_FOUND if text.is_empty() => format!("no such endpoint: {method} {path}"),
        _ if text.is_empty() => status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_owned(),
        _ => text,
    };
    let mut out = ApiError::invalid(code_for(status), message)
        .with_status(status)
        .into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().append(name.clone(), value.clone());
        }
    }
    out
}

/// How long one request may take, body upload included. Hyper bounds only the headers, so
/// without this a client could trickle a 64 KB offer for ever and keep its connection slot;
/// answering an offer takes milliseconds, and the control API gives up after 5 s.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Middleware: a request not answered within [`REQUEST_TIMEOUT`] gets a 408 and its connection
/// is freed (hyper closes a connection whose request body was not read to the end).
pub async fn request_timeout(req: Request, next: Next) -> Response {
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => ApiError::invalid(
            "request_timeout",
            format!(
                "the request was not complete within {} s",
                REQUEST_TIMEOUT.as_secs()
            ),
        )
        .with_status(StatusCode::REQUEST_TIMEOUT)
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::post;
    use tower::ServiceExt;

    async fn send(router: Router, req: axum::http::Request<Body>) -> (StatusCode, String) {
        let resp = router
            .layer(axum::middleware::from_fn(json_errors))
            .oneshot(req)
            .await
            .unwrap();
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    fn code(body: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        v["error"]["code"].as_str().unwrap().to_owned()
    }

    /// Axum's own `Json` rejections (wrong content type, bad JSON) come out in the shape.
    #[tokio::test]
    async fn extractor_rejections_become_realtime_errors() {
        let router = || {
            Router::new().route(
                "/j",
                post(|Json(v): Json<serde_json::Value>| async move { Json(v) }),
            )
        };
        let req = |ctype: &str, body: &'static str| {
            axum::http::Request::post("/j")
                .header("content-type", ctype)
                .body(Body::from(body))
                .unwrap()
        };
        let (s, b) = send(router(), req("text/plain", "{}")).await;
        assert_eq!(
            (s, code(&b).as_str()),
            (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_content_type"
            )
        );
        let (s, b) = send(router(), req("application/json", "{nope")).await;
        assert_eq!(
            (s, code(&b).as_str()),
            (StatusCode::BAD_REQUEST, "invalid_request")
        );
        assert!(b.contains("JSON"), "{b}");
        let (s, b) = send(router(), req("application/json", "[1]")).await;
        assert_eq!(s, StatusCode::OK, "{b}");
    }

    #[tokio::test]
    async fn errors_already_in_the_shape_pass_untouched_with_retry_after() {
        let router = Router::new()
            .route(
                "/full",
                post(|| async { ApiError::unavailable("full").with_retry_after(7) }),
            )
            .layer(axum::middleware::from_fn(json_errors));
        let req = axum::http::Request::post("/full")
            .body(Body::empty())
            .unwrap();
        let resp = router.oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "7");
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        assert_eq!(code(std::str::from_utf8(&body).unwrap()), "no_capacity");
    }
}
