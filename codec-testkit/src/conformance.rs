//! The conformance kit: every backend must pass every case here.
//!
//! A backend's test file runs them all with one line, `keycodec_testkit::conformance_tests!(codec);`,
//! which expands to one `#[test]` per case so that a failure names its case.

use keycodec_core::record::RecordableParams;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use halo2_proofs::plonk::{Circuit, ProvingKey, VerifyingKey};
use halo2_proofs::poly::kzg::commitment::ParamsKZG;
use halo2curves::bn256::{Bn256, Fr, G1Affine};
use xxhash_rust::xxh3::xxh3_64;

use crate::{halo2_lib, lookup, pk_bytes, prove_and_verify, standard_plonk, vk_bytes, Fixture};
use crate::{LookupCircuit, StandardPlonk, STANDARD_PLONK_K};
use keycodec_core::backend_api::{DecodeContext, Key, KeyRef, PayloadReader};
use keycodec_core::header::{Header, HEADER_LEN};
use keycodec_core::{
    Checksum, CodecId, Error, KeyCodec, KeyCodecExt, KeyDigest, LoadOptions, Result, SaveOptions,
    Validation, WireMode,
};

type Pk = ProvingKey<G1Affine>;
type Vk = VerifyingKey<G1Affine>;

/// Runs every case against `codec`, one `#[test]` each.
#[macro_export]
macro_rules! conformance_tests {
    ($codec:expr) => {
        $crate::conformance_tests!(@cases $codec;
            round_trip_real_keys,
            round_trip_through_files,
            trusted_mode_round_trips,
            every_truncation_is_an_error,
            every_bit_flip_is_detected,
            damaged_files_are_refused,
            skipping_the_checksum_is_explicit,
            forged_corruption_never_panics,
            wrong_circuit_is_refused,
            wrong_codec_is_refused,
            wrong_kind_is_refused,
            wrong_k_is_refused,
            trailing_bytes_are_refused,
            empty_and_short_inputs_are_truncated,
            huge_declared_payload_is_refused,
            failed_save_keeps_previous_file,
            pinned_loads_check_the_key_digest_from_every_source,
            a_verifying_key_loads_from_a_proving_keys_file,
            a_forged_recorded_digest_is_refused_when_the_digest_is_computed
        );
        #[cfg(unix)]
        $crate::conformance_tests!(@cases $codec;
            a_file_changed_while_it_loads_is_refused_or_loads_as_it_was,
            a_file_changed_by_another_thread_never_loads_other_bytes
        );
    };
    (@cases $codec:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                $crate::conformance::$case(&$codec);
            }
        )*
    };
}

fn check_fixture<K: KeyCodec + ?Sized, C: Circuit<Fr, Params = ()>>(
    codec: &K,
    fixture: &Fixture<C>,
    options: &LoadOptions,
) {
    check_keys(
        codec,
        (&fixture.params, &fixture.pk),
        &fixture.circuit,
        &fixture.instances,
        options,
    );
}

/// A key of `circuit` round-trips through memory and a stream (its verifying key alone too)
/// and proves with what was loaded.
fn check_keys<K: KeyCodec + ?Sized, C: Circuit<Fr>>(
    codec: &K,
    (params, pk): (&ParamsKZG<Bn256>, &Pk),
    circuit: &C,
    instances: &[Vec<Fr>],
    options: &LoadOptions,
) where
    C::Params: RecordableParams,
{
    let bytes = codec
        .to_vec::<C, _>(pk, circuit.params())
        .expect("encode pk");
    let loaded: Pk = codec
        .read_slice::<C, _>(&bytes, circuit.params(), options)
        .expect("decode pk");
    assert_eq!(
        pk_bytes(&loaded),
        pk_bytes(pk),
        "pk differs after round trip"
    );
    assert_eq!(
        vk_bytes(loaded.get_vk()),
        vk_bytes(pk.get_vk()),
        "embedded vk differs"
    );

    let vk_file = codec
        .to_vec::<C, _>(pk.get_vk(), circuit.params())
        .expect("encode vk");
    let loaded_vk: Vk = codec
        .read_slice::<C, _>(&vk_file, circuit.params(), options)
        .expect("decode vk");
    assert_eq!(
        vk_bytes(&loaded_vk),
        vk_bytes(pk.get_vk()),
        "vk differs after round trip"
    );

    let streamed: Pk = codec
        .read::<C, _>(&mut bytes.as_slice(), circuit.params(), options)
        .expect("read pk");
    assert_eq!(pk_bytes(&streamed), pk_bytes(pk), "streamed pk differs");

    prove_and_verify(params, &loaded, &loaded_vk, circuit, instances)
        .expect("a proof made with the loaded pk verifies against the loaded vk");
}

