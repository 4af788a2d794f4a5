//! LAN mode's pairing: the HTTPS listener that other devices reach serves the API only to
//! devices that were shown its pairing key.
//!
//! Why: `--lan` listens on every interface, and without this any device on the same Wi-Fi
//! could create calls, read a call's event log, attach a sideband, inject faults, download a
//! recording or hang up. The key travels in the printed URL's fragment (and its QR code), which
//! a browser never sends to a server or writes to a log; the demo page reads it and sends it as
//! its bearer key (or, on a WebSocket, the `openai-insecure-api-key.` sub-protocol). The page
//! itself and its files load without it, so a device that scanned the code can start. Keys the
//! server already trusts (a server key, an ephemeral key minted with one) are admitted too: an
//! app that holds one needs no pairing.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::admin_access::same_secret;

/// The key a LAN listener requires; cheap to clone into its middleware.
#[derive(Clone)]
pub struct Pairing {
    key: Arc<str>,
}

/// What the guard checks against: the pairing key, and the keys the server already trusts (a
/// server key an app holds, an ephemeral key minted with one).
#[derive(Clone)]
pub(super) struct Guard {
    pub pairing: Pairing,
    pub keys: Arc<super::keys::Keys>,
}

impl Pairing {
    /// A fresh random key (128 bits, hex), for one run of the server.
    pub fn random() -> Pairing {
        Pairing {
            key: format!("pair_{}", hex::encode(rand::random::<[u8; 16]>())).into(),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether a request may use the API: everything under `/v1/` needs the key; the demo
    /// page, its files and `/health` do not.
    fn admits(&self, path: &str, key: Option<&str>) -> bool {
        !path.starts_with("/v1/")
            || key.is_some_and(|k| same_secret(k.as_bytes(), self.key.as_bytes()))
    }
}

pub(super) async fn guard(State(guard): State<Guard>, req: Request, next: Next) -> Response {
    let key = super::websocket::key_of(req.headers());
    // The pairing check first: it takes no lock, and the page's own requests all pass it.
    if guard.pairing.admits(req.uri().path(), key.as_deref())
        || key.as_deref().is_some_and(|k| guard.keys.knows(k))
    {
        return next.run(req).await;
    }
    ApiError::invalid(
        "pairing_required",
        "This edge is in LAN mode: open the URL it printed, or scan its QR code, on this device. \
         Requests without its pairing key are refused.",
    )
    .with_status(StatusCode::UNAUTHORIZED)
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_needs_the_key_and_the_page_does_not() {
        let p = Pairing::random();
        assert!(p.key().starts_with("pair_") && p.key().len() == 37);
        assert!(p.admits("/", None));
        assert!(p.admits("/app.js", None));
        assert!(p.admits("/health", None));
        assert!(!p.admits("/v1/realtime/calls", None));
        assert!(!p.admits("/v1/realtime/calls", Some("pair_wrong")));
        assert!(p.admits("/v1/realtime/calls", Some(p.key())));
        assert!(!p.admits("/v1/live/sessions", Some(&p.key()[..20])));
        assert_ne!(Pairing::random().key(), p.key());
    }
}
