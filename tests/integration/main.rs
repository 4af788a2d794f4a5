//! The integration tests, one module per file, built as one test binary: each file was its own
//! binary before, and linking two dozen copies of the static voice-edge library (and compiling
//! tests/common two dozen times) was most of the test build. Five stay apart because they own or
//! measure process-wide state: relay_no_alloc (a counting global allocator), relay_flow_cache
//! (a capturing logger), tts_flood (the process's threads and children), admission (its RSS)
//! and multi_host (network namespaces, root).
//!
//!     cargo test --release --test integration                # all of them
//!     cargo test --release --test integration live::         # one file
//!
//! The tests mostly wait on real sockets and timers, so scripts/test.sh runs them with more
//! threads than cores.

#[path = "../common/mod.rs"]
mod common;

mod drain;
mod echo_through_relay;
mod event_log;
mod faults;
mod fuzz_corpus;
mod g711_calls;
mod global_relay;
mod ice_lite;
mod lifecycle;
mod live;
mod media_address;
mod membership;
mod relay_recovery;
mod relay_routing;
mod scripted_conversation;
mod signaling_http;
mod split_roles;
mod tool_calls;
mod websocket;
