//! Bytes read at explicit offsets: a file (`pread`), or anything else that can serve a range
//! of bytes on request, such as an object in object storage read by ranged requests.
//!
//! [`AtSource`] reads such a source from a starting offset onwards: small reads through a
//! buffer, bulk reads straight into the destination from several threads at once. Why
//! several threads: reading a file that is in the page cache into freshly allocated memory
//! costs more in page faults than in copying, and a fault is handled on the thread that takes
//! it, so reading two halves of a polynomial on two cores halves that cost (and a remote
//! source serves several ranges at once).

use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use rayon::prelude::*;

use crate::error::{Error, Result};

#[cfg(target_os = "linux")]
mod direct;
#[cfg(all(test, target_os = "linux"))]
pub(crate) use direct::on_a_block_file_system;
#[cfg(target_os = "linux")]
use direct::Direct;

/// Never made where files are not read past the page cache.
#[cfg(not(target_os = "linux"))]
enum Direct {}

#[cfg(not(target_os = "linux"))]
impl Direct {
    fn open(_file: &File) -> Option<Direct> {
        None
    }

    fn read(&self, _: &File, _: &mut Filling<'_>, _: u64, _: u64) -> io::Result<()> {
        match *self {}
    }

    fn refused(&self) -> bool {
        match *self {}
    }
}

/// Bytes a bulk read reads and checks as one piece: few system calls, and small enough that
/// the check finds the bytes still in cache.
pub const BULK_STEP: usize = 4 << 20;

/// Bytes checked at once within a piece read: a multiple of every element's size (32-byte
/// scalars, 64-byte points), small enough that a 2 MiB vector is checked on every core.
pub(crate) const CHECK_STEP: usize = 256 << 10;

/// Bytes an [`AtSource`]'s buffer fetches first (a container's header is far smaller).
const FIRST_FILL: usize = 16 << 10;

/// How many requests carry `total` bytes from a source that serves `lanes` requests at once,
/// each of at most `largest` bytes and, where `total` allows, of at least `smallest`: whole
/// rounds of `lanes` requests, as few rounds as keep each request within `largest`.
///
/// Why rounds: every request waits a round trip for its first byte, so a lane that carries
/// two requests of half the size pays it twice (a load of tens of MB in four rounds spent a
/// third of its time waiting on a 30 ms link), and a last round of a few requests leaves the
/// link to those few streams.
pub fn requests_for(total: u64, lanes: usize, smallest: u64, largest: u64) -> u64 {
    let lanes = lanes.max(1) as u64;
    let rounds = total.div_ceil(lanes.saturating_mul(largest.max(1))).max(1);
    let most = (total / smallest.max(1)).max(1);
    rounds.saturating_mul(lanes).min(most)
}

/// A source of bytes at explicit offsets. Reads may come from several threads at once.
pub trait ReadAt: Sync {
    /// Fills `buf` with the source's bytes from `offset`.
    ///
    /// # Errors
    ///
    /// `UnexpectedEof` when the source ends before `buf` is full; other I/O errors.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Reads what is there from `offset`, at most `buf.len()` bytes; returns how many (0 at
    /// the end).
    ///
    /// # Errors
    ///
    /// I/O errors.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Fills `buf`, memory not yet initialised, with the source's bytes from `offset`, and
    /// returns it initialised. By default the memory is zeroed, then read into; sources that
    /// can write into it directly (a file, through `pread`) skip the zeroing pass.
    ///
    /// # Errors
    ///
    /// As [`ReadAt::read_exact_at`].
    fn read_exact_uninit_at<'b>(
        &self,
        buf: &'b mut [MaybeUninit<u8>],
        offset: u64,
    ) -> io::Result<&'b mut [u8]> {
        let zeroed = crate::memory::zero(buf);
        self.read_exact_at(zeroed, offset)?;
        Ok(zeroed)
    }

    /// Fills each buffer with the source's bytes from its offset. By default one after the
    /// other; a source that serves requests at once (an object store) serves them so.
    ///
    /// # Errors
    ///
    /// As [`ReadAt::read_exact_at`].
    fn read_exact_many_at(&self, requests: &mut [(&mut [u8], u64)]) -> io::Result<()> {
        requests
            .iter_mut()
            .try_for_each(|(buf, offset)| self.read_exact_at(buf, *offset))
    }

    /// Fills `dsts`, one after the other, with the source's bytes from `offset` (the first
    /// from `offset`, the next where it ends, ...), and returns them initialised, in order.
    /// By default one read each; a source whose every request costs a round trip (an object
    /// store) serves them with one request.
    ///
    /// # Errors
    ///
    /// As [`ReadAt::read_exact_at`].
    fn read_exact_vectored_at<'b>(
        &self,
        dsts: Vec<Dst<'b>>,
        offset: u64,
    ) -> io::Result<Vec<&'b mut [u8]>> {
        read_one_after_another(self, dsts, offset)
    }

    /// Whether every request costs a round trip (an object store): bulk reads then ask for
    /// adjacent spans together, in whole rounds of [`ReadAt::requests_at_once`] requests of
    /// at most [`ReadAt::bulk_plan`]'s piece size ([`requests_for`]), instead of one request
    /// per polynomial piece and per small field.
    fn costly_requests(&self) -> bool {
        false
    }

    /// How many requests the source serves at once as a bulk read begins (a remote source's
    /// requests in flight): a bulk read of costly requests is split into whole rounds of
    /// that many. By default, the threads of [`ReadAt::bulk_plan`]'s pool (rayon's global
    /// pool without one).
    fn requests_at_once(&self) -> usize {
        self.bulk_plan()
            .map_or_else(rayon::current_num_threads, |(_, pool)| {
                pool.current_num_threads()
            })
    }

    /// How bulk reads of this source are best split, if not in [`BULK_STEP`] pieces on
    /// rayon's global pool: pieces of this many bytes (a power of two of at least 256 KiB),
    /// read by the threads of this pool (as many reads in flight as it has threads). A
    /// remote source wants large pieces and more requests in flight than cores; a file read
    /// past the page cache, pieces small enough to land one after another.
    fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
        None
    }

    /// Whether bulk reads are best made in order, by the threads of [`ReadAt::bulk_plan`]'s
    /// pool taking requests in payload order ([`FileSource`] of a file read from the disk:
    /// one thread through the page cache, several past it); the checks of what was read
    /// still run on every core, and the polynomials are read into memory in small pages (the
    /// disk, not faulting memory, is the cost).
    fn reads_in_order(&self) -> bool {
        false
    }

    /// Whether large reads of this source bypass the page cache, so that nothing reads
    /// ahead of them ([`FileSource`] of a file read from the disk where
    /// [`crate::reads_past_page_cache`], until the file system refuses a read so): a read in
    /// order ([`ReadAt::reads_in_order`]) of one run of bytes, such as the parameters'
    /// points, is then read by the threads of [`ReadAt::bulk_plan`]'s pool with a request
    /// each in flight all the way, rather than one piece at a time.
    fn reads_past_page_cache(&self) -> bool {
        false
    }
}

