//! Which address the relay binds and which address answers tell clients to send media to.
//!
//! The two differ more often than not. A bind address like `0.0.0.0` is meaningless to a client;
//! behind NAT, in a container or a cloud VM the address clients reach is not on any interface;
//! and loopback alone is not enough even on a laptop: Firefox neither gathers loopback candidates
//! nor pairs a loopback remote candidate with its own host candidates, so an answer naming only
//! `127.0.0.1` never connects there (Chromium is lenient and does).
//!
//! So by default (`auto`) the relay binds the machine's primary non-loopback address (the source
//! address of its default route) and answers name exactly that: every local browser reaches it
//! (the kernel delivers it over loopback), and so does a phone on the same LAN. It binds that one
//! address rather than the wildcard because a UDP reply from a wildcard socket leaves from
//! whichever address the route to the client picks, and on a machine with several interfaces
//! (docker0, a VPN) that can differ from the address the client sent to, which ICE treats as a
//! failed check. With no usable interface at all the relay falls back to loopback, which still
//! serves Chromium. `--advertise HOST[:PORT]` overrides the address in answers (NAT, containers,
//! clouds); when its IP is not one of this machine's, the relay binds the wildcard instead.
//!
//! [`plan`] is a pure function of the flags and a [`HostAddrs`] snapshot, so every rule is unit
//! tested without touching the machine's interfaces; [`HostAddrs::read`] takes the snapshot.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::str::FromStr;

/// The STUN/TURN port: what a client or firewall expects a media relay to use.
pub const DEFAULT_MEDIA_PORT: u16 = 3478;

/// Where the relay's public socket binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaBind {
    /// `auto[:PORT]`: this machine's primary non-loopback address (see the module docs).
    Auto { port: u16 },
    /// An explicit address; an unspecified IP (`0.0.0.0`, `::`) binds every interface.
    At(SocketAddr),
}

impl Default for MediaBind {
    fn default() -> Self {
        MediaBind::Auto {
            port: DEFAULT_MEDIA_PORT,
        }
    }
}

impl FromStr for MediaBind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "auto" {
            return Ok(MediaBind::default());
        }
        if let Some(port) = s.strip_prefix("auto:") {
            return port
                .parse()
                .map(|port| MediaBind::Auto { port })
                .map_err(|_| format!("bad port in {s:?}: expected auto:PORT"));
        }
        s.parse()
            .map(MediaBind::At)
            .map_err(|_| format!("{s:?} is not auto, auto:PORT or IP:PORT (IPv6 as [addr]:port)"))
    }
}

impl fmt::Display for MediaBind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MediaBind::Auto { port } => write!(f, "auto:{port}"),
            MediaBind::At(a) => write!(f, "{a}"),
        }
    }
}

/// `--advertise HOST[:PORT]`, resolved: the address answers name. Without a port, the relay's
/// own port is advertised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advertise {
    pub ip: IpAddr,
    pub port: Option<u16>,
}

impl Advertise {
    /// Parses `IP`, `IP:PORT`, `[IPv6]:PORT`, a bare IPv6 address, `HOST` or `HOST:PORT`; a host
    /// name is resolved once, now (an IPv4 address preferred, since every client has IPv4), because
    /// an ICE candidate must carry an address.
    pub fn parse(s: &str) -> Result<Advertise, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("--advertise is empty: expected HOST or HOST:PORT".into());
        }
        let (host, port) = split_host_port(s)?;
        let ip = match host.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => resolve(host)?,
        };
        if ip.is_unspecified() {
            return Err(format!(
                "--advertise {s}: an unspecified address can never be reached; give the address clients use"
            ));
        }
        if port == Some(0) {
            return Err(format!("--advertise {s}: port 0 can never be reached"));
        }
        Ok(Advertise { ip, port })
    }
}

impl FromStr for Advertise {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Advertise::parse(s)
    }
}

