//! The floor: a file read into fresh memory shaped as a key's, nothing decoded, while the
//! key's evaluation domain is built; what any loader of the file must at least do.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use halo2_proofs::poly::EvaluationDomain;
use halo2curves::bn256::Fr;
use keycodec::Validation;
use keycodec_core::backend_api::field::FR_BYTES;
use keycodec_core::backend_api::raw_view::{as_raw_bytes_mut, zeroed};
use keycodec_core::backend_api::{on_a_pool_of_its_own, PayloadReader, Span};
use keycodec_core::header::HEADER_LEN;
use keycodec_core::transport::{FileSource, ReadAt};
use keycodec_core::BufferConfig;

/// What any loader of a file must at least do: read it into fresh memory, while a key's
/// evaluation domain (`(degree, k)`) is built on another thread; nothing is decoded or
/// checked. A key file is read into memory allocated as a key's is, one vector per
/// polynomial (`polynomial_bytes` each), so that the allocator behaves as it does for a key,
/// handing back what the last key freed; parameters into one vector. The file is read each
/// of the ways its state and `visit` take (`ways` below), the fastest counting.
/// Returns the seconds and whether every byte was read, and the memory read into with the
/// domain built (both held, as a load holds its key, until the floor is dropped).
///
/// # Errors
///
/// I/O errors, as text.
pub fn floor(
    path: &Path,
    polynomial_bytes: Option<u64>,
    domain: Option<(u32, u32)>,
    visit: usize,
) -> Result<Floor, String> {
    let len = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    let parameters = polynomial_bytes.is_none();
    let polynomial_bytes = polynomial_bytes.unwrap_or(len);
    let cold = from_the_disk(path);
    let mut fastest: Option<Floor> = None;
    for way in ways(cold, visit, parameters, len) {
        let floor = match way {
            Way::ReadToEnd => {
                timed_with_domain(way, domain, || read_in_order(path, len, polynomial_bytes))
            }
            Way::Polynomials(ways) => timed_with_domain(way, domain, || {
                read_as_polynomials(path, len, polynomial_bytes, ways)
            }),
            Way::Parameters => timed_with_domain(way, domain, || read_as_parameters(path, len)),
        }?;
        if fastest
            .as_ref()
            .is_none_or(|best| floor.seconds < best.seconds)
        {
            fastest = Some(floor);
        }
    }
    fastest.ok_or_else(|| "a floor with no way to read its file".to_owned())
}

/// Whether a floor of `path` reads it from the disk: under a tenth of its pages cached.
fn from_the_disk(path: &Path) -> bool {
    keycodec_core::cached_pages(path).is_some_and(|(cached, pages)| cached * 10 < pages)
}

/// A way the floor reads a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Way {
    /// `read_to_end` on one thread into each vector's spare capacity (`read_in_order` here):
    /// small pages.
    ReadToEnd,
    /// keycodec's bulk read into a vector per polynomial (`read_as_polynomials` here): the
    /// header first, then positioned reads into memory not zeroed first, pages mapped a piece
    /// at a time; huge pages asked for only from the page cache, and only where loads ask
    /// for them ([`keycodec_core::asks_for_huge_pages`]).
    Polynomials(Ways),
    /// In order into one vector from the allocator zeroed, huge pages asked for where loads
    /// ask for them, as a parameters load reads its points (`read_as_parameters` here).
    Parameters,
}

/// The ways a floor reads a file, by where the file is (`cold`: under a tenth of its pages
/// cached), the floor's `visit` of its case, whether it is `parameters` and its `len`:
///
/// - from the page cache, over every core with keycodec's bulk read; under [`SMALL_FILE`]
///   (where starting threads costs more than it saves) also on one thread with
///   `read_to_end`, the faster counting;
/// - from the disk, one way per visit, in turn, each way's visits its own sample and the
///   faster way counting: `read_to_end` on one thread, through the page cache with the
///   kernel's read-ahead streaming the file; and in order as keycodec loads such a file
///   ([`FileSource`]: past the page cache where it reads so; a key into small pages,
///   parameters into memory allocated as their load's, which asks for huge pages where loads
///   do: read into small pages while the load asked for huge ones, a trusted load of
///   parameters from the disk beat it). Both ways, whichever way loads read: on one VM
///   reading past the page cache was the faster (`read_to_end` the slower in 83 of 90
///   default-run floors), on another `read_to_end` by 1.3-1.6x, because its host served
///   buffered reads from a cache of its own (`docs/performance.md`). (The bulk read over
///   every core through the page cache, pieces taken in turn by two threads, was a third way
///   for a key: from the first VM's disk the slowest, by 5-25%.)
fn ways(cold: bool, visit: usize, parameters: bool, len: u64) -> Vec<Way> {
    match (cold, visit.is_multiple_of(2), parameters) {
        (true, true, _) => vec![Way::ReadToEnd],
        (true, false, false) => vec![Way::Polynomials(Ways::InOrder)],
        (true, false, true) => vec![Way::Parameters],
        (false, _, _) if len < SMALL_FILE => {
            vec![Way::Polynomials(Ways::EveryCore), Way::ReadToEnd]
        }
        (false, _, _) => vec![Way::Polynomials(Ways::EveryCore)],
    }
}