/// A file as a source of bytes, read as its place in the page cache suggests: a file mostly
/// in the page cache is read in pieces by every core (faulting fresh memory is then the
/// cost, and it is spread over the cores); a file mostly not (a start after a deploy or a
/// reboot: read from the disk) in order, the small fields between a key's polynomials with
/// them. Through the page cache by one thread, which lets the kernel's read-ahead stream it
/// (from this project's disk 10-25% faster than two threads taking pieces in turn,
/// `docs/performance-history.md`); or, where [`crate::reads_past_page_cache`], past it
/// (`O_DIRECT`) by four threads taking pieces (a key's in payload order), each through a
/// buffer of its own (a file of 256 MiB or more where a first look at it finds that pays).
/// What the page cache holds is asked once, when made (`mincore`); the first look, when a
/// read would first go past the page cache.
pub struct FileSource<'f> {
    file: &'f File,
    in_order: bool,
    direct: Option<Direct>,
    /// The first look at the file ([`first_look`]), where it decides whether reads go past
    /// the page cache: made by the first read that would, or the first question about it
    /// ([`ReadAt::bulk_plan`], [`ReadAt::reads_past_page_cache`], which a bulk read of 64
    /// KiB or more asks before it starts), so that a load its header refuses,
    /// or one that reads only small parts of the file (a pinned verifying key from a proving
    /// key's file), reads nothing for it. `None`: no look; `direct` alone decides.
    look: Option<OnceLock<Look>>,
}

/// Threads reading a file past the page cache at once: requests in flight, each waiting on
/// the disk while another copies what it read.
pub(crate) const DIRECT_READERS: usize = 4;

/// Bytes each request past the page cache asks for: [`DIRECT_READERS`] requests of this
/// size keep the disk busy, while a piece lands, and is checked and handed on, soon after
/// it was asked for, and the last pieces leave little to check once the disk is done. (From
/// this project's disk, pieces of 4 MiB landed together four at a time and read the file
/// slower: 1.1-1.3 GB/s against 1.4-1.6 GB/s from 256 KiB to 1 MiB; `docs/performance.md`.)
pub(crate) const DIRECT_PIECE: usize = 1 << 20;

/// Runs of pages asked about to tell whether a file is mostly in the page cache: a sample
/// (64 runs of 64 KiB) tells it to a few hundredths, for a small part of what asking about
/// every page of a large key costs.
const CACHE_SAMPLE_RUNS: usize = 64;

/// Reads smaller than this go through the page cache even where the file is read past it (a
/// length prefix, a section's frame): one block each would be read twice otherwise.
const DIRECT_SMALLEST: usize = 64 << 10;

/// Files smaller than this are read through the page cache even where
/// [`crate::reads_past_page_cache`]: reading past it costs about a millisecond more to start
/// (its readers and their buffers), which a small file does not earn back. From this
/// project's disk, pages dropped, the k = 14 parameters (2 MB) read past the page cache in
/// 2.4 ms and through it in 1.5 ms; the k = 16 parameters (8 MB) in 5.5 ms and 6.2 ms
/// (medians of 8-24 visits of the harness's floor; `docs/performance.md`).
pub(crate) const DIRECT_SMALLEST_FILE: u64 = 4 << 20;

/// Files at least this long are read past the page cache, where
/// [`crate::reads_past_page_cache`] leaves it to the file, only where a first look at them
/// ([`first_look`]) finds that pays: the look reads [`LOOK_THROUGH`] bytes, a share of a
/// smaller file that would leave little of it to choose for.
pub(crate) const LOOKED_AT_FILE: u64 = 256 << 20;

