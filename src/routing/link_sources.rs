//! Which source addresses a transceiver takes relay link datagrams from.
//!
//! A link datagram says which client it carries, and a transceiver believes it: that is what lets
//! one socket serve every call behind a relay. So only relays may send them. The rule is by
//! source network, not by a list of relay sockets, because relays come and go (a restarted relay
//! re-binds, `docker compose up --scale` adds some) and a transceiver never learns about them
//! (they read membership, they do not write it); the network a cluster's relays sit in is
//! stable and is what an operator configures anyway.
//!
//! The default is the networks a cluster's own hosts use: loopback, RFC 1918 and RFC 6598
//! private space, IPv6 unique-local and link-local. A datagram from the internet claiming to
//! be relayed is dropped and counted before anything reads it.
//!
//! No MAC on the header: what a link datagram can do is already bounded by the payload's own
//! authentication. The stack checks STUN MESSAGE-INTEGRITY, DTLS and SRTP whatever address the
//! header names, and a call's return path moves only after an authenticated binding request
//! (see `transceiver::endpoint`). A forger inside the cluster network, who could spoof a
//! relay's source address, could at worst inject packets the stack rejects; a MAC would add
//! per-datagram cost and a key to distribute to defend the same ground.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSources {
    nets: Vec<IpNet>,
}

impl Default for LinkSources {
    fn default() -> Self {
        Self::private()
    }
}

impl LinkSources {
    /// Loopback and private networks: where a cluster's relays live.
    pub fn private() -> Self {
        let nets = [
            "127.0.0.0/8",
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10",
            "169.254.0.0/16",
            "::1/128",
            "fc00::/7",
            "fe80::/10",
        ];
        LinkSources {
            nets: nets
                .iter()
                .map(|n| n.parse().expect("a valid network"))
                .collect(),
        }
    }

    /// Loopback only: relays in the same process or on the same host.
    pub fn loopback() -> Self {
        LinkSources {
            nets: vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()],
        }
    }

    /// Any source: for a relay on a public address (say it with `--link-sources` instead when
    /// you can).
    pub fn any() -> Self {
        LinkSources {
            nets: vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()],
        }
    }

    pub fn allows(&self, ip: IpAddr) -> bool {
        // An IPv4 relay reaching a dual-stack socket arrives as ::ffff:a.b.c.d.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.nets.iter().any(|n| n.contains(&ip))
    }
}

impl FromStr for LinkSources {
    type Err = String;

    /// A comma-separated list of networks (`10.1.0.0/16,fd00::/8`) or addresses, `private` for
    /// the default set, or `any`.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut nets = vec![];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "private" => nets.extend(Self::private().nets),
                "any" => nets.extend(Self::any().nets),
                _ => nets.push(
                    part.parse::<IpNet>()
                        .or_else(|_| part.parse::<IpAddr>().map(IpNet::from))
                        .map_err(|_| {
                            format!("{part:?} is not a network (10.0.0.0/8), an address, `private` or `any`")
                        })?,
                ),
            }
        }
        if nets.is_empty() {
            return Err("no link source given: name at least one network".into());
        }
        Ok(LinkSources { nets })
    }
}

impl std::fmt::Display for LinkSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.nets.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_networks_by_default_and_not_the_internet() {
        let d = LinkSources::default();
        for ok in [
            "127.0.0.1",
            "10.2.3.4",
            "172.20.0.5",
            "192.168.1.9",
            "::1",
            "fd12::1",
        ] {
            assert!(d.allows(ip(ok)), "{ok}");
        }
        for bad in ["8.8.8.8", "172.32.0.1", "2001:db8::1", "203.0.113.7"] {
            assert!(!d.allows(ip(bad)), "{bad}");
        }
        assert!(
            d.allows(ip("::ffff:10.0.0.1")),
            "v4-mapped relay on a dual-stack socket"
        );
    }

    #[test]
    fn parses_lists_and_names() {
        let s: LinkSources = "10.1.0.0/16, 192.0.2.7".parse().unwrap();
        assert!(s.allows(ip("10.1.200.3")) && s.allows(ip("192.0.2.7")));
        assert!(!s.allows(ip("10.2.0.1")) && !s.allows(ip("127.0.0.1")));
        assert!("any".parse::<LinkSources>().unwrap().allows(ip("8.8.8.8")));
        assert!(
            "private,198.51.100.0/24"
                .parse::<LinkSources>()
                .unwrap()
                .allows(ip("198.51.100.9"))
        );
        assert!("".parse::<LinkSources>().is_err());
        let e = "10.0.0.0/33".parse::<LinkSources>().unwrap_err();
        assert!(e.contains("10.0.0.0/33"), "{e}");
    }
}