fn split_host_port(s: &str) -> Result<(&str, Option<u16>), String> {
    let bad_port = |p: &str| format!("bad port {p:?} in {s:?}");
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("missing ']' in {s:?}"))?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(p.parse().map_err(|_| bad_port(p))?))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(format!("unexpected {after:?} after ']' in {s:?}")),
        };
    }
    // More than one colon and no brackets: a bare IPv6 address, no port.
    if s.matches(':').count() > 1 {
        return Ok((s, None));
    }
    match s.split_once(':') {
        Some((host, p)) => Ok((host, Some(p.parse().map_err(|_| bad_port(p))?))),
        None => Ok((s, None)),
    }
}

fn resolve(host: &str) -> Result<IpAddr, String> {
    let addrs: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve --advertise host {host:?}: {e}"))?
        .map(|a| a.ip())
        .collect();
    addrs
        .iter()
        .find(|ip| ip.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("--advertise host {host:?} resolves to no address"))
}

/// One address of one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddr {
    pub name: String,
    pub ip: IpAddr,
}

/// What the machine's network looks like, as far as choosing a media address goes.
#[derive(Debug, Clone, Default)]
pub struct HostAddrs {
    pub interfaces: Vec<InterfaceAddr>,
    /// The source address the kernel picks for a packet to the internet (IPv4, then IPv6):
    /// the interface a LAN peer most likely shares with us.
    pub route_v4: Option<IpAddr>,
    pub route_v6: Option<IpAddr>,
}

impl HostAddrs {
    /// Reads the interfaces and the default routes' source addresses. Connecting a UDP socket sends
    /// nothing; it only makes the kernel choose a route and a source address.
    pub fn read() -> HostAddrs {
        let interfaces = if_addrs::get_if_addrs()
            .map(|list| {
                list.into_iter()
                    .map(|i| InterfaceAddr {
                        ip: i.ip(),
                        name: i.name,
                    })
                    .collect()
            })
            .unwrap_or_else(|e| {
                log::warn!("cannot list network interfaces: {e}");
                vec![]
            });
        let route_source = |bind: IpAddr, probe: IpAddr| {
            let s = UdpSocket::bind((bind, 0)).ok()?;
            s.connect((probe, 9)).ok()?;
            Some(s.local_addr().ok()?.ip())
        };
        HostAddrs {
            interfaces,
            // Documentation prefixes (RFC 5737, RFC 3849): any routable address would do, these
            // are never anyone's real peer.
            route_v4: route_source(
                Ipv4Addr::UNSPECIFIED.into(),
                Ipv4Addr::new(203, 0, 113, 1).into(),
            ),
            route_v6: route_source(
                Ipv6Addr::UNSPECIFIED.into(),
                "2001:db8::1".parse::<Ipv6Addr>().unwrap().into(),
            ),
        }
    }

    pub fn is_local(&self, ip: IpAddr) -> bool {
        ip.is_loopback() || self.interfaces.iter().any(|i| i.ip == ip)
    }

    /// The address a client elsewhere on the LAN (or a local browser) is best told to use: the
    /// default route's source address, else the first usable interface address, IPv4 before IPv6,
    /// physical interfaces before bridges and tunnels. `None` when only loopback is up.
    pub fn primary(&self) -> Option<IpAddr> {
        for r in [self.route_v4, self.route_v6].into_iter().flatten() {
            if usable(r) && self.interfaces.iter().any(|i| i.ip == r) {
                return Some(r);
            }
        }
        self.interfaces
            .iter()
            .filter(|i| usable(i.ip))
            .min_by_key(|i| (!i.ip.is_ipv4(), is_virtual(&i.name)))
            .map(|i| i.ip)
    }
}

/// An address a browser can be handed as a candidate: not loopback, not unspecified, not
/// link-local (IPv6 link-local needs a scope id no candidate carries; 169.254/16 is what a host
/// without DHCP makes up), not multicast.
fn usable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback() || v4.is_unspecified() || v4.is_link_local() || v4.is_multicast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80)
        }
    }
}

