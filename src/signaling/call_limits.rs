//! Caps signaling puts on clients before any transceiver sees their request: all calls
//! together (`--max-calls`), the calls one client holds (`--max-calls-per-client`), and, where
//! minting is open, the keys it mints ([`MintRate`]). The transceivers' own caps
//! ([`crate::transceiver::admission`]) bound each worker; these stop one client from taking all
//! of them.
//!
//! A client is its HTTP peer address, an IPv6 one by its /64 and every loopback address as one
//! (`client_of`). Behind a reverse proxy every client has the proxy's
//! address, so such a deployment raises or disables the per-client cap and lets the proxy
//! limit clients.
//!
//! Signaling learns when a call starts but not when it ends (the transceiver ends it on
//! timeouts and hang-ups signaling never sees), so a client's calls are counted from the ids it
//! was given and checked against the transceivers' live calls only when the client reaches its
//! cap, at most once per [`RECHECK`]: a client under its cap costs a map lookup.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::call::event_stream::QueueBytes;

/// Bytes one client's WebSocket messages may hold queued in signaling, over all its sockets:
/// four sessions' worth of queues, or four of the largest messages. Beyond it its sockets are
/// read no further until their sessions catch up, so one client cannot fill a transceiver's
/// whole pool (`--ws-queue-budget-mb`) alone.
pub const CLIENT_QUEUE_BYTES: usize = 64 << 20;

/// Each client's pool for [`CLIENT_QUEUE_BYTES`], shared by its open sockets.
#[derive(Default)]
pub struct ClientQueues {
    pools: Mutex<HashMap<IpAddr, std::sync::Weak<QueueBytes>>>,
}

impl ClientQueues {
    /// `peer`'s pool (`None`: an unknown peer, counted alone).
    pub fn of(&self, peer: Option<IpAddr>) -> Arc<QueueBytes> {
        let Some(client) = peer.map(client_of) else {
            return QueueBytes::new(CLIENT_QUEUE_BYTES);
        };
        let mut pools = self.pools.lock().unwrap();
        if let Some(pool) = pools.get(&client).and_then(std::sync::Weak::upgrade) {
            return pool;
        }
        pools.retain(|_, p| p.strong_count() > 0);
        let pool = QueueBytes::new(CLIENT_QUEUE_BYTES);
        pools.insert(client, Arc::downgrade(&pool));
        pool
    }
}

/// How often a client at its cap may make signaling ask the transceivers which of its calls
/// still live; refusals in between are answered from memory.
pub const RECHECK: Duration = Duration::from_secs(1);

#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// Calls (live and setting up) signaling places in all, over every transceiver; 0 leaves
    /// only the transceivers' own caps. More are refused with 503.
    #[arg(long, env = "VOICE_EDGE_MAX_CALLS", default_value_t = 0)]
    pub max_calls: usize,
    /// Calls (live and setting up) and open Realtime WebSocket sessions one client address may
    /// hold; more are refused with 429.
    /// 0: no cap (load tests; behind a reverse proxy every client shares its address).
    #[arg(long, env = "VOICE_EDGE_MAX_CALLS_PER_CLIENT", default_value_t = 100)]
    pub max_calls_per_client: usize,
}

impl Default for CallLimits {
    fn default() -> Self {
        crate::flags::defaults()
    }
}

/// The client an address belongs to, for its cap: an IPv6 address by its /64 (one host is
/// handed a whole /64 and can pick any address in it), an IPv4-mapped one as the IPv4 address,
/// and every loopback address as one (127.0.0.2 is the same machine as 127.0.0.1).
pub(super) fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => client_of(IpAddr::V4(v4)),
            None if v6.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[derive(Default)]
struct Client {
    /// Call ids given to this client that were live when last checked (or since).
    calls: Vec<String>,
    /// Offers from it being placed now.
    placing: usize,
    checked: Option<Instant>,
}

/// Who holds how many calls.
#[derive(Default)]
pub struct ClientCalls {
    max_per_client: usize,
    clients: Mutex<HashMap<IpAddr, Client>>,
}

/// What [`ClientCalls::admit`] decided.
pub enum Admit {
    /// Go ahead; the slot is held until the returned guard is dropped or turned into a call.
    Yes(Slot),
    /// At the cap, and the live calls were checked recently: refuse.
    Full,
    /// At the cap, and due for a check: ask the transceivers which of these still live, then
    /// [`ClientCalls::keep_live`] and admit again.
    Recheck(Vec<String>),
}

/// An admitted offer's place in its client's count.
pub struct Slot {
    calls: Arc<ClientCalls>,
    /// Counted under this client (`None`: not capped).
    ip: Option<IpAddr>,
    client: Option<IpAddr>,
}

impl Slot {
    /// The client the offer came from, capped or not.
    pub fn client(&self) -> Option<IpAddr> {
        self.client
    }

