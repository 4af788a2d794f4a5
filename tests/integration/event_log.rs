//! The per-call event log, `GET /v1/realtime/calls/{id}/events`, over real peers on real UDP: a
//! call's Realtime events both ways, in order, as JSON Lines, readable after hang-up, polled
//! with `?since=`, and guarded like hang-up.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Client, HttpResponse, http_get, http_with_headers, start_local};
use serde_json::{Value, json};
use voice_edge::allinone::AllInOneConfig;

/// The log's lines, each checked to be one JSON object.
fn parse(r: &HttpResponse) -> Vec<Value> {
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.headers.get("content-type").map(String::as_str),
        Some("application/jsonl")
    );
    assert!(r.body.is_empty() || r.body.ends_with('\n'), "{:?}", r.body);
    r.body
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            assert!(v.is_object(), "{l}");
            v
        })
        .collect()
}

fn events_path(id: &str) -> String {
    format!("/v1/realtime/calls/{id}/events")
}

/// Where in `log` the first line matching `f` is.
fn position(log: &[Value], what: &str, f: impl Fn(&Value) -> bool) -> usize {
    log.iter()
        .position(f)
        .unwrap_or_else(|| panic!("no {what} in the log: {log:#?}"))
}

fn is(dir: &'static str, kind: &'static str) -> impl Fn(&Value) -> bool {
    move |l| l["dir"] == dir && l["event"]["type"] == kind
}

fn client_event(event_id: &'static str) -> impl Fn(&Value) -> bool {
    move |l| l["dir"] == "client" && l["event"]["event_id"] == event_id
}

