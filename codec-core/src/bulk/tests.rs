//! The bulk read's tests: plans, requests, and reads against every source.

use std::io::Write;

use halo2_proofs::halo2curves::ff::Field;
use halo2curves::serde::SerdeObject;
use xxhash_rust::xxh3::xxh3_64;

use std::sync::atomic::Ordering;

use super::plan::*;
use super::*;
use crate::error::Error;
use crate::field::FieldEncoding;
use crate::options::Validation;
use crate::payload::PayloadReader;
use crate::source::Dst;
use crate::source::BULK_STEP;

/// A payload laid out as halo2 writes polynomials: each behind its length (u32 BE).
fn payload(polys: &[Vec<Fr>]) -> (Vec<u8>, Vec<Span>) {
    let mut bytes = Vec::new();
    let mut spans = Vec::new();
    for poly in polys {
        bytes.extend_from_slice(&(poly.len() as u32).to_be_bytes());
        spans.push(Span::Bytes(4));
        for value in poly {
            bytes.extend_from_slice(&crate::field::encode_fr(value, FieldEncoding::Raw));
        }
        spans.push(Span::Polynomial {
            count: poly.len(),
            spare: 1,
        });
    }
    (bytes, spans)
}

fn polys() -> Vec<Vec<Fr>> {
    let mut rng = crate::testing::rng();
    // Smaller than a piece, exactly a piece, and over two pieces.
    [
        1 << 10,
        BULK_STEP / FR_BYTES,
        (2 * BULK_STEP) / FR_BYTES + 1024,
        3,
    ]
    .iter()
    .map(|&len| (0..len).map(|_| Fr::random(&mut rng)).collect())
    .collect()
}

/// Memory read as an object store is: every request costly, each counted; with its
/// own piece size and pool, as an object source has, if given.
struct Costly<'a> {
    bytes: &'a [u8],
    requests: std::sync::atomic::AtomicUsize,
    plan: Option<(usize, rayon::ThreadPool)>,
}

impl<'a> Costly<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Costly {
            bytes,
            requests: std::sync::atomic::AtomicUsize::new(0),
            plan: None,
        }
    }

    /// Read in pieces of up to `piece` bytes by a pool of `threads`.
    fn planned(bytes: &'a [u8], piece: usize, threads: usize) -> Self {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        Costly {
            plan: Some((piece, pool)),
            ..Costly::new(bytes)
        }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl ReadAt for Costly<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        crate::source::Memory(self.bytes).read_exact_at(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        crate::source::Memory(self.bytes).read_at(buf, offset)
    }

    fn read_exact_vectored_at<'b>(
        &self,
        dsts: Vec<Dst<'b>>,
        offset: u64,
    ) -> std::io::Result<Vec<&'b mut [u8]>> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        crate::source::Memory(self.bytes).read_exact_vectored_at(dsts, offset)
    }

    fn costly_requests(&self) -> bool {
        true
    }

    fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
        self.plan.as_ref().map(|(piece, pool)| (*piece, pool))
    }
}

/// Memory read as a file from the disk is ([`FileSource`](crate::source::FileSource) of a
/// file out of the page cache): in order, by a pool of one thread.
/// Every read it served is logged (offset, length).
struct InOrder<'a> {
    bytes: &'a [u8],
    pool: rayon::ThreadPool,
    reads: std::sync::Mutex<Vec<(u64, usize)>>,
}

impl<'a> InOrder<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        InOrder {
            bytes,
            pool: rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap(),
            reads: std::sync::Mutex::new(Vec::new()),
        }
    }
}

impl ReadAt for InOrder<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.reads.lock().unwrap().push((offset, buf.len()));
        crate::source::Memory(self.bytes).read_exact_at(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        crate::source::Memory(self.bytes).read_at(buf, offset)
    }

    fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
        Some((BULK_STEP, &self.pool))
    }

    fn reads_in_order(&self) -> bool {
        true
    }
}

/// A source (safe code, as any `ReadAt` may be) that hands back memory of its own instead
/// of the destinations it was given.
struct Elsewhere<'a>(&'a [u8]);

