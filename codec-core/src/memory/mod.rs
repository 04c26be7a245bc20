//! Every `unsafe` of the core but one call (the bulk read's `set_len`, on this module's
//! contract): memory viewed as bytes, memory filled without being zeroed first, and the
//! kernel hints about memory and files (`MADV_HUGEPAGE`, `MADV_POPULATE_WRITE`,
//! `sync_file_range`) and what the page cache holds of a file (`mincore`).
//!
//! Scalars and G1 points are viewed as their raw bytes, without conversion: the bulk path of
//! the raw encoding, for keys (scalars) and parameters (points).
//!
//! halo2's `RawBytes` stores a scalar as its Montgomery limbs, little-endian, which is exactly
//! how `Fr` (`struct Fr([u64; 4])` in halo2curves) sits in memory on a little-endian machine,
//! and a G1 point as `x ‖ y`, each coordinate's limbs likewise: what a `G1Affine` holds if
//! its fields are laid out in that order. Viewing a polynomial as bytes lets a save hand the
//! writer its memory directly, and a load read the file straight into the key's vectors,
//! instead of converting 32 bytes at a time through a staging buffer.
//!
//! Neither type is `repr(C)`, so nothing promises that layout (halo2curves is pinned exactly
//! for it). One view serves both ([`PlainLimbs`], sealed to the two), and relies on the
//! layout only where it is proven:
//! - at compile time, each has the size of its limbs and the alignment of `u64` (so no
//!   padding, and any bytes are valid limbs: a valid value in memory);
//! - at run time, once per process and type, `layout_matches` compares the view with
//!   halo2curves' own `write_raw` / `from_raw_bytes_unchecked` on values whose limbs all
//!   differ. If it disagrees (a big-endian target, a future halo2curves with another layout),
//!   every function here returns `None` and callers take the converting path.

use std::alloc::Layout;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use halo2_proofs::halo2curves::ff::Field;
use halo2_proofs::halo2curves::group::prime::PrimeCurveAffine;
use halo2_proofs::halo2curves::group::Curve;
use halo2curves::bn256::{Fr, G1Affine, G1};
use halo2curves::serde::SerdeObject;

use crate::error::{Error, Result};

mod host;
pub use host::{asks_for_huge_pages, reads_past_page_cache, DIRECT_READS_ENV, HUGE_PAGES_ENV};
pub(crate) use host::{page_cache_way, parse_override, PageCacheWay};

/// Bytes of one scalar in memory, and of its encodings.
pub const FR_BYTES: usize = 32;

/// Bytes of one raw G1 point in memory and in the raw encoding.
const G1_BYTES: usize = 64;

// The compile-time half of the layout argument (see the module docs).
const _: () = assert!(std::mem::size_of::<Fr>() == FR_BYTES);
const _: () = assert!(std::mem::size_of::<Fr>() == std::mem::size_of::<[u64; 4]>());
const _: () = assert!(std::mem::align_of::<Fr>() == std::mem::align_of::<[u64; 4]>());
const _: () = assert!(std::mem::size_of::<G1Affine>() == G1_BYTES);
const _: () = assert!(std::mem::align_of::<G1Affine>() == std::mem::align_of::<u64>());

/// A type whose memory is plain 64-bit limbs: its size is its limbs' (no padding), any bytes
/// are a value, and all-zero bytes are one (`Fr::ZERO`, the point at infinity). Sealed: `Fr`
/// and `G1Affine` only, whose sizes the compile-time asserts above prove.
pub(crate) trait PlainLimbs:
    Sized + PartialEq + SerdeObject + sealed::Sealed + 'static
{
    /// Bytes of one value.
    const BYTES: usize;
    /// What an allocation failure names.
    const WHAT: &'static str;
    /// Values whose limbs (and the bytes within them) all differ, and the edge values.
    fn samples() -> Vec<Self>;
    /// halo2curves' own raw encoding, and its decoding.
    fn encode(&self) -> Vec<u8> {
        let mut encoded = Vec::with_capacity(Self::BYTES);
        let _ = self.write_raw(&mut encoded);
        encoded
    }
    /// The value whose raw encoding is `bytes`.
    fn decode(bytes: &[u8]) -> Self {
        Self::from_raw_bytes_unchecked(bytes)
    }
    /// The cell this type's layout check is cached in.
    fn checked() -> &'static OnceLock<bool>;
    /// The all-zero value.
    fn zero() -> Self;
}