    /// The offer became call `call_id`: it counts until it is found ended.
    pub fn placed(mut self, call_id: &str) {
        if let Some(ip) = self.ip.take() {
            let mut clients = self.calls.clients.lock().unwrap();
            let c = clients.entry(ip).or_default();
            c.placing = c.placing.saturating_sub(1);
            c.calls.push(call_id.to_owned());
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(ip) = self.ip {
            let mut clients = self.calls.clients.lock().unwrap();
            if let Some(c) = clients.get_mut(&ip) {
                c.placing = c.placing.saturating_sub(1);
                if c.placing == 0 && c.calls.is_empty() {
                    clients.remove(&ip);
                }
            }
        }
    }
}

impl ClientCalls {
    pub fn new(max_per_client: usize) -> Self {
        ClientCalls {
            max_per_client,
            clients: Mutex::default(),
        }
    }

    /// Whether `ip` may place one more call now (`None`: the peer address is unknown, as in
    /// in-memory tests; it is not capped).
    pub fn admit(self: &Arc<Self>, ip: Option<IpAddr>, now: Instant) -> Admit {
        let client = ip.map(client_of);
        let (Some(ip), true) = (client, self.max_per_client > 0) else {
            return Admit::Yes(Slot {
                calls: self.clone(),
                ip: None,
                client,
            });
        };
        let mut clients = self.clients.lock().unwrap();
        let c = clients.entry(ip).or_default();
        if c.calls.len() + c.placing < self.max_per_client {
            c.placing += 1;
            return Admit::Yes(Slot {
                calls: self.clone(),
                ip: Some(ip),
                client,
            });
        }
        if c.checked.is_some_and(|t| now.duration_since(t) < RECHECK) {
            return Admit::Full;
        }
        c.checked = Some(now);
        Admit::Recheck(c.calls.clone())
    }

    /// Forgets the calls of `ip` that were `checked` and not found `live` (the transceivers'
    /// answer to a [`Admit::Recheck`]); calls placed since the check was asked for stay.
    pub fn keep_live(&self, ip: IpAddr, checked: &[String], live: &HashSet<String>) {
        let ip = client_of(ip);
        let mut clients = self.clients.lock().unwrap();
        if let Some(c) = clients.get_mut(&ip) {
            c.calls
                .retain(|id| live.contains(id) || !checked.contains(id));
            if c.calls.is_empty() && c.placing == 0 {
                clients.remove(&ip);
            }
        }
    }

    /// A call hung up through the API no longer counts.
    pub fn ended(&self, call_id: &str) {
        let mut clients = self.clients.lock().unwrap();
        let mut emptied = None;
        for (ip, c) in clients.iter_mut() {
            if let Some(i) = c.calls.iter().position(|id| id == call_id) {
                c.calls.swap_remove(i);
                if c.calls.is_empty() && c.placing == 0 {
                    emptied = Some(*ip);
                }
                break;
            }
        }
        if let Some(ip) = emptied {
            clients.remove(&ip);
        }
    }

    /// Clients tracked now (for tests: nothing is kept for a client with no calls).
    pub fn clients(&self) -> usize {
        self.clients.lock().unwrap().len()
    }
}

/// Ephemeral keys a client may mint per minute when minting needs no server key (the
/// default and LAN modes): enough for any app, and 20,000 keys (the store) take a client over
/// five hours instead of seconds.
pub const MINTS_PER_MINUTE: u32 = 60;

/// A token bucket per client for `POST /v1/realtime/client_secrets` in the open modes.
#[derive(Default)]
pub struct MintRate {
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl MintRate {
    /// Takes one mint for `ip` at `now`, or says in how many seconds one is free.
    pub fn take(&self, ip: Option<IpAddr>, now: Instant) -> Result<(), u64> {
        let Some(ip) = ip.map(client_of) else {
            return Ok(());
        };
        let per_sec = f64::from(MINTS_PER_MINUTE) / 60.0;
        let full = f64::from(MINTS_PER_MINUTE);
        let mut buckets = self.buckets.lock().unwrap();
        if buckets.len() > 10_000 {
            // Buckets that have refilled hold nothing worth keeping.
            buckets.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * per_sec < full
            });
        }
        let (tokens, at) = buckets.entry(ip).or_insert((full, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * per_sec).min(full);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / per_sec).ceil() as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minting_is_a_minute_s_worth_at_once_then_one_a_second() {
        let rate = MintRate::default();
        let t0 = Instant::now();
        let ip = Some("192.0.2.9".parse().unwrap());
        for _ in 0..MINTS_PER_MINUTE {
            assert_eq!(rate.take(ip, t0), Ok(()));
        }
        assert_eq!(rate.take(ip, t0), Err(1));
        assert_eq!(
            rate.take(Some("192.0.2.10".parse().unwrap()), t0),
            Ok(()),
            "another client"
        );
        assert_eq!(
            rate.take(ip, t0 + std::time::Duration::from_millis(1100)),
            Ok(())
        );
        assert_eq!(
            rate.take(None, t0),
            Ok(()),
            "no peer address (in-process): not limited"
        );
    }

