use super::*;
use std::io::Write;

fn file_with(bytes: &[u8]) -> File {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(bytes).unwrap();
    file
}

/// A file named in a directory of its own (on the disk where the temporary directory is,
/// unlike an unnamed `tempfile`), held by the directory returned; with its path.
fn file_in_a_directory(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, File) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file");
    std::fs::write(&path, bytes).unwrap();
    let file = File::open(&path).unwrap();
    (dir, path, file)
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Reads into memory not yet initialised give exactly the source's bytes, from a file
/// (`pread` into the memory itself, in as many calls as it takes) and from memory, at
/// any offset and length; a read past the end is `UnexpectedEof`.
#[test]
fn uninitialised_reads_fill_every_byte() {
    let data = pattern(3 * BULK_STEP + 4321);
    let file = file_with(&data);
    let memory = Memory(&data);
    let sources: [&dyn ReadAt; 2] = [&file, &memory];
    for source in sources {
        for (offset, len) in [
            (0, 1),
            (7, 4096),
            (1, BULK_STEP + 3),
            (100, data.len() - 100),
        ] {
            let mut buf: Vec<u8> = Vec::with_capacity(len);
            let spare = buf.spare_capacity_mut();
            let read = source
                .read_exact_uninit_at(spare.get_mut(..len).unwrap(), offset as u64)
                .unwrap();
            assert_eq!(read, &data[offset..offset + len]);
        }
        let mut buf: Vec<u8> = Vec::with_capacity(10);
        let past_end = source.read_exact_uninit_at(
            buf.spare_capacity_mut().get_mut(..10).unwrap(),
            (data.len() - 5) as u64,
        );
        assert_eq!(
            past_end.err().map(|err| err.kind()),
            Some(io::ErrorKind::UnexpectedEof)
        );
    }
    // The default (zeroing first) agrees.
    struct Plain<'a>(&'a File);
    impl ReadAt for Plain<'_> {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.0.read_exact_at(buf, offset)
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            ReadAt::read_at(self.0, buf, offset)
        }
    }
    let mut buf: Vec<u8> = Vec::with_capacity(5000);
    let read = Plain(&file)
        .read_exact_uninit_at(buf.spare_capacity_mut(), 3)
        .unwrap();
    assert_eq!(read, &data[3..3 + read.len()]);
}

#[test]
fn small_and_bulk_reads_hand_out_the_source_in_order() {
    let data = pattern(3 * BULK_STEP + 1000);
    let file = file_with(&data);
    let mut source = AtSource::new(&file, 10, 64);
    let mut out = vec![0u8; data.len() - 10];
    // Mixed: small buffered reads, a bulk read that starts inside the buffer, more small
    // reads, a bulk read starting at an empty buffer, and a large plain read.
    let (a, rest) = out.split_at_mut(5);
    source.read_exact(a).unwrap();
    let (b, rest) = rest.split_at_mut(BULK_STEP + 3);
    source
        .read_parallel(&mut [b], &|_| Ok(()), &mut |_| {}, "test")
        .unwrap();
    let (c, rest) = rest.split_at_mut(100);
    source.read_exact(c).unwrap();
    let (d, rest) = rest.split_at_mut(BULK_STEP);
    source
        .read_parallel(&mut [d], &|_| Ok(()), &mut |_| {}, "test")
        .unwrap();
    source.read_exact(rest).unwrap();
    assert_eq!(out, data[10..]);
    assert_eq!(source.position(), data.len() as u64);
    let mut end = [0u8; 1];
    assert_eq!(source.read(&mut end).unwrap(), 0);
    assert_eq!(
        hash_range(&file, 10, (data.len() - 10) as u64),
        Some(xxhash_rust::xxh3::xxh3_64(&data[10..]))
    );
    assert_eq!(hash_range(&file, 10, data.len() as u64), None);
}

/// Reads 32 bytes of `source` through the buffer, then `len` bytes with
/// [`AtSource::read_parallel`]; returns the head, the rest, and the length of every part
/// checked (in the order checked).
fn head_then_parallel(source: &dyn ReadAt, len: usize) -> ([u8; 32], Vec<u8>, Vec<usize>) {
    let mut reader = AtSource::new(source, 0, 1 << 10);
    let mut head = [0u8; 32];
    reader.read_exact(&mut head).unwrap();
    let mut out = vec![0u8; len];
    let lens = std::sync::Mutex::new(Vec::new());
    let mut handed = Vec::new();
    reader
        .read_parallel(
            &mut [&mut out],
            &|piece: &[u8]| {
                lens.lock().unwrap().push(piece.len());
                Ok(())
            },
            &mut |piece| handed.extend_from_slice(piece),
            "test",
        )
        .unwrap();
    // Every byte read handed on once, in order, whichever way it was read.
    assert!(
        handed == out,
        "the bytes handed on in order are the bytes read"
    );
    (head, out, lens.into_inner().unwrap())
}

