//! A cluster's static membership table: which transceiver id lives at which internal address.
//!
//! The ufrag carries a small transceiver *index*, never an address, so a forged or replayed hint can
//! only ever name a member; this table is where the relay turns an index into an address. It sits
//! beside the ufrag codec because it is the other half of the relay–transceiver contract; Redis
//! leases ([`crate::membership`]) fill it when the roles run split.

use std::collections::HashMap;
use std::net::SocketAddr;

/// One cluster as its relay sees it.
#[derive(Debug, Clone)]
pub struct ClusterMembers {
    pub cluster: u16,
    /// Transceiver id → the internal UDP address of its worker 0.
    pub transceivers: HashMap<u16, SocketAddr>,
    /// Worker sockets per transceiver: worker `w` is at worker 0's port + `w`.
    pub workers: u8,
}

impl ClusterMembers {
    pub fn new(cluster: u16) -> Self {
        ClusterMembers {
            cluster,
            transceivers: HashMap::new(),
            workers: 1,
        }
    }

    pub fn with_workers(mut self, workers: u8) -> Self {
        self.workers = workers;
        self
    }

    pub fn with(mut self, id: u16, addr: SocketAddr) -> Self {
        self.transceivers.insert(id, addr);
        self
    }

    pub fn get(&self, id: u16) -> Option<SocketAddr> {
        self.transceivers.get(&id).copied()
    }
}

/// Parses `ID=ADDR` as given on the command line (`--transceiver 1=10.0.0.5:4000`).
pub fn parse_member(s: &str) -> Result<(u16, SocketAddr), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("expected ID=ADDR, got {s:?}"))?;
    let id = id
        .trim()
        .parse::<u16>()
        .map_err(|e| format!("bad transceiver id {id:?}: {e}"))?;
    let addr = addr
        .trim()
        .parse::<SocketAddr>()
        .map_err(|e| format!("bad transceiver address {addr:?}: {e}"))?;
    Ok((id, addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_members_and_rejects_garbage() {
        assert_eq!(
            parse_member("3=127.0.0.1:4000").unwrap(),
            (3, "127.0.0.1:4000".parse().unwrap())
        );
        assert!(parse_member("3").is_err());
        assert!(parse_member("x=127.0.0.1:1").is_err());
        assert!(parse_member("1=nope").is_err());
    }

    #[test]
    fn member_lookup() {
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let m = ClusterMembers::new(0).with(1, a);
        assert_eq!(m.get(1), Some(a));
        assert_eq!(m.get(2), None);
    }
}