/// Real keys of the test circuits (StandardPlonk, a lookup circuit, a halo2-lib circuit)
/// round-trip exactly (halo2 `RawBytes` equality, transcript representation included), and a
/// proof made with the loaded proving key verifies against the loaded verifying key.
pub fn round_trip_real_keys<K: KeyCodec + ?Sized>(codec: &K) {
    check_fixture(codec, standard_plonk(), &LoadOptions::default());
    check_fixture(codec, lookup(), &LoadOptions::default());
    let fixture = halo2_lib();
    check_keys(
        codec,
        (&fixture.params, &fixture.pk),
        &fixture.prover(),
        &[],
        &LoadOptions::default(),
    );
}

/// `save` then `load` through the file system, including saving over an existing file.
pub fn round_trip_through_files<K: KeyCodec + ?Sized>(codec: &K) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("key.pk");
    let fixture = lookup();
    let plonk = standard_plonk();
    // First a different key, then the real one over it: the second save replaces the first.
    codec
        .save::<StandardPlonk, _>(&path, &plonk.pk, (), &SaveOptions::default())
        .expect("save");
    codec
        .save::<LookupCircuit, _>(&path, &fixture.pk, (), &SaveOptions::default())
        .expect("save over");
    let loaded: Pk = codec
        .load::<LookupCircuit, _>(&path, (), &LoadOptions::default())
        .expect("load");
    assert_eq!(pk_bytes(&loaded), pk_bytes(&fixture.pk));
    assert_eq!(leftover_temp_files(dir.path()), 0);
}

/// Loading with [`Validation::Trusted`] yields the same key.
pub fn trusted_mode_round_trips<K: KeyCodec + ?Sized>(codec: &K) {
    let options = LoadOptions {
        validation: Validation::Trusted,
        ..LoadOptions::default()
    };
    check_fixture(codec, standard_plonk(), &options);
}

/// Every prefix of a small proving-key file is an error: [`Error::Truncated`] from a stream,
/// and `Truncated` or [`Error::LengthMismatch`] from a slice (whose real length is known).
pub fn every_truncation_is_an_error<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let options = LoadOptions::default();
    for end in 0..file.len() {
        let prefix = &file[..end];
        let streamed = codec.read::<StandardPlonk, Pk>(&mut &prefix[..], (), &options);
        assert!(
            matches!(streamed, Err(Error::Truncated { .. })),
            "stream prefix of {end} bytes: {:?}",
            streamed.err()
        );
        let sliced = codec.read_slice::<StandardPlonk, Pk>(prefix, (), &options);
        assert!(
            matches!(
                sliced,
                Err(Error::Truncated { .. } | Error::LengthMismatch { .. })
            ),
            "slice prefix of {end} bytes: {:?}",
            sliced.err()
        );
    }
}

/// Every single-bit flip of a small proving-key file is reported as corruption (header or
/// payload checksum, magic, version): none loads.
pub fn every_bit_flip_is_detected<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let options = LoadOptions::default();
    for bit in 0..file.len() * 8 {
        let mut flipped = file.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = codec.read_slice::<StandardPlonk, Pk>(&flipped, (), &options);
        assert!(
            reported_as_corruption(&result),
            "bit {bit}: {:?}",
            result.err()
        );
    }
}

/// The same damage through [`KeyCodecExt::load`] of a file (the path real users take: for
/// buffered codecs, parallel positioned reads straight into the key): a sample of single-bit
/// flips is reported as corruption, a sample of truncations as a length error, and forged
/// bytes behind valid checksums never panic.
pub fn damaged_files_are_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("damaged.key");
    let options = LoadOptions::default();
    let load = |bytes: &[u8]| {
        std::fs::write(&path, bytes).expect("write");
        codec.load::<StandardPlonk, Pk>(&path, (), &options)
    };
    let bits = file.len() * 8;
    for bit in (0..bits).step_by((bits / 256).max(1)) {
        let mut flipped = file.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = load(&flipped);
        assert!(
            reported_as_corruption(&result),
            "bit {bit}: {:?}",
            result.err()
        );
    }
    for end in (0..file.len()).step_by((file.len() / 64).max(1)) {
        let result = load(&file[..end]);
        assert!(
            matches!(
                result,
                Err(Error::Truncated { .. } | Error::LengthMismatch { .. })
            ),
            "prefix of {end} bytes: {:?}",
            result.err()
        );
    }
    for offset in (HEADER_LEN..file.len()).step_by(((file.len() - HEADER_LEN) / 64).max(1)) {
        for value in [0x00, 0xff, 0x80] {
            let mut forged = file.clone();
            forged[offset] = value;
            refresh_checksums(&mut forged);
            // Either outcome is fine; reaching this line (no panic) is the test.
            let _ = load(&forged);
        }
    }
}

