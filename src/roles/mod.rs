//! The split roles, each its own process of the one binary (`voice-edge signaling`,
//! `voice-edge transceiver`; the relay role is [`crate::relay`] on its own): the same modules
//! the all-in-one process wires by function calls, wired here through Redis membership and the
//! control API instead.

pub mod signaling;
pub mod transceiver;

/// The relay role's `/metrics`: every per-reason counter.
pub fn relay_metrics(h: &crate::relay::RelayHandle) -> String {
    let mut out = String::new();
    let named = h.counters().named();
    let samples: Vec<[(&str, &str); 1]> = named.iter().map(|(n, _)| [("event", *n)]).collect();
    let rows: Vec<(&[(&str, &str)], f64)> = samples
        .iter()
        .zip(&named)
        .map(|(l, (_, v))| (&l[..], *v as f64))
        .collect();
    crate::ops::family(
        &mut out,
        "voice_edge_relay_events_total",
        "counter",
        "Relay datagrams and flows by outcome (forwarded, dropped per reason, flow cache).",
        &rows,
    );
    out
}
