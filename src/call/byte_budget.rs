//! Memory a transceiver lets its clients hold beyond a call's fixed cost, counted in bytes per
//! client and in all.
//!
//! Admission counts calls, and a call's own state is small and bounded; but a Live recording
//! grows at 96 KB/s for as long as the session runs. Counted only as one call each, a single
//! client address could pin gigabytes and starve every other caller on the transceiver. So what
//! grows is reserved here before it is kept, and a reservation that would take a client past
//! its share, or the transceiver past its whole, is refused with a reason the client is told.
//!
//! A client is the address signaling saw it at (see `signaling::call_limits::client_of`); one
//! whose address is unknown (in-memory tests) is counted in the whole only.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Bytes held in all and per client; shared by a transceiver's workers and session tasks.
#[derive(Debug)]
pub struct ByteBudget {
    total: usize,
    per_client: usize,
    used: Mutex<Used>,
}

#[derive(Debug, Default)]
struct Used {
    all: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// Why a reservation was refused, for the client's error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Exhausted {
    #[error("this client already holds its {0} bytes")]
    Client(usize),
    #[error("this transceiver already holds its {0} bytes")]
    Transceiver(usize),
}

/// Bytes held until dropped.
#[derive(Debug)]
pub struct Held {
    budget: Arc<ByteBudget>,
    client: Option<IpAddr>,
    bytes: usize,
}

impl ByteBudget {
    pub fn new(total: usize, per_client: usize) -> Arc<ByteBudget> {
        Arc::new(ByteBudget {
            total,
            per_client: per_client.min(total),
            used: Mutex::default(),
        })
    }

    /// `bytes` for `client`, if both its share and the whole have room.
    pub fn reserve(
        self: &Arc<Self>,
        client: Option<IpAddr>,
        bytes: usize,
    ) -> Result<Held, Exhausted> {
        let mut held = Held {
            budget: self.clone(),
            client,
            bytes: 0,
        };
        held.grow(bytes)?;
        Ok(held)
    }

    /// Bytes held now, in all and by `client`.
    #[cfg(test)]
    pub fn used(&self, client: Option<IpAddr>) -> (usize, usize) {
        let used = self.lock();
        let mine = client.and_then(|c| used.by_client.get(&c)).copied();
        (used.all, mine.unwrap_or(0))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Used> {
        self.used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Held {
    /// `more` bytes on top of what is held, or nothing at all.
    pub fn grow(&mut self, more: usize) -> Result<(), Exhausted> {
        let b = &self.budget;
        let mut used = b.lock();
        if used.all + more > b.total {
            return Err(Exhausted::Transceiver(b.total));
        }
        if let Some(c) = self.client {
            let mine = used.by_client.entry(c).or_default();
            if *mine + more > b.per_client {
                if *mine == 0 {
                    used.by_client.remove(&c);
                }
                return Err(Exhausted::Client(b.per_client));
            }
            *mine += more;
        }
        used.all += more;
        self.bytes += more;
        Ok(())
    }

    /// Gives back what is held beyond `bytes` (a finished recording keeps only its size).
    pub fn shrink_to(&mut self, bytes: usize) {
        let less = self.bytes.saturating_sub(bytes);
        self.release(less);
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn client(&self) -> Option<IpAddr> {
        self.client
    }

    fn release(&mut self, less: usize) {
        if less == 0 {
            return;
        }
        let mut used = self.budget.lock();
        used.all -= less;
        if let Some(c) = self.client
            && let Some(mine) = used.by_client.get_mut(&c)
        {
            *mine -= less;
            if *mine == 0 {
                used.by_client.remove(&c);
            }
        }
        self.bytes -= less;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    const B: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)));

    #[test]
    fn a_client_is_held_to_its_share_and_all_to_the_whole() {
        let budget = ByteBudget::new(100, 40);
        let mut a = budget.reserve(A, 30).unwrap();
        assert_eq!(a.grow(11), Err(Exhausted::Client(40)));
        assert_eq!(a.bytes(), 30, "a refused growth takes nothing");
        a.grow(10).unwrap();
        let b = budget.reserve(B, 40).unwrap();
        let anon = budget.reserve(None, 20).unwrap();
        assert_eq!(
            budget.reserve(None, 1).unwrap_err(),
            Exhausted::Transceiver(100)
        );
        assert_eq!(budget.used(A), (100, 40));
        drop(b);
        assert_eq!(budget.used(B), (60, 0));
        a.shrink_to(5);
        assert_eq!(budget.used(A), (25, 5));
        drop((a, anon));
        assert_eq!(budget.used(A), (0, 0));
        assert!(budget.used.lock().unwrap().by_client.is_empty());
    }
}