impl Way {
    /// The way's name, as the harness's JSON gives it.
    pub fn name(self) -> &'static str {
        match self {
            Way::ReadToEnd => "read_to_end",
            Way::Polynomials(Ways::EveryCore) => "every core",
            Way::Polynomials(Ways::InOrder) => "in order",
            Way::Parameters => "parameters in order",
        }
    }
}

/// A floor's read: its seconds, the way that took them, whether every byte was read, and the
/// memory read into.
pub struct Floor {
    /// Seconds the read took (the domain's build beside it included).
    pub seconds: f64,
    /// The way that took them (of those tried, the fastest).
    pub way: Way,
    /// Whether every byte was read (and the domain built).
    pub complete: bool,
    /// The memory read into and the domain built, held until the floor is dropped.
    _held: Box<dyn std::any::Any>,
}

/// Below this, the floor also reads on one thread.
pub const SMALL_FILE: u64 = 256 << 20;

/// Times `read`, the floor's `way`, while the domain is built on another thread, its twiddles
/// on a pool of its own as a load builds them ([`on_a_pool_of_its_own`]).
fn timed_with_domain<T: 'static>(
    way: Way,
    domain: Option<(u32, u32)>,
    read: impl FnOnce() -> Result<(bool, T), String>,
) -> Result<Floor, String> {
    let started = Instant::now();
    // Asked before anything else, also where no domain is built: it starts rayon's global
    // pool, whose threads then start while the file is opened and its header read (a floor
    // of parameters from the page cache took 1.15x as long, per-round median of sixteen, with
    // the pool started by its first read instead).
    let threads = rayon::current_num_threads();
    let (complete, held) = std::thread::scope(|scope| {
        let building = domain.map(|(degree, k)| {
            scope.spawn(move || {
                on_a_pool_of_its_own(threads, || EvaluationDomain::<Fr>::new(degree, k))
            })
        });
        let read = read();
        // The domain is held with the memory read, as a load holds it in its key: freeing
        // it is no part of a load (the seed's k = 22 domain is 736 MiB).
        let built = building.map(|thread| thread.join().ok());
        let complete = built.as_ref().is_none_or(Option::is_some);
        read.map(|(read, held)| (read && complete, (held, built)))
    })?;
    Ok(Floor {
        seconds: started.elapsed().as_secs_f64(),
        way,
        complete,
        _held: Box::new(held),
    })
}

/// Reads `path` on this thread into one vector per polynomial of `polynomial_bytes`.
fn read_in_order(
    path: &Path,
    len: u64,
    polynomial_bytes: u64,
) -> Result<(bool, Vec<Vec<u8>>), String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut vectors = Vec::new();
    let mut read = 0u64;
    while read < len {
        let want = polynomial_bytes.max(1).min(len - read);
        let mut piece = Vec::with_capacity(usize::try_from(want).map_err(|e| e.to_string())?);
        let got = (&mut file)
            .take(want)
            .read_to_end(&mut piece)
            .map_err(|e| e.to_string())?;
        if got == 0 {
            break;
        }
        read += got as u64;
        vectors.push(piece);
    }
    Ok((read == len, std::hint::black_box(vectors)))
}

/// Reads the `len` bytes of `path` in order, as a parameters load reads a file that is not
/// in the page cache: through keycodec's one reader over a [`FileSource`], its header first (see
/// [`read_header`]), then into one vector of elements from the allocator zeroed, huge pages
/// asked for where loads ask for them ([`zeroed`], the memory a parameters load reads its
/// points into), then the bytes after the last whole element.
fn read_as_parameters(path: &Path, len: u64) -> Result<(bool, Vec<Fr>), String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let source = FileSource::new(&file);
    let mut reader = PayloadReader::from_file(&source, len, buffer());
    read_header(&mut reader)?;
    let left = reader.remaining();
    let count = usize::try_from(left / FR_BYTES as u64).map_err(|e| e.to_string())?;
    let mut values = zeroed(count)
        .map_err(|e| e.to_string())?
        .ok_or("field elements are not laid out as their raw encoding here")?;
    let bytes = as_raw_bytes_mut(&mut values).ok_or("no raw view of the elements")?;
    reader
        .read_checked(bytes, |_| Ok(()), "floor")
        .map_err(|e| e.to_string())?;
    let mut rest = vec![0; usize::try_from(left % FR_BYTES as u64).map_err(|e| e.to_string())?];
    reader
        .read_exact(&mut rest, "floor")
        .map_err(|e| e.to_string())?;
    std::hint::black_box(&rest);
    Ok((reader.remaining() == 0, std::hint::black_box(values)))
}

