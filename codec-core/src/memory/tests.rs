use super::*;

#[test]
fn zeroed_bytes_are_zero_and_refuse_what_cannot_be_had() {
    let mut bytes = zeroed_bytes(3 << 20, "a test").unwrap_or_default();
    assert_eq!(bytes.len(), 3 << 20);
    assert!(bytes.iter().all(|&b| b == 0));
    bytes.push(7);
    assert_eq!(bytes.last(), Some(&7));
    assert!(zeroed_bytes(0, "a test").is_ok_and(|b| b.is_empty()));
    // More than any machine has: an error, not an abort.
    assert!(matches!(
        zeroed_bytes(usize::MAX / 2, "a test"),
        Err(Error::OutOfMemory { what: "a test", .. })
    ));
}

/// halo2curves' own raw encoding of a scalar: the reference the views must agree with.
fn encode_fr(value: &Fr) -> Vec<u8> {
    let mut out = Vec::new();
    value.write_raw(&mut out).unwrap();
    out
}

#[test]
fn the_layout_check_passes_on_this_target() {
    // keycodec's targets are little-endian 64-bit; if this fails, the fast path is off
    // (correct, but slow) and the docs must change.
    assert!(layout_matches());
}

#[test]
fn views_agree_with_halo2curves_encoding() {
    let mut rng = crate::testing::rng();
    let values: Vec<Fr> = (0..1000).map(|_| Fr::random(&mut rng)).collect();
    let bytes = as_raw_bytes(&values).unwrap();
    assert_eq!(bytes.len(), values.len() * FR_BYTES);
    for (value, chunk) in values.iter().zip(bytes.chunks_exact(FR_BYTES)) {
        assert_eq!(chunk, encode_fr(value));
    }
}

#[test]
fn element_views_agree_with_byte_views() {
    let mut rng = crate::testing::rng();
    let values: Vec<Fr> = (0..100).map(|_| Fr::random(&mut rng)).collect();
    let elements = as_raw_elements(&values).unwrap();
    assert_eq!(elements.len(), values.len());
    for (value, element) in values.iter().zip(elements) {
        assert_eq!(element.as_slice(), encode_fr(value));
    }
    assert_eq!(elements.as_flattened(), as_raw_bytes(&values).unwrap());
}

#[test]
fn writing_through_the_view_sets_elements() {
    let mut rng = crate::testing::rng();
    let values: Vec<Fr> = (0..1000).map(|_| Fr::random(&mut rng)).collect();
    let encoded: Vec<u8> = values.iter().flat_map(encode_fr).collect();
    let mut target = vec![Fr::ZERO; values.len()];
    as_raw_bytes_mut(&mut target)
        .unwrap()
        .copy_from_slice(&encoded);
    assert_eq!(target, values);
    for (value, chunk) in target.iter().zip(encoded.chunks_exact(FR_BYTES)) {
        assert_eq!(Fr::from_raw_bytes(chunk), Some(*value));
    }
}

#[test]
fn an_impossible_allocation_is_an_error() {
    assert!(matches!(
        zeroed(usize::MAX / 16),
        Err(Error::OutOfMemory { .. })
    ));
}

#[test]
fn memory_hints_keep_every_byte() {
    // Written memory of several huge pages, not aligned to one: advised (and its spare
    // capacity populated), every byte is still what was written, and the vector still
    // grows and drops.
    let len = 3 * HUGE_PAGE + 12_345;
    let mut bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    bytes.reserve_exact(HUGE_PAGE);
    let view = bytes.as_mut_slice();
    // SAFETY (test): the same initialised bytes, as `MaybeUninit<u8>`, for the calls.
    let written: &mut [MaybeUninit<u8>] =
        unsafe { std::slice::from_raw_parts_mut(view.as_mut_ptr().cast(), view.len()) };
    advise_page_size(written, true);
    populate(written);
    advise_page_size(bytes.spare_capacity_mut(), true);
    populate(bytes.spare_capacity_mut());
    assert!(bytes.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    // SAFETY (test): as above.
    let written: &mut [MaybeUninit<u8>] =
        unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast(), len) };
    advise_page_size(written, false);
    assert!(bytes.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    bytes.extend(std::iter::repeat_n(7u8, HUGE_PAGE));
    assert_eq!(bytes.len(), len + HUGE_PAGE);
    // Zeroed memory advised at allocation is zero.
    let values = zeroed(3 * HUGE_PAGE / FR_BYTES + 5).unwrap().unwrap();
    assert!(values.iter().all(|v| *v == Fr::ZERO));
}