/// Whether a load of a bit-flipped file failed the way corruption must: a checksum, the
/// magic or the version (the header fields checked before its checksum).
pub fn reported_as_corruption<T>(result: &Result<T>) -> bool {
    matches!(
        result,
        Err(Error::HeaderChecksum
            | Error::PayloadChecksum { .. }
            | Error::BadMagic
            | Error::UnsupportedVersion { .. })
    )
}

/// With [`Checksum::Skip`] a payload whose recorded checksum is wrong still loads (the
/// caller vouched for it); by default the same file is refused.
pub fn skipping_the_checksum_is_explicit<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    rewrite_header(&mut file, |header| header.payload_checksum ^= 1);
    let refused = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
    assert!(
        matches!(refused, Err(Error::PayloadChecksum { .. })),
        "{:?}",
        refused.err()
    );
    let skip = LoadOptions {
        checksum: Checksum::Skip,
        ..LoadOptions::default()
    };
    let loaded = codec
        .read_slice::<StandardPlonk, Pk>(&file, (), &skip)
        .expect("skip: slice");
    assert_eq!(pk_bytes(&loaded), pk_bytes(&standard_plonk().pk));
    let streamed = codec
        .read::<StandardPlonk, Pk>(&mut file.as_slice(), (), &skip)
        .expect("skip: stream");
    assert_eq!(pk_bytes(&streamed), pk_bytes(&standard_plonk().pk));
}

/// Corruption behind a *valid* checksum (a forger's file) never panics the decoder. Flips one
/// bit in each of a spread of payload bytes and in every byte of the first 1 KiB, then fixes
/// the checksum; each load must return (an error, or a key of the right shape).
pub fn forged_corruption_never_panics<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let payload_len = file.len() - HEADER_LEN;
    let step = (payload_len / 512).max(1);
    let positions = (0..payload_len.min(1024)).chain((1024..payload_len).step_by(step));
    for validation in [Validation::Checked, Validation::Trusted] {
        let options = LoadOptions {
            validation,
            ..LoadOptions::default()
        };
        for (n, offset) in positions.clone().enumerate() {
            let mut forged = file.clone();
            forged[HEADER_LEN + offset] ^= 1 << (n % 8);
            refresh_checksums(&mut forged);
            let result = catch_unwind(AssertUnwindSafe(|| {
                codec.read_slice::<StandardPlonk, Pk>(&forged, (), &options)
            }));
            match result {
                Err(_) => panic!("decoder panicked on payload byte {offset} ({validation:?})"),
                Ok(Ok(pk)) => assert_eq!(pk.get_vk().get_domain().k(), STANDARD_PLONK_K),
                Ok(Err(_)) => {}
            }
        }
    }
}

/// A key saved for one circuit does not load as another: [`Error::CircuitMismatch`].
pub fn wrong_circuit_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let result = codec.read_slice::<LookupCircuit, Pk>(&file, (), &LoadOptions::default());
    assert!(
        matches!(result, Err(Error::CircuitMismatch { .. })),
        "{:?}",
        result.err()
    );
}

/// A file naming another codec is refused with [`Error::CodecMismatch`] naming both.
pub fn wrong_codec_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    let other = CodecId::new(codec.id().byte().wrapping_add(1));
    rewrite_header(&mut file, |header| header.codec = other);
    let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
    match result {
        Err(Error::CodecMismatch {
            expected,
            expected_name,
            found,
        }) => {
            assert_eq!(expected, codec.id());
            assert_eq!(expected_name, codec.name());
            assert_eq!(found, other);
        }
        other => panic!("expected CodecMismatch, got {:?}", other.err()),
    }
}

/// A proving-key file does not load as a verifying key, nor the reverse.
pub fn wrong_kind_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let fixture = standard_plonk();
    let options = LoadOptions::default();
    let pk_file = codec
        .to_vec::<StandardPlonk, _>(&fixture.pk, ())
        .expect("encode");
    let vk_file = codec
        .to_vec::<StandardPlonk, _>(fixture.vk(), ())
        .expect("encode");
    let as_vk = codec.read_slice::<StandardPlonk, Vk>(&pk_file, (), &options);
    assert!(
        matches!(as_vk, Err(Error::KindMismatch { .. })),
        "{:?}",
        as_vk.err()
    );
    let as_pk = codec.read_slice::<StandardPlonk, Pk>(&vk_file, (), &options);
    assert!(
        matches!(as_pk, Err(Error::KindMismatch { .. })),
        "{:?}",
        as_pk.err()
    );
}

/// A caller expecting another `k` gets [`Error::KMismatch`]; a forged impossible `k` gets
/// [`Error::KOutOfRange`].
pub fn wrong_k_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    let options = LoadOptions {
        expected_k: Some(STANDARD_PLONK_K + 1),
        ..LoadOptions::default()
    };
    let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &options);
    assert!(
        matches!(result, Err(Error::KMismatch { expected, found }) if expected == STANDARD_PLONK_K + 1 && found == STANDARD_PLONK_K),
        "{:?}",
        result.err()
    );
    for k in [0, 29, 64, u32::MAX] {
        rewrite_header(&mut file, |header| header.k = k);
        let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
        assert!(
            matches!(result, Err(Error::KOutOfRange { .. })),
            "k={k}: {:?}",
            result.err()
        );
    }
}