    /// An IPv6 host picks any address of its /64, and every loopback address is this machine:
    /// neither gets a fresh cap by changing address.
    #[test]
    fn a_client_is_its_v6_64_or_its_v4_address_and_loopback_is_one() {
        let c = |s: &str| client_of(s.parse().unwrap());
        assert_eq!(c("2001:db8:1:2:aaaa::1"), c("2001:db8:1:2:ffff::9"));
        assert_ne!(c("2001:db8:1:2::1"), c("2001:db8:1:3::1"));
        assert_eq!(c("127.0.0.2"), c("127.0.0.1"));
        assert_eq!(c("::1"), c("127.0.0.1"));
        assert_eq!(c("::ffff:192.0.2.7"), c("192.0.2.7"));
        assert_ne!(c("192.0.2.7"), c("192.0.2.8"));
        let calls = Arc::new(ClientCalls::new(1));
        let now = Instant::now();
        let Admit::Yes(slot) = calls.admit(Some("2001:db8::1".parse().unwrap()), now) else {
            panic!("the first call is admitted");
        };
        slot.placed("rtc_1");
        assert!(matches!(
            calls.admit(Some("2001:db8::2".parse().unwrap()), now),
            Admit::Recheck(_)
        ));
    }

    fn yes(a: Admit) -> Slot {
        match a {
            Admit::Yes(s) => s,
            _ => panic!("refused"),
        }
    }

    #[test]
    fn a_client_at_its_cap_is_refused_until_its_calls_end() {
        let calls = Arc::new(ClientCalls::new(2));
        let (ip, other) = (
            Some("192.0.2.1".parse().unwrap()),
            Some("192.0.2.2".parse().unwrap()),
        );
        let t0 = Instant::now();
        yes(calls.admit(ip, t0)).placed("a");
        yes(calls.admit(ip, t0)).placed("b");
        yes(calls.admit(other, t0)).placed("c");
        // At the cap: the first refusal asks for a check, the next within RECHECK does not.
        let Admit::Recheck(ids) = calls.admit(ip, t0) else {
            panic!("no recheck")
        };
        assert_eq!(ids, ["a", "b"]);
        calls.keep_live(ip.unwrap(), &ids, &["a".to_owned(), "b".to_owned()].into());
        assert!(matches!(calls.admit(ip, t0 + RECHECK / 2), Admit::Full));
        // Call b ended on its own: the next check finds it gone and the client may call again.
        let Admit::Recheck(ids) = calls.admit(ip, t0 + RECHECK) else {
            panic!("no recheck")
        };
        calls.keep_live(ip.unwrap(), &ids, &["a".to_owned()].into());
        yes(calls.admit(ip, t0 + RECHECK)).placed("d");
        // A hang-up through the API frees its slot at once.
        calls.ended("a");
        let _held = yes(calls.admit(ip, t0 + RECHECK));
    }

    #[test]
    fn offers_being_placed_hold_a_slot_and_failures_give_it_back() {
        let calls = Arc::new(ClientCalls::new(1));
        let ip = Some("192.0.2.1".parse().unwrap());
        let t0 = Instant::now();
        let slot = yes(calls.admit(ip, t0));
        assert!(
            !matches!(calls.admit(ip, t0), Admit::Yes(_)),
            "one in flight fills the cap"
        );
        drop(slot); // the offer failed
        assert_eq!(
            calls.clients(),
            0,
            "nothing is kept for a client with no calls"
        );
        yes(calls.admit(ip, t0)).placed("a");
        calls.ended("a");
        assert_eq!(calls.clients(), 0);
    }

    #[test]
    fn a_call_placed_during_a_check_is_not_forgotten() {
        let calls = Arc::new(ClientCalls::new(2));
        let addr: IpAddr = "192.0.2.1".parse().unwrap();
        let ip = Some(addr);
        let t0 = Instant::now();
        yes(calls.admit(ip, t0)).placed("a");
        let b = yes(calls.admit(ip, t0));
        let Admit::Recheck(ids) = calls.admit(ip, t0) else {
            panic!("no recheck")
        };
        b.placed("b"); // answered while the transceivers were being asked about "a"
        calls.keep_live(addr, &ids, &["a".to_owned()].into());
        assert!(
            !matches!(calls.admit(ip, t0), Admit::Yes(_)),
            "a and b are both live: the client is still at its cap"
        );
    }

    #[test]
    fn zero_means_no_cap_and_unknown_peers_are_not_capped() {
        let calls = Arc::new(ClientCalls::new(0));
        for i in 0..1000 {
            yes(calls.admit(Some("192.0.2.1".parse().unwrap()), Instant::now()))
                .placed(&i.to_string());
        }
        let capped = Arc::new(ClientCalls::new(1));
        for _ in 0..10 {
            yes(capped.admit(None, Instant::now())).placed("x");
        }
        assert_eq!(capped.clients() + calls.clients(), 0);
    }
}
