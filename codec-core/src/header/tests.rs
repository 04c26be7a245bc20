use super::*;

fn sample() -> Header {
    Header {
        codec: CodecId::new(1),
        mode: 0,
        kind: ArtifactKind::Proving,
        k: 12,
        payload_len: 123_456,
        payload_checksum: 0xdead_beef,
        fingerprint: Fingerprint([7; 16]),
        digest: Some(KeyDigest([9; 32])),
        written_by: Some(WrittenBy::this_build()),
        record_len: 0,
    }
}

/// A header with a record after its payload is version 4; the length round-trips, and
/// a version 3 header with a record length, or a version 4 one without, is refused.
#[test]
fn a_record_makes_version_4() {
    let with_record = Header {
        record_len: 77,
        ..sample()
    };
    let bytes = with_record.to_bytes();
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 4);
    assert_eq!(Header::from_bytes(&bytes).unwrap(), with_record);
    assert_eq!(
        with_record.container_len(HEADER_LEN),
        128 + 123_456 + 77 + 8
    );
    assert_eq!(u16::from_le_bytes([sample().to_bytes()[8], 0]), 3);
    for (version, record_len) in [(3u16, 77u32), (4, 0)] {
        let mut forged = sample().to_bytes();
        forged[8..10].copy_from_slice(&version.to_le_bytes());
        forged[20..24].copy_from_slice(&record_len.to_le_bytes());
        let checksum = xxh3_64(&forged[..120]);
        forged[120..].copy_from_slice(&checksum.to_le_bytes());
        assert!(
            matches!(
                Header::from_bytes(&forged),
                Err(Error::ReservedField { .. })
            ),
            "version {version}, record {record_len}"
        );
    }
}

#[test]
fn a_record_longer_than_the_format_allows_is_refused_at_the_header() {
    let limit = crate::record::MAX_RECORD_BYTES as u32;
    let at_limit = Header {
        record_len: limit,
        ..sample()
    };
    assert_eq!(
        Header::from_bytes(&at_limit.to_bytes()).ok(),
        Some(at_limit)
    );
    let over = Header {
        record_len: limit + 1,
        ..sample()
    };
    assert!(matches!(
        Header::from_bytes(&over.to_bytes()),
        Err(Error::Malformed(_))
    ));
}

#[test]
fn header_round_trips() {
    let header = sample();
    assert_eq!(Header::from_bytes(&header.to_bytes()).ok(), Some(header));
}

#[test]
fn header_layout_is_stable() {
    let bytes = sample().to_bytes();
    assert_eq!(bytes.get(..8), Some(&MAGIC[..]));
    assert_eq!(bytes.get(8..10), Some(&[3u8, 0][..]));
    assert_eq!(bytes.get(88..105), Some(&b"halo2-axiom 0.5.3"[..]));
    assert_eq!(bytes.get(105..112), Some(&[0u8; 7][..]));
    assert_eq!(bytes.get(56..88), Some(&[9u8; 32][..]));
    assert_eq!(bytes.get(16..20), Some(&12u32.to_le_bytes()[..]));
    assert_eq!(bytes.get(24..32), Some(&123_456u64.to_le_bytes()[..]));
}

#[test]
fn every_header_bit_flip_is_rejected() {
    let bytes = sample().to_bytes();
    for bit in 0..HEADER_LEN * 8 {
        let mut flipped = bytes;
        if let Some(byte) = flipped.get_mut(bit / 8) {
            *byte ^= 1 << (bit % 8);
        }
        let result = Header::from_bytes(&flipped);
        assert!(
            matches!(
                result,
                Err(Error::BadMagic | Error::UnsupportedVersion { .. } | Error::HeaderChecksum)
            ),
            "bit {bit}: {result:?}"
        );
    }
}

#[test]
fn wrong_curve_is_named() {
    let mut bytes = sample().to_bytes();
    bytes[13] = 2;
    let checksum = xxh3_64(&bytes[..120]);
    bytes[120..].copy_from_slice(&checksum.to_le_bytes());
    assert!(matches!(
        Header::from_bytes(&bytes),
        Err(Error::CurveMismatch { found: 2 })
    ));
}