impl ReadAt for Elsewhere<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        crate::source::Memory(self.0).read_exact_at(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        crate::source::Memory(self.0).read_at(buf, offset)
    }

    fn read_exact_vectored_at<'b>(
        &self,
        dsts: Vec<Dst<'b>>,
        _offset: u64,
    ) -> std::io::Result<Vec<&'b mut [u8]>> {
        Ok(dsts
            .iter()
            .map(|dst| &mut Vec::leak(vec![0u8; dst.len()])[..])
            .collect())
    }
}

/// The polynomials' memory is taken as initialised only when the source handed back
/// exactly the destinations: one that hands back other memory fails the read, and no
/// vector is given a length over memory nobody wrote (the `SAFETY` argument of
/// `read_spans`).
#[test]
fn a_source_that_hands_back_other_memory_is_refused() {
    let polys = polys();
    let (bytes, spans) = payload(&polys);
    let source = Elsewhere(&bytes);
    let len = bytes.len() as u64;
    let mut reader = PayloadReader::at(&source, 0, len, 1 << 10)
        .narrow(len, true, true)
        .unwrap();
    let result = reader.read_spans(&spans, &[1, 3], Validation::Trusted, |_, _| Ok(()), "test");
    assert!(
        matches!(result, Err(Error::Internal(ref why)) if why.contains("other memory")),
        "{:?}",
        result.map(|data| data.bytes.len())
    );
}

/// From a file, memory and a stream, a run of spans gives the same polynomials (grouped
/// as asked, each with its spare room), the small spans' bytes, the payload's stream
/// hash, and each polynomial's digest hash.
#[test]
fn every_source_reads_the_same_spans() {
    let polys = polys();
    let (bytes, spans) = payload(&polys);
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&bytes).unwrap();
    let mut stream = bytes.as_slice();
    let len = bytes.len() as u64;
    let costly = Costly::new(&bytes);
    let in_order = InOrder::new(&bytes);
    // Past the page cache where the file system allows it (on ext4 or XFS it must).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("payload"), &bytes).unwrap();
    let on_disk = std::fs::File::open(dir.path().join("payload")).unwrap();
    let past_page_cache = crate::source::FileSource::with(&on_disk, true, true);
    let readers = [
        ("file", PayloadReader::at(&file, 0, len, 1 << 10)),
        (
            "past the page cache",
            PayloadReader::at(&past_page_cache, 0, len, 1 << 10),
        ),
        ("costly", PayloadReader::at(&costly, 0, len, 1 << 10)),
        ("in order", PayloadReader::at(&in_order, 0, len, 1 << 10)),
        ("memory", PayloadReader::from_slice(&bytes)),
        ("stream", PayloadReader::new(&mut stream, len, false)),
    ];
    for (name, reader) in readers {
        let mut reader = reader.narrow(len, name != "stream", true).unwrap();
        reader.record_polynomials();
        let mut seen = Vec::new();
        let data = reader
            .read_spans(
                &spans,
                &[1, 3],
                Validation::Checked,
                |index, prefix| {
                    seen.push((index, prefix.to_vec()));
                    Ok(())
                },
                "test",
            )
            .unwrap();
        let flat: Vec<&Vec<Fr>> = data.groups.iter().flatten().collect();
        assert_eq!(data.groups.iter().map(Vec::len).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(flat.len(), polys.len(), "{name}");
        for (read, original) in flat.iter().zip(&polys) {
            assert_eq!(*read, original, "{name}");
            assert!(read.capacity() > read.len(), "{name}: no spare room");
        }
        let prefixes: Vec<u8> = polys
            .iter()
            .flat_map(|p| (p.len() as u32).to_be_bytes())
            .collect();
        assert_eq!(data.bytes, prefixes, "{name}");
        assert_eq!(
            seen.iter().map(|(index, _)| *index).collect::<Vec<_>>(),
            [0, 2, 4, 6],
            "{name}"
        );
        assert_eq!(reader.remaining(), 0, "{name}");
        assert_eq!(reader.digest(), Some(xxh3_64(&bytes)), "{name}");
        let recorded = reader.recorded_polynomials().unwrap();
        let expected: Vec<[u8; 32]> = polys
            .iter()
            .map(|p| *blake3::hash(crate::memory::as_raw_bytes(p).unwrap()).as_bytes())
            .collect();
        assert_eq!(recorded, expected, "{name}");
    }
    // Read past the page cache, not refused, where the file system must allow it.
    #[cfg(target_os = "linux")]
    if crate::source::on_a_block_file_system(&on_disk) {
        assert!(
            past_page_cache.reads_past_page_cache(),
            "not read past the page cache"
        );
    }
}