/// Bytes the first look reads past the page cache: requests past it are as many at once
/// from the first, so a few rounds of them show their pace.
#[cfg(target_os = "linux")]
const LOOK_PAST: usize = 8 << 20;

/// Bytes the first look reads through the page cache, from the file's start: the kernel's
/// read-ahead grows over the first tens of MiB (from one VM's disk, 32 MiB from a dropped
/// file read at 1.1-1.4 GB/s, 64 MiB at 1.9, the whole 1.1 GB file at 3.5), and these bytes
/// are the load's first, left in the page cache for it.
const LOOK_THROUGH: usize = 64 << 20;

/// How many times the pace past the page cache the pace through it must be for a file to
/// be read through it: past it, memory the host took back is faulted in once (the load's
/// own), through it twice (the page cache's too), which the look pays at its own scale
/// only; and where the two are near, reading past the page cache keeps its steadiness
/// (`crate::memory`'s host notes).
#[cfg(target_os = "linux")]
const THROUGH_WINS_BY: f64 = 1.5;

impl<'f> FileSource<'f> {
    /// `file` as a source, read in order when under half of its pages are in the page cache,
    /// and then past the page cache where [`crate::reads_past_page_cache`] and the file is at
    /// least 4 MiB long (and can be opened so), a file of 256 MiB or more where the first
    /// look that function describes finds it pays (unless the environment asks for it
    /// always). The look is made by the first read that would go past the page cache.
    pub fn new(file: &'f File) -> Self {
        use crate::memory::PageCacheWay;
        let in_order = crate::memory::cached_pages_of(file, Some(CACHE_SAMPLE_RUNS))
            .is_some_and(|(cached, pages)| cached.saturating_mul(2) < pages);
        let len = file.metadata().map_or(0, |meta| meta.len());
        let way = crate::memory::page_cache_way();
        let past = in_order && way != PageCacheWay::Through && len >= DIRECT_SMALLEST_FILE;
        let mut source = Self::with(file, in_order, past);
        if way == PageCacheWay::PastWherePays && len >= LOOKED_AT_FILE && source.direct.is_some() {
            source.look = Some(OnceLock::new());
        }
        source
    }

    /// The reader past the page cache, and how many of the file's first bytes the first look
    /// left in the page cache, where reads go past it: not once the file system refused a
    /// read so, nor where the first look (made now if it was not yet) chose the page cache.
    fn past_page_cache(&self) -> Option<(&Direct, u64)> {
        let direct = self.direct.as_ref().filter(|direct| !direct.refused())?;
        let look = self
            .look
            .as_ref()
            .map(|look| *look.get_or_init(|| first_look(self.file, direct)));
        match look {
            Some(Look::Through) => None,
            Some(Look::Past { cached }) => Some((direct, cached)),
            None => Some((direct, 0)),
        }
    }

    /// `file` as a source read in order or not, and past the page cache or not (where it
    /// can be opened so), whatever the page cache holds.
    pub(crate) fn with(file: &'f File, in_order: bool, past_page_cache: bool) -> Self {
        let direct = past_page_cache.then(|| Direct::open(file)).flatten();
        FileSource {
            file,
            in_order,
            direct,
            look: None,
        }
    }

    /// The reader past the page cache, for a read of `len` bytes: none for a small read, nor
    /// once the file system refused a read past it (reads then go straight to their
    /// destination through the page cache), nor where the first look chose the page cache
    /// or left these bytes in it.
    fn direct_for(&self, len: usize, offset: u64) -> Option<&Direct> {
        if len < DIRECT_SMALLEST {
            return None;
        }
        let (direct, cached) = self.past_page_cache()?;
        (offset.saturating_add(len as u64) > cached).then_some(direct)
    }
}

impl ReadAt for FileSource<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self.direct_for(buf.len(), offset) {
            Some(direct) => {
                self.read_past_page_cache(direct, vec![Dst::Init(buf)], offset)?;
                Ok(())
            }
            None => ReadAt::read_exact_at(self.file, buf, offset),
        }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        ReadAt::read_at(self.file, buf, offset)
    }

    fn read_exact_uninit_at<'b>(
        &self,
        buf: &'b mut [MaybeUninit<u8>],
        offset: u64,
    ) -> io::Result<&'b mut [u8]> {
        match self.direct_for(buf.len(), offset) {
            Some(direct) => {
                let mut filled =
                    self.read_past_page_cache(direct, vec![Dst::Uninit(buf)], offset)?;
                filled
                    .pop()
                    .ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
            }
            None => ReadAt::read_exact_uninit_at(self.file, buf, offset),
        }
    }

    fn read_exact_vectored_at<'b>(
        &self,
        dsts: Vec<Dst<'b>>,
        offset: u64,
    ) -> io::Result<Vec<&'b mut [u8]>> {
        let len: usize = dsts.iter().map(Dst::len).sum();
        match self.direct_for(len, offset) {
            Some(direct) => self.read_past_page_cache(direct, dsts, offset),
            None => read_one_after_another(self, dsts, offset),
        }
    }

    fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
        let past_page_cache = self.reads_past_page_cache();
        let piece = match past_page_cache {
            true => DIRECT_PIECE,
            false => BULK_STEP,
        };
        self.in_order
            .then(|| readers(past_page_cache))
            .flatten()
            .map(|pool| (piece, pool))
    }

    fn reads_in_order(&self) -> bool {
        self.in_order
    }

    fn reads_past_page_cache(&self) -> bool {
        self.past_page_cache().is_some()
    }
}

