//! What keeps a broken connection out of the pool.
//!
//! A statement abandoned at its budget (or failed without an answer from the server) leaves its
//! connection in an unknown state: its request may still be in flight, and on a black-holed path
//! (an idle NAT or VPC flow dropped, a paused server) nothing will ever answer it. tokio-postgres
//! pipelines the next statement behind it on the same connection, and deadpool's recycle check
//! (`is_closed`) passes, so every statement handed that connection would wait its full budget
//! until the kernel gives up on the socket (~15 minutes). Such a connection is therefore never
//! handed out again: it is marked *in flight* before each statement and the mark is cleared only
//! once the server has answered; a pre-recycle hook closes every connection that comes back to
//! the pool still marked. Marking before the statement (rather than after the timeout) leaves no
//! moment in which the abandoned connection sits in the pool unmarked, whoever cancels the
//! statement (its own budget or a caller's). The cost is the other way round: a connection that
//! answered goes back to the pool an instant before its mark is cleared, and a waiter that took
//! it in that instant would close it and connect anew (a reconnect, never a wrong answer).
//!
//! TCP keepalives on idle connections (see [`KEEPALIVE_IDLE`]) keep a NAT's or firewall's flow
//! alive and find a dead peer while the connection waits in the pool.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Object, StatementCache};

/// Idle time before the first keepalive probe: under the 350 s after which an AWS NAT gateway
/// (and many firewalls) forget an idle flow, so a pooled connection's flow stays open.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
/// Time between unanswered probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes before the kernel closes the connection (the pool then replaces it).
pub const KEEPALIVE_RETRIES: u32 = 3;

/// The connections with a statement in flight. A connection is known by its statement cache
/// (an `Arc` that lives exactly as long as the connection); a `Weak` keeps the address from
/// being reused while it is listed.
pub(super) struct InFlight<T = StatementCache> {
    marked: Mutex<Vec<Weak<T>>>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        Self {
            marked: Mutex::new(Vec::new()),
        }
    }
}

/// One statement's mark on its connection; [`Flight::landed`] clears it. Dropped without
/// landing (the statement abandoned at its budget), the mark stays and the pool discards the
/// connection when it comes back.
pub(super) struct Flight {
    set: Arc<InFlight>,
    cache: Weak<StatementCache>,
}

impl<T> InFlight<T> {
    fn mark(&self, cache: Weak<T>) {
        let mut marked = self.marked.lock().unwrap_or_else(|p| p.into_inner());
        // Connections closed some other way (the server ended them) are gone: forget them.
        marked.retain(|w| w.strong_count() > 0);
        marked.push(cache);
    }

    /// Whether `cache`'s connection is marked; the mark is removed either way.
    fn remove(&self, cache: &Weak<T>) -> bool {
        let mut marked = self.marked.lock().unwrap_or_else(|p| p.into_inner());
        match marked.iter().position(|w| w.ptr_eq(cache)) {
            Some(i) => {
                marked.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// How many connections are marked (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.marked.lock().map(|m| m.len()).unwrap_or(0)
    }
}

impl InFlight {
    /// Marks `client`'s connection as carrying a statement.
    pub(super) fn take_off(self: &Arc<Self>, client: &Object) -> Flight {
        let cache = Arc::downgrade(&client.statement_cache);
        self.mark(cache.clone());
        Flight {
            set: self.clone(),
            cache,
        }
    }

    /// The pool's pre-recycle hook: a connection that comes back still marked is closed
    /// (dropping it ends its connection task and its socket), and the pool takes another.
    pub(super) fn hook(self: &Arc<Self>) -> Hook {
        let set = self.clone();
        Hook::sync_fn(move |client, _| {
            if set.remove(&Arc::downgrade(&client.statement_cache)) {
                tracing::warn!(
                    "a PostgreSQL connection left with a statement unanswered is closed, not reused"
                );
                Err(HookError::message(
                    "a statement was left unanswered on this connection",
                ))
            } else {
                Ok(())
            }
        })
    }
}

impl Flight {
    /// The server answered (with rows or with an error): the connection is fit for reuse.
    pub(super) fn landed(self) {
        self.set.remove(&self.cache);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_known_by_their_connection_and_forgotten_with_it() {
        let set = InFlight::<u8>::default();
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        set.mark(Arc::downgrade(&a));
        assert!(!set.remove(&Arc::downgrade(&b)), "b was never marked");
        assert!(set.remove(&Arc::downgrade(&a)), "a was marked");
        assert!(!set.remove(&Arc::downgrade(&a)), "a mark is removed once");
        set.mark(Arc::downgrade(&b));
        drop(b);
        set.mark(Arc::downgrade(&c));
        assert_eq!(set.len(), 1, "a closed connection's mark is forgotten");
        assert!(set.remove(&Arc::downgrade(&c)));
    }
}