async fn get(h: SocketAddr, path: &str) -> HttpResponse {
    http_get(h, path).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_holds_both_directions_in_order_and_outlives_the_call() {
    let server = start_local(AllInOneConfig::default()).await;
    let h = server.http_addr;
    let mut c = Client::call(h, "/v1/realtime/calls?model=echo").await;
    c.wait_connected(Duration::from_secs(10)).await;
    c.wait_for("session.created", 1).await;
    let id = c.call_id();

    let sent = [
        json!({"type": "session.update", "event_id": "ev_update",
               "session": {"type": "realtime", "instructions": "Be brief.",
                           "output_modalities": ["text"]}}),
        json!({"type": "conversation.item.create", "event_id": "ev_item",
               "item": {"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": "hello log"}]}}),
        json!({"type": "response.create", "event_id": "ev_response"}),
    ];
    c.dc.send_text(&sent[0].to_string()).await.unwrap();
    c.wait_for("session.updated", 1).await;
    for e in &sent[1..] {
        c.dc.send_text(&e.to_string()).await.unwrap();
    }
    c.wait_for("response.done", 1).await;
    c.dc.send_text("this is { not json").await.unwrap();
    // The engine answers a frame it cannot parse with an error event.
    c.wait_for("error", 1).await;

    // Readable while the call is live.
    let live = parse(&get(h, &events_path(&id)).await);
    assert!(live.iter().any(is("server", "response.done")), "{live:#?}");

    let r = c.hangup(h).await;
    assert_eq!(r.status, 200, "{}", r.body);
    c.wait_told_closed(Duration::from_secs(3)).await;

    let log = parse(&get(h, &events_path(&id)).await);
    // seq counts from 0 with no gap; time never runs backwards, on either clock.
    for (i, l) in log.iter().enumerate() {
        assert_eq!(l["seq"], i, "{l}");
        assert!(l["t_ms"].is_f64() || l["t_ms"].is_u64(), "{l}");
        assert!(l["at"].is_u64(), "{l}");
        assert!(l["dir"] == "client" || l["dir"] == "server", "{l}");
    }
    for w in log.windows(2) {
        assert!(w[0]["t_ms"].as_f64() <= w[1]["t_ms"].as_f64(), "{w:?}");
        assert!(w[0]["at"].as_u64() <= w[1]["at"].as_u64(), "{w:?}");
    }
    let first_server = log.iter().find(|l| l["dir"] == "server").unwrap();
    assert_eq!(first_server["event"]["type"], "session.created");

    // The client's frames are there exactly as sent, in order, each before what it caused.
    let clients: Vec<&Value> = log.iter().filter(|l| l["dir"] == "client").collect();
    assert_eq!(clients.len(), 4, "{clients:#?}");
    for (line, event) in clients.iter().zip(&sent) {
        assert_eq!(&line["event"], event);
    }
    assert_eq!(clients[3]["event"], Value::Null);
    assert_eq!(clients[3]["raw"], "this is { not json");
    let created = position(&log, "session.created", is("server", "session.created"));
    let update = position(&log, "the session.update", client_event("ev_update"));
    let updated = position(&log, "session.updated", is("server", "session.updated"));
    let item = position(&log, "the item", client_event("ev_item"));
    let added = position(&log, "item.added", is("server", "conversation.item.added"));
    let create = position(&log, "the response.create", client_event("ev_response"));
    let response_created = position(&log, "response.created", is("server", "response.created"));
    let done = position(&log, "response.done", is("server", "response.done"));
    let raw = position(&log, "the bad frame", |l| l.get("raw").is_some());
    let error = position(&log, "error", is("server", "error"));
    assert!(
        created < update
            && update < updated
            && updated < item
            && item < added
            && create < response_created
            && response_created < done
            && done < raw
            && raw < error,
        "out of order: {log:#?}"
    );
    assert_eq!(
        log[done]["event"]["response"]["status"], "completed",
        "{}",
        log[done]
    );

    // What the server sent is what the client received, in the same order.
    let received: Vec<Value> = c
        .events
        .lock()
        .await
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let server_sent: Vec<&Value> = log
        .iter()
        .filter(|l| l["dir"] == "server")
        .map(|l| &l["event"])
        .collect();
    assert_eq!(server_sent.len(), received.len());
    for (s, r) in server_sent.iter().zip(&received) {
        assert_eq!(*s, r);
    }

    // ?since= returns the same lines from there on; past the end, none.
    let k = log.len() / 2;
    let tail = parse(&get(h, &format!("{}?since={k}", events_path(&id))).await);
    assert_eq!(tail, log[k..]);
    let none = get(h, &format!("{}?since={}", events_path(&id), log.len())).await;
    assert_eq!((none.status, none.body.as_str()), (200, ""));
    let bad = get(h, &format!("{}?since=soon", events_path(&id))).await;
    assert_eq!(bad.status, 400, "{}", bad.body);

    // Unknown calls: 404 in the Realtime error shape, whether the id is junk or well formed.
    let mut other = id.clone();
    let last = if other.ends_with('0') { "1" } else { "0" };
    other.replace_range(other.len() - 1.., last);
    for unknown in ["rtc_nope", other.as_str()] {
        let r = get(h, &events_path(unknown)).await;
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(
            (r.status, v["error"]["code"].as_str()),
            (404, Some("call_not_found")),
            "{unknown}: {}",
            r.body
        );
    }
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

/// Who may hang a call up may read its log; another client's key may not (403, as hang-up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_who_may_hang_up_may_read_the_log() {
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
    c.wait_for("session.created", 1).await;
    let path = events_path(&c.call_id());
    let with = |key: &str| {
        let auth = format!("Bearer {key}");
        let path = path.clone();
        async move { http_with_headers("GET", h, &path, &[("Authorization", &auth)]).await }
    };
    let code = |r: &HttpResponse| {
        let v: Value = serde_json::from_str(&r.body).unwrap_or_default();
        (
            r.status,
            v["error"]["code"].as_str().unwrap_or("").to_owned(),
        )
    };

    assert_eq!(code(&get(h, &path).await), (401, "invalid_api_key".into()));
    assert_eq!(code(&with(&theirs).await), (403, "call_forbidden".into()));
    assert_eq!(code(&with("sk-wrong").await).0, 401);
    for key in [&mine, "sk-test"] {
        let log = parse(&with(key).await);
        assert_eq!(log[0]["event"]["type"], "session.created", "{key}");
    }
    // A stranger learns nothing about which ids exist: an unknown id is refused the same way.
    let unknown = http_with_headers(
        "GET",
        h,
        &events_path("rtc_nope"),
        &[("Authorization", &format!("Bearer {theirs}"))],
    )
    .await;
    assert_eq!(code(&unknown), (403, "call_forbidden".into()));
    c.pc.close().await.unwrap();
    server.shutdown().await;
}