impl FileSource<'_> {
    /// Fills `dsts`, one after the other from `offset`, past the page cache.
    fn read_past_page_cache<'b>(
        &self,
        direct: &Direct,
        dsts: Vec<Dst<'b>>,
        offset: u64,
    ) -> io::Result<Vec<&'b mut [u8]>> {
        let len: u64 = dsts.iter().map(|dst| dst.len() as u64).sum();
        let mut filling = Filling::new(dsts);
        direct.read(self.file, &mut filling, offset, len)?;
        filling
            .finish()
            .ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
    }
}

/// What the first look at a file found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Look {
    /// Read it through the page cache.
    Through,
    /// Read it past the page cache, but for its first `cached` bytes, in it now.
    Past { cached: u64 },
}

/// Which way `file` (at least [`LOOKED_AT_FILE`] bytes) is best read here: [`LOOK_PAST`]
/// bytes after its first [`LOOK_THROUGH`] read past the page cache as a load reads them
/// (pieces of [`DIRECT_PIECE`] on [`readers`]), then its first [`LOOK_THROUGH`] bytes
/// read through it as a load reads them (in [`BULK_STEP`] reads on one thread, the kernel's
/// read-ahead ahead of them), each through a buffer of its own used again, so that the page
/// cache's pages are what the second way faults in and the first does not. Through the page
/// cache where its pace was over [`THROUGH_WINS_BY`] times the other's; past it otherwise,
/// and where either read failed (the load then meets the error itself).
#[cfg(target_os = "linux")]
fn first_look(file: &File, direct: &Direct) -> Look {
    use std::time::Instant;
    let failed = Look::Past { cached: 0 };
    let Some(pool) = readers(true) else {
        return failed;
    };
    let started = Instant::now();
    let read = pool.install(|| {
        (0..LOOK_PAST / DIRECT_PIECE)
            .into_par_iter()
            .try_for_each_init(
                || vec![0u8; DIRECT_PIECE],
                |piece, i| {
                    let at = (LOOK_THROUGH + i * DIRECT_PIECE) as u64;
                    let mut filling = Filling::new(vec![Dst::Init(piece)]);
                    direct.read(file, &mut filling, at, DIRECT_PIECE as u64)
                },
            )
    });
    let past = started.elapsed().as_secs_f64() / LOOK_PAST as f64;
    if read.is_err() || direct.refused() {
        return failed;
    }
    let mut piece = vec![0u8; BULK_STEP];
    let started = Instant::now();
    let read = (0..LOOK_THROUGH / BULK_STEP)
        .try_for_each(|i| ReadAt::read_exact_at(file, &mut piece, (i * BULK_STEP) as u64));
    let through = started.elapsed().as_secs_f64() / LOOK_THROUGH as f64;
    if read.is_err() {
        return failed;
    }
    match through_wins(past, through) {
        true => Look::Through,
        false => Look::Past {
            cached: LOOK_THROUGH as u64,
        },
    }
}

/// Never called: no [`Direct`] is made off Linux.
#[cfg(not(target_os = "linux"))]
fn first_look(_: &File, direct: &Direct) -> Look {
    match *direct {}
}

/// Whether reading past the page cache at `past` seconds a byte loses to reading through it
/// at `through`: by over [`THROUGH_WINS_BY`] times.
#[cfg(target_os = "linux")]
fn through_wins(past: f64, through: f64) -> bool {
    past > through * THROUGH_WINS_BY
}

/// [`ReadAt::read_exact_vectored_at`] by one read per destination.
fn read_one_after_another<'b>(
    source: &(impl ReadAt + ?Sized),
    dsts: Vec<Dst<'b>>,
    offset: u64,
) -> io::Result<Vec<&'b mut [u8]>> {
    let mut at = offset;
    let mut filled = Vec::with_capacity(dsts.len());
    for dst in dsts {
        let len = dst.len() as u64;
        filled.push(match dst {
            Dst::Init(buf) => {
                source.read_exact_at(buf, at)?;
                buf
            }
            Dst::Uninit(buf) => source.read_exact_uninit_at(buf, at)?,
        });
        at = at
            .checked_add(len)
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
    }
    Ok(filled)
}

/// The pool that reads a file from the disk in order: one thread through the page cache,
/// [`DIRECT_READERS`] past it (`None` if the system refused the threads: the read then takes
/// every core). Each is made when first used.
fn readers(past_page_cache: bool) -> Option<&'static rayon::ThreadPool> {
    type Pool = OnceLock<Option<rayon::ThreadPool>>;
    static ONE: Pool = Pool::new();
    static PAST: Pool = Pool::new();
    let (pool, threads) = match past_page_cache {
        false => (&ONE, 1),
        true => (&PAST, DIRECT_READERS),
    };
    pool.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|_| "keycodec-read".into())
            .build()
            .ok()
    })
    .as_ref()
}