/// The buffer of the floor's reader: a load's default, whatever buffer the loads compared
/// with it were given (`--buffers`). The floor is the file's best read on this machine, one
/// per file and state: a load given a smaller buffer is compared with the same floor, so its
/// `x floor` shows what the smaller buffer costs it.
fn buffer() -> usize {
    BufferConfig::default().file_read_capacity()
}

/// Reads a container header's worth of bytes first, as a load does: the reader's first fill
/// is small (16 KiB), and a read from the disk that starts small lets the kernel's
/// read-ahead ramp up ahead of the large reads after it. (Parameters of k = 18, 33.5 MB,
/// from the disk: 16.9 ms against 23.3 ms starting with a 4 MiB read, medians of 30; a
/// trusted load of them, which starts so, took 18.6 ms and beat the floor that did not.)
/// From the page cache it is faster too, for a reason not known: the k = 18 key's floor
/// took 312 ms with it, 370 ms without (medians of 12 new processes).
fn read_header(reader: &mut PayloadReader<'_>) -> Result<(), String> {
    let len = HEADER_LEN.min(usize::try_from(reader.remaining()).unwrap_or(HEADER_LEN));
    let mut header = vec![0; len];
    reader
        .read_exact(&mut header, "floor")
        .map_err(|e| e.to_string())?;
    std::hint::black_box(&header);
    Ok(())
}

/// How keycodec's bulk read reads a file: pieces on every core, or as a load of a file out
/// of the page cache does, in order ([`FileSource`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ways {
    /// Pieces taken by every core.
    EveryCore,
    /// In order, as [`FileSource`] reads a file out of the page cache.
    InOrder,
}