mod sealed {
    pub(crate) trait Sealed {}
    impl Sealed for super::Fr {}
    impl Sealed for super::G1Affine {}
}

impl PlainLimbs for Fr {
    const BYTES: usize = FR_BYTES;
    const WHAT: &'static str = "field elements";

    fn samples() -> Vec<Self> {
        vec![
            Fr::from_raw([
                0x0706_0504_0302_0100,
                0x0f0e_0d0c_0b0a_0908,
                0x1716_1514_1312_1110,
                0x1f1e_1d1c_1b1a_1918,
            ]),
            Fr::from(0x0123_4567_89ab_cdef_u64),
            -Fr::ONE,
            Fr::ZERO,
        ]
    }

    fn checked() -> &'static OnceLock<bool> {
        static CHECKED: OnceLock<bool> = OnceLock::new();
        &CHECKED
    }

    fn zero() -> Self {
        Fr::ZERO
    }
}

impl PlainLimbs for G1Affine {
    const BYTES: usize = G1_BYTES;
    const WHAT: &'static str = "curve points";

    fn samples() -> Vec<Self> {
        let generator = G1Affine::generator();
        vec![
            generator,
            // 3G, whose coordinates look random, by two additions: a scalar multiplication
            // (256 constant-time doublings and additions) cost every new process its time
            // (docs/performance-history.md).
            (G1::from(generator) + generator + generator).to_affine(),
            G1Affine::identity(),
        ]
    }

    fn checked() -> &'static OnceLock<bool> {
        static CHECKED: OnceLock<bool> = OnceLock::new();
        &CHECKED
    }

    fn zero() -> Self {
        G1Affine::identity()
    }
}

/// Whether `T`'s memory is its raw encoding (checked once per type, then cached).
pub(crate) fn layout_matches_for<T: PlainLimbs>() -> bool {
    *T::checked().get_or_init(|| {
        T::samples().iter().all(|value| {
            let encoded = value.encode();
            let viewed = bytes_of(std::slice::from_ref(value));
            let mut copy = [T::zero()];
            bytes_of_mut(&mut copy).copy_from_slice(&encoded);
            encoded.len() == T::BYTES
                && viewed == encoded.as_slice()
                && copy.first() == Some(&T::decode(&encoded))
        }) && zeroed_plain::<T>(1).is_ok_and(|zero| zero.first() == Some(&T::zero()))
    })
}

/// Whether `Fr`'s memory is its raw encoding (checked once, then cached).
pub(crate) fn layout_matches() -> bool {
    layout_matches_for::<Fr>()
}

/// `values`' memory as bytes: their raw encoding, when the layout check passed.
pub(crate) fn as_raw_bytes(values: &[Fr]) -> Option<&[u8]> {
    layout_matches().then(|| bytes_of(values))
}

/// `values`' memory as one 32-byte array per element: their raw encodings, when
/// the layout check passed (see the module docs).
pub fn as_raw_elements(values: &[Fr]) -> Option<&[[u8; FR_BYTES]]> {
    layout_matches().then(|| {
        // SAFETY: as in `bytes_of` (every byte of `values` is initialised); `[u8; 32]` has
        // `Fr`'s size and alignment 1, so the same memory holds exactly `values.len()` of
        // them, and the borrow is shared for the same lifetime. The test
        // `element_views_agree_with_byte_views` checks it.
        unsafe {
            std::slice::from_raw_parts(values.as_ptr().cast::<[u8; FR_BYTES]>(), values.len())
        }
    })
}