/// One destination of [`ReadAt::read_exact_vectored_at`]: memory already initialised, or
/// not yet (a polynomial's spare capacity).
pub enum Dst<'b> {
    /// Initialised bytes, overwritten.
    Init(&'b mut [u8]),
    /// Memory not yet initialised, returned initialised.
    Uninit(&'b mut [MaybeUninit<u8>]),
}

impl Dst<'_> {
    /// Bytes it holds.
    pub fn len(&self) -> usize {
        match self {
            Dst::Init(buf) => buf.len(),
            Dst::Uninit(buf) => buf.len(),
        }
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Destinations filled in turn with the bytes of one response (a transport's
/// [`ReadAt::read_exact_vectored_at`] served by one request whose bytes arrive in chunks):
/// each chunk written where the last one ended, across destinations, and the destinations
/// returned initialised once every byte of them is written.
pub struct Filling<'b> {
    /// Those not yet full, the first being filled; each with how many of its bytes are
    /// written.
    pending: std::collections::VecDeque<(Dst<'b>, usize)>,
    full: Vec<&'b mut [u8]>,
}

impl<'b> Filling<'b> {
    /// Fills `dsts`, in order, from their first byte.
    pub fn new(dsts: Vec<Dst<'b>>) -> Self {
        let mut filling = Filling {
            full: Vec::with_capacity(dsts.len()),
            pending: dsts.into_iter().map(|dst| (dst, 0)).collect(),
        };
        filling.retire();
        filling
    }

    /// Writes `bytes` next; `false` if they go past the last destination.
    pub fn write(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            let Some((dst, written)) = self.pending.front_mut() else {
                return false;
            };
            let n = (dst.len() - *written).min(bytes.len());
            let (now, later) = bytes.split_at(n);
            let range = *written..*written + n;
            match dst {
                Dst::Init(buf) => match buf.get_mut(range) {
                    Some(to) => to.copy_from_slice(now),
                    None => return false,
                },
                Dst::Uninit(buf) => match buf.get_mut(range) {
                    Some(to) => {
                        to.write_copy_of_slice(now);
                    }
                    None => return false,
                },
            }
            *written += n;
            bytes = later;
            self.retire();
        }
        true
    }

    /// Moves the full destinations at the front to `full`.
    fn retire(&mut self) {
        while self
            .pending
            .front()
            .is_some_and(|(dst, written)| *written == dst.len())
        {
            let Some((dst, _)) = self.pending.pop_front() else {
                break;
            };
            self.full.push(match dst {
                Dst::Init(buf) => buf,
                #[allow(unsafe_code)] // one of the two uses of `unsafe` outside `memory`
                // SAFETY: a destination is retired only once `written == dst.len()`, and
                // `write` advances `written` by exactly the bytes it copied into
                // `buf[written..written + n]`, from the start: every byte of `buf` was written.
                // The test `vectored_reads_fill_every_destination` checks it byte for byte.
                Dst::Uninit(buf) => unsafe { buf.assume_init_mut() },
            });
        }
    }

    /// Every destination, initialised, once all are full; `None` if bytes are missing.
    pub fn finish(self) -> Option<Vec<&'b mut [u8]>> {
        self.pending.is_empty().then_some(self.full)
    }
}

#[cfg(unix)]
impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }

    #[cfg(target_os = "linux")]
    fn read_exact_uninit_at<'b>(
        &self,
        buf: &'b mut [MaybeUninit<u8>],
        offset: u64,
    ) -> io::Result<&'b mut [u8]> {
        crate::memory::pread_uninit(self, buf, offset)
    }
}

/// Bytes in memory, read at offsets into the slice.
pub(crate) struct Memory<'a>(pub(crate) &'a [u8]);

impl ReadAt for Memory<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let source = slice_at(self.0, offset, buf.len())?;
        buf.copy_from_slice(source);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let rest = self.0.get(start..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        let (head, _) = buf.split_at_mut(n);
        head.copy_from_slice(rest.get(..n).unwrap_or_default());
        Ok(n)
    }

    fn read_exact_uninit_at<'b>(
        &self,
        buf: &'b mut [MaybeUninit<u8>],
        offset: u64,
    ) -> io::Result<&'b mut [u8]> {
        let source = slice_at(self.0, offset, buf.len())?;
        Ok(buf.write_copy_of_slice(source))
    }
}

/// `len` bytes of `bytes` from `offset`, or `UnexpectedEof` when they reach past its end.
fn slice_at(bytes: &[u8], offset: u64, len: usize) -> io::Result<&[u8]> {
    usize::try_from(offset)
        .ok()
        .and_then(|start| bytes.get(start..start.checked_add(len)?))
        .ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
}

#[cfg(windows)]
impl ReadAt for File {
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = std::mem::take(&mut buf).get_mut(n..).unwrap_or_default();
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(self, buf, offset)
    }
}

#[cfg(not(any(unix, windows)))]
impl ReadAt for File {
    fn read_exact_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }

    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Reads a [`ReadAt`] source from a starting offset onwards, in order: small reads through a
/// buffer, bulk reads ([`AtSource::read_parallel`]) straight into the destination.
pub(crate) struct AtSource<'a> {
    source: &'a dyn ReadAt,
    /// Bytes small reads fetched so far ([`AtSource::read`]: through the buffer or, as large
    /// as its next fill, straight into theirs), not bulk reads.
    fetched: u64,
    /// Offset of the first byte not yet fetched into `buffer`.
    next: u64,
    /// Fetched bytes; `buffer[start..]` are not yet handed out.
    buffer: Vec<u8>,
    start: usize,
    capacity: usize,
}

