//! Entry points for the cargo-fuzz targets in `fuzz/`, one per parser a stranger can reach.
//!
//! They live in the library rather than in the fuzz crate so that the stable test
//! `tests/integration/fuzz_corpus.rs` replays every committed corpus file through exactly the code libFuzzer
//! runs, invariants included: the corpus is checked on every `cargo test`, without nightly.
//! Each function takes arbitrary bytes, drives the real code the way production does, and panics
//! only when an invariant breaks, which is what both libFuzzer and the test report.
//!
//! Not an API: hidden from the docs and free to change with the targets.

mod client_events;
mod link;
mod route;
mod sdp;
mod stun;

pub use client_events::client_events;
pub use link::link_header;
pub use route::route_decode;
pub use sdp::sdp_offer;
pub use stun::stun_peek;

/// A target's entry point: arbitrary bytes in, a panic if an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target by its `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/` name, so the corpus
/// test can refuse a corpus directory that no target would ever read.
pub const TARGETS: &[(&str, Target)] = &[
    ("stun_peek", stun_peek),
    ("link_header", link_header),
    ("route_decode", route_decode),
    ("sdp_offer", sdp_offer),
    ("client_events", client_events),
];