/// The writer's versions read back; the halo2 crate named is the one the lock file pins.
#[test]
fn headers_say_who_wrote_them() {
    let header = Header::from_bytes(&sample().to_bytes()).ok();
    let written_by = header.and_then(|header| header.written_by);
    assert_eq!(
        written_by.map(|w| w.halo2().to_owned()).as_deref(),
        Some(HALO2_CRATE)
    );
    assert_eq!(
        written_by.map(|w| w.keycodec().to_owned()).as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
        .unwrap_or_default();
    let pinned = lock
        .split("[[package]]")
        .find(|entry| entry.contains("name = \"halo2-axiom\""))
        .and_then(|entry| entry.split("version = \"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .map(|version| format!("halo2-axiom {version}"));
    assert_eq!(
        pinned.as_deref(),
        Some(HALO2_CRATE),
        "HALO2_CRATE names the pinned halo2"
    );
}

/// A version 2 header (96 bytes, no writer) still decodes.
#[test]
fn version_2_headers_are_read() {
    let mut v2 = [0u8; HEADER_LEN_V2];
    let v3 = sample().to_bytes();
    v2[..88].copy_from_slice(&v3[..88]);
    v2[8..10].copy_from_slice(&2u16.to_le_bytes());
    let checksum = xxh3_64(&v2[..88]);
    v2[88..].copy_from_slice(&checksum.to_le_bytes());
    let header = Header::from_bytes(&v2).ok();
    assert_eq!(Header::len_of(&v2).ok(), Some(HEADER_LEN_V2));
    assert_eq!(
        header.map(|h| (h.digest, h.written_by)),
        Some((sample().digest, None))
    );
}

/// A version 1 header (64 bytes, no digest) still decodes.
#[test]
fn version_1_headers_are_read() {
    let mut v1 = [0u8; HEADER_LEN_V1];
    v1[..8].copy_from_slice(&MAGIC);
    v1[8] = 1;
    v1[10..14].copy_from_slice(&[1, 0, 1, CURVE_BN254]);
    v1[16..20].copy_from_slice(&12u32.to_le_bytes());
    v1[24..32].copy_from_slice(&123_456u64.to_le_bytes());
    v1[32..40].copy_from_slice(&0xdead_beef_u64.to_le_bytes());
    v1[40..56].copy_from_slice(&[7; 16]);
    let checksum = xxh3_64(&v1[..56]);
    v1[56..].copy_from_slice(&checksum.to_le_bytes());
    assert_eq!(Header::len_of(&v1).ok(), Some(HEADER_LEN_V1));
    let header = Header::from_bytes(&v1).unwrap();
    assert_eq!(
        header,
        Header {
            digest: None,
            written_by: None,
            ..sample()
        }
    );
    // The digest flag does not exist in version 1.
    v1[14] = 1;
    let checksum = xxh3_64(&v1[..56]);
    v1[56..].copy_from_slice(&checksum.to_le_bytes());
    assert!(matches!(
        Header::from_bytes(&v1),
        Err(Error::ReservedField { .. })
    ));
}

#[test]
fn newer_version_is_named() {
    let mut bytes = sample().to_bytes();
    bytes[8] = 9;
    assert!(matches!(
        Header::from_bytes(&bytes),
        Err(Error::UnsupportedVersion {
            found: 9,
            supported: 4
        })
    ));
}

#[test]
fn a_payload_checksum_hashes_its_range_and_reports_every_step() {
    use std::io::Write;
    // Over one 4 MiB step, so that it takes two.
    let bytes: Vec<u8> = (0..(4 << 20) + 1000u32).map(|i| (i % 251) as u8).collect();
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&bytes).unwrap();
    let (at, len) = (7u64, bytes.len() as u64 - 20);
    let mut steps = Vec::new();
    let found = payload_checksum(&file, at, len, &mut |step| steps.push(step)).unwrap();
    assert_eq!(found, crate::xxh3::xxh3_64(&bytes[7..bytes.len() - 13]));
    assert_eq!(steps, vec![4 << 20, len - (4 << 20)]);
    assert_eq!(
        payload_checksum(&file, 0, 0, &mut |_| panic!("no step")).unwrap(),
        crate::xxh3::xxh3_64(&[])
    );
    // A file that ends first.
    let short = payload_checksum(&file, at, bytes.len() as u64, &mut |_| {});
    assert_eq!(short.unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
}