#[test]
fn pieces_are_checked_on_their_own_boundaries() {
    let data = pattern(2 * BULK_STEP + 64);
    let file = file_with(&data);
    let (_, out, lens) = head_then_parallel(&file, 2 * BULK_STEP);
    assert_eq!(out, data[32..32 + 2 * BULK_STEP]);
    // Every part checked is CHECK_STEP long, on the pieces' own boundaries (not shifted by
    // the bytes the buffer held), and together they cover the read.
    assert_eq!(lens, vec![CHECK_STEP; 2 * BULK_STEP / CHECK_STEP]);
}

#[test]
fn a_failed_check_or_a_short_source_is_an_error() {
    let data = pattern(BULK_STEP + 10);
    let file = file_with(&data);
    let mut out = vec![0u8; BULK_STEP];
    let refused = AtSource::new(&file, 0, 16).read_parallel(
        &mut [&mut out],
        &|_| Err(Error::InvalidFieldElement { context: "test" }),
        &mut |_| {},
        "test",
    );
    assert!(matches!(refused, Err(Error::InvalidFieldElement { .. })));
    let mut too_long = vec![0u8; BULK_STEP + 11];
    let short = AtSource::new(&file, 0, 16).read_parallel(
        &mut [&mut too_long],
        &|_| Ok(()),
        &mut |_| {},
        "tail",
    );
    assert!(matches!(short, Err(Error::Truncated { context: "tail" })));
}

/// Destinations of every size, initialised or not, filled from chunks that straddle
/// them, come back holding exactly the bytes sent, in order; too few or too many bytes
/// are refused.
#[test]
fn vectored_reads_fill_every_destination() {
    let data: Vec<u8> = (0..30_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let sizes = [0usize, 1, 4096, 3, 2000, 3900];
    for chunk in [1usize, 7, 1000, 10_000] {
        let mut inits: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0xAA; n]).collect();
        let mut uninits: Vec<Vec<u8>> = sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
        let mut dsts = Vec::new();
        for (i, (init, uninit)) in inits.iter_mut().zip(&mut uninits).enumerate() {
            dsts.push(Dst::Init(init.as_mut_slice()));
            let n = sizes[i];
            let spare: &mut [MaybeUninit<u8>] = &mut uninit.spare_capacity_mut()[..n];
            dsts.push(Dst::Uninit(spare));
        }
        let total: usize = dsts.iter().map(Dst::len).sum();
        let mut filling = Filling::new(dsts);
        for piece in data[..total].chunks(chunk) {
            assert!(filling.write(piece));
        }
        assert!(
            !filling.write(&[1]),
            "a byte past the last destination is refused"
        );
        let filled = filling.finish().expect("every destination full");
        let joined: Vec<u8> = filled.iter().flat_map(|dst| dst.iter().copied()).collect();
        assert_eq!(joined, &data[..total], "chunks of {chunk}");
    }
    let mut short = vec![0u8; 10];
    let mut filling = Filling::new(vec![Dst::Init(&mut short)]);
    assert!(filling.write(&[1; 9]));
    assert!(filling.finish().is_none(), "a short response is no fill");
}

/// A file whose pages were dropped but smaller than [`DIRECT_SMALLEST_FILE`] is read in
/// order through the page cache, whatever the machine does with larger ones.
#[test]
fn a_small_file_out_of_the_page_cache_is_read_through_it() {
    let data = pattern(DIRECT_SMALLEST_FILE as usize - 1);
    let (_dir, path, file) = file_in_a_directory(&data);
    file.sync_all().unwrap();
    crate::drop_cached_pages(&path);
    let dropped =
        crate::memory::cached_pages_of(&file, None).is_some_and(|(cached, _)| cached == 0);
    let source = FileSource::new(&file);
    assert_eq!(source.reads_in_order(), dropped);
    assert!(!source.reads_past_page_cache());
    if dropped {
        let (piece, pool) = source.bulk_plan().unwrap();
        assert_eq!((piece, pool.current_num_threads()), (BULK_STEP, 1));
    }
    let mut out = vec![0; data.len()];
    source.read_exact_at(&mut out, 0).unwrap();
    assert_eq!(out, data);
}