/// Bytes after a complete container are refused (slice and file).
pub fn trailing_bytes_are_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    file.push(0);
    let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
    assert!(
        matches!(result, Err(Error::TrailingBytes { count: 1 })),
        "{:?}",
        result.err()
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trailing.pk");
    std::fs::write(&path, &file).expect("write");
    let result = codec.load::<StandardPlonk, Pk>(&path, (), &LoadOptions::default());
    assert!(
        matches!(result, Err(Error::TrailingBytes { count: 1 })),
        "{:?}",
        result.err()
    );
}

/// An empty input, or one shorter than the header, is [`Error::Truncated`]; a header with
/// wrong magic is [`Error::BadMagic`].
pub fn empty_and_short_inputs_are_truncated<K: KeyCodec + ?Sized>(codec: &K) {
    let options = LoadOptions::default();
    for input in [&[][..], &[0x89u8; 10][..], &[0u8; HEADER_LEN - 1][..]] {
        let result = codec.read_slice::<StandardPlonk, Pk>(input, (), &options);
        assert!(
            matches!(result, Err(Error::Truncated { .. })),
            "{:?}",
            result.err()
        );
    }
    let mut file = small_pk_file(codec);
    file[0] = b'P';
    let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &options);
    assert!(matches!(result, Err(Error::BadMagic)), "{:?}", result.err());
}

/// A header declaring a payload of `u64::MAX` (or just above the limit) is refused before
/// anything is allocated, from a slice and from a stream.
pub fn huge_declared_payload_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    let options = LoadOptions::default();
    rewrite_header(&mut file, |header| header.payload_len = u64::MAX);
    let sliced = codec.read_slice::<StandardPlonk, Pk>(&file, (), &options);
    assert!(
        matches!(sliced, Err(Error::LimitExceeded { .. })),
        "{:?}",
        sliced.err()
    );
    let limit = options.limits.max_payload_bytes;
    rewrite_header(&mut file, |header| header.payload_len = limit + 1);
    let streamed = codec.read::<StandardPlonk, Pk>(&mut file.as_slice(), (), &options);
    assert!(
        matches!(streamed, Err(Error::LimitExceeded { .. })),
        "{:?}",
        streamed.err()
    );
    // Within the limit but beyond the real data: a slice knows, a stream runs dry.
    rewrite_header(&mut file, |header| header.payload_len = limit);
    let sliced = codec.read_slice::<StandardPlonk, Pk>(&file, (), &options);
    assert!(
        matches!(sliced, Err(Error::LengthMismatch { .. })),
        "{:?}",
        sliced.err()
    );
    let streamed = codec.read::<StandardPlonk, Pk>(&mut file.as_slice(), (), &options);
    assert!(
        streamed.is_err(),
        "a stream shorter than its declared payload must fail"
    );
}

/// A save that fails midway (an I/O error, or a panic inside the encoder) leaves the previous
/// file intact and no temporary file behind.
pub fn failed_save_keeps_previous_file<K: KeyCodec + ?Sized>(codec: &K) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("key.pk");
    let fixture = standard_plonk();
    codec
        .save::<StandardPlonk, _>(&path, &fixture.pk, (), &SaveOptions::default())
        .expect("save");
    let before = std::fs::read(&path).expect("read");

    for failure in [Failure::IoError, Failure::Panic] {
        let failing = FailingCodec {
            inner: codec,
            fail_after: before.len() / 2,
            failure,
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            failing.save::<StandardPlonk, _>(&path, &fixture.pk, (), &SaveOptions::default())
        }));
        match (failure, result) {
            (Failure::IoError, Ok(Err(Error::Io { .. }))) | (Failure::Panic, Err(_)) => {}
            (_, other) => panic!(
                "{failure:?}: unexpected outcome {:?}",
                other.map(|r| r.err())
            ),
        }
        assert_eq!(
            std::fs::read(&path).expect("read"),
            before,
            "{failure:?} changed the file"
        );
        assert_eq!(
            leftover_temp_files(dir.path()),
            0,
            "{failure:?} left a temp file"
        );
    }
    // A save into a folder that does not exist fails cleanly.
    let missing = dir.path().join("missing").join("key.pk");
    let result = codec.save::<StandardPlonk, _>(&missing, &fixture.pk, (), &SaveOptions::default());
    match result {
        Err(Error::Io {
            path: Some(named), ..
        }) => assert_eq!(named, missing.parent().unwrap()),
        other => panic!(
            "expected an I/O error naming the folder, got {:?}",
            other.err()
        ),
    }
}

