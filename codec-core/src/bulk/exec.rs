//! A bulk read's execution: the requests read on the pool's threads, each piece checked and
//! hashed where it was read, while the calling thread visits them in payload order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

use crate::xxh3::Xxh3;

use super::plan::*;
use super::*;
use crate::error::{Error, Result};
use crate::poly_hash::PolyHasher;
use crate::source::{Dst, ReadAt};

/// Reads the small spans set apart, at once, and checks each before any polynomial is read.
pub(super) fn read_small_spans_first(
    source: &dyn ReadAt,
    reads: &mut [(usize, &mut [u8], u64)],
    check_bytes: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    context: &'static str,
) -> Result<()> {
    let mut many: Vec<(&mut [u8], u64)> = reads
        .iter_mut()
        .map(|(_, dst, offset)| (&mut **dst, *offset))
        .collect();
    source
        .read_exact_many_at(&mut many)
        .map_err(|err| Error::from_read(err, context))?;
    drop(many);
    for (span, dst, _) in reads.iter() {
        check_bytes(*span, dst)?;
    }
    Ok(())
}

/// Checks a small span's bytes (by its index among the spans).
pub(super) type CheckSpan<'c> = &'c mut dyn FnMut(usize, &[u8]) -> Result<()>;

/// What one bulk read reads: its requests, each segment's role and offset, and what the
/// calling thread visits in order (`read_first`: the small spans read before the rest).
pub(super) struct Batch<'s, 'b> {
    pub(super) requests: Vec<Request<'s>>,
    pub(super) roles: &'b [(Role, u64)],
    pub(super) items: &'b [Item],
    pub(super) read_first: &'b [&'b [u8]],
}

/// Reads every request (on the pool's threads, in payload order, each piece checked and
/// hashed for the digest on its thread) while the calling thread visits the items in
/// payload order: hashing them, and handing small spans read in the requests to
/// `check_in_order`.
pub(super) fn run<'s>(
    source: &dyn ReadAt,
    batch: Batch<'s, '_>,
    hashers: &[Option<PolyHasher>],
    mut check_in_order: Option<CheckSpan<'_>>,
    hooks: Hooks<'_>,
    workers: &Workers<'_>,
) -> Result<()> {
    let Hooks {
        hash,
        check,
        context,
        ..
    } = hooks;
    let Batch {
        requests,
        roles,
        items,
        read_first,
    } = batch;
    let shared = Shared {
        queue: Mutex::new(requests.into_iter()),
        done: (0..roles.len()).map(|_| OnceLock::new()).collect(),
        failure: Mutex::new(None),
        failed_at: AtomicU64::new(u64::MAX),
        signal: Mutex::new(()),
        landed: Condvar::new(),
    };
    let work = || {
        while let Some(request) = shared.next() {
            read_request(source, request, roles, check, hashers, context, &shared);
        }
    };
    let threads = workers.pool.map_or_else(
        rayon::current_num_threads,
        rayon::ThreadPool::current_num_threads,
    );
    // A thread of the pool itself must not wait for the pool's work: it reads too, and
    // visits the items once everything is read.
    let inside = match workers.pool {
        Some(pool) => pool.current_thread_index().is_some(),
        None => rayon::current_thread_index().is_some(),
    };
    let mut hash = hash;
    let visits = hash.is_some() || check_in_order.is_some();
    let visitor = Visitor {
        shared: &shared,
        roles,
        items,
        read_first,
    };
    in_place_scope(workers.pool, |scope| {
        for _ in 0..threads {
            scope.spawn(|_| work());
        }
        match (visits, inside) {
            (true, false) => visitor.visit(&mut hash, &mut check_in_order),
            // The pool's reader alone: this thread waits for it at the scope's end.
            (false, false) if workers.pool_only => {}
            _ => work(),
        }
    });
    if visits && inside {
        visitor.visit(&mut hash, &mut check_in_order);
    }
    let landed = |item: &Item| match item {
        Item::Bytes(_) => true,
        Item::Segment(index) => shared
            .done
            .get(*index)
            .is_some_and(|slot| slot.get().is_some()),
    };
    match shared.take_failure() {
        Some(err) => Err(err),
        None if items.iter().all(landed) => Ok(()),
        None => Err(Error::Internal("a bulk read lost a piece".into())),
    }
}

/// Runs `op` in a scope of `pool` (rayon's global pool if `None`) whose spawned work runs on
/// the pool's threads while `op` runs on this one.
fn in_place_scope<'scope, R>(
    pool: Option<&rayon::ThreadPool>,
    op: impl FnOnce(&rayon::Scope<'scope>) -> R,
) -> R {
    match pool {
        Some(pool) => pool.in_place_scope(op),
        None => rayon::in_place_scope(op),
    }
}