/// `values`' memory as writable bytes: writing a raw encoding into it sets the elements,
/// when the layout check passed (see the module docs). Any bytes are a valid `Fr` in
/// memory; whether a value is below the modulus is the caller's to check.
pub fn as_raw_bytes_mut(values: &mut [Fr]) -> Option<&mut [u8]> {
    layout_matches().then(|| bytes_of_mut(values))
}

/// `values`' memory as bytes (scalars or points): their raw encoding, when the layout check
/// for their type passed.
pub(crate) fn raw_bytes_of<T: PlainLimbs>(values: &[T]) -> Option<&[u8]> {
    layout_matches_for::<T>().then(|| bytes_of(values))
}

/// `values`' memory as writable bytes (scalars or points): writing a raw encoding into it
/// sets the values, when the layout check for their type passed. Whether the values are
/// canonical (and points on the curve) is the caller's to check.
pub(crate) fn raw_bytes_mut_of<T: PlainLimbs>(values: &mut [T]) -> Option<&mut [u8]> {
    layout_matches_for::<T>().then(|| bytes_of_mut(values))
}

/// `count` zero elements in memory obtained zeroed from the allocator (for a large vector:
/// fresh pages the kernel maps on first write, so filling it costs one pass, not two), when
/// the layout check passed (see the module docs); `Ok(None)` when it did not.
///
/// # Errors
///
/// [`Error::OutOfMemory`] when the allocator cannot provide the memory (instead of aborting
/// the process, as `vec!` would).
pub fn zeroed(count: usize) -> Result<Option<Vec<Fr>>> {
    zeroed_of(count)
}

/// `count` zero values (`Fr::ZERO`, or points at infinity: all-zero memory is halo2curves'
/// encoding of the identity) in memory obtained zeroed from the allocator, when the layout
/// check for their type passed; `Ok(None)` when it did not.
///
/// # Errors
///
/// [`Error::OutOfMemory`] when the allocator cannot provide the memory.
pub(crate) fn zeroed_of<T: PlainLimbs>(count: usize) -> Result<Option<Vec<T>>> {
    match layout_matches_for::<T>() {
        true => zeroed_plain(count).map(Some),
        false => Ok(None),
    }
}