/// A file in the page cache is read by every core; one whose pages were dropped (where the
/// kernel drops them: a file on a disk, not tmpfs) in order, by one thread, with the same
/// bytes and the same checks on the pieces' own boundaries, the buffered head used first.
#[test]
fn a_file_out_of_the_page_cache_is_read_in_order() {
    let data = pattern(3 * BULK_STEP + 64);
    let (_dir, path, file) = file_in_a_directory(&data);
    file.sync_all().unwrap();
    let _ = std::fs::read(&path).unwrap();
    let cached = FileSource::new(&file);
    assert!(!cached.reads_in_order() && cached.bulk_plan().is_none());
    crate::drop_cached_pages(&path);
    let dropped =
        crate::memory::cached_pages_of(&file, None).is_some_and(|(cached, _)| cached == 0);
    let source = FileSource::new(&file);
    assert_eq!(source.reads_in_order(), dropped);
    if dropped {
        // Past the page cache only where this machine reads so; then on ext4 or XFS always.
        assert!(crate::reads_past_page_cache() || !source.reads_past_page_cache());
        #[cfg(target_os = "linux")]
        if direct::on_a_block_file_system(&file) {
            assert_eq!(
                source.reads_past_page_cache(),
                crate::reads_past_page_cache()
            );
        }
        let (readers, step) = match source.reads_past_page_cache() {
            true => (DIRECT_READERS, DIRECT_PIECE),
            false => (1, BULK_STEP),
        };
        let (piece, pool) = source.bulk_plan().unwrap();
        assert_eq!((piece, pool.current_num_threads()), (step, readers));
    }
    for source in [&cached, &source] {
        let (head, out, lens) = head_then_parallel(source, 3 * BULK_STEP);
        assert_eq!(head, data[..32]);
        assert_eq!(out, data[32..32 + 3 * BULK_STEP]);
        assert_eq!(lens, vec![CHECK_STEP; 3 * BULK_STEP / CHECK_STEP]);
    }
}

/// Requests come in whole rounds of the lanes, as few rounds as keep each within the largest,
/// none under the smallest where the total allows; no input is refused or panics.
#[test]
fn requests_for_fills_whole_rounds() {
    const MIB: u64 = 1 << 20;
    // An 80 MB key from 32 lanes: one round.
    assert_eq!(requests_for(79_692_863, 32, MIB, 16 * MIB), 32);
    // 1.13 GB: 2.1 rounds of 16 MiB requests make three.
    assert_eq!(requests_for(1_132_466_998, 32, MIB, 16 * MIB), 96);
    // 4 MiB: no request under 1 MiB.
    assert_eq!(requests_for(4 * MIB, 32, MIB, 16 * MIB), 4);
    for (total, lanes, smallest, largest) in [
        (0, 32, MIB, 16 * MIB),
        (u64::MAX, usize::MAX, 0, 0),
        (1, 0, 0, 1),
    ] {
        assert!(requests_for(total, lanes, smallest, largest) >= 1);
    }
}

/// A file whose reads of at most a buffer's worth ([`ReadAt::read_at`], how an
/// [`AtSource`]'s small reads fetch) are logged by length; its exact reads (bulk reads) are
/// not.
struct Logged<'a>(&'a File, std::sync::Mutex<Vec<usize>>);

impl ReadAt for Logged<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.1.lock().unwrap().push(buf.len());
        ReadAt::read_at(self.0, buf, offset)
    }
}

/// The buffer's first fill fetches [`FIRST_FILL`] bytes, each next one that much more than
/// all fetched before, up to the capacity: a header read first does not cost a whole
/// buffer. Small reads still hand out the source in order.
#[test]
fn buffer_fills_start_small_and_grow_to_the_capacity() {
    let capacity = 1 << 20;
    let data = pattern(3 * capacity);
    let file = file_with(&data);
    let logged = Logged(&file, std::sync::Mutex::new(Vec::new()));
    let mut reader = AtSource::new(&logged, 0, capacity);
    let mut out = vec![0u8; data.len()];
    for part in out.chunks_mut(1000) {
        reader.read_exact(part).unwrap();
    }
    assert_eq!(out, data);
    let requests = logged.1.into_inner().unwrap();
    let mut fetched = 0;
    for (at, &len) in requests.iter().enumerate() {
        assert_eq!(
            len,
            (fetched + FIRST_FILL).min(capacity),
            "fill {at}: {requests:?}"
        );
        fetched += len;
    }
    assert_eq!(requests.first(), Some(&FIRST_FILL));
    assert!(requests.iter().filter(|&&len| len == capacity).count() >= 2);
}

