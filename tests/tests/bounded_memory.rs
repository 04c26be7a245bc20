//! Tiny files that declare huge sizes must not make a decoder allocate them: every case here
//! runs under a counting global allocator and asserts the peak stays small.
//!
//! This file is its own test binary, and its measurements run one at a time (`peak_during`
//! serialises them), so that no test resets another's peak.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec::Backend;
use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_core::header::HEADER_LEN;
use keycodec_core::{KeyCodecExt, LoadOptions};
use keycodec_testkit::conformance::{refresh_checksums, rewrite_header, without_record};
use keycodec_testkit::{standard_plonk, StandardPlonk};
use keycodec_tests::counting::{peak_during, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What a decoder may allocate on a tiny forged input: bounded pre-allocations and staging
/// buffers, nowhere near the declared sizes (gigabytes to terabytes).
const BOUND: usize = 96 << 20;

type Pk = ProvingKey<G1Affine>;
type Vk = keycodec_core::halo2_proofs::plonk::VerifyingKey<G1Affine>;
/// One way of loading a verifying key.
type Load<'a> = dyn Fn() -> keycodec_core::Result<Vk> + 'a;

fn assert_bounded<T>(case: &str, (result, peak): (keycodec_core::Result<T>, usize)) {
    assert!(result.is_err(), "{case}: a forged input loaded");
    assert!(peak < BOUND, "{case}: peak allocation {peak} bytes");
    println!(
        "{case}: refused ({}), peak {} KiB",
        result.err().map(|e| e.to_string()).unwrap_or_default(),
        peak / 1024
    );
}

#[test]
fn counting_allocator_sees_allocations() {
    let (block, peak) = peak_during(|| vec![1u8; 8 << 20]);
    assert!(peak >= 8 << 20);
    drop(block);
}

#[test]
fn huge_declared_sizes_in_tiny_files_allocate_little() {
    let fixture = standard_plonk();
    let options = LoadOptions::default();

    for backend in Backend::compiled() {
        // Without the circuit's record: the payload ends the file.
        let file = without_record(
            backend
                .codec()
                .unwrap()
                .to_vec::<StandardPlonk, _>(&fixture.pk, ())
                .unwrap(),
        );

        // 1. The header declares a payload of 1 TiB (the default limit) and k = 28; the
        //    stream holds 10 KiB. (The payload's own k disagrees, so also forge nothing else:
        //    the decoder must stop at the first disagreement, before any O(2^k) allocation.)
        let mut forged = file.clone();
        rewrite_header(&mut forged, |h| {
            h.payload_len = options.limits.max_payload_bytes;
            h.k = 28;
        });
        assert_bounded(
            &format!("{backend}: header k=28, 1 TiB declared, stream"),
            peak_during(|| backend_read(backend, &forged, &options)),
        );

        // 2. Every 8-byte-aligned word of the payload set to u64::MAX (lengths, counts,
        //    section sizes, pointers), one at a time, checksum refreshed, as a stream with a
        //    1 TiB declared length and as a slice.
        let payload_len = file.len() - HEADER_LEN;
        for offset in (0..payload_len.min(2048))
            .step_by(8)
            .chain((2048..payload_len).step_by(1024))
        {
            let mut forged = file.clone();
            let end = (HEADER_LEN + offset + 8).min(forged.len());
            forged[HEADER_LEN + offset..end].fill(0xff);
            refresh_checksums(&mut forged);
            let (result, peak) = peak_during(|| {
                backend
                    .codec()
                    .unwrap()
                    .read_slice::<StandardPlonk, Pk>(&forged, (), &options)
            });
            assert!(peak < BOUND, "{backend}: slice, word {offset}: peak {peak}");
            drop(result);
            rewrite_header(&mut forged, |h| {
                h.payload_len = options.limits.max_payload_bytes
            });
            let (result, peak) = peak_during(|| backend_read(backend, &forged, &options));
            assert!(
                peak < BOUND,
                "{backend}: stream, word {offset}: peak {peak}"
            );
            drop(result);
        }
    }

    #[cfg(feature = "rawbytes")]
    headerless_halo2_files(&options);

    forged_large_k_keys();
    #[cfg(feature = "rawbytes")]
    forged_large_k_parameters();
}

/// Parameter files of under 1 KiB claiming k = 26 (64 Mi points of each kind: 8 GiB): a
/// headerless halo2 file from a stream and from a file, and a resealed container; each is
/// refused, with memory growing by under 64 MiB.
#[cfg(feature = "rawbytes")]
fn forged_large_k_parameters() {
    use keycodec_core::halo2_proofs::SerdeFormat;
    let codec = keycodec_rawbytes::RawBytesCodec::default();
    let options = LoadOptions::default();
    let dir = tempfile::tempdir().unwrap();
    let mut halo2 = Vec::new();
    standard_plonk()
        .params
        .write_custom(&mut halo2, SerdeFormat::RawBytes)
        .unwrap();
    halo2.truncate(1000);
    halo2[..4].copy_from_slice(&26u32.to_le_bytes());
    let (result, peak) = peak_during(|| codec.import_params(&mut halo2.as_slice(), &options));
    assert_bounded_by(
        "headerless parameters, k = 26, 1000 bytes, stream",
        (result, peak),
        FORGED_K_BOUND,
    );
    let path = dir.path().join("forged.srs");
    std::fs::write(&path, &halo2).unwrap();
    let (result, peak) = peak_during(|| codec.import_params_file(&path, &options));
    assert_bounded_by(
        "headerless parameters, k = 26, 1000 bytes, file",
        (result, peak),
        FORGED_K_BOUND,
    );

    let container_path = dir.path().join("forged.params");
    codec
        .save_params(
            &container_path,
            &standard_plonk().params,
            &keycodec_core::SaveOptions::default(),
        )
        .unwrap();
    let mut container = std::fs::read(&container_path).unwrap();
    container.truncate(1000);
    container[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&26u32.to_le_bytes());
    let payload_len = (container.len() - HEADER_LEN) as u64;
    rewrite_header(&mut container, |h| {
        h.k = 26;
        h.payload_len = payload_len;
    });
    refresh_checksums(&mut container);
    std::fs::write(&container_path, &container).unwrap();
    let (result, peak) = peak_during(|| codec.load_params(&container_path, &options));
    assert_bounded_by(
        "parameters container, k = 26, 1000 bytes, file",
        (result, peak),
        FORGED_K_BOUND,
    );
    let (result, peak) = peak_during(|| codec.read_params_slice(&container, &options));
    assert_bounded_by(
        "parameters container, k = 26, 1000 bytes, slice",
        (result, peak),
        FORGED_K_BOUND,
    );
}

/// The growth of memory a forged tiny key claiming a large `k` may cause: none of its
/// `2^k`-sized memory is justified by its bytes.
const FORGED_K_BOUND: usize = 64 << 20;

/// Where each backend's payload stores the verifying key's `k` (a u32, little-endian),
/// counted from the payload's start.
fn payload_k_offset(backend: Backend, payload: &[u8]) -> usize {
    match backend.name() {
        // After halo2's version byte.
        "rawbytes" => 1,
        // The first field of the serde mirror / of the verifying key's layout.
        "bincode" | "compact" => 0,
        // The verifying key's section: the archive's root (56 bytes: k, the flag, three
        // vectors) ends the archive, k first.
        "rkyv" => {
            let len = u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize;
            16 + len - 56
        }
        other => panic!("no k offset known for {other}"),
    }
}

/// A container whose header and payload both claim `k`, checksums resealed.
fn forge_k(backend: Backend, file: &[u8], k: u32) -> Vec<u8> {
    let mut forged = file.to_vec();
    let at = HEADER_LEN + payload_k_offset(backend, &forged[HEADER_LEN..]);
    assert_eq!(
        forged[at..at + 4],
        keycodec_testkit::STANDARD_PLONK_K.to_le_bytes(),
        "{backend}: the payload's k is not where this test looks"
    );
    forged[at..at + 4].copy_from_slice(&k.to_le_bytes());
    rewrite_header(&mut forged, |h| h.k = k);
    refresh_checksums(&mut forged);
    forged
}

/// Peak memory of the evaluation domain a StandardPlonk verifying key at `k` needs.
fn domain_estimate(k: u32) -> u64 {
    use keycodec_core::backend_api::{VkParts, VkPlan};
    let mut parts = VkParts::of(standard_plonk().vk()).unwrap();
    parts.k = k;
    let limits = keycodec_core::Limits {
        max_k: 28,
        ..keycodec_core::Limits::default()
    };
    VkPlan::new(
        keycodec_core::backend_api::circuit::configure::<StandardPlonk>(()),
        parts,
        &limits,
    )
    .unwrap()
    .domain_memory()
}

/// Verifying keys of under 1 KiB claiming k = 24 and k = 26 (header and payload agree,
/// checksums resealed), from a slice, a file and a stream, and proving keys claiming k = 24
/// from a stream (declared length trusted by nothing), from bincode (decoded in full before
/// assembly) and from compact (a few bytes of runs that would fill 2^k columns): every one
/// is refused, and memory grows by under 64 MiB. With the default options; where the
/// machine's default budget would allow a k = 24 domain, with a budget that does not.
fn forged_large_k_keys() {
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    for k in [24u32, 26] {
        let estimate = domain_estimate(k);
        let mut options = LoadOptions::default();
        if options.limits.memory_budget >= estimate {
            options.limits.memory_budget = estimate / 2;
            println!("k = {k}: the default budget allows the domain; using {estimate} / 2");
        }
        for backend in Backend::compiled() {
            let codec = backend.codec().unwrap();
            let vk_file =
                without_record(codec.to_vec::<StandardPlonk, _>(fixture.vk(), ()).unwrap());
            assert!(vk_file.len() < 1024, "{backend}: {} bytes", vk_file.len());
            let forged = forge_k(backend, &vk_file, k);
            let path = dir.path().join(format!("{backend}-{k}.vk"));
            std::fs::write(&path, &forged).unwrap();
            let cases: [(&str, Box<Load<'_>>); 3] = [
                (
                    "slice",
                    Box::new(|| codec.read_slice::<StandardPlonk, Vk>(&forged, (), &options)),
                ),
                (
                    "file",
                    Box::new(|| codec.load::<StandardPlonk, Vk>(&path, (), &options)),
                ),
                (
                    "stream",
                    Box::new(|| {
                        codec.read::<StandardPlonk, Vk>(&mut forged.as_slice(), (), &options)
                    }),
                ),
            ];
            for (source, load) in cases {
                let (result, peak) = peak_during(load);
                let case = format!(
                    "{backend} verifying key, k = {k}, {} bytes, {source}",
                    forged.len()
                );
                assert!(
                    matches!(result, Err(keycodec::Error::OverBudget { .. })),
                    "{case}: {:?}",
                    result.err()
                );
                assert!(peak < FORGED_K_BOUND, "{case}: peak {peak} bytes");
                println!("{case}: refused, peak {} KiB", peak / 1024);
            }
        }
    }
    // Proving keys claiming k = 24.
    let mut options = LoadOptions::default();
    options.limits.memory_budget = options.limits.memory_budget.min(domain_estimate(24) / 2);
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let pk_file = without_record(codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap());
        let mut forged = forge_k(backend, &pk_file, 24);
        let (result, peak) =
            peak_during(|| codec.read_slice::<StandardPlonk, Pk>(&forged, (), &options));
        let case = format!(
            "{backend} proving key, k = 24, {} bytes, slice",
            forged.len()
        );
        assert_bounded_by(&case, (result, peak), FORGED_K_BOUND);
        // From a stream that declares a payload of 1 TiB: nothing proves the bytes exist.
        rewrite_header(&mut forged, |h| h.payload_len = 1 << 40);
        let (result, peak) = peak_during(|| backend_read(backend, &forged, &options));
        let case = format!("{backend} proving key, k = 24, 1 TiB declared, stream");
        assert_bounded_by(&case, (result, peak), FORGED_K_BOUND);
    }
}

fn assert_bounded_by<T>(
    case: &str,
    (result, peak): (keycodec_core::Result<T>, usize),
    bound: usize,
) {
    assert!(result.is_err(), "{case}: a forged input loaded");
    assert!(peak < bound, "{case}: peak allocation {peak} bytes");
    println!(
        "{case}: refused ({}), peak {} KiB",
        result.err().map(|e| e.to_string()).unwrap_or_default(),
        peak / 1024
    );
}

/// Headerless halo2 files (rawbytes import): 2^32 - 1 fixed commitments, an l0 of
/// 2^32 - 1 elements, k = 28 in the payload, each in a stream of a few KiB.
#[cfg(feature = "rawbytes")]
fn headerless_halo2_files(options: &LoadOptions) {
    let fixture = standard_plonk();
    let options = *options;
    let codec = keycodec_rawbytes::RawBytesCodec::default();
    use keycodec_core::halo2_proofs::SerdeFormat;
    let halo2 = fixture.pk.to_bytes(SerdeFormat::RawBytes);
    let vk_len = fixture.vk().to_bytes(SerdeFormat::RawBytes).len();
    let mut count = halo2.clone();
    count[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_bounded(
        "rawbytes import: 2^32-1 fixed commitments",
        peak_during(|| codec.import::<StandardPlonk, Pk>(&mut count.as_slice(), (), &options)),
    );
    let mut len = halo2.clone();
    len[vk_len..vk_len + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_bounded(
        "rawbytes import: l0 of 2^32-1 elements",
        peak_during(|| codec.import::<StandardPlonk, Pk>(&mut len.as_slice(), (), &options)),
    );
    let mut k = halo2;
    k[1..5].copy_from_slice(&28u32.to_le_bytes());
    let (result, peak) =
        peak_during(|| codec.import::<StandardPlonk, Pk>(&mut k.as_slice(), (), &options));
    assert!(
        peak < 1 << 20,
        "k = 28 in a tiny file allocated {peak} bytes"
    );
    assert_bounded("rawbytes import: k = 28 proving key", (result, peak));
    let (vk, peak) = peak_during(|| {
        codec.import::<StandardPlonk, keycodec_core::halo2_proofs::plonk::VerifyingKey<G1Affine>>(
            &mut fixture.vk().to_bytes(SerdeFormat::RawBytes).as_slice(),
            (),
            &options,
        )
    });
    assert!(
        vk.is_ok() && peak < BOUND,
        "a real small verifying key loads within the bound"
    );
}

fn backend_read(
    backend: Backend,
    bytes: &[u8],
    options: &LoadOptions,
) -> keycodec_core::Result<Pk> {
    backend
        .codec()?
        .read::<StandardPlonk, Pk>(&mut &bytes[..], (), options)
}

/// halo2's headerless parameters file claiming a large `k`, as a stream (no length to check
/// against): refused, `k` past the limit before anything is read, and a `k` within it without
/// allocating what it declares (2^26 points of each kind: 8 GiB), measured.
#[cfg(feature = "rawbytes")]
#[test]
fn a_headerless_parameters_file_claiming_a_large_k_allocates_little() {
    use keycodec_core::halo2_proofs::SerdeFormat;
    let mut halo2 = Vec::new();
    standard_plonk()
        .params
        .write_custom(&mut halo2, SerdeFormat::RawBytes)
        .unwrap();
    let codec = keycodec_rawbytes::RawBytesCodec::default();
    for k in [26u32, 28, 29, 32, u32::MAX] {
        halo2[..4].copy_from_slice(&k.to_le_bytes());
        let (result, peak) =
            peak_during(|| codec.import_params(&mut halo2.as_slice(), &LoadOptions::default()));
        let expected = if k <= keycodec_core::MAX_K {
            matches!(result, Err(keycodec::Error::Truncated { .. }))
        } else {
            matches!(result, Err(keycodec::Error::KOutOfRange { .. }))
        };
        assert!(expected, "k {k}: {:?}", result.err());
        assert!(peak < BOUND, "k {k}: peak allocation {peak} bytes");
    }
}
