//! The Realtime HTTP surface: bad input gets a clear 4xx in the Realtime error shape and creates
//! nothing; keys, client secrets and multipart offers behave as OpenAI's clients expect.

use crate::common;

use std::time::Duration;

use common::{Client, http_post, sessions, start_local};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use voice_edge::allinone::{self, AllInOneConfig};
use voice_edge::http_server::HttpLimits;

fn error_code(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "no message: {body}"
    );
    assert!(v["error"]["type"].is_string(), "no type: {body}");
    v["error"]["code"].as_str().unwrap_or_default().to_owned()
}

const OFFER_NO_AUDIO: &str = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=fingerprint:sha-256 00:11\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n";
const OFFER_NO_FINGERPRINT: &str = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\n";
const OFFER_BROKEN: &str =
    "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=fingerprint:sha-256 00\r\nthis is not sdp\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_offers_get_realtime_errors_and_create_nothing() {
    let server = start_local(AllInOneConfig::default()).await;
    let h = server.http_addr;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "text/plain",
            b"v=0\r\n".to_vec(),
            415,
            "unsupported_content_type",
        ),
        (
            "application/sdp",
            vec![b'a'; 70 * 1024],
            413,
            "body_too_large",
        ),
        ("application/sdp", b"hello".to_vec(), 400, "invalid_sdp"),
        (
            "application/sdp",
            vec![0xff, 0xfe, 0x00],
            400,
            "invalid_sdp",
        ),
        (
            "application/sdp",
            OFFER_NO_AUDIO.as_bytes().to_vec(),
            400,
            "no_audio",
        ),
        (
            "application/sdp",
            OFFER_NO_FINGERPRINT.as_bytes().to_vec(),
            400,
            "no_dtls_fingerprint",
        ),
        (
            "application/sdp",
            OFFER_BROKEN.as_bytes().to_vec(),
            400,
            "invalid_offer",
        ),
    ];
    for (ctype, body, status, code) in cases {
        let r = http_post(h, "/v1/realtime/calls", ctype, &body).await;
        assert_eq!(
            r.status,
            status,
            "{ctype} {:?}: {}",
            String::from_utf8_lossy(&body[..body.len().min(40)]),
            r.body
        );
        assert_eq!(error_code(&r.body), code, "{}", r.body);
    }
    assert_eq!(
        sessions(&server).await,
        0,
        "a refused offer left a session behind"
    );
    // Hangup of an unknown call.
    let r = http_post(
        h,
        "/v1/realtime/calls/rtc_nope/hangup",
        "application/json",
        b"",
    )
    .await;
    assert_eq!(
        (r.status, error_code(&r.body).as_str()),
        (404, "call_not_found")
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_keys_client_secrets_and_multipart_offers() {
    let server = start_local(AllInOneConfig {
        require_keys: true,
        api_keys: vec!["sk-test".into()],
        ..Default::default()
    })
    .await;
    let h = server.http_addr;
    // No key: 401, nothing created.
    let r = http_post(h, "/v1/realtime/calls", "application/sdp", b"v=0\r\n").await;
    assert_eq!(
        (r.status, error_code(&r.body).as_str()),
        (401, "invalid_api_key")
    );
    // Minting needs the server key.
    let r = http_post(h, "/v1/realtime/client_secrets", "application/json", b"{}").await;
    assert_eq!(r.status, 401);
    let minted = common::http_post_auth(
        h,
        "/v1/realtime/client_secrets",
        "application/json",
        br#"{"expires_after":{"anchor":"created_at","seconds":60},"session":{"type":"realtime","model":"tts"}}"#,
        "sk-test",
    )
    .await;
    assert_eq!(minted.status, 200, "{}", minted.body);
    let v: Value = serde_json::from_str(&minted.body).unwrap();
    let ek = v["value"].as_str().unwrap().to_owned();
    assert!(ek.starts_with("ek_"));
    assert_eq!(v["session"]["object"], "realtime.session");
    assert!(v["expires_at"].as_u64().unwrap() > 0);
    let r = common::http_post_auth(
        h,
        "/v1/realtime/client_secrets",
        "application/json",
        br#"{"expires_after":{"seconds":5}}"#,
        "sk-test",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(sessions(&server).await, 0);

    // A real call with the ephemeral key, its offer sent as multipart like openai-node does.
    let mut c = Client::call_multipart(h, "/v1/realtime/calls?model=loopback", &ek).await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(
        c.echo_round(0x31, 10).await >= 9,
        "multipart call did not carry media"
    );
    assert_eq!(sessions(&server).await, 1);
    server.shutdown().await;
}

/// Admin is the operator's: a web page of another origin (or one that rebinds its DNS name to
/// 127.0.0.1) cannot drain a transceiver or restart the relay through a developer's browser,
/// and admin answers carry no CORS grant; the public API keeps its CORS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_refuses_web_pages_and_undoes_a_drain() {
    let server = start_local(AllInOneConfig {
        dev_admin: true,
        ..Default::default()
    })
    .await;
    let a = server.http_addr;
    let drain = "/admin/actions/drain-transceiver:1";
    for headers in [
        &[("Origin", "https://evil.example")][..],
        &[("Origin", "null")][..],
        &[("Sec-Fetch-Site", "cross-site")][..],
        &[
            ("Host", "evil.example:8080"),
            ("Origin", "http://evil.example:8080"),
        ][..],
        &[("Host", "evil.example:8080")][..],
    ] {
        let r = common::http_with_headers("POST", a, drain, headers).await;
        assert_eq!(r.status, 403, "{headers:?}: {}", r.body);
        assert_eq!(error_code(&r.body), "admin_forbidden");
        assert!(
            !r.headers.contains_key("access-control-allow-origin"),
            "{headers:?}"
        );
    }
    assert!(
        server.transceivers.iter().all(|t| !t.is_draining()),
        "a refused request drained a transceiver"
    );
    // The public API still answers browsers of any origin.
    let pre = common::http_with_headers(
        "OPTIONS",
        a,
        "/v1/realtime/calls",
        &[
            ("Origin", "https://app.example"),
            ("Access-Control-Request-Method", "POST"),
        ],
    )
    .await;
    assert_eq!(
        pre.headers
            .get("access-control-allow-origin")
            .map(String::as_str),
        Some("*")
    );

    // The operator on this machine drains, then undoes it.
    let r = common::http_with_headers("POST", a, drain, &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(server.transceivers.iter().any(|t| t.is_draining()));
    let r = common::http_with_headers("POST", a, "/admin/actions/undrain-transceiver:1", &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(server.transceivers.iter().all(|t| !t.is_draining()));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_token_is_required_once_set() {
    let server = start_local(AllInOneConfig {
        admin_token: Some("op-token-0123456789".into()),
        ..Default::default()
    })
    .await;
    let a = server.http_addr;
    let r = common::http_with_headers("GET", a, "/admin/stats", &[]).await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(error_code(&r.body), "admin_unauthorized");
    let r = common::http_with_headers(
        "GET",
        a,
        "/admin/stats",
        &[("Authorization", "Bearer op-token-0123456789")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r =
        common::http_with_headers("GET", a, "/metrics", &[("Authorization", "Bearer nope")]).await;
    assert_eq!(r.status, 401);
    server.shutdown().await;
}

/// With keys required a call belongs to whoever created it: another client's ephemeral key
/// cannot hang it up or renegotiate it (the call lives on), the creating key and server keys
/// can, and one ephemeral key places a bounded number of calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_creating_key_or_a_server_key_may_end_a_call() {
    let server = start_local(AllInOneConfig {
        require_keys: true,
        api_keys: vec!["sk-test".into()],
        ..Default::default()
    })
    .await;
    let h = server.http_addr;
    let (mine, theirs) = (
        common::mint_key(h, "sk-test").await,
        common::mint_key(h, "sk-test").await,
    );
    let mut c = Client::call_multipart(h, "/v1/realtime/calls?model=loopback", &mine).await;
    c.wait_connected(Duration::from_secs(10)).await;
    let id = c.response.headers["location"]
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let hangup = format!("/v1/realtime/calls/{id}/hangup");

    let r = http_post(h, &hangup, "application/json", b"").await;
    assert_eq!(
        (r.status, error_code(&r.body).as_str()),
        (401, "invalid_api_key")
    );
    let r = common::http_post_auth(h, &hangup, "application/json", b"", &theirs).await;
    assert_eq!(
        (r.status, error_code(&r.body).as_str()),
        (403, "call_forbidden")
    );
    let r = common::http_post_auth(h, &hangup, "application/json", b"", "sk-wrong").await;
    assert_eq!(r.status, 401);
    let r = common::http_with_headers(
        "PATCH",
        h,
        &format!("/v1/realtime/calls/{id}"),
        &[("Authorization", &format!("Bearer {theirs}"))],
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        c.echo_round(0x51, 10).await >= 9,
        "the call did not survive"
    );

    let r = common::http_post_auth(h, &hangup, "application/json", b"", &mine).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // The same ephemeral key: two more calls, then no more.
    let mut more = vec![];
    for _ in 1..voice_edge::signaling::keys::CALLS_PER_EPHEMERAL {
        more.push(Client::call_multipart(h, "/v1/realtime/calls?model=loopback", &mine).await);
    }
    let r = common::http_post_auth(
        h,
        "/v1/realtime/calls",
        "application/sdp",
        b"v=0\r\n",
        &mine,
    )
    .await;
    assert_eq!(
        (r.status, error_code(&r.body).as_str()),
        (429, "ephemeral_key_exhausted")
    );
    // A server key may end any call.
    let other = more[0].response.headers["location"]
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let r = common::http_post_auth(
        h,
        &format!("/v1/realtime/calls/{other}/hangup"),
        "application/json",
        b"",
        "sk-test",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    server.shutdown().await;
}

/// Without `--dev-admin` the actions that disrupt live calls are refused (403, in the error
/// shape) and change nothing, while the read-only endpoints still answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disruptive_admin_actions_need_the_dev_admin_flag() {
    let server = start_local(AllInOneConfig::default()).await;
    let a = server.http_addr;
    // Something the relay counts, which a restart (a fresh relay) would forget.
    let stray = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    stray
        .send_to(b"not stun", server.relay().public_addr())
        .unwrap();
    let counted = || server.relay().counters().dropped_not_stun;
    for _ in 0..100 {
        if counted() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(counted(), 1);
    for action in [
        "restart-relay",
        "restart-relay:cluster-0",
        "drain-transceiver:1",
        "undrain-transceiver:1",
    ] {
        let r =
            common::http_with_headers("POST", a, &format!("/admin/actions/{action}"), &[]).await;
        assert_eq!(r.status, 403, "{action}: {}", r.body);
        assert_eq!(error_code(&r.body), "dev_admin_disabled");
        assert!(r.body.contains("--dev-admin"), "{}", r.body);
    }
    assert!(server.transceivers.iter().all(|t| !t.is_draining()));
    assert_eq!(counted(), 1, "the relay was restarted");
    for path in ["/admin/stats", "/admin/calls", "/metrics"] {
        let r = common::http_get(a, path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    server.shutdown().await;
}

/// Whatever axum would have answered in plain text or with an empty body (no route, wrong
/// method, a body over the limit, a bad query string, the wrong content type) comes back in the
/// Realtime error shape with the right status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_is_a_realtime_error() {
    let server = start_local(AllInOneConfig::default()).await;
    let h = server.http_addr;
    let big = vec![b' '; 70 * 1024];
    // Method, path, content type, body → status, code.
    type Case<'a> = (&'a str, &'a str, &'a str, &'a [u8], u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/v1/realtime/client_secrets",
            "application/json",
            &big,
            413,
            "body_too_large",
        ),
        (
            "POST",
            "/v1/realtime/client_secrets",
            "application/json",
            b"{not json",
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/v1/realtime/calls?cluster=abc",
            "application/sdp",
            b"v=0\r\n",
            400,
            "invalid_query",
        ),
        (
            "GET",
            "/v1/realtime/calls",
            "text/plain",
            b"",
            405,
            "method_not_allowed",
        ),
        (
            "DELETE",
            "/v1/realtime/client_secrets",
            "text/plain",
            b"",
            405,
            "method_not_allowed",
        ),
        ("GET", "/v1/nope", "text/plain", b"", 404, "not_found"),
        ("POST", "/nope", "application/json", b"{}", 404, "not_found"),
        (
            "PUT",
            "/index.html",
            "text/plain",
            b"x",
            405,
            "method_not_allowed",
        ),
        (
            "POST",
            "/v1/realtime/calls",
            "application/json",
            b"{}",
            415,
            "unsupported_content_type",
        ),
        (
            "POST",
            "/v1/realtime/calls",
            "application/sdp",
            &big,
            413,
            "body_too_large",
        ),
    ];
    for (method, path, ctype, body, status, code) in cases {
        let r = common::http_request(method, h, path, ctype, body).await;
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert_eq!(
            r.headers.get("content-type").map(String::as_str),
            Some("application/json"),
            "{method} {path}"
        );
        assert_eq!(error_code(&r.body), code, "{method} {path}: {}", r.body);
        if status == 405 {
            assert!(r.headers.contains_key("allow"), "{method} {path}: no Allow");
        }
    }
    // The demo page itself is still a page.
    let page = common::http_get(h, "/").await;
    assert_eq!(page.status, 200);
    assert!(page.headers["content-type"].starts_with("text/html"));
    server.shutdown().await;
}

/// Offers a browser would never connect with are refused with a 400 naming the problem, not
/// answered with a 201 and a session that can only time out; what Chromium and Firefox send
/// is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_the_server_cannot_honour_are_refused_and_real_ones_answered() {
    let server = start_local(AllInOneConfig::default()).await;
    let h = server.http_addr;
    let chromium = include_str!("../../fixtures/sdp/chromium-offer.sdp");
    let firefox = include_str!("../../fixtures/sdp/firefox-offer.sdp");
    let fp = chromium
        .lines()
        .find_map(|l| l.strip_prefix("a=fingerprint:"))
        .unwrap();
    let sha1 = "sha-1 AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01";
    let cases = [
        ("a=setup:actpass", "a=setup:bogus", "a=setup:bogus"),
        ("a=setup:actpass", "a=setup:passive", "a=setup:passive"),
        (fp, sha1, "sha-1"),
        ("a=sctp-port:5000", "a=sctp-port:-5", "a=sctp-port:-5"),
        ("a=sctp-port:5000", "a=sctp-port:70000", "a=sctp-port:70000"),
        ("UDP/TLS/RTP/SAVPF", "RTP/AVP", "DTLS-SRTP"),
    ];
    for (from, to, named) in cases {
        let offer = chromium.replace(from, to);
        let r = http_post(h, "/v1/realtime/calls", "application/sdp", offer.as_bytes()).await;
        assert_eq!(r.status, 400, "{to}: {}", r.body);
        assert_eq!(error_code(&r.body), "invalid_offer", "{to}: {}", r.body);
        let message = serde_json::from_str::<Value>(&r.body).unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(named), "{to}: {message}");
    }
    // No audio m-line (only the data channel): the long-standing code.
    let (head, rest) = chromium.split_once("m=audio").unwrap();
    let data_only = format!(
        "{head}m=application{}",
        rest.split_once("m=application").unwrap().1
    );
    let r = http_post(
        h,
        "/v1/realtime/calls",
        "application/sdp",
        data_only.as_bytes(),
    )
    .await;
    assert_eq!((r.status, error_code(&r.body).as_str()), (400, "no_audio"));
    assert_eq!(sessions(&server).await, 0, "a refused offer left a session");

    for offer in [chromium, firefox] {
        let r = http_post(h, "/v1/realtime/calls", "application/sdp", offer.as_bytes()).await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert!(r.body.starts_with("v=0"), "{}", r.body);
    }
    assert_eq!(sessions(&server).await, 2);
    server.shutdown().await;
}

/// The key store is bounded: a session config over the cap is refused with a 400 saying so,
/// and once live keys fill the store a mint gets a 503 with `Retry-After`, in the error shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_secrets_are_bounded_in_size_and_in_total() {
    use voice_edge::signaling::keys::{MAX_EPHEMERAL_BYTES, MAX_SESSION_BYTES};
    // With a server key: minting with one is not rate-limited per client (open minting is).
    let server = start_local(AllInOneConfig {
        require_keys: true,
        api_keys: vec!["sk-test".into()],
        ..Default::default()
    })
    .await;
    let h = server.http_addr;
    let mint = |instructions: usize| {
        serde_json::to_vec(&serde_json::json!({
            "session": {"type": "realtime", "instructions": "x".repeat(instructions)}
        }))
        .unwrap()
    };
    let r = common::http_post_auth(
        h,
        "/v1/realtime/client_secrets",
        "application/json",
        &mint(MAX_SESSION_BYTES),
        "sk-test",
    )
    .await;
    assert_eq!(
        (r.status, error_code(&r.body).as_str()),
        (400, "session_too_large"),
        "{}",
        r.body
    );
    let body = mint(MAX_SESSION_BYTES - 200);
    let most = MAX_EPHEMERAL_BYTES / (MAX_SESSION_BYTES - 200);
    let mut minted = 0;
    let full = loop {
        let r = common::http_post_auth(
            h,
            "/v1/realtime/client_secrets",
            "application/json",
            &body,
            "sk-test",
        )
        .await;
        if r.status != 200 {
            break r;
        }
        minted += 1;
        assert!(
            minted <= most,
            "minted {minted} keys of {} bytes",
            body.len()
        );
    };
    assert!(minted >= most * 9 / 10, "refused after only {minted}");
    assert_eq!(
        (full.status, error_code(&full.body).as_str()),
        (503, "key_store_full"),
        "{}",
        full.body
    );
    let retry: u64 = full.headers["retry-after"].parse().unwrap();
    assert!((1..=600).contains(&retry), "Retry-After: {retry}");
    server.shutdown().await;
}

/// Where minting needs no key, one client gets a minute's worth at once and then waits, in
/// the error shape with Retry-After, rather than filling the key store for everyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_minting_is_rate_limited_per_client() {
    let server = start_local(AllInOneConfig::default()).await;
    let h = server.http_addr;
    let mut minted = 0;
    let refused = loop {
        let r = http_post(h, "/v1/realtime/client_secrets", "application/json", b"{}").await;
        if r.status != 200 {
            break r;
        }
        minted += 1;
        assert!(minted <= 70, "no limit after {minted} mints");
    };
    assert_eq!(
        minted,
        voice_edge::signaling::call_limits::MINTS_PER_MINUTE as usize
    );
    assert_eq!(
        (refused.status, error_code(&refused.body).as_str()),
        (429, "too_many_mints"),
        "{}",
        refused.body
    );
    assert_eq!(refused.headers["retry-after"], "1");
}

/// A connection that sends no request is closed after the header timeout, on the HTTP and the
/// HTTPS listener alike, as is a keep-alive connection that goes quiet after a request; the
/// server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_header_timeout() {
    let cache_dir = std::env::temp_dir().join(format!("voice-edge-idle-{}", std::process::id()));
    let server = start_local(AllInOneConfig {
        http_limits: HttpLimits {
            header_timeout: Duration::from_millis(300),
            ..Default::default()
        },
        lan: allinone::LanMode {
            enabled: true,
            https: "127.0.0.1:0".parse().unwrap(),
            cache_dir: Some(cache_dir.clone()),
            ..AllInOneConfig::default().lan
        },
        ..Default::default()
    })
    .await;
    let https: std::net::SocketAddr = {
        // https://HOST:PORT/#key=… (the pairing key rides the fragment)
        let url = server.https_url.as_deref().unwrap();
        let url = url.split('#').next().unwrap();
        let port = url.rsplit(':').next().unwrap().trim_end_matches('/');
        format!("127.0.0.1:{port}").parse().unwrap()
    };
    let mut idle = vec![];
    for _ in 0..20 {
        idle.push(TcpStream::connect(server.http_addr).await.unwrap());
    }
    for _ in 0..5 {
        idle.push(TcpStream::connect(https).await.unwrap());
    }
    // Half a request line and headers, then nothing.
    let mut slow = TcpStream::connect(server.http_addr).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    idle.push(slow);
    // One request on a keep-alive connection, then quiet.
    let mut kept = TcpStream::connect(server.http_addr).await.unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    idle.push(kept);

    for (i, mut s) in idle.into_iter().enumerate() {
        assert!(
            closed_within(&mut s, Duration::from_secs(10)).await,
            "connection {i} still open"
        );
    }
    let r = common::http_get(server.http_addr, "/health").await;
    assert_eq!(r.status, 200);
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(cache_dir);
}