/// A small read after bulk reads fetches what small reads have earned, not a whole buffer:
/// the bulk reads' bytes do not make the buffer's next fill grow.
#[test]
fn a_small_read_after_bulk_reads_fetches_little() {
    let capacity = 1 << 20;
    let data = pattern(4 * capacity);
    let file = file_with(&data);
    let logged = Logged(&file, std::sync::Mutex::new(Vec::new()));
    let mut reader = AtSource::new(&logged, 0, capacity);
    let mut header = vec![0u8; 100];
    reader.read_exact(&mut header).unwrap();
    let mut bulk = vec![0u8; 3 * capacity];
    reader.read_exact_direct(&mut bulk).unwrap();
    let mut tail = vec![0u8; 256];
    reader.read_exact(&mut tail).unwrap();
    let mut read = header;
    read.extend(bulk);
    read.extend(tail);
    assert_eq!(read, data.get(..read.len()).unwrap());
    let fills = logged.1.into_inner().unwrap();
    assert_eq!(fills, [FIRST_FILL, 2 * FIRST_FILL]);
}

/// Memory that says it is read best in order (as a file out of the page cache is).
struct InOrderMemory<'a>(&'a [u8]);

impl ReadAt for InOrderMemory<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        Memory(self.0).read_exact_at(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        Memory(self.0).read_at(buf, offset)
    }

    fn reads_in_order(&self) -> bool {
        true
    }
}

/// Read in order, each piece is handed on once it is checked, in order, while the next is
/// read: every byte once, the buffered head first; a piece that fails its check is not
/// handed on, nor anything after it.
#[test]
fn a_read_in_order_hands_on_each_piece_once_checked() {
    let data = pattern(3 * BULK_STEP + 100);
    let source = InOrderMemory(&data);
    let (head, out, lens) = head_then_parallel(&source, 3 * BULK_STEP);
    assert_eq!(head, data[..32]);
    assert_eq!(out, data[32..32 + 3 * BULK_STEP]);
    assert_eq!(lens.iter().sum::<usize>(), 3 * BULK_STEP);

    let mut out = vec![0u8; 3 * BULK_STEP];
    let (refused, handed) = read_refusing(&source, &data, &mut [&mut out], &[(BULK_STEP, "test")]);
    assert!(matches!(refused, Err(Error::InvalidFieldElement { .. })));
    assert_eq!(handed, data[..BULK_STEP]);
}