impl<'a> AtSource<'a> {
    /// Reads `source` from `offset`, with a buffer of `capacity` bytes for small reads.
    pub(crate) fn new(source: &'a dyn ReadAt, offset: u64, capacity: usize) -> Self {
        AtSource {
            source,
            fetched: 0,
            next: offset,
            buffer: Vec::new(),
            start: 0,
            capacity: capacity.max(1),
        }
    }

    /// The source itself (to read a range again, apart from this reader's position).
    pub(crate) fn source(&self) -> &'a dyn ReadAt {
        self.source
    }

    /// The offset of the next byte this reader hands out.
    pub(crate) fn position(&self) -> u64 {
        self.next - self.buffered().len() as u64
    }

    /// Moves to `position` (not before [`AtSource::position`]), dropping what is buffered:
    /// the bytes up to it were handed out by other means (a bulk read).
    pub(crate) fn advance_to(&mut self, position: u64) {
        let current = self.position();
        self.buffer.clear();
        self.start = 0;
        self.next = position.max(current);
    }

    fn buffered(&self) -> &[u8] {
        self.buffer.get(self.start..).unwrap_or_default()
    }

    /// Hands out up to `dst.len()` buffered bytes; returns how many.
    fn take_buffered(&mut self, dst: &mut [u8]) -> usize {
        let n = dst.len().min(self.buffered().len());
        let (head, _) = dst.split_at_mut(n);
        head.copy_from_slice(self.buffered().get(..n).unwrap_or_default());
        self.start += n;
        n
    }

    /// Fills `dsts`, the source's next bytes one after the other (the first from here, the
    /// next where it ends, ...), checking each piece ([`BULK_STEP`]; read in order, the
    /// source's own piece where it has one ([`ReadAt::bulk_plan`]); less for a read shorter
    /// than a piece per thread; never across two destinations) right after reading
    /// it, in parts of [`CHECK_STEP`] on every core (a check can cost more than the read: a
    /// point's curve equation does), and handing every byte to `in_order` once, in order.
    /// Pieces are read and checked in parallel (rayon): called from outside rayon's pool,
    /// each handed to `in_order` as soon as it and those before it were, while the pool
    /// reads on; from within it, destination after destination, then each destination handed
    /// to `in_order`; or, where the source says so
    /// ([`ReadAt::reads_in_order`]), read in order: a piece at a time through the page cache,
    /// each checked and handed on while the next is read, or, where it
    /// [`ReadAt::reads_past_page_cache`], by the threads of its pool with a request each in
    /// flight all the way through every destination ([`in_flight`]), each piece checked as it
    /// lands and handed on once those before it were. Either way the first failing piece in
    /// payload order is the error. Bytes already buffered are used first. After an error the
    /// position is unspecified: the caller stops reading.
    pub(crate) fn read_parallel(
        &mut self,
        dsts: &mut [&mut [u8]],
        check: &(impl Fn(&[u8]) -> Result<()> + Sync),
        in_order: &mut (dyn FnMut(&[u8]) + Send),
        context: &'static str,
    ) -> Result<()> {
        // The run's byte at `j` (its destinations one after the other) is the source's byte
        // at `origin + j`; the first `from_buffer` bytes are already in the buffer.
        let origin = self.position();
        let total: usize = dsts.iter().map(|dst| dst.len()).sum();
        let mut from_buffer = 0;
        for dst in dsts.iter_mut() {
            from_buffer += self.take_buffered(dst);
        }
        let source = self.source;
        // Fills `piece`, which starts at `start` in the run.
        let fill = |start: usize, piece: &mut [u8]| {
            let skip = from_buffer.saturating_sub(start).min(piece.len());
            let (_, unread) = piece.split_at_mut(skip);
            if !unread.is_empty() {
                source
                    .read_exact_at(unread, origin + (start + skip) as u64)
                    .map_err(|err| Error::from_read(err, context))?;
            }
            Ok(())
        };
        let check_piece = |piece: &[u8]| piece.par_chunks(CHECK_STEP).try_for_each(check);
        // Destination after destination (so that the first failing one is the error), each
        // in pieces read and checked in parallel.
        let read = |dsts: &mut [&mut [u8]], step: usize| {
            let mut at = 0;
            dsts.iter_mut().try_for_each(|dst| {
                let len = dst.len();
                let read = pieces(&mut [&mut **dst], step)
                    .into_par_iter()
                    .try_for_each(|(start, piece)| {
                        fill(at + start, piece)?;
                        check_piece(piece)
                    });
                at += len;
                read
            })
        };
        let longest = dsts.iter().map(|dst| dst.len()).max().unwrap_or(0);
        // A read too small to go past the page cache does not ask the source's plan, which
        // may cost a file its first look (`FileSource::past_page_cache`): a verifying key's
        // few points read from a proving key's file.
        let plan = match total < DIRECT_SMALLEST {
            true => None,
            false => source.bulk_plan(),
        };
        // Whether each piece was handed on as it landed (else each destination is, after).
        let handed_on = match plan {
            // In order: past the page cache, a request per thread of the source's pool in
            // flight (nothing reads ahead there but requests in flight), each piece checked on
            // every core as it lands; through it, a piece at a time on this thread (its
            // read-ahead keeps ahead of it), each checked on every core and handed on while
            // the next is read.
            plan if source.reads_in_order() => {
                // The source's piece, held to whole check parts and the bulk step whatever
                // the source says (a piece splitting an element would fail its check).
                let step = plan.map_or(BULK_STEP, |(piece, _)| {
                    piece
                        .checked_next_power_of_two()
                        .unwrap_or(BULK_STEP)
                        .clamp(CHECK_STEP, BULK_STEP)
                });
                match plan.filter(|(_, pool)| {
                    // A thread of the pool itself must not wait for the pool's work.
                    source.reads_past_page_cache() && pool.current_thread_index().is_none()
                }) {
                    Some((_, pool)) => in_flight(
                        Some(pool),
                        pieces(dsts, step),
                        &fill,
                        &check_piece,
                        in_order,
                    ),
                    None => {
                        let mut last: &[u8] = &[];
                        let mut settle = |bytes: &[u8]| {
                            check_piece(bytes)?;
                            in_order(bytes);
                            Ok(())
                        };
                        for (start, piece) in pieces(dsts, step) {
                            let (filled, settled) =
                                rayon::join(|| fill(start, piece), || settle(last));
                            // The earlier piece's check first: the first failing piece in
                            // payload order is the error.
                            settled.and(filled)?;
                            last = piece;
                        }
                        settle(last)
                    }
                }
                .map(|()| true)
            }
            Some((largest, pool)) => {
                // Pieces small enough that every thread has one (a polynomial smaller than
                // `largest` per thread still keeps every request in flight).
                let share = (longest / pool.current_num_threads().max(1)).next_power_of_two();
                let step = share.clamp(BULK_STEP, largest.max(BULK_STEP));
                pool.install(|| read(dsts, step)).map(|()| false)
            }
            // A read shorter than a piece per thread is cut finer (never below a check's
            // part), so that every core reads as well as checks: one piece would be read by
            // one thread while the others wait for it. Called from outside rayon's pool,
            // this thread hands each piece on as soon as it and those before it were read
            // and checked by the pool (hashing the first while the pool reads the rest).
            None => {
                let share = (longest / rayon::current_num_threads().max(1)).next_power_of_two();
                let step = share.clamp(CHECK_STEP, BULK_STEP);
                match rayon::current_thread_index() {
                    None => {
                        let read_and_check = |start: usize, piece: &mut [u8]| {
                            fill(start, piece)?;
                            check_piece(piece)
                        };
                        let checked = |_: &[u8]| Ok(());
                        in_flight(
                            None,
                            pieces(dsts, step),
                            &read_and_check,
                            &checked,
                            in_order,
                        )
                        .map(|()| true)
                    }
                    Some(_) => read(dsts, step).map(|()| false),
                }
            }
        }?;
        if !handed_on {
            dsts.iter().for_each(|dst| in_order(dst));
        }
        if total > from_buffer {
            // Everything buffered was used; the position moves past the run.
            self.buffer.clear();
            self.start = 0;
            self.next = origin + total as u64;
        }
        Ok(())
    }

    /// Fills `dst` in order: what is buffered, then the rest with one positioned read
    /// (which a source whose requests are costly splits as it sees fit), not through the
    /// buffer.
    pub(crate) fn read_exact_direct(&mut self, dst: &mut [u8]) -> io::Result<()> {
        let from_buffer = self.take_buffered(dst);
        let (_, rest) = dst.split_at_mut(from_buffer);
        if !rest.is_empty() {
            self.source.read_exact_at(rest, self.next)?;
            self.next += rest.len() as u64;
        }
        Ok(())
    }

    /// Reads at most `dst.len()` bytes in order; returns how many (0 at the end).
    pub(crate) fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        if self.buffered().is_empty() {
            let fill = self.fill();
            if dst.len() >= fill {
                // A read at least as large as the buffer's next fill goes straight to `dst`.
                let n = self.source.read_at(dst, self.next)?;
                self.next += n as u64;
                self.fetched += n as u64;
                return Ok(n);
            }
            self.buffer.resize(fill, 0);
            let n = self.source.read_at(&mut self.buffer, self.next)?;
            self.buffer.truncate(n);
            self.start = 0;
            self.next += n as u64;
            self.fetched += n as u64;
        }
        Ok(self.take_buffered(dst))
    }

    /// Bytes the buffer's next fill asks for: [`FIRST_FILL`] more than small reads fetched
    /// so far, up to the buffer's capacity. So the first fills are small and then about
    /// double: a reader that reads a header, then the rest in bulk reads straight into their
    /// destination, never fetches (zeroes and copies) a whole buffer it then drops, nor does
    /// one that reads a few bytes after its bulk reads (the parameters' last 256 bytes took a
    /// fresh 1 MiB buffer, zeroed, after 33 MB of bulk reads).
    fn fill(&self) -> usize {
        let fetched = usize::try_from(self.fetched).unwrap_or(usize::MAX);
        fetched.saturating_add(FIRST_FILL).min(self.capacity)
    }

    /// Fills `dst` in order.
    pub(crate) fn read_exact(&mut self, mut dst: &mut [u8]) -> io::Result<()> {
        while !dst.is_empty() {
            match self.read(dst)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => dst = std::mem::take(&mut dst).get_mut(n..).unwrap_or_default(),
            }
        }
        Ok(())
    }
}