/// Reads the `len` bytes of `path`, the header's first ([`read_header`]), then the rest as
/// polynomials of `polynomial_bytes` bytes (whole elements, none longer than the rest),
/// then the bytes after the last whole polynomial: in file order, as a load
/// reads (a bulk read takes its small spans first, which would read the file's end before
/// its start).
fn read_as_polynomials(
    path: &Path,
    len: u64,
    polynomial_bytes: u64,
    ways: Ways,
) -> Result<(bool, keycodec_core::backend_api::SpanData), String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    // Only the in-order way asks what the page cache holds (as a load does).
    let in_order;
    let source: &dyn ReadAt = match ways {
        Ways::EveryCore => &file,
        Ways::InOrder => {
            in_order = FileSource::new(&file);
            &in_order
        }
    };
    let mut reader = PayloadReader::from_file(source, len, buffer());
    read_header(&mut reader)?;
    let len = reader.remaining();
    // No polynomial longer than what follows the header (parameters' one vector).
    let elements = usize::try_from(polynomial_bytes.min(len) / 32).map_err(|e| e.to_string())?;
    let polynomial_bytes = elements as u64 * 32;
    let polynomials = len.checked_div(polynomial_bytes).unwrap_or(0);
    let rest = len - polynomials * polynomial_bytes;
    let spans: Vec<Span> = (0..polynomials)
        .map(|_| Span::Polynomial {
            count: elements,
            spare: 0,
        })
        .collect();
    let groups = [usize::try_from(polynomials).map_err(|e| e.to_string())?];
    let mut data = reader
        .read_spans(&spans, &groups, Validation::Trusted, |_, _| Ok(()), "floor")
        .map_err(|e| e.to_string())?;
    data.bytes = vec![0; usize::try_from(rest).map_err(|e| e.to_string())?];
    reader
        .read_exact(&mut data.bytes, "floor")
        .map_err(|e| e.to_string())?;
    let read: u64 = data
        .groups
        .iter()
        .flatten()
        .map(|values| (values.len() * 32) as u64)
        .sum::<u64>()
        + data.bytes.len() as u64;
    Ok((read == len, std::hint::black_box(data)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keycodec_core::backend_api::raw_view::as_raw_elements;

    /// A floor holds the domain it built with the memory it read, as a load holds it in its
    /// key: freeing the domain is no part of the time.
    #[test]
    fn a_floor_holds_its_domain() {
        let floor = timed_with_domain(Way::ReadToEnd, Some((3, 6)), || Ok((true, 7u8))).unwrap();
        assert!(floor.complete);
        let held = floor
            ._held
            .downcast_ref::<(u8, Option<Option<EvaluationDomain<Fr>>>)>()
            .unwrap();
        assert_eq!(held.0, 7);
        assert!(matches!(&held.1, Some(Some(domain)) if domain.k() == 6));
    }

    /// From the disk a floor takes one way per visit, in turn, parameters' in-order way their
    /// own; from the page cache every core, and a small file one thread too.
    #[test]
    fn a_floor_takes_its_ways_by_where_the_file_is_and_the_visit() {
        let large = SMALL_FILE;
        let small = SMALL_FILE - 1;
        for len in [small, large] {
            for parameters in [false, true] {
                assert_eq!(ways(true, 0, parameters, len), [Way::ReadToEnd]);
                assert_eq!(ways(true, 2, parameters, len), [Way::ReadToEnd]);
            }
            assert_eq!(ways(true, 1, false, len), [Way::Polynomials(Ways::InOrder)]);
            assert_eq!(ways(true, 3, true, len), [Way::Parameters]);
        }
        for visit in [0, 1] {
            for parameters in [false, true] {
                assert_eq!(
                    ways(false, visit, parameters, large),
                    [Way::Polynomials(Ways::EveryCore)]
                );
                assert_eq!(
                    ways(false, visit, parameters, small),
                    [Way::Polynomials(Ways::EveryCore), Way::ReadToEnd]
                );
            }
        }
    }

    /// A floor reads the whole file whichever visit it is, from the page cache and, where
    /// the file system lets its pages be dropped, from the disk.
    #[test]
    fn a_floor_reads_the_whole_file_at_every_visit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        let len = HEADER_LEN + 5 * (32 << 10) + 40;
        std::fs::write(&path, vec![0x5a; len]).unwrap();
        for polynomial_bytes in [Some(32 << 10), None] {
            for visit in 0..2 {
                for cold in [false, true] {
                    if cold {
                        let _ = keycodec_core::drop_cached_pages(&path);
                    } else {
                        let _ = std::fs::read(&path).unwrap();
                    }
                    let dropped = from_the_disk(&path);
                    let floor = floor(&path, polynomial_bytes, Some((4, 4)), visit).unwrap();
                    assert!(
                        floor.complete,
                        "{polynomial_bytes:?} visit {visit} cold {cold}"
                    );
                    assert!(floor.seconds > 0.0);
                    // The way it names is one it took: where the pages were dropped, the
                    // visit's one way; from the page cache, one of its two.
                    let took = ways(dropped, visit, polynomial_bytes.is_none(), len as u64);
                    assert!(took.contains(&floor.way), "{:?} not in {took:?}", floor.way);
                }
            }
        }
    }

    /// Each way a cold floor reads a file reads every byte of it, from where it lies (the
    /// header first, then the rest in elements, then what is left after the last whole
    /// element or polynomial): a floor that skipped or misplaced bytes would be too fast.
    #[test]
    fn the_in_order_ways_read_every_byte_where_it_lies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        // A header, three polynomials of 64 KiB and 7 bytes more (no whole element).
        let len = HEADER_LEN + 3 * (64 << 10) + 7;
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let payload = &bytes[HEADER_LEN..];
        // Out of the page cache where the file system allows, so that the ways read in order
        // as from the disk (elsewhere over every core: the bytes must match either way).
        let _ = keycodec_core::drop_cached_pages(&path);

        let (complete, values) = read_as_parameters(&path, len as u64).unwrap();
        assert!(complete);
        assert_eq!(
            as_raw_elements(&values).unwrap().as_flattened(),
            &payload[..payload.len() / 32 * 32]
        );

        let _ = keycodec_core::drop_cached_pages(&path);
        let (complete, data) =
            read_as_polynomials(&path, len as u64, 64 << 10, Ways::InOrder).unwrap();
        assert!(complete);
        let mut read: Vec<u8> = Vec::new();
        for values in data.groups.iter().flatten() {
            read.extend_from_slice(as_raw_elements(values).unwrap().as_flattened());
        }
        read.extend_from_slice(&data.bytes);
        assert_eq!(read, payload);

        // Parameters' floor: one vector of the whole file, in order and over every
        // core too: every whole element is read into it, none left to the slow tail.
        for ways in [Ways::InOrder, Ways::EveryCore] {
            let _ = keycodec_core::drop_cached_pages(&path);
            let (complete, data) =
                read_as_polynomials(&path, len as u64, len as u64, ways).unwrap();
            assert!(complete);
            let vectors: Vec<&Vec<Fr>> = data.groups.iter().flatten().collect();
            assert_eq!(vectors.len(), 1);
            let mut read = as_raw_elements(vectors[0]).unwrap().as_flattened().to_vec();
            read.extend_from_slice(&data.bytes);
            assert_eq!(read, payload);
        }

        let (complete, vectors) = read_in_order(&path, len as u64, 64 << 10).unwrap();
        assert!(complete);
        assert_eq!(vectors.concat(), bytes);
    }
}
