//! The files the cases start from and forge: a small container, without its record, its
//! checksums refreshed or its header rewritten; and temporaries a save left behind.

use std::path::Path;

use keycodec_core::header::{Header, HEADER_LEN};
use keycodec_core::{KeyCodec, KeyCodecExt};
use twox_hash::XxHash3_64;

use crate::{standard_plonk, StandardPlonk};

/// A small proving-key container from `codec` (StandardPlonk at k = 4), without the
/// circuit's record (version 3): its payload ends the file, as the tests that forge payload
/// bytes at offsets from the end expect. (The record's own damage is tested where records
/// are: `tests/tests/integration/record.rs`.)
pub fn small_pk_file<K: KeyCodec + ?Sized>(codec: &K) -> Vec<u8> {
    without_record(
        codec
            .to_vec::<StandardPlonk, _>(&standard_plonk().pk, ())
            .expect("encode"),
    )
}

/// The container `file` without its circuit's record: a version 3 container of the same
/// payload.
pub fn without_record(mut file: Vec<u8>) -> Vec<u8> {
    let header = Header::from_bytes(&file).expect("valid header");
    let end = HEADER_LEN + usize::try_from(header.payload_len).expect("payload length");
    file.truncate(end);
    let bare = Header {
        record_len: 0,
        ..header
    };
    file[..HEADER_LEN].copy_from_slice(&bare.to_bytes());
    file
}

/// Recomputes the payload checksum and header checksum after a payload edit (as a forger
/// would).
///
/// Works on the bytes (either header version), whatever the other header fields hold, so a
/// forged `k`, length, kind or mode reaches the decoder; does nothing unless the file starts
/// with the magic and a known version.
pub fn refresh_checksums(file: &mut [u8]) {
    let Ok(len) = Header::len_of(file) else {
        return;
    };
    if file.len() < len {
        return;
    }
    let (head, payload) = file.split_at_mut(len);
    head[32..40].copy_from_slice(&XxHash3_64::oneshot(payload).to_le_bytes());
    let checksum = XxHash3_64::oneshot(&head[..len - 8]);
    head[len - 8..].copy_from_slice(&checksum.to_le_bytes());
}

/// Edits header fields and rewrites the header (in the version this build writes, which must
/// be the file's) with a valid header checksum.
pub fn rewrite_header(file: &mut [u8], edit: impl FnOnce(&mut Header)) {
    let mut header = Header::from_bytes(file).expect("valid header");
    edit(&mut header);
    file[..HEADER_LEN].copy_from_slice(&header.to_bytes());
}

/// Files in `dir` that look like keycodec temporaries.
pub fn leftover_temp_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"))
        .count()
}
