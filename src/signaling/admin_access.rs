//! Who may use `/metrics` and `/admin/*`: the operator, never a web page.
//!
//! Admin shares the all-in-one's HTTP listener with the public API, which browsers may call
//! from any origin (CORS). CORS does not stop a page from *sending* a simple POST, so without
//! this guard any website a developer visits could restart the relay or drain transceivers
//! through `127.0.0.1:8080`. The guard, on admin routes only:
//! - refuses requests a browser marks as coming from another site (`Origin` not this very
//!   loopback origin, or `Sec-Fetch-Site` other than `same-origin`/`none`);
//! - with an admin token configured, requires `Authorization: Bearer <token>` from everyone;
//! - without one, serves only loopback peers that name a loopback host (a page that rebinds
//!   its own DNS name to 127.0.0.1 still sends its own name in `Host`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;

/// The admin token, if the operator set one.
#[derive(Clone, Default)]
pub struct AdminAccess {
    pub token: Option<Arc<str>>,
}

pub(super) async fn guard(State(access): State<AdminAccess>, req: Request, next: Next) -> Response {
    // In-process callers (tests driving the router directly) have no peer; every listener this
    // crate starts records one.
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    match check(&access, req.headers(), peer) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// The guard's decision, for an admin action reached through another route (the
/// `relay_restart` fault).
pub(super) fn check(
    access: &AdminAccess,
    h: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Result<(), ApiError> {
    let host = h
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let forbidden = |m: &str| {
        ApiError::invalid("admin_forbidden", m.to_owned()).with_status(StatusCode::FORBIDDEN)
    };
    if let Some(origin) = h.get(header::ORIGIN) {
        let same =
            origin.to_str().ok() == Some(&format!("http://{host}")) && is_loopback_host(host);
        if !same {
            return Err(forbidden("admin endpoints do not serve other web origins"));
        }
    }
    if let Some(site) = h.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && site != "same-origin"
        && site != "none"
    {
        return Err(forbidden("admin endpoints do not serve other web origins"));
    }
    if let Some(token) = &access.token {
        let given = h
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !same_secret(given.as_bytes(), token.as_bytes()) {
            return Err(ApiError::invalid(
                "admin_unauthorized",
                "admin endpoints need Authorization: Bearer <admin token>",
            )
            .with_status(StatusCode::UNAUTHORIZED));
        }
        return Ok(());
    }
    if peer.is_some_and(|p| !p.ip().is_loopback()) || !is_loopback_host(host) {
        return Err(forbidden(
            "admin endpoints serve this machine only (set an admin token to reach them otherwise)",
        ));
    }
    Ok(())
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((n, port)) if port.chars().all(|c| c.is_ascii_digit()) && !n.ends_with(':') => n,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Compares without an early exit, so response timing says nothing about how much matched.
pub(crate) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    const LOCAL: Option<SocketAddr> = Some(SocketAddr::new(
        std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        50000,
    ));

    #[test]
    fn loopback_tools_pass_and_web_pages_do_not() {
        let open = AdminAccess::default();
        assert!(check(&open, &headers(&[("host", "127.0.0.1:8080")]), LOCAL).is_ok());
        assert!(check(&open, &headers(&[("host", "localhost:8080")]), LOCAL).is_ok());
        assert!(check(&open, &headers(&[("host", "[::1]:8080")]), LOCAL).is_ok());
        // The demo page itself, same origin.
        let same = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ];
        assert!(check(&open, &headers(&same), LOCAL).is_ok());
        for bad in [
            &[
                ("host", "127.0.0.1:8080"),
                ("origin", "https://evil.example"),
            ][..],
            &[("host", "127.0.0.1:8080"), ("origin", "null")][..],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")][..],
            // DNS rebinding: same origin as far as the browser knows, but not our name.
            &[
                ("host", "evil.example:8080"),
                ("origin", "http://evil.example:8080"),
            ][..],
            &[("host", "evil.example:8080")][..],
        ] {
            let e = check(&open, &headers(bad), LOCAL).unwrap_err();
            assert_eq!(e.status, StatusCode::FORBIDDEN, "{bad:?}");
        }
        // Another machine, even naming loopback.
        let remote = Some("192.0.2.5:40000".parse().unwrap());
        assert!(check(&open, &headers(&[("host", "127.0.0.1:8080")]), remote).is_err());
    }

    #[test]
    fn a_token_admits_anyone_who_has_it_and_no_one_else() {
        let access = AdminAccess {
            token: Some("s3cret-admin".into()),
        };
        let remote = Some("192.0.2.5:40000".parse().unwrap());
        let with = |t: &str| headers(&[("host", "edge.example:8081"), ("authorization", t)]);
        assert!(check(&access, &with("Bearer s3cret-admin"), remote).is_ok());
        for t in [
            "Bearer s3cret-admiN",
            "Bearer ",
            "s3cret-admin",
            "Bearer s3cret-admin2",
        ] {
            let e = check(&access, &with(t), remote).unwrap_err();
            assert_eq!(e.status, StatusCode::UNAUTHORIZED, "{t}");
        }
        let none = headers(&[("host", "127.0.0.1:8080")]);
        assert!(
            check(&access, &none, LOCAL).is_err(),
            "loopback needs it too"
        );
    }
}