/// Each of `dsts`' pieces of `step` bytes (the last of each may be shorter), with where it
/// starts in the run of `dsts` one after the other.
fn pieces<'b>(dsts: &'b mut [&mut [u8]], step: usize) -> Vec<(usize, &'b mut [u8])> {
    let mut at = 0;
    let mut pieces = Vec::new();
    for dst in dsts.iter_mut() {
        let len = dst.len();
        pieces.extend(
            dst.chunks_mut(step)
                .enumerate()
                .map(|(index, piece)| (at + index * step, piece)),
        );
        at += len;
    }
    pieces
}

/// Reads `pieces` (each with where it starts in the run) by the threads of `pool` (rayon's
/// global pool for `None`), a piece each, taken in order as threads come free (`fill` reads
/// a piece, and nothing else runs on those threads), so that as many requests are in flight
/// as `pool` has threads, all the way. This thread checks each piece as it lands (`check`,
/// on its own pool's cores; a `fill` that checks its piece itself passes a `check` that
/// accepts everything), and hands the checked pieces to `in_order`, in order. The
/// first failing piece in payload order (its read or its check) is the error: nothing from
/// it on is handed on, and no piece after it is read once the failure is known. Call it
/// from a thread outside `pool`.
fn in_flight(
    pool: Option<&rayon::ThreadPool>,
    pieces: Vec<(usize, &mut [u8])>,
    fill: &(dyn Fn(usize, &mut [u8]) -> Result<()> + Sync),
    check: &dyn Fn(&[u8]) -> Result<()>,
    in_order: &mut (dyn FnMut(&[u8]) + Send),
) -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    /// A piece, as this thread knows it.
    enum Piece<'b> {
        Waiting,
        Checked(&'b [u8]),
        Failed(Error),
        /// Not read or not checked: a piece before it failed.
        Skipped,
    }
    let count = pieces.len();
    // The lowest index of a piece known to have failed: no piece after it is read.
    let failed = AtomicUsize::new(usize::MAX);
    let (landed, arrivals) = std::sync::mpsc::channel::<(usize, Option<Result<&[u8]>>)>();
    in_place_scope_fifo(pool, |scope| {
        for (index, (start, piece)) in pieces.into_iter().enumerate() {
            let (landed, failed) = (landed.clone(), &failed);
            scope.spawn_fifo(move |_| {
                let filled = (index < failed.load(Ordering::Relaxed)).then(|| {
                    let filled = fill(start, piece).map(|()| &*piece);
                    if filled.is_err() {
                        failed.fetch_min(index, Ordering::Relaxed);
                    }
                    filled
                });
                // The receiver outlives every piece (the scope waits for them): no error.
                let _ = landed.send((index, filled));
            });
        }
        // Every sender now belongs to a piece: the arrivals end when the last piece is done,
        // or has unwound.
        drop(landed);
        let mut known: Vec<Piece<'_>> = (0..count).map(|_| Piece::Waiting).collect();
        let mut next = 0;
        let mut outcome = None;
        for (index, filled) in arrivals {
            if outcome.is_some() {
                continue;
            }
            let piece = match filled {
                Some(Ok(piece)) if index < failed.load(Ordering::Relaxed) => match check(piece) {
                    Ok(()) => Piece::Checked(piece),
                    Err(err) => {
                        failed.fetch_min(index, Ordering::Relaxed);
                        Piece::Failed(err)
                    }
                },
                Some(Err(err)) => Piece::Failed(err),
                Some(Ok(_)) | None => Piece::Skipped,
            };
            if let Some(slot) = known.get_mut(index) {
                *slot = piece;
            }
            // Every piece before `next` is handed on; a failed one is the lowest that failed.
            while outcome.is_none() {
                match known
                    .get_mut(next)
                    .map(|slot| std::mem::replace(slot, Piece::Waiting))
                {
                    Some(Piece::Checked(piece)) => {
                        in_order(piece);
                        next += 1;
                    }
                    Some(Piece::Failed(err)) => outcome = Some(err),
                    // Skipped only after a piece before it failed, which `next` meets first.
                    Some(Piece::Skipped) => {
                        outcome = Some(Error::Internal(
                            "a piece read in order was skipped before any failed".into(),
                        ))
                    }
                    Some(Piece::Waiting) | None => break,
                }
            }
        }
        match outcome {
            Some(err) => Err(err),
            None if next == count => Ok(()),
            None => Err(Error::Internal("a piece read in order did not land".into())),
        }
    })
}

/// Runs `op` on this thread with a scope whose jobs run on `pool` (rayon's global pool for
/// `None`).
fn in_place_scope_fifo<'s, R>(
    pool: Option<&rayon::ThreadPool>,
    op: impl FnOnce(&rayon::ScopeFifo<'s>) -> R,
) -> R {
    match pool {
        Some(pool) => pool.in_place_scope_fifo(op),
        None => rayon::in_place_scope_fifo(op),
    }
}

/// XXH3-64 of `len` bytes of `source` from `offset`, or `None` if they cannot be read.
pub(crate) fn hash_range(source: &dyn ReadAt, offset: u64, len: u64) -> Option<u64> {
    let mut hasher = crate::xxh3::Xxh3::new();
    let mut buffer = vec![0u8; BULK_STEP.min(usize::try_from(len).unwrap_or(usize::MAX))];
    let mut done = 0u64;
    while done < len {
        let step = buffer
            .len()
            .min(usize::try_from(len - done).unwrap_or(usize::MAX));
        let chunk = buffer.get_mut(..step)?;
        source.read_exact_at(chunk, offset + done).ok()?;
        hasher.update(chunk);
        done += step as u64;
    }
    Some(hasher.digest())
}

#[cfg(test)]
mod tests;