/// `count` random polynomials of `bytes` bytes each.
fn random_polys(count: usize, bytes: usize) -> Vec<Vec<Fr>> {
    let mut rng = crate::testing::rng();
    (0..count)
        .map(|_| {
            (0..bytes / FR_BYTES)
                .map(|_| Fr::random(&mut rng))
                .collect()
        })
        .collect()
}

/// Reads `polys` behind their prefixes (a halo2-lib key's shape) from `costly`, checks
/// every byte and the digest, and returns the requests the bulk read made.
fn requests_of_a_bulk_read(polys: &[Vec<Fr>], costly: impl Fn(&[u8]) -> Costly<'_>) -> usize {
    let (bytes, spans) = payload(polys);
    let costly = costly(&bytes);
    let len = bytes.len() as u64;
    let mut reader = PayloadReader::at(&costly, 0, len, 1 << 10)
        .narrow(len, true, true)
        .unwrap();
    let before = costly.requests();
    let data = reader
        .read_spans(
            &spans,
            &[polys.len()],
            Validation::Checked,
            |_, _| Ok(()),
            "test",
        )
        .unwrap();
    assert_eq!(data.groups[0], polys);
    assert_eq!(reader.digest(), Some(xxh3_64(&bytes)));
    costly.requests() - before
}

/// From a source whose requests are costly, adjacent spans are asked for together:
/// fewer requests than pieces, none smaller than it must be, and every byte read once.
#[test]
fn costly_sources_get_few_large_requests() {
    // Many polynomials smaller than a piece.
    let requests = requests_of_a_bulk_read(&random_polys(64, 64 << 10), |bytes| Costly::new(bytes));
    // 4 MiB of payload in requests of at least 1 MiB (one per span would be 128).
    assert!(requests <= 5, "{requests} requests");
}

/// Polynomials of half a request behind their 4-byte prefixes (a halo2-lib key's shape
/// at k = 14 from an object store: 512 KiB against 1 MiB requests) go two to a request,
/// though two with their prefixes are 8 bytes over it.
#[test]
fn costly_requests_pair_polynomials_of_half_a_request() {
    // 8 threads: a share of the payload per thread is under the smallest request.
    let requests = requests_of_a_bulk_read(&random_polys(16, MIN_REQUEST / 2), |bytes| {
        Costly::planned(bytes, 16 << 20, 8)
    });
    // One request a polynomial would be 16.
    assert_eq!(requests, 8, "{requests} requests");
}

/// From a costly source, the requests go in whole rounds of the requests it serves at once
/// (by default its pool's threads): one round while each stays within a piece, two when not.
#[test]
fn costly_reads_go_in_whole_rounds_of_the_requests_at_once() {
    let polys = random_polys(12, MIN_REQUEST);
    // 12 MiB (and the prefixes) from 3 at once: one round of 4 MiB requests.
    let one_round = requests_of_a_bulk_read(&polys, |bytes| Costly::planned(bytes, 16 << 20, 3));
    assert_eq!(one_round, 3);
    // Pieces of at most 4 MiB: 12 MiB and 48 bytes take two rounds of three.
    let two_rounds = requests_of_a_bulk_read(&polys, |bytes| Costly::planned(bytes, 4 << 20, 3));
    assert_eq!(two_rounds, 6);
}