#[cfg(unix)]
/// How a file is changed under a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// Cut to half its length (`truncate`, a writer's `File::create` before it writes).
    Truncate,
    /// Every payload byte flipped in place, same length (`cp` over it, a rewrite through an
    /// NFS or FUSE mount).
    Rewrite,
}

#[cfg(unix)]
/// How the loader reads the file.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// [`KeyCodecExt::load`]'s reader: positioned reads, parallel for bulk data.
    Positioned,
    /// [`KeyCodecExt::read`] of the open file: a stream.
    Stream,
}

#[cfg(unix)]
/// A file that changes on disk when its `change_at`-th read starts (a deterministic
/// stand-in for another process writing it during a load).
struct ChangingFile {
    file: std::fs::File,
    path: std::path::PathBuf,
    change: Change,
    change_at: usize,
    reads: std::sync::atomic::AtomicUsize,
    position: u64,
}

#[cfg(unix)]
impl ChangingFile {
    fn before_read(&self) {
        let index = self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if index == self.change_at {
            apply(&self.path, self.change);
        }
    }
}

#[cfg(unix)]
/// Changes the file at `path` in place (the same inode a reader has open).
/// Truncates the file to half, or rewrites its payload (every byte flipped).
fn apply(path: &Path, change: Change) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open to change");
    let len = file.metadata().expect("metadata").len();
    match change {
        Change::Truncate => file.set_len(len / 2).expect("truncate"),
        Change::Rewrite => {
            use std::os::unix::fs::FileExt;
            let mut payload = vec![0u8; (len - HEADER_LEN as u64) as usize];
            file.read_exact_at(&mut payload, HEADER_LEN as u64)
                .expect("read to rewrite");
            payload.iter_mut().for_each(|byte| *byte ^= 0x5a);
            file.write_all_at(&payload, HEADER_LEN as u64)
                .expect("rewrite");
        }
    }
}

#[cfg(unix)]
impl keycodec_core::transport::ReadAt for ChangingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.before_read();
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.before_read();
        std::os::unix::fs::FileExt::read_at(&self.file, buf, offset)
    }
}

#[cfg(unix)]
impl std::io::Read for ChangingFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.before_read();
        let n = std::os::unix::fs::FileExt::read_at(&self.file, buf, self.position)?;
        self.position += n as u64;
        Ok(n)
    }
}

#[cfg(unix)]
/// A proving key, its digest computed (its pieces hashed as they are read).
#[cfg(unix)]
fn digest_request() -> keycodec_core::transport::Request {
    keycodec_core::transport::Request {
        digest: true,
        ..keycodec_core::transport::Request::of(keycodec_core::ArtifactKind::Proving)
    }
}

/// Loads `path` while it changes at its `change_at`-th read; returns the outcome and how
/// many reads the load made.
fn load_while_changing<K: KeyCodec + ?Sized>(
    codec: &K,
    path: &Path,
    mode: Mode,
    change: Change,
    change_at: usize,
    options: &LoadOptions,
) -> (Result<Pk>, usize) {
    let mut file = ChangingFile {
        file: std::fs::File::open(path).expect("open"),
        path: path.to_path_buf(),
        change,
        change_at,
        reads: std::sync::atomic::AtomicUsize::new(0),
        position: 0,
    };
    let len = file.file.metadata().expect("metadata").len();
    let cs = keycodec_core::backend_api::circuit::configure::<StandardPlonk>(());
    let result = match mode {
        Mode::Positioned => {
            let input = keycodec_core::transport::Input::At {
                source: &file,
                len,
                buffer: options.buffers.file_read_capacity(),
            };
            // The key's digest is computed too: its pieces are hashed as they are read.
            keycodec_core::transport::read(
                codec,
                digest_request(),
                Some(cs.clone()),
                input,
                options,
            )
        }
        Mode::Stream => {
            let input = keycodec_core::transport::Input::Stream(&mut file);
            keycodec_core::transport::read(
                codec,
                digest_request(),
                Some(cs.clone()),
                input,
                options,
            )
        }
    }
    .and_then(|decoded| match decoded.item {
        keycodec_core::transport::Item::Key(key) => <Pk as keycodec_core::HaloKey>::from_key(key),
        keycodec_core::transport::Item::Params(_) => panic!("parameters decoded for a key"),
    });
    let reads = file.reads.load(std::sync::atomic::Ordering::SeqCst);
    (result, reads)
}

