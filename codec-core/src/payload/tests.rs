//! The reader's tests: what each source hands out and hashes.

use super::*;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 + i / 7) as u8).collect()
}

#[test]
fn element_count_times_size_cannot_overflow() {
    let bytes = [0u8; 64];
    for count in [usize::MAX, usize::MAX / FR_BYTES + 1, 1 << 60] {
        let mut source = &bytes[..];
        let mut reader = PayloadReader::new(&mut source, bytes.len() as u64, true);
        let result = read_fr_vec(
            &mut reader,
            count,
            FieldEncoding::Raw,
            Validation::Checked,
            "test",
        );
        assert!(
            matches!(result, Err(Error::LimitExceeded { .. })),
            "{count}: {result:?}"
        );
    }
}

#[test]
fn the_rest_is_borrowed_from_memory_and_read_from_a_stream() -> Result<()> {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    let mut memory = PayloadReader::from_slice(&bytes);
    memory.read_u8("first byte")?;
    let rest = memory.read_rest("rest")?;
    assert!(matches!(rest, Cow::Borrowed(_)));
    assert_eq!(&*rest, bytes.get(1..).unwrap_or_default());
    assert_eq!(memory.remaining(), 0);

    let mut source = bytes.as_slice();
    let mut stream = PayloadReader::new(&mut source, bytes.len() as u64, false);
    stream.read_u8("first byte")?;
    let rest = stream.read_rest("rest")?;
    assert!(matches!(rest, Cow::Owned(_)));
    assert_eq!(&*rest, bytes.get(1..).unwrap_or_default());

    // A stream shorter than its declared length is truncated, not a short slice.
    let mut short = bytes.get(..100).unwrap_or_default();
    let mut stream = PayloadReader::new(&mut short, 200, false);
    assert!(matches!(
        stream.read_rest("rest"),
        Err(Error::Truncated { .. })
    ));
    Ok(())
}

/// A large read handed out whole from a source read at offsets is one read of the
/// source (an object source fetches it in ranges at once), not a read per buffer.
#[test]
fn a_large_borrowed_read_is_one_read_of_the_source() -> Result<()> {
    struct Counted<'a>(Memory<'a>, std::sync::atomic::AtomicUsize);
    impl ReadAt for Counted<'_> {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.read_exact_at(buf, offset)
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.read_at(buf, offset)
        }
    }
    let data = pattern(3 * DIRECT_READ);
    let source = Counted(Memory(&data), 0.into());
    let len = data.len() as u64;
    let mut reader = PayloadReader::at(&source, 0, len, 1 << 10).narrow(len, true, true)?;
    let small = reader.read_array::<10>("small")?;
    let reads = source.1.load(std::sync::atomic::Ordering::Relaxed);
    let whole = reader.read_borrowed(2 * DIRECT_READ, "whole")?;
    assert_eq!(
        source.1.load(std::sync::atomic::Ordering::Relaxed),
        reads + 1
    );
    assert_eq!(&small[..], &data[..10]);
    assert_eq!(&whole[..], &data[10..10 + 2 * DIRECT_READ]);
    Ok(())
}

/// Every source, read with every kind of read, hashes exactly the payload's bytes in
/// order: the digest equals the XXH3 of the payload, and hashing it afresh agrees.
#[test]
fn every_source_hashes_exactly_what_it_hands_out() -> Result<()> {
    let header = 64usize;
    let data = pattern(header + 2 * BULK_STEP + 1000);
    let payload = &data[header..];
    let expected = xxh3_64(payload);
    let mut file = tempfile::tempfile().map_err(|e| Error::io("create", e))?;
    std::io::Write::write_all(&mut file, &data).map_err(|e| Error::io("write", e))?;
    let mut stream = data.as_slice();
    let readers: Vec<(&str, PayloadReader<'_>)> = vec![
        ("memory", PayloadReader::from_slice(&data)),
        (
            "stream",
            PayloadReader::new(&mut stream, data.len() as u64, false),
        ),
        (
            "file",
            PayloadReader::at(&file, 0, data.len() as u64, 1 << 10),
        ),
    ];
    for (name, mut reader) in readers {
        reader.read_array::<64>("header")?;
        let mut reader = reader.narrow(payload.len() as u64, true, true)?;
        let mut out = Vec::new();
        out.extend_from_slice(&reader.read_array::<3>("small")?);
        let mut bulk = vec![0u8; BULK_STEP + 5];
        reader.read_checked(&mut bulk, |_| Ok(()), "bulk")?;
        out.extend_from_slice(&bulk);
        out.extend_from_slice(&reader.read_borrowed(100, "borrowed")?);
        // Straight from the source, past the buffer, for sources read at offsets.
        out.extend_from_slice(&reader.read_borrowed(DIRECT_READ + 7, "borrowed whole")?);
        let mut tail = Vec::new();
        reader
            .read_to_end(&mut tail)
            .map_err(|e| Error::io("read", e))?;
        out.extend_from_slice(&tail);
        assert_eq!(out, payload, "{name}");
        assert_eq!(reader.digest(), Some(expected), "{name}");
        if name != "stream" {
            assert_eq!(reader.digest_afresh(), Some(expected), "{name}");
        }
    }
    Ok(())
}

/// A read that fails part-way loses the running hash: no digest is ever reported for
/// bytes that were not all handed out.
#[test]
fn a_failed_read_loses_the_hash() -> Result<()> {
    let data = pattern(100);
    let mut short = &data[..50];
    let mut reader = PayloadReader::new(&mut short, 100, false).narrow(100, false, true)?;
    let mut buf = [0u8; 80];
    assert!(matches!(
        reader.read_exact(&mut buf, "too much"),
        Err(Error::Truncated { .. })
    ));
    assert_eq!(reader.digest(), None);
    assert_eq!(reader.digest_afresh(), None);
    Ok(())
}
