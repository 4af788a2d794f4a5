//! See `voice_edge::fuzzing::stun_peek` for what this covers and which invariants it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| voice_edge::fuzzing::stun_peek(data));