/// `len` zero bytes from the allocator's zeroed memory (fresh pages for a large buffer, so a
/// length a server claimed costs only the pages its bytes fill).
///
/// # Errors
///
/// [`Error::OutOfMemory`] naming `what` when the allocator cannot provide them (instead of
/// aborting the process, as `vec![0u8; len]` would).
pub(crate) fn zeroed_bytes(len: usize, what: &'static str) -> Result<Vec<u8>> {
    let out_of_memory = || Error::OutOfMemory {
        what,
        bytes: len as u64,
    };
    if len == 0 {
        return Ok(Vec::new());
    }
    let layout = Layout::array::<u8>(len).map_err(|_| out_of_memory())?;
    let ptr = allocate_zeroed(layout).ok_or_else(out_of_memory)?;
    // SAFETY: `ptr` was allocated by the global allocator with `Layout::array::<u8>(len)`
    // (alignment 1, `len` bytes), the layout a `Vec<u8>` of capacity `len` deallocates with;
    // its `len` bytes are initialised (zeroed); the pointer has no other owner. The test
    // `zeroed_bytes_are_zero_and_refuse_what_cannot_be_had` checks both.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// Zeroed memory of `layout` from the global allocator; `None` when it cannot provide it, or
/// for a layout of no size (which the allocator may not be asked for).
fn allocate_zeroed(layout: Layout) -> Option<*mut u8> {
    if layout.size() == 0 {
        return None;
    }
    // SAFETY: `layout` has a non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    (!ptr.is_null()).then_some(ptr)
}

/// `count` all-zero values of `T` from the allocator's zeroed memory.
fn zeroed_plain<T: PlainLimbs>(count: usize) -> Result<Vec<T>> {
    let out_of_memory = || Error::OutOfMemory {
        what: T::WHAT,
        bytes: (count as u64).saturating_mul(T::BYTES as u64),
    };
    if count == 0 {
        return Ok(Vec::new());
    }
    let layout = Layout::array::<T>(count).map_err(|_| out_of_memory())?;
    let ptr = allocate_zeroed(layout).ok_or_else(out_of_memory)?;
    // SAFETY: `ptr` is a live allocation of `layout.size()` bytes that nothing else refers
    // to yet; viewed as `MaybeUninit<u8>` (alignment 1, any bytes valid) only for this call.
    advise_huge_pages_if_asked(unsafe {
        std::slice::from_raw_parts_mut(ptr.cast::<MaybeUninit<u8>>(), layout.size())
    });
    // SAFETY: `ptr` was allocated by the global allocator with `Layout::array::<T>(count)`,
    // that is `T`'s alignment and `count * size_of::<T>()` bytes, exactly what
    // `Vec::from_raw_parts` requires of a vector of capacity `count` (its deallocation uses
    // the same layout). The `count` values are initialised: the memory is zeroed, and `T` is
    // plain limbs (`PlainLimbs`: any bytes are a value; all-zero limbs are `Fr::ZERO` and the
    // identity point, which `layout_matches_for` checks before this is called for users, and
    // the tests `zeroed_vectors_hold_zero_and_can_grow_and_drop` and
    // `zeroed_points_are_the_identity` check). The pointer has no other owner.
    Ok(unsafe { Vec::from_raw_parts(ptr.cast::<T>(), count, count) })
}

/// Memory for elements not yet initialised (a vector's spare capacity) as bytes not yet
/// initialised, for reading raw encodings straight into it, when the layout check passed
/// (see the module docs). Once every byte is written, [`set_len_after_fill`] takes the
/// elements into the vector.
pub(crate) fn uninit_bytes_mut(spare: &mut [MaybeUninit<Fr>]) -> Option<&mut [MaybeUninit<u8>]> {
    layout_matches().then(|| {
        // SAFETY: the same memory, `size_of_val(spare)` bytes of it; `MaybeUninit<u8>` has
        // alignment 1 and no validity requirement, so any byte of `spare`'s memory (written
        // or not) is one; the borrow is exclusive for the same lifetime.
        unsafe {
            std::slice::from_raw_parts_mut(
                spare.as_mut_ptr().cast::<MaybeUninit<u8>>(),
                std::mem::size_of_val(spare),
            )
        }
    })
}

/// Sets `values`' length to `count` after its spare capacity's first `count` elements were
/// written through [`uninit_bytes_mut`].
///
/// # Safety
///
/// `values` had length 0 and capacity at least `count`, and every byte of its first `count`
/// elements was written (through the view [`uninit_bytes_mut`] returned for
/// `values.spare_capacity_mut()`, which exists only when the layout check passed, so that any
/// 32 written bytes are a valid `Fr`).
pub(crate) unsafe fn set_len_after_fill(values: &mut Vec<Fr>, count: usize) {
    // SAFETY: the caller's contract: the elements are initialised, within capacity, and
    // valid values (`Fr` is plain limbs without invalid bit patterns).
    unsafe { values.set_len(count) }
}

fn bytes_of<T: PlainLimbs>(values: &[T]) -> &[u8] {
    // SAFETY: `T` is plain limbs with no padding (`PlainLimbs`: its size is its limbs',
    // compile-time asserts above), so every byte of `values` is initialised; `u8` has
    // alignment 1; the length is the same memory's in bytes and the borrow is shared for the
    // same lifetime. The tests `views_agree_with_halo2curves_encoding` check the bytes.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

fn bytes_of_mut<T: PlainLimbs>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`; in addition, `T` is plain limbs without invalid bit patterns
    // (every `[u64; 4]` is a valid value of `Fr`'s one field and of each coordinate of a
    // point), so any bytes written through the view leave valid values. The borrow is
    // exclusive for the same lifetime. The tests `writing_through_the_view_sets_elements` and
    // `writing_through_the_view_sets_points` check it.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}

/// Asks the kernel to map every page of `buf` now (Linux, `MADV_POPULATE_WRITE`), in one
/// call, instead of one page fault per page as a read writes it; a hint, ignored where the
/// kernel does not support it. Skipped where `buf`'s first and last pages are mapped already
/// ([`ends_mapped`]: memory the allocator reused, as in a process that reloads its key),
/// where it would only walk pages that need no fault.
pub(crate) fn populate(buf: &mut [MaybeUninit<u8>]) {
    #[cfg(target_os = "linux")]
    if !ends_mapped(buf) {
        advise(buf, PAGE, rustix::mm::Advice::LinuxPopulateWrite);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// Whether the first and the last whole page inside `buf` are mapped in this process
/// (`mincore`, which reads no memory); true where `buf` holds no whole page (nothing to map),
/// false where the kernel cannot tell (an address not aligned to its page size).
#[cfg(target_os = "linux")]
pub(crate) fn ends_mapped(buf: &[MaybeUninit<u8>]) -> bool {
    let start = (buf.as_ptr() as usize).next_multiple_of(PAGE);
    let end = (buf.as_ptr() as usize + buf.len()) / PAGE * PAGE;
    if end <= start {
        return true;
    }
    [start, end - PAGE].iter().all(|&page| {
        let mut resident = [0u8; 1];
        // SAFETY: `page` is the address of a whole 4 KiB page inside `buf`, memory of a live
        // allocation; `mincore` reads none of it and writes one byte a system page of the
        // range asked about: `PAGE` bytes span one page where the system's pages are 4 KiB
        // or larger (Linux's are), and an address not aligned to a larger page is refused
        // (`EINVAL`, read as not mapped) before anything is written. The test
        // `populate_maps_fresh_memory_and_ends_mapped_tells_it` checks that fresh memory
        // reads as unmapped and populated memory as mapped.
        let asked =
            unsafe { libc::mincore(page as *mut libc::c_void, PAGE, resident.as_mut_ptr()) };
        asked == 0 && resident[0] & 1 == 1
    })
}

/// Bytes of a page, and of a transparent huge page (x86-64 and aarch64 with 4 KiB pages).
const PAGE: usize = 4 << 10;
const HUGE_PAGE: usize = 2 << 20;

/// For memory about to be filled: asks the kernel to back the 2 MiB-aligned part of `buf`
/// with transparent huge pages where loads ask for them on this machine
/// ([`asks_for_huge_pages`]), and to keep it in small pages where they do not (whatever
/// `transparent_hugepage/enabled` says).
pub(crate) fn advise_huge_pages_if_asked(buf: &mut [MaybeUninit<u8>]) {
    advise_page_size(buf, asks_for_huge_pages());
}

/// Asks the kernel to back the 2 MiB-aligned part of `buf` with transparent huge pages
/// (`huge`; Linux, `MADV_HUGEPAGE`) or to keep it in small pages (`MADV_NOHUGEPAGE`). In
/// huge pages, where the system leaves them to the program's choice (`enabled = madvise`,
/// the usual default), a vector filled in fresh memory takes one fault per 2 MiB instead of
/// one per 4 KiB, and a fresh load's page faults cost about a quarter as much. A hint,
/// ignored where the kernel does not support it or huge pages are off; memory is never
/// rounded up (only whole huge pages inside `buf` are advised).
fn advise_page_size(buf: &mut [MaybeUninit<u8>], huge: bool) {
    #[cfg(target_os = "linux")]
    advise(
        buf,
        HUGE_PAGE,
        if huge {
            rustix::mm::Advice::LinuxHugepage
        } else {
            rustix::mm::Advice::LinuxNoHugepage
        },
    );
    #[cfg(not(target_os = "linux"))]
    let _ = (buf, huge);
}

/// How many of `path`'s pages the page cache holds now, and how many it has (Linux:
/// `mincore` over a read-only mapping of the file, which reads nothing): whether a load of it
/// will read the disk. `None` where that cannot be told (another system, an empty file, a
/// mapping refused).
#[cfg(target_os = "linux")]
pub fn cached_pages(path: &std::path::Path) -> Option<(u64, u64)> {
    cached_pages_of(&std::fs::File::open(path).ok()?, None)
}

/// Runs of pages [`cached_pages_of`] asks about in a sample: 64 KiB of 4 KiB pages each.
const SAMPLE_RUN_PAGES: usize = 16;

/// [`cached_pages`] of an open file: every page, or, given `runs`, that many runs of
/// [`SAMPLE_RUN_PAGES`] spread evenly from the file's first page to its last (every page of
/// a file no longer than them): how many of those the page cache holds, of how many. A
/// sample decides how to read a file for a small part of what asking about every page costs
/// (4-13 ms for 1.1 GB here, against 0.3-0.4 ms for 64 runs).
#[cfg(target_os = "linux")]
pub(crate) fn cached_pages_of(file: &std::fs::File, runs: Option<usize>) -> Option<(u64, u64)> {
    use std::os::fd::AsRawFd;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len == 0 {
        return None;
    }
    let page = rustix::param::page_size().max(PAGE);
    let pages = len.div_ceil(page);
    // The first page of each run asked about, and the pages each covers.
    let (starts, run_pages): (Vec<usize>, usize) =
        match runs.filter(|&runs| runs >= 2 && pages > runs.saturating_mul(SAMPLE_RUN_PAGES)) {
            Some(runs) => (
                (0..runs)
                    .map(|run| run * (pages - SAMPLE_RUN_PAGES) / (runs - 1))
                    .collect(),
                SAMPLE_RUN_PAGES,
            ),
            None => (vec![0], pages),
        };
    // SAFETY: a new read-only shared mapping of `len` bytes of an open file, at an address
    // the kernel picks: it aliases no memory of this program, and nothing reads through it.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return None;
    }
    let mut resident = vec![0u8; run_pages];
    let mut cached = 0;
    let mut counted = true;
    for &start in &starts {
        // Within the file: `start + run_pages <= pages` (a sample's runs start at most
        // `pages - SAMPLE_RUN_PAGES` in), so `start * page < len`.
        let bytes = (len - start * page).min(run_pages * page);
        // SAFETY: `map` is the page-aligned mapping of `len` bytes made above; `start *
        // page` is a page boundary within it and `bytes` stays within it (above); `resident`
        // holds one byte for each of the `run_pages` pages `bytes` spans at most, as
        // `mincore` writes: the system's page size, at least 4 KiB on Linux (the tests
        // `cached_pages_counts_every_page_of_a_read_file` and
        // `a_sample_of_pages_counts_its_runs_alone` count the pages asked about).
        let address = unsafe { map.cast::<u8>().add(start * page) }.cast();
        // SAFETY: as above.
        counted &= unsafe { libc::mincore(address, bytes, resident.as_mut_ptr()) } == 0;
        cached += resident
            .get(..bytes.div_ceil(page))
            .unwrap_or_default()
            .iter()
            .filter(|&&byte| byte & 1 == 1)
            .count();
    }
    // SAFETY: unmaps exactly the mapping made above, which nothing refers to any more.
    unsafe { libc::munmap(map, len) };
    counted.then_some((cached as u64, (starts.len() * run_pages) as u64))
}

