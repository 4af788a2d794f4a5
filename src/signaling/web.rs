//! The browser demo, compiled into the binary so `cargo run` needs no other files. It is also the
//! signaling router's fallback, so a path that is neither an endpoint nor a page gets its 404
//! here, in the Realtime error shape like every other refusal.

use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

use super::ApiError;

#[derive(RustEmbed)]
#[folder = "web/"]
struct Assets;

pub async fn serve(method: Method, uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    let Some(file) = Assets::get(path) else {
        return ApiError::invalid(
            "not_found",
            format!("no such endpoint or page: {method} {}", uri.path()),
        )
        .with_status(StatusCode::NOT_FOUND)
        .into_response();
    };
    if method != Method::GET && method != Method::HEAD {
        let mut resp = ApiError::invalid(
            "method_not_allowed",
            format!(
                "{method} is not allowed on {} (allowed: GET, HEAD)",
                uri.path()
            ),
        )
        .with_status(StatusCode::METHOD_NOT_ALLOWED)
        .into_response();
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    (
        [(header::CONTENT_TYPE, mime.as_ref().to_owned())],
        file.data.into_owned(),
    )
        .into_response()
}