/// From a costly source (small spans read with the polynomials), the error is the one
/// a read in payload order meets first: a bad prefix before a bad element, or a bad
/// element before a bad prefix.
#[test]
fn costly_sources_report_the_first_error_in_payload_order() {
    let bad_prefix = |index: usize, _: &[u8]| match index {
        4 => Err(Error::Malformed("third prefix".into())),
        _ => Ok(()),
    };
    for (poisoned, prefix_first) in [(3, true), (0, false)] {
        let mut polys = polys();
        polys[poisoned][0] = Fr::from_raw_bytes_unchecked(&[0xff; 32]);
        let (bytes, spans) = payload(&polys);
        let costly = Costly::new(&bytes);
        let len = bytes.len() as u64;
        let mut reader = PayloadReader::at(&costly, 0, len, 1 << 10)
            .narrow(len, true, true)
            .unwrap();
        let refused = reader.read_spans(&spans, &[4], Validation::Checked, bad_prefix, "test");
        match prefix_first {
            true => assert!(matches!(refused, Err(Error::Malformed(_))), "{refused:?}"),
            false => assert!(
                matches!(refused, Err(Error::InvalidFieldElement { .. })),
                "{refused:?}"
            ),
        }
    }
}

/// Whether the mapping that holds `at` has `flag` among its flags in `/proc/self/smaps`
/// (`hg`: huge pages asked for, `nh`: small pages asked for).
#[cfg(target_os = "linux")]
fn has_vm_flag(at: *const u8, flag: &str) -> bool {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let at = at as usize;
    let mut inside = false;
    for line in smaps.lines() {
        let range = line.split_whitespace().next().and_then(|range| {
            let (start, end) = range.split_once('-')?;
            Some((
                usize::from_str_radix(start, 16).ok()?,
                usize::from_str_radix(end, 16).ok()?,
            ))
        });
        match range {
            Some((start, end)) if !line.starts_with("VmFlags") => inside = start <= at && at < end,
            _ if inside && line.starts_with("VmFlags:") => {
                return line.split_whitespace().any(|listed| listed == flag)
            }
            _ => {}
        }
    }
    panic!("no mapping holds {at:#x}")
}

/// Polynomials read from a file in the page cache or memory ask for huge pages where loads
/// ask for them on this machine, and for small pages where they do not
/// ([`crate::asks_for_huge_pages`]: not where the host takes back free memory); read from the
/// disk (a source read in order), they ask for neither: the disk is the cost there, and the
/// 2 MiB blocks huge pages come from are what a VM's host takes back first.
///
/// Checked in processes of their own, one with each answer of [`crate::asks_for_huge_pages`]
/// (decided once per process by [`crate::HUGE_PAGES_ENV`]): in a process where other tests
/// advised memory, the allocator may hand the vectors of the read in order memory that
/// another test freed with its advice still on it.
#[cfg(target_os = "linux")]
#[test]
fn huge_pages_are_asked_for_unless_the_source_is_read_in_order() {
    if crate::testing::in_child() {
        return advice_follows_the_source();
    }
    for asks in ["1", "0"] {
        crate::testing::passes_alone(
            "bulk::tests::huge_pages_are_asked_for_unless_the_source_is_read_in_order",
            &[(crate::HUGE_PAGES_ENV, asks)],
        );
    }
}

/// The check of [`huge_pages_are_asked_for_unless_the_source_is_read_in_order`], in a process
/// where nothing advised memory before it: the read in order comes first.
#[cfg(target_os = "linux")]
fn advice_follows_the_source() {
    // 40 MiB polynomials: above glibc's largest mmap threshold (32 MiB), so each is a new
    // mapping of its own, with whole huge pages inside.
    let polys = vec![vec![Fr::ONE; (40 << 20) / FR_BYTES]; 2];
    let (bytes, spans) = payload(&polys);
    let len = bytes.len() as u64;
    let in_order = InOrder::new(&bytes);
    let memory = crate::source::Memory(&bytes);
    let asks = crate::asks_for_huge_pages();
    let wanted = std::env::var(crate::HUGE_PAGES_ENV).unwrap();
    assert_eq!(asks, wanted == "1", "{}={wanted}", crate::HUGE_PAGES_ENV);
    for (source, huge) in [(&in_order as &dyn ReadAt, false), (&memory, true)] {
        let mut reader = PayloadReader::at(source, 0, len, 1 << 10)
            .narrow(len, true, true)
            .unwrap();
        let data = reader
            .read_spans(&spans, &[2], Validation::Trusted, |_, _| Ok(()), "test")
            .unwrap();
        assert_eq!(data.groups[0], polys);
        for values in &data.groups[0] {
            let middle = values[values.len() / 2..].as_ptr().cast::<u8>();
            assert_eq!(
                has_vm_flag(middle, "hg"),
                huge && asks,
                "in order: {}",
                !huge
            );
            assert_eq!(
                has_vm_flag(middle, "nh"),
                huge && !asks,
                "in order: {}",
                !huge
            );
        }
    }
}