/// Reads `dsts` from the start of `source`, whose bytes are `data`, with a check that
/// refuses a part starting with the byte at any of `refused` (an offset into `data`, with
/// the context of its error; the first that matches); returns the read's result and the
/// bytes handed on.
fn read_refusing(
    source: &dyn ReadAt,
    data: &[u8],
    dsts: &mut [&mut [u8]],
    refused: &[(usize, &'static str)],
) -> (Result<()>, Vec<u8>) {
    let mut handed = Vec::new();
    let read = AtSource::new(source, 0, 16).read_parallel(
        dsts,
        &|part: &[u8]| match refused
            .iter()
            .find(|(at, _)| !part.is_empty() && part.first() == data.get(*at))
        {
            Some(&(_, context)) => Err(Error::InvalidFieldElement { context }),
            None => Ok(()),
        },
        &mut |piece| handed.extend_from_slice(piece),
        "test",
    );
    (read, handed)
}

/// A file read past the page cache gives its bytes at any offset and length (blocks read
/// around them, reads longer than one buffer in several), into memory not yet initialised
/// and into several destinations at once, in pieces and in bulk; a read past its end is
/// `UnexpectedEof`. (Where the file system refuses reads past the page cache
/// they go through it, with the same bytes.)
#[cfg(target_os = "linux")]
#[test]
fn reads_past_the_page_cache_give_the_files_bytes() {
    let len = 2 * BULK_STEP + 3 * direct::BLOCK + 4321;
    let data = pattern(len);
    let (_dir, _path, file) = file_in_a_directory(&data);
    let source = FileSource::with(&file, true, true);
    eprintln!(
        "read past the page cache: {}",
        source.reads_past_page_cache()
    );
    for (offset, n) in [
        (0, DIRECT_SMALLEST),
        (1, DIRECT_SMALLEST + 1),
        (4095, 2 * direct::BLOCK + 2),
        (direct::BLOCK, BULK_STEP),
        (17, len - 17),
        (len - DIRECT_SMALLEST, DIRECT_SMALLEST),
        (333, 2 * BULK_STEP + 5000),
    ] {
        let want = &data[offset..offset + n];
        let mut uninit = vec![std::mem::MaybeUninit::new(0xA5u8); n];
        let read = source
            .read_exact_uninit_at(&mut uninit, offset as u64)
            .unwrap();
        assert!(read == want, "read_exact_uninit_at({offset}, {n})");
        // Three destinations of uneven lengths, one of them not yet initialised.
        let (a, b) = (n / 3, n / 3 + 7);
        let mut first = vec![0u8; a];
        let mut second = vec![std::mem::MaybeUninit::new(0u8); b - a];
        let mut third = vec![0u8; n - b];
        let filled = source
            .read_exact_vectored_at(
                vec![
                    Dst::Init(&mut first),
                    Dst::Uninit(&mut second),
                    Dst::Init(&mut third),
                ],
                offset as u64,
            )
            .unwrap();
        let joined: Vec<u8> = filled
            .iter()
            .flat_map(|part| part.iter().copied())
            .collect();
        assert!(joined == want, "read_exact_vectored_at({offset}, {n})");
    }
    for (offset, n) in [(len - 10, DIRECT_SMALLEST), (len + 1, DIRECT_SMALLEST)] {
        let mut buf = vec![std::mem::MaybeUninit::new(0u8); n];
        let err = source
            .read_exact_uninit_at(&mut buf, offset as u64)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{offset}");
    }
    let (head, out, _) = head_then_parallel(&source, 2 * BULK_STEP);
    assert_eq!(head, data[..32]);
    assert!(out == data[32..32 + 2 * BULK_STEP]);
    // Every read above went past the page cache, none refused (a read off a block boundary
    // would have been, on these file systems).
    if direct::on_a_block_file_system(&file) {
        assert!(source.reads_past_page_cache(), "a read was refused");
    }
}

/// The first look at a large file chooses the page cache only where its pace through it
/// was over 1.5 times its pace past it; where its reads fail (a file shorter than the bytes
/// it reads), it keeps reading past it; and a load after it reads the file's bytes either
/// way, its first bytes through the page cache where the rest is read past it.
#[cfg(target_os = "linux")]
#[test]
fn a_first_look_reads_through_the_page_cache_only_where_that_is_clearly_faster() {
    // Seconds a byte past the page cache, then through it.
    assert!(through_wins(3.0, 1.0));
    assert!(through_wins(1.51, 1.0));
    assert!(!through_wins(1.49, 1.0));
    assert!(!through_wins(1.0, 1.0));
    assert!(!through_wins(0.5, 1.0));
    for len in [
        LOOK_THROUGH,
        LOOK_THROUGH + LOOK_PAST + 3 * direct::BLOCK + 17,
    ] {
        let data = pattern(len);
        let (_dir, path, file) = file_in_a_directory(&data);
        let Some(direct) = Direct::open(&file) else {
            eprintln!("no O_DIRECT here: not tested");
            return;
        };
        let _ = crate::drop_cached_pages(&path);
        let look = first_look(&file, &direct);
        eprintln!("{len} bytes: {look:?}");
        if let Look::Past { cached } = look {
            // Past its first bytes, the look reads beyond this file's end.
            assert!(
                len > LOOK_THROUGH || cached == 0,
                "{look:?} of a failed look"
            );
            assert!(cached == 0 || cached == LOOK_THROUGH as u64, "{look:?}");
        }
        let mut source = FileSource::with(&file, true, true);
        source.look = Some(OnceLock::from(look));
        assert_eq!(
            source.reads_past_page_cache(),
            look != Look::Through && !source.direct.as_ref().is_some_and(Direct::refused),
            "{look:?} followed"
        );
        let (head, out, _) = head_then_parallel(&source, len - 32);
        assert_eq!(head, data[..32]);
        assert!(out == data[32..], "{len} bytes after {look:?}");
    }
}

/// The first look waits for the first read that would go past the page cache: a load's
/// header, and the small fields and points of a verifying key read from a proving key's
/// file (a small bulk read), read nothing for it; the large read that makes it gets the
/// file's bytes.
#[cfg(target_os = "linux")]
#[test]
fn the_first_look_waits_for_a_read_past_the_page_cache() {
    let data = pattern(4 * DIRECT_SMALLEST + 5);
    let (_dir, _path, file) = file_in_a_directory(&data);
    let mut source = FileSource::with(&file, true, true);
    if source.direct.is_none() {
        eprintln!("no O_DIRECT here: not tested");
        return;
    }
    source.look = Some(OnceLock::new());
    let looked =
        |source: &FileSource<'_>| source.look.as_ref().and_then(|look| look.get().copied());
    let mut small = vec![0u8; DIRECT_SMALLEST - 1];
    source.read_exact_at(&mut small, 7).unwrap();
    assert!(small == data[7..7 + small.len()]);
    assert_eq!(looked(&source), None, "a small read looked");
    // A bulk read as small (a verifying key's points) does not ask the source's plan.
    let (head, out, _) = head_then_parallel(&source, DIRECT_SMALLEST - 1);
    assert_eq!(head, data[..32]);
    assert!(out == data[32..32 + DIRECT_SMALLEST - 1]);
    assert_eq!(looked(&source), None, "a small bulk read looked");
    let (head, out, _) = head_then_parallel(&source, data.len() - 32);
    assert_eq!(head, data[..32]);
    assert!(out == data[32..]);
    // The look's reads go beyond this file's end: it keeps reading past the page cache.
    assert_eq!(looked(&source), Some(Look::Past { cached: 0 }));
}

/// A read the file system refuses past the page cache (a buffer off a block boundary, as a
/// file system with larger blocks would refuse an aligned one) is read through it, with the
/// same bytes, and so is every read after it.
#[cfg(target_os = "linux")]
#[test]
fn a_refused_read_past_the_page_cache_is_read_through_it() {
    let data = pattern(2 * DIRECT_SMALLEST + 123);
    let (_dir, _path, file) = file_in_a_directory(&data);
    let Some(direct) = direct::Direct::open(&file) else {
        eprintln!("this file system cannot be read past the page cache");
        return;
    };
    let mut buffer = vec![0u8; 3 * direct::BLOCK];
    let skip = buffer.as_ptr().align_offset(direct::BLOCK) + 1;
    let off_block = &mut buffer[skip..skip + direct::BLOCK];
    let n = direct.read_block_into(&file, off_block, 0).unwrap();
    assert!(off_block[..n] == data[..n] && n == direct::BLOCK);
    // A file system that reads past the page cache refuses memory off a block boundary
    // (tmpfs reads it through the page cache whatever the flag says).
    let on_disk = direct::on_a_block_file_system(&file);
    if on_disk {
        assert!(
            direct.refused(),
            "a read off a block boundary was not refused"
        );
    }
    // Once refused, every read goes through the page cache, with the same bytes.
    let skip = skip - 1;
    let aligned = &mut buffer[skip..skip + direct::BLOCK];
    assert_eq!(
        direct.read_block_into(&file, aligned, 0).unwrap(),
        direct::BLOCK
    );
    assert!(aligned == &data[..direct::BLOCK]);
    let refused = direct.refused();
    // A reader not refused reads the same block past the page cache.
    let fresh = direct::Direct::open(&file).unwrap();
    aligned.fill(0);
    assert_eq!(
        fresh.read_block_into(&file, aligned, 0).unwrap(),
        direct::BLOCK
    );
    assert!(aligned == &data[..direct::BLOCK] && !fresh.refused());
    // A source whose reader was refused reads straight through the page cache, and says so.
    let source = FileSource {
        file: &file,
        in_order: true,
        direct: Some(direct),
        look: None,
    };
    assert_eq!(source.reads_past_page_cache(), !refused);
    let mut whole = vec![std::mem::MaybeUninit::new(0u8); data.len()];
    assert!(source.read_exact_uninit_at(&mut whole, 0).unwrap() == data);
}

/// Memory read as a file past the page cache is: in order, by a pool of four threads, in
/// pieces of `piece` bytes, each request taking a while; it counts the requests in flight at
/// once and keeps the largest.
struct InFlightMemory<'a> {
    data: &'a [u8],
    pool: rayon::ThreadPool,
    piece: usize,
    in_flight: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
    largest: std::sync::atomic::AtomicUsize,
    /// A read that starts here fails at once.
    fails_at: Option<u64>,
    /// Whether it says it is read past the page cache (else through it: a piece at a time).
    past_page_cache: bool,
    /// Whether each request waits (up to five seconds) until as many requests as the pool
    /// has threads were in flight at once: a test of how many are, on a machine so loaded
    /// that one request could end before the last thread took its own.
    meet: bool,
}

impl<'a> InFlightMemory<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self::with_threads(data, 4)
    }

    fn with_threads(data: &'a [u8], threads: usize) -> Self {
        InFlightMemory {
            data,
            pool: rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap(),
            piece: BULK_STEP,
            in_flight: 0.into(),
            most: 0.into(),
            largest: 0.into(),
            fails_at: None,
            past_page_cache: true,
            meet: false,
        }
    }
}