/// Beyond the connection cap, a new connection is not served until a slot frees; then it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_connection_cap_a_request_waits_for_a_free_slot() {
    let server = start_local(AllInOneConfig {
        http_limits: HttpLimits {
            max_connections: 3,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let h = server.http_addr;
    let mut held = vec![];
    for _ in 0..3 {
        held.push(TcpStream::connect(h).await.unwrap());
    }
    let mut waiting = TcpStream::connect(h).await.unwrap();
    waiting
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![];
    let early =
        tokio::time::timeout(Duration::from_millis(500), waiting.read_to_end(&mut buf)).await;
    assert!(
        early.is_err(),
        "served beyond the cap: {:?}",
        String::from_utf8_lossy(&buf)
    );
    // One held connection goes away: its slot goes to the waiting one.
    drop(held.pop());
    tokio::time::timeout(Duration::from_secs(5), waiting.read_to_end(&mut buf))
        .await
        .expect("still not served after a slot freed")
        .unwrap();
    assert!(
        buf.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
    drop(held);
    server.shutdown().await;
}

/// Whether the peer closes `s` within `d` (EOF or reset), having sent nothing else of note.
async fn closed_within(s: &mut TcpStream, d: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + d;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // A 408 or the TLS alert that precedes the close.
            Ok(Ok(_)) => continue,
        }
    }
}

/// What hyper refuses before the router sees it (a URI over 64 KiB, more than 100 headers, a
/// request line that is not HTTP) is answered with its status and the API's JSON error, like
/// every other refusal, and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parser_s_own_refusals_are_json_too() {
    let server = start_local(AllInOneConfig::default()).await;
    let raw = |request: String| async move {
        let mut s = TcpStream::connect(server.http_addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (head.to_owned(), body.to_owned())
    };
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let many_headers = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\n{}\r\n",
        (0..200)
            .map(|i| format!("x-h{i}: v\r\n"))
            .collect::<String>()
    );
    for (request, status, code) in [
        (long_uri, "414", "uri_too_long"),
        (many_headers, "431", "headers_too_large"),
        (
            "NOT HTTP AT ALL\r\n\r\n".to_owned(),
            "400",
            "invalid_request",
        ),
    ] {
        let (head, body) = raw(request).await;
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert_eq!(error_code(&body), code, "{body}");
    }
    let (head, _) =
        raw("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into()).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    server.shutdown().await;
}