/// How many of `path`'s pages the page cache holds: not told on this system.
#[cfg(not(target_os = "linux"))]
pub fn cached_pages(_path: &std::path::Path) -> Option<(u64, u64)> {
    None
}

/// [`cached_pages`] of an open file: not told on this system.
#[cfg(not(target_os = "linux"))]
pub(crate) fn cached_pages_of(_file: &std::fs::File, _runs: Option<usize>) -> Option<(u64, u64)> {
    None
}

/// `madvise(advice)` on the whole `unit`s inside `buf` (aligned to `unit`, a page multiple).
/// Only advice that changes no byte of the memory may be passed.
#[cfg(target_os = "linux")]
fn advise(buf: &mut [MaybeUninit<u8>], unit: usize, advice: rustix::mm::Advice) {
    let start = (buf.as_ptr() as usize).next_multiple_of(unit);
    let end = (buf.as_ptr() as usize + buf.len()) / unit * unit;
    if end > start {
        // SAFETY: `[start, end)` lies within `buf`, memory this thread holds exclusively
        // (`&mut`) and that belongs to a live allocation, and is page-aligned (`unit` is a
        // page multiple). The callers' advice changes no byte of it: `MADV_POPULATE_WRITE`
        // only faults its pages in (as writing them would), `MADV_HUGEPAGE` and
        // `MADV_NOHUGEPAGE` only mark how they are to be backed (the test
        // `memory_hints_keep_every_byte` checks each on written memory).
        let _ = unsafe { rustix::mm::madvise(start as *mut std::ffi::c_void, end - start, advice) };
    }
}