impl ReadAt for InFlightMemory<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.fails_at == Some(offset) {
            return Err(io::Error::other("this block is bad"));
        }
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        self.largest.fetch_max(buf.len(), SeqCst);
        let start = std::time::Instant::now();
        while self.meet
            && self.most.load(SeqCst) < self.pool.current_num_threads()
            && start.elapsed().as_secs() < 5
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(30));
        let read = Memory(self.data).read_exact_at(buf, offset);
        self.in_flight.fetch_sub(1, SeqCst);
        read
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        Memory(self.data).read_at(buf, offset)
    }

    fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
        Some((self.piece, &self.pool))
    }

    fn reads_in_order(&self) -> bool {
        true
    }

    fn reads_past_page_cache(&self) -> bool {
        self.past_page_cache
    }
}

/// Read past the page cache, a run of destinations is one read: four requests in flight
/// though each destination has two pieces (read one destination at a time, two at most),
/// every byte where it lies, each piece checked within its destination and off the readers'
/// threads, and every byte handed on once, in order.
#[test]
fn a_run_past_the_page_cache_keeps_its_requests_in_flight_across_destinations() {
    let data = pattern(32 + 4 * BULK_STEP + 96);
    let source = InFlightMemory {
        meet: true,
        ..InFlightMemory::new(&data)
    };
    let mut reader = AtSource::new(&source, 0, 1 << 10);
    let mut head = [0u8; 32];
    reader.read_exact(&mut head).unwrap();
    let (mut first, mut second) = (vec![0u8; 2 * BULK_STEP], vec![0u8; BULK_STEP + 64]);
    let mut third = vec![0u8; BULK_STEP - 32];
    let checked = std::sync::Mutex::new(Vec::new());
    let mut handed = Vec::new();
    reader
        .read_parallel(
            &mut [&mut first, &mut second, &mut third],
            &|piece: &[u8]| {
                // Checked off the readers' threads, which only read.
                assert!(source.pool.current_thread_index().is_none());
                checked
                    .lock()
                    .unwrap()
                    .push(piece.as_ptr() as usize..piece.as_ptr() as usize + piece.len());
                Ok(())
            },
            &mut |piece| handed.extend_from_slice(piece),
            "test",
        )
        .unwrap();
    let run = [first.as_slice(), &second, &third].concat();
    assert!(run == data[32..32 + run.len()], "every byte where it lies");
    assert!(handed == run, "every byte handed on once, in order");
    assert_eq!(reader.position(), (32 + run.len()) as u64);
    let most = source.most.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(most, 4, "requests in flight at once");
    let largest = source.largest.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(largest, BULK_STEP, "requests of the source's piece");
    // No checked part spans two destinations.
    let within = |part: &std::ops::Range<usize>| {
        [first.as_slice(), &second, &third].iter().any(|dst| {
            let start = dst.as_ptr() as usize;
            start <= part.start && part.end <= start + dst.len()
        })
    };
    assert!(checked.lock().unwrap().iter().all(within));
}