#[cfg(unix)]
/// A file truncated, or rewritten in place, while it loads, at every read of the load in
/// turn, through positioned reads and as a stream, checked and trusted (small buffers, so
/// that a load makes many reads): the load returns the original key or an error, and when
/// the rewrite came before a read it is an error. No key is ever built from bytes other
/// than the checksummed ones.
pub fn a_file_changed_while_it_loads_is_refused_or_loads_as_it_was<K: KeyCodec + ?Sized>(
    codec: &K,
) {
    let original = small_pk_file(codec);
    let expected = pk_bytes(&standard_plonk().pk);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("changing.pk");
    for validation in [Validation::Checked, Validation::Trusted] {
        let options = LoadOptions {
            buffers: keycodec_core::BufferConfig::both(keycodec_core::Size(256)),
            validation,
            ..LoadOptions::default()
        };
        for mode in [Mode::Positioned, Mode::Stream] {
            std::fs::write(&path, &original).expect("write");
            let (untouched, reads) =
                load_while_changing(codec, &path, mode, Change::Rewrite, usize::MAX, &options);
            let untouched = untouched.expect("the unchanged file loads");
            assert_eq!(pk_bytes(&untouched), expected);
            assert!(reads >= 2, "{mode:?}: only {reads} reads");
            for change in [Change::Truncate, Change::Rewrite] {
                for change_at in 0..reads {
                    std::fs::write(&path, &original).expect("write");
                    let (result, _) =
                        load_while_changing(codec, &path, mode, change, change_at, &options);
                    let case = format!("{mode:?} {validation:?} {change:?} at read {change_at}");
                    match result {
                        Ok(pk) => {
                            assert_eq!(pk_bytes(&pk), expected, "{case}: another key loaded");
                            assert_ne!(change_at, 0, "{case}: the changed file loaded");
                        }
                        Err(err) => assert!(!matches!(err, Error::Internal(_)), "{case}: {err}"),
                    }
                }
            }
        }
    }
}

#[cfg(unix)]
/// The same with real threads through [`KeyCodecExt::load`] and [`KeyCodecExt::read`]: the
/// file is truncated or rewritten at spread-out moments during loads of a larger key; every
/// load returns the original key or an error. Each round records when the file began to
/// change and when the load began and ended: for each way of loading and each change, at
/// least 6 rounds (of at most 60) must have changed the file while the load ran, or the test
/// proves nothing.
pub fn a_file_changed_by_another_thread_never_loads_other_bytes<K: KeyCodec + ?Sized>(codec: &K) {
    // Delays of 0 to 11 twelfths of a load; at least `DURING` changes of each kind must land
    // while a load runs, within `MAX_ROUNDS` rounds.
    const STEPS: u32 = 12;
    const DURING: u32 = 6;
    const MAX_ROUNDS: u32 = 60;
    let fixture = crate::standard_plonk_k10();
    let original = codec
        .to_vec::<StandardPlonk, _>(&fixture.pk, ())
        .expect("encode the k = 10 key");
    let expected = pk_bytes(&fixture.pk);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("changing.pk");
    let options = LoadOptions::default();
    let load = |mode: Mode| -> Result<Pk> {
        match mode {
            Mode::Positioned => codec.load::<StandardPlonk, Pk>(&path, (), &options),
            Mode::Stream => {
                let mut file = std::fs::File::open(&path).expect("open");
                codec.read::<StandardPlonk, Pk>(&mut file, (), &options)
            }
        }
    };
    // The rewritten payload, made before any load so that a change is one system call.
    let mut rewritten = original.get(HEADER_LEN..).expect("a payload").to_vec();
    rewritten.iter_mut().for_each(|byte| *byte ^= 0x5a);
    let change_now = |change: Change| {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open to change");
        let at = std::time::Instant::now();
        match change {
            Change::Truncate => file.set_len(original.len() as u64 / 2).expect("truncate"),
            Change::Rewrite => file
                .write_all_at(&rewritten, HEADER_LEN as u64)
                .expect("rewrite"),
        }
        at
    };
    for mode in [Mode::Positioned, Mode::Stream] {
        // How long a load takes here: the fastest of three unchanged loads.
        let mut full = std::time::Duration::MAX;
        for _ in 0..3 {
            std::fs::write(&path, &original).expect("write");
            let started = std::time::Instant::now();
            assert_eq!(pk_bytes(&load(mode).expect("unchanged")), expected);
            full = full.min(started.elapsed());
        }
        let (mut rounds, mut during, mut refused) = (0u32, 0u32, 0u32);
        for change in [Change::Truncate, Change::Rewrite] {
            // Rounds until enough changes landed while a load ran, each delay a fraction of
            // the last load's time (which moves with the machine's load).
            let (mut last, mut landed) = (full, 0u32);
            for step in 0..MAX_ROUNDS {
                if landed >= DURING {
                    break;
                }
                std::fs::write(&path, &original).expect("write");
                let delay = last * (step % STEPS) / STEPS;
                let (result, began, ended, changed) = std::thread::scope(|scope| {
                    let changer = scope.spawn(|| {
                        std::thread::sleep(delay);
                        change_now(change)
                    });
                    let began = std::time::Instant::now();
                    let result = load(mode);
                    let ended = std::time::Instant::now();
                    (result, began, ended, changer.join().expect("the changer"))
                });
                rounds += 1;
                last = ended - began;
                let case = format!("{mode:?} {change:?} after {delay:?}");
                if began < changed && changed < ended {
                    landed += 1;
                }
                match result {
                    Ok(pk) => assert_eq!(pk_bytes(&pk), expected, "{case}: another key loaded"),
                    Err(err) => {
                        assert!(!matches!(err, Error::Internal(_)), "{case}: {err}");
                        refused += 1;
                    }
                }
            }
            assert!(
                landed >= DURING,
                "{mode:?} {change:?}: the file changed during only {landed} of {MAX_ROUNDS} \
                 loads; the test must change it while loads run"
            );
            during += landed;
        }
        println!(
            "{mode:?}: the file changed during {during} of {rounds} loads ({refused} refused)"
        );
    }
}