/// Reads one request and lands its segments in order, each piece checked and hashed for
/// the digest; a failure is recorded where it happened.
fn read_request<'s>(
    source: &dyn ReadAt,
    mut request: Request<'s>,
    roles: &[(Role, u64)],
    check: &(dyn Fn(&[u8]) -> Result<()> + Sync),
    hashers: &[Option<PolyHasher>],
    context: &'static str,
    shared: &Shared<'s>,
) {
    // Pages mapped in one call rather than faulted one by one as the read writes them; not
    // for a source whose requests wait on a round trip, where the faults cost nothing that
    // waiting does not, and mapping first would only delay the request.
    if !source.costly_requests() {
        for dst in &mut request.dsts {
            if let Dst::Uninit(buf) = dst {
                crate::memory::populate(buf);
            }
        }
    }
    // Where each destination is: a source must hand back exactly these (see `run`'s use).
    let given: Vec<(*const u8, usize)> = request
        .dsts
        .iter()
        .map(|dst| match dst {
            Dst::Init(buf) => (buf.as_ptr(), buf.len()),
            Dst::Uninit(buf) => (buf.as_ptr().cast::<u8>(), buf.len()),
        })
        .collect();
    let filled = match source.read_exact_vectored_at(request.dsts, request.offset) {
        Ok(filled) => filled,
        Err(err) => return shared.fail(Error::from_read(err, context), request.offset),
    };
    let same = filled.len() == given.len()
        && filled
            .iter()
            .zip(&given)
            .all(|(read, &(at, len))| std::ptr::eq(read.as_ptr(), at) && read.len() == len);
    if !same {
        let err = Error::Internal("a source handed back other memory than it was given".into());
        return shared.fail(err, request.offset);
    }
    for (index, read) in (request.first..).zip(filled) {
        let read: &'s [u8] = read;
        let Some(&(role, offset)) = roles.get(index) else {
            return shared.fail(Error::Internal("a segment without a role".into()), 0);
        };
        if let Role::Piece { polynomial, at } = role {
            if let Err(err) = check(read) {
                return shared.fail(err, offset);
            }
            if let Some(Some(hasher)) = hashers.get(polynomial) {
                hasher.add(at, read);
            }
        }
        shared.land(index, read);
    }
}

/// The calling thread's pass over the items, in payload order.
struct Visitor<'v, 's> {
    shared: &'v Shared<'s>,
    roles: &'v [(Role, u64)],
    items: &'v [Item],
    read_first: &'v [&'v [u8]],
}

impl Visitor<'_, '_> {
    /// Hashes every item into `hash` and hands each small span read by a request to
    /// `check`, waiting for each segment to land; stops at the first failure in payload
    /// order (recording `check`'s as such).
    fn visit(&self, hash: &mut Option<&mut Xxh3>, check: &mut Option<CheckSpan<'_>>) {
        for item in self.items {
            let read = match item {
                Item::Bytes(index) => self.read_first.get(*index).copied().unwrap_or_default(),
                Item::Segment(index) => {
                    let Some(&(role, offset)) = self.roles.get(*index) else {
                        return;
                    };
                    let Some(read) = self.shared.wait(*index, offset) else {
                        return;
                    };
                    if let (Role::Bytes { span }, Some(check)) = (role, check.as_mut()) {
                        if let Err(err) = check(span, read) {
                            return self.shared.fail(err, offset);
                        }
                    }
                    read
                }
            };
            if let Some(hasher) = hash.as_mut() {
                hasher.update(read);
            }
        }
    }
}

/// What the readers and the calling thread share.
struct Shared<'s> {
    /// The requests not yet taken, in payload order.
    queue: Mutex<std::vec::IntoIter<Request<'s>>>,
    /// Each segment's bytes, once read (and checked, for a piece).
    done: Vec<OnceLock<&'s [u8]>>,
    /// The failure earliest in the payload, and where it is.
    failure: Mutex<Option<(u64, Error)>>,
    /// Where that failure is (`u64::MAX`: none): nothing more is taken, and nothing at or
    /// after it is waited for.
    failed_at: AtomicU64,
    /// Wakes the calling thread when a segment lands (or a read fails).
    signal: Mutex<()>,
    landed: Condvar,
}

impl<'s> Shared<'s> {
    fn next(&self) -> Option<Request<'s>> {
        if self.failed_at.load(Ordering::Acquire) != u64::MAX {
            return None;
        }
        self.queue.lock().ok()?.next()
    }

    fn land(&self, index: usize, bytes: &'s [u8]) {
        if let Some(slot) = self.done.get(index) {
            let _ = slot.set(bytes);
        }
        self.wake();
    }

    /// Records `err` at payload offset `at`, unless a failure earlier in the payload is
    /// recorded: the error a read in payload order would meet first wins (requests are
    /// taken in payload order, so every request before a failure was taken, and lands or
    /// fails).
    fn fail(&self, err: Error, at: u64) {
        if let Ok(mut failure) = self.failure.lock() {
            if failure.as_ref().is_none_or(|(first, _)| at < *first) {
                *failure = Some((at, err));
                self.failed_at.fetch_min(at, Ordering::AcqRel);
            }
        }
        self.wake();
    }

    fn wake(&self) {
        // Taken so that the calling thread, between its check and its wait, cannot miss it.
        drop(self.signal.lock());
        self.landed.notify_all();
    }

    /// The bytes of segment `index` (at payload offset `offset`) once it has landed; `None`
    /// once a read failed at or before it.
    fn wait(&self, index: usize, offset: u64) -> Option<&'s [u8]> {
        let slot = self.done.get(index)?;
        let mut guard = self.signal.lock().ok()?;
        loop {
            if let Some(bytes) = slot.get() {
                return Some(bytes);
            }
            if self.failed_at.load(Ordering::Acquire) <= offset {
                return None;
            }
            guard = self.landed.wait(guard).ok()?;
        }
    }

    fn take_failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .ok()
            .and_then(|mut failure| failure.take())
            .map(|(_, err)| err)
    }
}