/// Memory whose last piece is not read until the first was handed on (or five seconds
/// passed): it keeps whether it was.
struct LastAfterFirst<'a> {
    data: &'a [u8],
    handed: std::sync::atomic::AtomicBool,
    last_after_first: std::sync::atomic::AtomicBool,
}

impl ReadAt for LastAfterFirst<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if offset as usize + buf.len() == self.data.len() {
            let start = std::time::Instant::now();
            while !self.handed.load(SeqCst) && start.elapsed().as_secs() < 5 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            self.last_after_first
                .store(self.handed.load(SeqCst), SeqCst);
        }
        Memory(self.data).read_exact_at(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        Memory(self.data).read_at(buf, offset)
    }
}

/// Read from memory or the page cache by a thread outside rayon's pool, a run hands each
/// piece on as soon as it and those before it were read and checked, while the pool reads
/// the rest (the hash of the first piece need not wait for the last): every byte still
/// where it lies and handed on once, in order. Pieces of one check part each (on two
/// threads or more; one thread reads them in order): a piece whose check waited on a
/// stolen part could have its worker take the last piece meanwhile, under the first.
#[test]
fn a_run_through_the_page_cache_hands_its_first_piece_on_before_its_last_is_read() {
    use std::sync::atomic::Ordering::SeqCst;
    let data = pattern(4 * CHECK_STEP);
    let source = LastAfterFirst {
        data: &data,
        handed: false.into(),
        last_after_first: false.into(),
    };
    let (mut first, mut second) = (vec![0u8; 2 * CHECK_STEP], vec![0u8; 2 * CHECK_STEP]);
    let mut handed = Vec::new();
    AtSource::new(&source, 0, 16)
        .read_parallel(
            &mut [&mut first, &mut second],
            &|_| Ok(()),
            &mut |piece| {
                source.handed.store(true, SeqCst);
                handed.extend_from_slice(piece);
            },
            "test",
        )
        .unwrap();
    assert!(
        source.last_after_first.load(SeqCst),
        "the first piece handed on first"
    );
    assert!([first, second].concat() == data, "every byte where it lies");
    assert!(handed == data, "every byte handed on once, in order");
}