/// Saving returns the key's digest (the same as [`KeyDigest::of_pk`] / [`KeyDigest::of_vk`]
/// compute in memory); a load pinned to it succeeds from a file, a slice and a stream, and
/// reports it; a load pinned to another key's digest, or to another verifying key's
/// `transcript_repr`, is refused.
pub fn pinned_loads_check_the_key_digest_from_every_source<K: KeyCodec + ?Sized>(codec: &K) {
    let fixture = lookup();
    let other = standard_plonk();
    let dir = tempfile::tempdir().expect("tempdir");
    let pk_path = dir.path().join("key.pk");
    let vk_path = dir.path().join("key.vk");
    let pk_digest = codec
        .save::<LookupCircuit, _>(&pk_path, &fixture.pk, (), &SaveOptions::default())
        .expect("save pk");
    let vk_digest = codec
        .save::<LookupCircuit, _>(&vk_path, fixture.vk(), (), &SaveOptions::default())
        .expect("save vk");
    assert_eq!(Some(pk_digest), KeyDigest::of_pk(&fixture.pk).ok());
    assert_eq!(Some(vk_digest), KeyDigest::of_vk(fixture.vk()).ok());
    assert_ne!(pk_digest, vk_digest, "a verifying key has its own digest");
    let wrong = KeyDigest::of_pk(&other.pk).expect("digest");

    let (loaded, reported) = codec
        .load_with_digest::<LookupCircuit, Pk>(&pk_path, (), &LoadOptions::default())
        .expect("load with digest");
    assert_eq!(reported, pk_digest);
    assert_eq!(pk_bytes(&loaded), pk_bytes(&fixture.pk));
    let (_, reported) = codec
        .load_with_digest::<LookupCircuit, Vk>(&vk_path, (), &LoadOptions::default())
        .expect("load vk with digest");
    assert_eq!(reported, vk_digest);

    let bytes = std::fs::read(&pk_path).expect("read");
    for validation in [Validation::Checked, Validation::Trusted] {
        let pinned = |digest| LoadOptions {
            expected_digest: Some(digest),
            validation,
            ..LoadOptions::default()
        };
        let loads = |options: &LoadOptions| {
            [
                codec.load::<LookupCircuit, Pk>(&pk_path, (), options),
                codec.read_slice::<LookupCircuit, Pk>(&bytes, (), options),
                codec.read::<LookupCircuit, Pk>(&mut bytes.as_slice(), (), options),
            ]
        };
        for (source, result) in ["file", "slice", "stream"]
            .iter()
            .zip(loads(&pinned(pk_digest)))
        {
            let pk = result.unwrap_or_else(|err| panic!("{source} {validation:?}: {err}"));
            assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk), "{source}");
        }
        for (source, result) in ["file", "slice", "stream"]
            .iter()
            .zip(loads(&pinned(wrong)))
        {
            assert!(
                matches!(result, Err(Error::DigestMismatch { expected, found, .. }) if expected == wrong && found == pk_digest),
                "{source} {validation:?}: {:?}",
                result.err()
            );
        }
    }
    let transcript = |vk: &Vk| vk.transcript_repr();
    let right = LoadOptions {
        expected_transcript: Some(transcript(fixture.vk())),
        ..LoadOptions::default()
    };
    codec
        .load::<LookupCircuit, Vk>(&vk_path, (), &right)
        .expect("transcript pin");
    codec
        .load::<LookupCircuit, Pk>(&pk_path, (), &right)
        .expect("transcript pin on a proving key");
    let wrong_transcript = LoadOptions {
        expected_transcript: Some(transcript(other.vk())),
        ..LoadOptions::default()
    };
    let refused = codec.load::<LookupCircuit, Vk>(&vk_path, (), &wrong_transcript);
    assert!(
        matches!(refused, Err(Error::TranscriptMismatch { .. })),
        "{:?}",
        refused.err()
    );
}

