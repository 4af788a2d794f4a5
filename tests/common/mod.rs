//! Shared test helpers, one module per job; each test binary uses a few of them, hence the
//! allowances. Re-exported flat so a test names what it uses, not where it lives.

#![allow(dead_code, unused_imports)]

mod client;
mod http;
mod nat;
mod offers;
mod redis;
mod server;
mod stun;

pub use client::{Client, max_gap, response_types};
pub use http::{
    HttpResponse, http_get, http_get_bytes, http_patch, http_post, http_post_auth,
    http_post_with_headers, http_request, http_with_headers, mint_key,
};
pub use nat::Nat;
pub use offers::{CLIENT_PWD, CLIENT_UFRAG, chromium_like_offer};
pub use redis::RedisServer;
pub use server::{sessions, start_local};
pub use stun::binding_request;