/// Read past the page cache, requests are of the source's own piece (a file's is smaller than
/// a bulk read's elsewhere): a run of a few of them has one in flight per reader.
#[test]
fn a_run_past_the_page_cache_asks_for_the_sources_pieces() {
    let data = pattern(8 * DIRECT_PIECE + 96);
    let source = InFlightMemory {
        piece: DIRECT_PIECE,
        meet: true,
        ..InFlightMemory::new(&data)
    };
    let mut out = vec![0u8; data.len()];
    let mut handed = Vec::new();
    AtSource::new(&source, 0, 16)
        .read_parallel(
            &mut [&mut out],
            &|_| Ok(()),
            &mut |piece| handed.extend_from_slice(piece),
            "test",
        )
        .unwrap();
    assert!(
        out == data && handed == data,
        "every byte where it lies, in order"
    );
    use std::sync::atomic::Ordering::SeqCst;
    assert_eq!(source.largest.load(SeqCst), DIRECT_PIECE);
    assert_eq!(
        source.most.load(SeqCst),
        4,
        "a request per reader in flight"
    );
}

/// Read in order, a piece the source asks for that is no power of two, too small or too large
/// (a public trait's answer) is held to whole check parts up to the bulk step: no piece
/// splits an element, and no input panics.
#[test]
fn a_sources_odd_piece_is_held_to_whole_check_parts() {
    let data = pattern(4 * CHECK_STEP + 64);
    for (piece, expected) in [(0, CHECK_STEP), (1000, CHECK_STEP), (usize::MAX, BULK_STEP)] {
        let source = InFlightMemory {
            piece,
            ..InFlightMemory::new(&data)
        };
        let mut out = vec![0u8; data.len()];
        AtSource::new(&source, 0, 16)
            .read_parallel(
                &mut [&mut out],
                &|part: &[u8]| match part.len() % 64 {
                    0 => Ok(()),
                    _ => Err(Error::Internal("a part splitting an element".into())),
                },
                &mut |_| {},
                "test",
            )
            .unwrap();
        assert!(out == data, "piece {piece}: every byte where it lies");
        let largest = source.largest.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(largest, expected.min(data.len()), "piece {piece}");
    }
}

/// Read past the page cache, the first failing piece in payload order is the error, though
/// a later one failed too and may have landed first; nothing from it on is handed on.
#[test]
fn a_run_past_the_page_cache_fails_on_its_first_failing_piece() {
    let data = pattern(6 * BULK_STEP);
    let source = InFlightMemory::new(&data);
    let (mut first, mut second) = (vec![0u8; 3 * BULK_STEP], vec![0u8; 3 * BULK_STEP]);
    let refused = read_refusing(
        &source,
        &data,
        &mut [&mut first, &mut second],
        &[(4 * BULK_STEP, "earlier"), (5 * BULK_STEP, "later")],
    );
    assert_failed_on_earlier(refused, &data[..4 * BULK_STEP]);
}

/// The read failed on the part refused as `"earlier"`, having handed on `before` alone.
fn assert_failed_on_earlier((failed, handed): (Result<()>, Vec<u8>), before: &[u8]) {
    assert!(
        matches!(
            failed,
            Err(Error::InvalidFieldElement { context: "earlier" })
        ),
        "{failed:?}"
    );
    assert!(handed == before, "handed on up to the failing piece");
}

/// A read made on a thread of the source's own pool does not wait for that pool (whose only
/// thread it is here): it reads one piece at a time itself, every byte where it lies.
#[test]
fn a_run_read_from_a_thread_of_the_readers_pool_reads_it_itself() {
    let data = pattern(3 * BULK_STEP + 64);
    let source = InFlightMemory::with_threads(&data, 1);
    let (mut first, mut second) = (vec![0u8; 2 * BULK_STEP], vec![0u8; BULK_STEP + 64]);
    let mut handed = Vec::new();
    source.pool.install(|| {
        AtSource::new(&source, 0, 16)
            .read_parallel(
                &mut [&mut first, &mut second],
                &|_| Ok(()),
                &mut |piece| handed.extend_from_slice(piece),
                "test",
            )
            .unwrap()
    });
    assert!([first, second].concat() == data, "every byte where it lies");
    assert!(handed == data, "every byte handed on once, in order");
}

/// Read in order, past the page cache or through it, a piece whose check fails is the error
/// though the piece after it failed its read first (at once, while the earlier one was still
/// being read, or checked).
#[test]
fn a_read_in_order_fails_on_its_first_failing_piece_of_either_kind() {
    for past_page_cache in [true, false] {
        first_failing_piece_of_either_kind(past_page_cache);
    }
}

fn first_failing_piece_of_either_kind(past_page_cache: bool) {
    let data = pattern(4 * BULK_STEP);
    let source = InFlightMemory {
        fails_at: Some(2 * BULK_STEP as u64),
        past_page_cache,
        ..InFlightMemory::new(&data)
    };
    let mut out = vec![0u8; 4 * BULK_STEP];
    let refused = read_refusing(&source, &data, &mut [&mut out], &[(BULK_STEP, "earlier")]);
    assert_failed_on_earlier(refused, &data[..BULK_STEP]);
}
