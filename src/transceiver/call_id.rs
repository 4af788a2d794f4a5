//! Call ids that say where the call lives:
//! `rtc_<cluster:4 hex><transceiver:4 hex><worker:2 hex><random:18 hex>`.
//!
//! Signaling routes `/v1/realtime/calls/{id}/…` by decoding the id instead of keeping a map of
//! calls, and a transceiver hands the request straight to the worker that owns the call, so a
//! call that ends on its own leaves nothing behind outside that worker. The id grants nothing by
//! itself: the random part only keeps ids unique and unguessable.
//!
//! A [`CallId`] is an id parsed once where it enters (a URL path, a control request): past that
//! point the id cannot be malformed and its place is read, not decoded again.

use std::fmt;

/// Where a call lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallPlace {
    pub cluster: u16,
    pub transceiver: u16,
    pub worker: u8,
}

pub fn mint(place: CallPlace) -> String {
    mint_with("rtc_", place)
}

/// An id with another prefix and the same routing part (a Live session's `live_…`).
pub fn mint_with(prefix: &str, place: CallPlace) -> String {
    let CallPlace {
        cluster,
        transceiver,
        worker,
    } = place;
    format!(
        "{prefix}{cluster:04x}{transceiver:04x}{worker:02x}{}",
        hex::encode(rand::random::<[u8; 9]>())
    )
}

/// Where a call id minted here lives, or `None` for anything else; [`CallId::parse`] is the
/// one caller, so an id is decoded once, where it enters.
fn decode(id: &str) -> Option<CallPlace> {
    let hexpart = id
        .strip_prefix("rtc_")
        .or_else(|| id.strip_prefix(crate::live::ID_PREFIX))?;
    if hexpart.len() != 28 || !hexpart.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(CallPlace {
        cluster: u16::from_str_radix(&hexpart[0..4], 16).ok()?,
        transceiver: u16::from_str_radix(&hexpart[4..8], 16).ok()?,
        worker: u8::from_str_radix(&hexpart[8..10], 16).ok()?,
    })
}

/// A call id minted here, with the place it names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallId {
    text: String,
    place: CallPlace,
}

impl CallId {
    /// `None` for anything this edge did not mint (wrong prefix, length or digits).
    pub fn parse(text: &str) -> Option<CallId> {
        Some(CallId {
            place: decode(text)?,
            text: text.to_owned(),
        })
    }

    pub fn place(&self) -> CallPlace {
        self.place
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let place = CallPlace {
            cluster: 3,
            transceiver: 513,
            worker: 7,
        };
        let id = mint(place);
        assert_eq!(decode(&id), Some(place));
        assert_ne!(mint(place), id);
        assert_eq!(decode("rtc_zz"), None);
        assert_eq!(decode(&id.replace("rtc_", "sess_")), None);
        assert_eq!(decode(&format!("{id}0")), None);
        let live = mint_with(crate::live::ID_PREFIX, place);
        assert!(live.starts_with("live_"));
        assert_eq!(decode(&live), Some(place));
    }

    #[test]
    fn a_call_id_is_parsed_once_and_carries_its_place() {
        let place = CallPlace {
            cluster: 1,
            transceiver: 2,
            worker: 3,
        };
        let text = mint(place);
        let id = CallId::parse(&text).unwrap();
        assert_eq!((id.place(), id.as_str()), (place, text.as_str()));
        assert_eq!(id.to_string(), text);
        for bad in [
            "",
            "rtc_",
            "rtc_../../x",
            "sess_0001000203aabbccddeeff001122",
            &text[1..],
        ] {
            assert_eq!(CallId::parse(bad), None, "{bad:?}");
        }
    }
}