/// Fresh memory (64 MiB: mapped anew by any allocator) reads as unmapped until populated or
/// written, and as mapped after: what lets a reload skip populating reused memory.
#[cfg(target_os = "linux")]
#[test]
fn populate_maps_fresh_memory_and_ends_mapped_tells_it() {
    let mut fresh: Vec<u8> = Vec::with_capacity(64 << 20);
    assert!(!ends_mapped(fresh.spare_capacity_mut()));
    populate(fresh.spare_capacity_mut());
    assert!(ends_mapped(fresh.spare_capacity_mut()));
    let written = vec![1u8; 64 << 20];
    assert!(ends_mapped(&[]));
    // SAFETY (test): the same initialised bytes, as `MaybeUninit<u8>`.
    let view: &[MaybeUninit<u8>] =
        unsafe { std::slice::from_raw_parts(written.as_ptr().cast(), written.len()) };
    assert!(ends_mapped(view));
}

#[test]
fn zeroed_vectors_hold_zero_and_can_grow_and_drop() {
    for count in [0, 1, 7, 1 << 16] {
        let mut values = zeroed(count).unwrap().unwrap();
        assert_eq!(values.len(), count);
        assert!(values.iter().all(|v| *v == Fr::ZERO));
        // Reallocation and deallocation go through the layout recorded for Fr.
        values.push(Fr::ONE);
        values.shrink_to_fit();
        assert_eq!(values.last(), Some(&Fr::ONE));
    }
}

/// `mincore` counts a page for every started page of a file (one byte past whole pages makes
/// one more), all of them cached once the file was read, and none of a file whose pages were
/// dropped (where the kernel drops them: a regular file on a disk, not tmpfs).
/// A sample asks about its runs of pages alone, spread over the file to its partly filled
/// last page (every page of a file no longer than them): a cached file's runs all count,
/// a dropped one's none.
#[test]
fn a_sample_of_pages_counts_its_runs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file");
    let page = rustix::param::page_size().max(4096);
    std::fs::write(&path, vec![7u8; 100 * page + 1]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    file.sync_all().unwrap();
    assert_eq!(std::fs::read(&path).unwrap().len(), 100 * page + 1);
    let Some(every) = cached_pages_of(&file, None) else {
        return;
    };
    assert_eq!(every, (101, 101));
    assert_eq!(cached_pages_of(&file, Some(4)), Some((64, 64)));
    // Too few pages for the runs, or a run alone: every page.
    assert_eq!(cached_pages_of(&file, Some(7)), Some((101, 101)));
    assert_eq!(cached_pages_of(&file, Some(1)), Some((101, 101)));
    // Only a file system on a disk drops the pages (tmpfs accepts the request and keeps them).
    if crate::drop_cached_pages(&path) && crate::source::on_a_block_file_system(&file) {
        let (after, asked) = cached_pages_of(&file, Some(4)).unwrap();
        assert_eq!(asked, 64);
        assert!(
            after < 64,
            "{after} of {asked} sampled pages cached after the drop"
        );
    }
}

#[test]
fn cached_pages_counts_every_page_of_a_read_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file");
    let page = rustix::param::page_size();
    std::fs::write(&path, vec![7u8; 3 * page + 1]).unwrap();
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    assert_eq!(std::fs::read(&path).unwrap().len(), 3 * page + 1);
    let counted = cached_pages(&path);
    assert_eq!(
        counted.is_some(),
        cfg!(target_os = "linux"),
        "mincore on a regular file"
    );
    let Some((cached, pages)) = counted else {
        return;
    };
    assert_eq!((cached, pages), (4, 4));
    if crate::drop_cached_pages(&path) {
        let (after, pages) = cached_pages(&path).unwrap();
        assert_eq!(pages, 4);
        assert!(
            after <= cached,
            "{after} of {pages} pages cached after the drop"
        );
    }
    assert_eq!(cached_pages(&dir.path().join("absent")), None);
    std::fs::write(&path, b"").unwrap();
    assert_eq!(cached_pages(&path), None);
}
