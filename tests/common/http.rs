//! A minimal HTTP/1.1 client over a fresh TCP connection per request: the tests check status
//! codes and headers byte for byte as a client sees them, with nothing in between.

use std::collections::HashMap;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct HttpResponse {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

pub async fn http_post(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> HttpResponse {
    request("POST", addr, path, content_type, body, None, &[]).await
}

/// Mints an `ek_` key with an empty session, authorized by `server_key`; returns its value.
pub async fn mint_key(addr: SocketAddr, server_key: &str) -> String {
    let r = http_post_auth(
        addr,
        "/v1/realtime/client_secrets",
        "application/json",
        b"{}",
        server_key,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    v["value"].as_str().unwrap().to_owned()
}

pub async fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    request("GET", addr, path, "text/plain", b"", None, &[]).await
}

/// A body-less request with extra headers (`Host` among them replaces the default), as a
/// browser or a forger would send it.
pub async fn http_with_headers(
    method: &str,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> HttpResponse {
    request(method, addr, path, "text/plain", b"", None, headers).await
}

/// A POST with extra headers (an `Origin`, say).
pub async fn http_post_with_headers(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> HttpResponse {
    request("POST", addr, path, content_type, body, None, headers).await
}

pub async fn http_patch(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> HttpResponse {
    request("PATCH", addr, path, content_type, body, None, &[]).await
}

pub async fn http_post_auth(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
    key: &str,
) -> HttpResponse {
    request("POST", addr, path, content_type, body, Some(key), &[]).await
}

/// A GET whose body is binary (a WAV): the status and the body's bytes.
pub async fn http_get_bytes(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect http");
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let status = String::from_utf8_lossy(&raw[..split])
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, raw[split + 4..].to_vec())
}

/// Any method, path, content type and body, as a client sends it.
pub async fn http_request(
    method: &str,
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> HttpResponse {
    request(method, addr, path, content_type, body, None, &[]).await
}

async fn request(
    method: &str,
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
    key: Option<&str>,
    extra: &[(&str, &str)],
) -> HttpResponse {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect http");
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let host = extra
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map_or_else(|| addr.to_string(), |(_, v)| v.to_string());
    let more: String = extra
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}{more}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    HttpResponse {
        status,
        headers,
        body: body.to_owned(),
    }
}
