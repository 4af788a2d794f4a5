//! Call ids that say where the call lives: `rtc_<cluster:4 hex><transceiver:4 hex><random>`.
//!
//! Signaling routes `/v1/realtime/calls/{id}/…` by decoding the id instead of keeping a map of
//! calls, so a call that ends on its own leaves nothing behind outside its transceiver. The id
//! grants nothing by itself: the random part only keeps ids unique and unguessable.

pub fn mint(cluster: u16, transceiver: u16) -> String {
    format!(
        "rtc_{cluster:04x}{transceiver:04x}{}",
        hex::encode(rand::random::<[u8; 10]>())
    )
}

/// (cluster, transceiver) of a call id minted here, or `None` for anything else.
pub fn decode(id: &str) -> Option<(u16, u16)> {
    let hexpart = id.strip_prefix("rtc_")?;
    if hexpart.len() != 28 || !hexpart.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let cluster = u16::from_str_radix(&hexpart[0..4], 16).ok()?;
    let transceiver = u16::from_str_radix(&hexpart[4..8], 16).ok()?;
    Some((cluster, transceiver))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let id = mint(3, 513);
        assert_eq!(decode(&id), Some((3, 513)));
        assert_ne!(mint(3, 513), id);
        assert_eq!(decode("rtc_zz"), None);
        assert_eq!(decode(&id.replace("rtc_", "sess_")), None);
        assert_eq!(decode(&format!("{id}0")), None);
    }
}
