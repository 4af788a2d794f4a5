//! JSON bodies for the errors hyper answers on its own.
//!
//! A request hyper cannot parse (a URI over its limit: 414; headers over its buffer or count:
//! 431; a malformed request line: 400; an unknown version: 505) never reaches the router, and
//! hyper answers it itself with `content-length: 0` and closes. hyper has no hook for that
//! answer's body, so the README's promise that every error is JSON would not hold for exactly
//! the requests a probe sends. This wrapper sits under hyper on the connection's byte stream
//! and rewrites such an answer as it is written: the same status, and the API's error body.
//!
//! What it recognises is narrow: a response head alone in one write, with one of those
//! statuses and an empty body. The router never writes one (its errors all have JSON bodies),
//! so a response the API made passes untouched.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection's stream, with hyper's own error answers given JSON bodies.
pub struct JsonParseErrors<S> {
    inner: S,
    /// A rewritten answer not yet written in full, and how much of it is.
    pending: Option<(Vec<u8>, usize)>,
}

impl<S> JsonParseErrors<S> {
    pub fn new(inner: S) -> Self {
        JsonParseErrors {
            inner,
            pending: None,
        }
    }
}

/// hyper's error heads are a status line, `content-length: 0` and `date`: well under this.
const MAX_ERROR_HEAD: usize = 256;

/// The JSON answer for a head hyper wrote for a request it could not parse, if `head` is one.
/// Every write passes here, bodies of any size included, so the cheap tests come first and a
/// write that is not a short error head is looked at no further than its first bytes.
fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    if head.len() > MAX_ERROR_HEAD || !head.starts_with(b"HTTP/1.1 ") {
        return None;
    }
    let status = match &head[9..12] {
        s @ (b"400" | b"414" | b"431" | b"505") => s,
        _ => return None,
    };
    let text = std::str::from_utf8(head).ok()?;
    if !text.ends_with("\r\n\r\n")
        || !text
            .to_ascii_lowercase()
            .contains("\r\ncontent-length: 0\r\n")
    {
        return None;
    }
    let (status, code, message) = match status {
        b"400" => (
            "400 Bad Request",
            "invalid_request",
            "The request could not be parsed as HTTP/1.1.",
        ),
        b"414" => (
            "414 URI Too Long",
            "uri_too_long",
            "The request's URI is longer than this server reads.",
        ),
        b"431" => (
            "431 Request Header Fields Too Large",
            "headers_too_large",
            "The request's headers are larger, or more, than this server reads.",
        ),
        b"505" => (
            "505 HTTP Version Not Supported",
            "http_version_not_supported",
            "This server speaks HTTP/1.1 (and 1.0).",
        ),
        _ => return None,
    };
    let body = serde_json::json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "code": code,
        "param": null,
    }})
    .to_string();
    Some(
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<S: AsyncWrite + Unpin> JsonParseErrors<S> {
    /// Writes what is left of a rewritten answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.pending {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *done += n;
            if *done == bytes.len() {
                self.pending = None;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonParseErrors<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if let Some(answer) = rewrite(buf) {
            // Taken whole: what the stream has not accepted yet is written by the next
            // write, flush or shutdown.
            self.pending = Some((answer, 0));
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hyper_s_empty_error_heads_are_rewritten() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Mon, 07 Dec 2026 05:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(rewrite(hyper).unwrap()).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 "));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "headers_too_large");

        // The API's own answers pass: a JSON 400, a 200, a head split from its body.
        let api = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 88\r\n\r\n";
        assert!(rewrite(api).is_none());
        assert!(rewrite(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(rewrite(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n").is_none());
    }
}