/// A source read in order (a file from the disk) is read as one stream: every byte once,
/// each read starting where the last ended, the small spans with the polynomials around
/// them (read apart first, each would cost the disk a seek); and the first bad span in
/// payload order is still the error.
#[test]
fn a_source_read_in_order_is_read_as_one_stream() {
    let polys = random_polys(5, 3 << 20);
    let (bytes, spans) = payload(&polys);
    let len = bytes.len() as u64;
    let in_order = InOrder::new(&bytes);
    let reader = || {
        PayloadReader::at(&in_order, 0, len, 1 << 10)
            .narrow(len, true, true)
            .unwrap()
    };
    let data = reader()
        .read_spans(&spans, &[5], Validation::Checked, |_, _| Ok(()), "test")
        .unwrap();
    assert_eq!(data.groups[0], polys);
    let reads = in_order.reads.lock().unwrap().clone();
    let mut next = 0;
    for &(offset, bytes) in &reads {
        assert_eq!(offset, next, "a read out of order: {reads:?}");
        next += bytes as u64;
    }
    assert_eq!(next, len);
    assert!(reads.len() > spans.len() / 2, "{reads:?}");

    let refused = reader().read_spans(
        &spans,
        &[5],
        Validation::Checked,
        |index, _| match index {
            4 | 6 => Err(Error::Malformed(format!("prefix at span {index}"))),
            _ => Ok(()),
        },
        "test",
    );
    assert!(
        matches!(&refused, Err(Error::Malformed(what)) if what == "prefix at span 4"),
        "{refused:?}"
    );
}

/// The small spans are checked before any polynomial is read: a bad prefix is the error,
/// whatever the polynomials hold.
#[test]
fn small_spans_are_checked_first() {
    let mut polys = polys();
    // An element above the modulus: refused when checked, if it were read.
    polys[0][0] = Fr::from_raw_bytes_unchecked(&[0xff; 32]);
    let (bytes, spans) = payload(&polys);
    let mut reader = PayloadReader::from_slice(&bytes);
    let refused = reader.read_spans(
        &spans,
        &[4],
        Validation::Checked,
        |index, _| match index {
            4 => Err(Error::Malformed("third prefix".into())),
            _ => Ok(()),
        },
        "test",
    );
    assert!(matches!(refused, Err(Error::Malformed(_))), "{refused:?}");
    let mut reader = PayloadReader::from_slice(&bytes);
    let invalid = reader.read_spans(&spans, &[4], Validation::Checked, |_, _| Ok(()), "test");
    assert!(
        matches!(invalid, Err(Error::InvalidFieldElement { .. })),
        "{invalid:?}"
    );
    let mut reader = PayloadReader::from_slice(&bytes);
    let trusted = reader.read_spans(&spans, &[4], Validation::Trusted, |_, _| Ok(()), "test");
    assert!(trusted.is_ok());
}

/// A file shorter than the payload declared (truncated while it loads) is a truncation,
/// with nothing half-read returned; so are groups that do not cover the polynomials.
#[test]
fn a_short_source_or_wrong_groups_are_errors() {
    let polys = polys();
    let (bytes, spans) = payload(&polys);
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&bytes[..bytes.len() - 1000]).unwrap();
    let mut reader = PayloadReader::at(&file, 0, bytes.len() as u64, 1 << 10)
        .narrow(bytes.len() as u64, true, true)
        .unwrap();
    let short = reader.read_spans(&spans, &[4], Validation::Trusted, |_, _| Ok(()), "tail");
    assert!(
        matches!(short, Err(Error::Truncated { context: "tail" })),
        "{short:?}"
    );
    assert_eq!(reader.digest(), None);
    let mut reader = PayloadReader::from_slice(&bytes);
    let wrong = reader.read_spans(&spans, &[3], Validation::Trusted, |_, _| Ok(()), "test");
    assert!(matches!(wrong, Err(Error::Internal(_))), "{wrong:?}");
}