/// `buf` with every byte set to zero, as initialised bytes.
pub(crate) fn zero(buf: &mut [MaybeUninit<u8>]) -> &mut [u8] {
    for byte in buf.iter_mut() {
        byte.write(0);
    }
    // SAFETY: the loop above wrote every byte of `buf`.
    unsafe { buf.assume_init_mut() }
}

/// Fills `buf`, memory not yet initialised, with `file`'s bytes from `offset` by `pread`
/// (Linux), returning it initialised: no zeroing pass first.
///
/// # Errors
///
/// `UnexpectedEof` when the file ends first; other I/O errors.
#[cfg(target_os = "linux")]
pub(crate) fn pread_uninit<'b>(
    file: &std::fs::File,
    buf: &'b mut [MaybeUninit<u8>],
    offset: u64,
) -> std::io::Result<&'b mut [u8]> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..).filter(|rest| !rest.is_empty()) {
        match rustix::io::pread(file, rest, offset + filled as u64) {
            Ok(([], _)) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok((read, _)) => filled += read.len(),
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    // SAFETY: the loop ends only when `filled == buf.len()`, and `pread` wrote each of the
    // `filled` bytes: rustix returns as initialised exactly the prefix the kernel said it
    // wrote, and the next read starts right after it. The test
    // `uninitialised_reads_fill_every_byte` (in `source`) checks the result byte for byte,
    // short reads included.
    Ok(unsafe { buf.assume_init_mut() })
}

/// Asks the kernel to start writing `len` bytes of `file` from `offset` back to the disk
/// (Linux `sync_file_range`, `SYNC_FILE_RANGE_WRITE`): a hint, its errors ignored.
#[cfg(target_os = "linux")]
pub(crate) fn start_writeback(file: &std::fs::File, offset: i64, len: i64) {
    use std::os::fd::AsRawFd;
    // SAFETY: `sync_file_range` reads and writes no memory of this process: it takes the
    // descriptor of a file the caller borrows (so open for the whole call) and three
    // integers, and only starts writing the range's dirty pages back (no waiting, nothing
    // dropped from the page cache). A bad range or descriptor is an error it returns, ignored
    // here: a hint. The test `saves_that_start_writeback_write_every_byte` (in `file`) checks
    // the file.
    let _ = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
}

#[cfg(test)]
mod point_tests;
#[cfg(test)]
mod tests;