/// [`KeyCodecExt::load_verifying_key`] reads a verifying key from a proving key's container:
/// the verifying key equals the original, a damaged polynomial region is refused by the
/// checksum unless a pin authenticates the verifying key (then the polynomials are not
/// read) or integrity is skipped, and a damaged verifying key is refused either way.
pub fn a_verifying_key_loads_from_a_proving_keys_file<K: KeyCodec + ?Sized>(codec: &K) {
    let fixture = lookup();
    let dir = tempfile::tempdir().expect("tempdir");
    let pk_path = dir.path().join("key.pk");
    codec
        .save::<LookupCircuit, _>(&pk_path, &fixture.pk, (), &SaveOptions::default())
        .expect("save");
    let plain = LoadOptions::default();
    let vk = codec
        .load_verifying_key::<LookupCircuit>(&pk_path, (), &plain)
        .expect("vk of pk");
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    // A verifying key's own file loads the same way.
    let vk_path = dir.path().join("key.vk");
    codec
        .save::<LookupCircuit, _>(&vk_path, fixture.vk(), (), &SaveOptions::default())
        .expect("save vk");
    let again = codec
        .load_verifying_key::<LookupCircuit>(&vk_path, (), &plain)
        .expect("vk");
    assert_eq!(vk_bytes(&again), vk_bytes(fixture.vk()));

    // The last byte of the file lies after the verifying key in every layout.
    let mut damaged = std::fs::read(&pk_path).expect("read");
    let last = damaged.len() - 1;
    damaged[last] ^= 0x01;
    let damaged_path = dir.path().join("damaged.pk");
    std::fs::write(&damaged_path, &damaged).expect("write");
    let refused = codec.load_verifying_key::<LookupCircuit>(&damaged_path, (), &plain);
    assert!(
        matches!(refused, Err(Error::PayloadChecksum { .. })),
        "{:?}",
        refused.err()
    );
    let pinned = LoadOptions {
        expected_transcript: Some(fixture.vk().transcript_repr()),
        ..LoadOptions::default()
    };
    let vk = codec
        .load_verifying_key::<LookupCircuit>(&damaged_path, (), &pinned)
        .expect("a pinned verifying key needs no polynomials");
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    let skipped = LoadOptions {
        checksum: Checksum::Skip,
        ..LoadOptions::default()
    };
    codec
        .load_verifying_key::<LookupCircuit>(&damaged_path, (), &skipped)
        .expect("integrity skipped");
    // A proving key is still refused from a verifying key's file.
    let as_pk = codec.load::<LookupCircuit, Pk>(&vk_path, (), &plain);
    assert!(matches!(as_pk, Err(Error::KindMismatch { .. })));
}

/// A header whose recorded digest is not its key's (resealed, as a forger would) loads when
/// no digest is computed, and is refused with [`Error::RecordedDigestMismatch`] when one is.
pub fn a_forged_recorded_digest_is_refused_when_the_digest_is_computed<K: KeyCodec + ?Sized>(
    codec: &K,
) {
    let mut file = small_pk_file(codec);
    let forged = KeyDigest([0x42; 32]);
    rewrite_header(&mut file, |header| header.digest = Some(forged));
    let unpinned = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
    assert!(unpinned.is_ok(), "{:?}", unpinned.err());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("forged.pk");
    std::fs::write(&path, &file).expect("write");
    let result = codec.load_with_digest::<StandardPlonk, Pk>(&path, (), &LoadOptions::default());
    assert!(
        matches!(result, Err(Error::RecordedDigestMismatch { recorded, .. }) if recorded == forged),
        "{:?}",
        result.err()
    );
}

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
    head[32..40].copy_from_slice(&xxh3_64(payload).to_le_bytes());
    let checksum = xxh3_64(&head[..len - 8]);
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

#[derive(Clone, Copy, Debug)]
enum Failure {
    IoError,
    Panic,
}

/// Wraps a codec so that encoding fails after `fail_after` payload bytes.
struct FailingCodec<'a, K: ?Sized> {
    inner: &'a K,
    fail_after: usize,
    failure: Failure,
}

impl<K: KeyCodec + ?Sized> KeyCodec for FailingCodec<'_, K> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn id(&self) -> CodecId {
        self.inner.id()
    }

    fn wire_modes(&self) -> &'static [WireMode] {
        self.inner.wire_modes()
    }

    fn wire_mode(&self) -> WireMode {
        self.inner.wire_mode()
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        let mut limited = FailingWriter {
            inner: out,
            left: self.fail_after,
            failure: self.failure,
        };
        self.inner.encode(key, &mut limited)
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        self.inner.decode(input, context)
    }
}

struct FailingWriter<'a> {
    inner: &'a mut dyn Write,
    left: usize,
    failure: Failure,
}

impl Write for FailingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.left {
            match self.failure {
                Failure::IoError => return Err(std::io::Error::other("injected write failure")),
                Failure::Panic => panic!("injected panic inside the encoder"),
            }
        }
        self.left -= buf.len();
        self.inner.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