/// Container bridges, VM networks and tunnels: reachable from this host, rarely from a phone.
fn is_virtual(name: &str) -> bool {
    [
        "docker", "br-", "veth", "virbr", "vmnet", "vboxnet", "tun", "tap", "wg", "cni", "flannel",
        "lxc", "podman",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// The outcome: bind here, and name this in answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaPlan {
    pub bind: SocketAddr,
    /// The IP answers name; never unspecified.
    pub advertise_ip: IpAddr,
    /// The port answers name; `None`: whatever port the relay ends up bound to.
    pub advertise_port: Option<u16>,
    /// Why the plan is less than ideal (loopback only, say), for the startup log.
    pub warning: Option<&'static str>,
}

impl MediaPlan {
    /// The address answers name, once the relay is bound to `bound` (its port may have been 0).
    pub fn advertised(&self, bound: SocketAddr) -> SocketAddr {
        SocketAddr::new(
            self.advertise_ip,
            self.advertise_port.unwrap_or(bound.port()),
        )
    }
}

const LOOPBACK_ONLY: &str = "no non-loopback network interface: media is on loopback, which \
    Chromium reaches but Firefox does not (it never pairs loopback candidates); pass --advertise \
    or connect a network";

/// Decides where the relay binds and what answers advertise. See the module docs for why.
pub fn plan(bind: MediaBind, advertise: Option<Advertise>, host: &HostAddrs) -> MediaPlan {
    let port_of = |a: Option<Advertise>| a.and_then(|a| a.port);
    match (bind, advertise) {
        (MediaBind::At(addr), Some(a)) => MediaPlan {
            bind: addr,
            advertise_ip: a.ip,
            advertise_port: a.port,
            warning: None,
        },
        (MediaBind::At(addr), None) if !addr.ip().is_unspecified() => MediaPlan {
            bind: addr,
            advertise_ip: addr.ip(),
            advertise_port: None,
            warning: None,
        },
        (MediaBind::At(addr), None) => {
            // A wildcard bind: name the primary address of the bound family (`::` is dual-stack
            // on Linux, so any family will do there).
            let primary = if addr.is_ipv4() {
                host.route_v4
                    .filter(|ip| usable(*ip) && host.is_local(*ip))
                    .or_else(|| host.primary().filter(IpAddr::is_ipv4))
            } else {
                host.primary()
            };
            let (ip, warning) = match primary {
                Some(ip) => (ip, None),
                None if addr.is_ipv4() => (Ipv4Addr::LOCALHOST.into(), Some(LOOPBACK_ONLY)),
                None => (Ipv6Addr::LOCALHOST.into(), Some(LOOPBACK_ONLY)),
            };
            MediaPlan {
                bind: addr,
                advertise_ip: ip,
                advertise_port: None,
                warning,
            }
        }
        (MediaBind::Auto { port }, Some(a)) => {
            // Our own address: bind just it. Someone else's (a NAT's, a load balancer's, the
            // container host's): bind everything and let the network deliver.
            let ip = if host.is_local(a.ip) {
                a.ip
            } else if a.ip.is_ipv4() {
                Ipv4Addr::UNSPECIFIED.into()
            } else {
                Ipv6Addr::UNSPECIFIED.into()
            };
            MediaPlan {
                bind: SocketAddr::new(ip, port),
                advertise_ip: a.ip,
                advertise_port: port_of(advertise),
                warning: None,
            }
        }
        (MediaBind::Auto { port }, None) => {
            let (ip, warning) = match host.primary() {
                Some(ip) => (ip, None),
                None => (Ipv4Addr::LOCALHOST.into(), Some(LOOPBACK_ONLY)),
            };
            MediaPlan {
                bind: SocketAddr::new(ip, port),
                advertise_ip: ip,
                advertise_port: None,
                warning,
            }
        }
    }
}

/// A URL host part for `ip`: IPv6 in brackets.
pub fn url_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// What a user should type to reach a listener bound to `bind`: loopback for a wildcard bind
/// (this machine), the address itself otherwise.
pub fn reachable(bind: SocketAddr) -> SocketAddr {
    match bind.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), bind.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), bind.port())
        }
        _ => bind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, ip: &str) -> InterfaceAddr {
        InterfaceAddr {
            name: name.into(),
            ip: ip.parse().unwrap(),
        }
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn laptop() -> HostAddrs {
        HostAddrs {
            interfaces: vec![
                iface("lo", "127.0.0.1"),
                iface("lo", "::1"),
                iface("docker0", "172.17.0.1"),
                iface("wlan0", "192.168.1.23"),
                iface("wlan0", "fe80::1"),
            ],
            route_v4: Some(ip("192.168.1.23")),
            route_v6: None,
        }
    }

    #[test]
    fn auto_binds_and_advertises_the_default_route_address() {
        let p = plan(MediaBind::default(), None, &laptop());
        assert_eq!(p.bind, sa("192.168.1.23:3478"));
        assert_eq!(p.advertised(p.bind), p.bind);
        assert_eq!(p.warning, None);
    }

    #[test]
    fn without_a_default_route_a_physical_interface_beats_a_bridge() {
        let mut h = laptop();
        h.route_v4 = None;
        assert_eq!(h.primary(), Some(ip("192.168.1.23")));
        h.interfaces.retain(|i| i.name != "wlan0");
        assert_eq!(h.primary(), Some(ip("172.17.0.1")));
    }

    #[test]
    fn a_route_source_that_is_no_interface_of_ours_is_not_trusted() {
        let mut h = laptop();
        h.route_v4 = Some(ip("10.9.9.9"));
        assert_eq!(h.primary(), Some(ip("192.168.1.23")));
    }

    #[test]
    fn no_usable_interface_falls_back_to_loopback_with_a_warning() {
        let h = HostAddrs {
            interfaces: vec![
                iface("lo", "127.0.0.1"),
                iface("lo", "::1"),
                iface("eth0", "169.254.3.4"),
                iface("eth0", "fe80::2"),
            ],
            route_v4: None,
            route_v6: None,
        };
        assert_eq!(h.primary(), None);
        let p = plan(MediaBind::Auto { port: 4000 }, None, &h);
        assert_eq!(p.bind, sa("127.0.0.1:4000"));
        assert_eq!(p.advertised(p.bind), p.bind);
        assert!(p.warning.unwrap().contains("Firefox"));
        // An empty snapshot (listing interfaces failed) behaves the same.
        let p = plan(MediaBind::default(), None, &HostAddrs::default());
        assert_eq!(p.bind.ip(), ip("127.0.0.1"));
    }

    #[test]
    fn ipv6_only_hosts_get_their_global_address() {
        let h = HostAddrs {
            interfaces: vec![
                iface("lo", "::1"),
                iface("eth0", "fe80::2"),
                iface("eth0", "2001:db8:5::7"),
            ],
            route_v4: None,
            route_v6: Some(ip("2001:db8:5::7")),
        };
        let p = plan(MediaBind::default(), None, &h);
        assert_eq!(p.bind, sa("[2001:db8:5::7]:3478"));
        assert_eq!(p.advertise_ip, ip("2001:db8:5::7"));
        // A wildcard IPv6 bind advertises it too; an IPv4 wildcard has nothing but loopback.
        let p = plan(MediaBind::At(sa("[::]:3478")), None, &h);
        assert_eq!(p.advertise_ip, ip("2001:db8:5::7"));
        let p = plan(MediaBind::At(sa("0.0.0.0:3478")), None, &h);
        assert_eq!(p.advertise_ip, ip("127.0.0.1"));
        assert!(p.warning.is_some());
    }

    #[test]
    fn ipv4_is_preferred_when_both_families_route() {
        let mut h = laptop();
        h.interfaces.push(iface("wlan0", "2001:db8::23"));
        h.route_v6 = Some(ip("2001:db8::23"));
        assert_eq!(h.primary(), Some(ip("192.168.1.23")));
    }

    #[test]
    fn a_wildcard_bind_never_advertises_the_wildcard() {
        let p = plan(MediaBind::At(sa("0.0.0.0:3478")), None, &laptop());
        assert_eq!(p.bind, sa("0.0.0.0:3478"));
        assert_eq!(
            p.advertised(p.bind),
            sa("192.168.1.23:3478"),
            "what Dockerfile-style VOICE_EDGE_RELAY=0.0.0.0:3478 must advertise"
        );
    }

    #[test]
    fn an_explicit_address_advertises_itself_with_the_port_it_got() {
        let p = plan(MediaBind::At(sa("127.0.0.1:0")), None, &laptop());
        assert_eq!(p.bind, sa("127.0.0.1:0"));
        assert_eq!(p.advertised(sa("127.0.0.1:40123")), sa("127.0.0.1:40123"));
    }

    #[test]
    fn advertise_overrides_the_address_in_answers() {
        let nat: Advertise = "203.0.113.9:50000".parse().unwrap();
        // A public address that is not ours: bind everything, advertise the NAT's mapping.
        let p = plan(MediaBind::default(), Some(nat), &laptop());
        assert_eq!(p.bind, sa("0.0.0.0:3478"));
        assert_eq!(p.advertised(p.bind), sa("203.0.113.9:50000"));
        // One of our own addresses: bind exactly it, on the relay's port.
        let own: Advertise = "172.17.0.1".parse().unwrap();
        let p = plan(MediaBind::default(), Some(own), &laptop());
        assert_eq!(p.bind, sa("172.17.0.1:3478"));
        assert_eq!(p.advertised(p.bind), sa("172.17.0.1:3478"));
        // With an explicit bind too, both are taken as given.
        let p = plan(MediaBind::At(sa("0.0.0.0:3478")), Some(nat), &laptop());
        assert_eq!(p.bind, sa("0.0.0.0:3478"));
        assert_eq!(p.advertised(p.bind), sa("203.0.113.9:50000"));
    }

    #[test]
    fn advertise_parses_every_host_form() {
        let a = |s: &str| Advertise::parse(s).unwrap();
        assert_eq!(
            a("10.0.0.5"),
            Advertise {
                ip: ip("10.0.0.5"),
                port: None
            }
        );
        assert_eq!(a("10.0.0.5:9000").port, Some(9000));
        assert_eq!(a("[2001:db8::1]:9000").ip, ip("2001:db8::1"));
        assert_eq!(a("[2001:db8::1]:9000").port, Some(9000));
        assert_eq!(a("2001:db8::1").port, None);
        assert_eq!(a("[2001:db8::1]").ip, ip("2001:db8::1"));
        assert_eq!(a("localhost:7000").ip, ip("127.0.0.1"));
        for bad in [
            "",
            "0.0.0.0",
            "[::]:3478",
            "10.0.0.5:99999",
            "10.0.0.5:0",
            "[2001:db8::1",
            "no-such-host.invalid",
        ] {
            assert!(Advertise::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn media_bind_parses_auto_and_addresses() {
        assert_eq!("auto".parse::<MediaBind>().unwrap(), MediaBind::default());
        assert_eq!(
            "auto:4000".parse::<MediaBind>().unwrap(),
            MediaBind::Auto { port: 4000 }
        );
        assert_eq!(
            "0.0.0.0:3478".parse::<MediaBind>().unwrap(),
            MediaBind::At(sa("0.0.0.0:3478"))
        );
        assert!("auto:x".parse::<MediaBind>().is_err());
        assert!("localhost:3478".parse::<MediaBind>().is_err());
        assert_eq!(MediaBind::Auto { port: 4000 }.to_string(), "auto:4000");
    }

    #[test]
    fn users_are_shown_reachable_addresses() {
        assert_eq!(reachable(sa("0.0.0.0:8080")), sa("127.0.0.1:8080"));
        assert_eq!(reachable(sa("[::]:8080")), sa("[::1]:8080"));
        assert_eq!(reachable(sa("10.0.0.2:8080")), sa("10.0.0.2:8080"));
        assert_eq!(url_host(ip("2001:db8::1")), "[2001:db8::1]");
    }

    #[test]
    fn this_machine_has_a_plan_that_never_advertises_the_wildcard() {
        let p = plan(MediaBind::default(), None, &HostAddrs::read());
        assert!(!p.advertise_ip.is_unspecified());
        assert!(!p.bind.ip().is_unspecified());
    }
}
