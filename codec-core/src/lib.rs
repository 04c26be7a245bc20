//! The core of keycodec: the [`KeyCodec`] trait every backend implements, the operations
//! users call on any codec ([`KeyCodecExt`]), the container every backend's payload travels
//! in, typed options, the one [`enum@Error`] type, and the file I/O every load and save goes
//! through.
//!
//! Users normally depend on the `keycodec` facade, which re-exports what is here. Backend
//! authors find everything they need in [`backend_api`]; transports (the facade's object
//! storage, its `remote` feature) in [`transport`]. The conformance kit every backend's tests
//! run is the `codec-testkit` crate.
//!
//! # The container
//!
//! Every file is a 128-byte header followed by the backend's payload. The header names the
//! codec and its wire mode, the key kind, the curve, `k`, the payload's length and XXH3-64
//! checksum, and a [`Fingerprint`] of the circuit (`docs/format.md` has the byte layout).
//! Loading checks, in order: magic, version, header checksum, codec, wire mode, key kind,
//! `k`, circuit fingerprint, declared length against the real length (for files and slices);
//! then the backend decodes with every count checked before allocation, reading through one
//! reader that hashes exactly the bytes it hands the decoder, and the checksum is compared
//! before the key is returned.
//!
//! # Trust
//!
//! [`Validation::Checked`] (the default) checks every field element and point.
//! [`Validation::Trusted`] skips value checks for files you wrote yourself; structure,
//! lengths and checksums are still checked. The checksum detects corruption, not a
//! different valid key for a circuit with the same fingerprint.

// `unsafe` is denied but in `memory` (views of memory as bytes, memory filled without being
// zeroed, the kernel hints), `field::ifma` and `field::avx2` (AVX-512 and AVX2 instructions, where the CPU has them),
// the bulk read's one `set_len` on `memory`'s contract, and `Filling`'s one
// `assume_init_mut` of destinations it has written whole (`source`).
#![deny(unsafe_code)]

mod assembly;
mod bulk;
mod circuit;
mod codec;
mod container;
mod digest;
mod error;
mod field;
mod file;
mod ids;
mod item;
mod lock;
#[allow(unsafe_code)]
mod memory;
mod ops;
mod options;
mod params;
mod payload;
mod pk_parts;
mod poly_hash;
pub mod record;
mod source;
mod stamp;
#[cfg(test)]
mod testing;
mod vk_layout;
mod vk_parts;
mod xxh3;

pub mod header;
pub mod hex;
pub mod test_setup;

pub use codec::KeyCodec;
pub use error::{Error, Result};
pub use field::{points_checked_at_once, WIDE_POINT_CHECK_ENV};
pub use file::{drop_cached_pages, replace_atomically, temp_beside};
pub use ids::{ArtifactKind, CodecId, Fingerprint, KeyDigest, ParseDigestError, WireMode};
pub use item::HaloKey;
pub use item::KzgParams;
pub use lock::{lock_beside, DEFAULT_LOCK_TIMEOUT};
pub use memory::{
    asks_for_huge_pages, cached_pages, reads_past_page_cache, DIRECT_READS_ENV, HUGE_PAGES_ENV,
};
pub use ops::KeyCodecExt;
pub use options::{
    BufferConfig, Checksum, CodecSet, Limits, LoadOptions, ParseSizeError, Recording, SaveOptions,
    Size, TestSetup, Validation, MAX_K,
};
pub use params::downsize;
pub use stamp::FileStamp;

/// The halo2 and curve crates this workspace is built against, re-exported so that users
/// name exactly the same types.
pub use halo2_proofs;
pub use halo2curves;

pub mod transport {
    //! The seam a transport is built on (object storage, a test kit's changing file): a
    //! positioned source of bytes ([`ReadAt`]) and the container's one reader over it
    //! ([`read`]), with its in-order writer for a sink that cannot seek ([`write_in_order`]).
    //! A transport supplies bytes; the core checks and decodes them exactly as it does a
    //! file's, so every guarantee of a file load holds for it.

    pub use crate::circuit::fingerprint;
    pub use crate::container::{read, write_in_order, Decoded, Described, Input, Request};
    pub use crate::file::{save_atomic, write_all_at, Writeback};
    pub use crate::item::{Item, ItemRef};
    pub use crate::ops::{into_key, into_params, read_file};
    pub use crate::source::{requests_for, Dst, FileSource, Filling, ReadAt, BULK_STEP};
}

pub mod backend_api {
    //! Everything a backend author needs, and nothing a user does.
    //!
    //! A backend is a crate with a codec type implementing [`KeyCodec`]: a name, an id, its
    //! wire modes, and [`KeyCodec::encode`] / [`KeyCodec::decode`] of a payload. The container
    //! (header, checksums, length checks) and every way of reading and writing it are provided
    //! by the core. A decoder:
    //!
    //! - reads only through the [`PayloadReader`] it is given, and checks every declared count
    //!   against [`PayloadReader::ensure_available`] before allocating for it;
    //! - decodes the verifying key's data into [`VkParts`] (for halo2's own layout,
    //!   [`vk_layout::read`]), checks the payload's `k` with [`DecodeContext::check_payload_k`],
    //!   and lets [`DecodeContext::assemble`] (or [`DecodeContext::assemble_vk`] /
    //!   [`DecodeContext::assemble_pk`]) check every count and length against the circuit and
    //!   build the key;
    //! - reads polynomials in bulk with [`field::read_fr_vec`] and checks values unless the
    //!   context's [`Validation`] is `Trusted`.
    //!
    //! An encoder writes the key's parts ([`VkParts::of`], [`parts::groups`]) to the writer it
    //! is given, mapping I/O errors with [`IoContext::during`]. The conformance kit
    //! (`keycodec_testkit::conformance_tests!(MyCodec::default());`, crate `codec-testkit`)
    //! checks all of it; the facade's backend list is the one place a backend is registered.

    pub use crate::assembly::{assemble_pk, on_a_pool_of_its_own, VkPlan};
    pub use crate::bulk::{Span, SpanData};
    pub use crate::codec::{DecodeContext, KeyCodec};
    pub use crate::error::{Error, IoContext, Result};
    pub use crate::ids::{ArtifactKind, CodecId, WireMode};
    pub use crate::item::{Key, KeyRef, KzgParams};
    pub use crate::options::{Limits, Validation};
    pub use crate::params::{
        assemble_params, read_g1_points, read_g2, read_params, write_params, ParamsParts,
    };
    pub use crate::payload::PayloadReader;
    pub use crate::pk_parts::{PkParts, PkShape, PolyGroup};
    pub use crate::vk_parts::VkParts;

    /// The circuit's constraint system, row counts, and the structure check.
    pub mod circuit {
        pub use crate::circuit::{configure, expect_count, rows};
    }

    /// Byte encodings of BN254 scalars and G1 points, checked or trusted, one at a time and
    /// in bulk.
    pub mod field {
        pub use crate::field::{
            check_raw_elements, decode_fr_chunk, decode_g1, encode_fr, encode_fr_chunk, encode_g1,
            write_fr_slice, zeros, FieldEncoding, FR_BYTES,
        };
        pub use crate::payload::{read_fr_vec, read_polynomial};
    }

    /// A proving key's polynomials in halo2's order (the [`PolyGroup`]s).
    pub mod parts {
        pub use crate::pk_parts::{groups, polynomials};
    }

    /// Scalars viewed as their raw bytes, where that is proven sound.
    pub mod raw_view {
        pub use crate::memory::{as_raw_bytes_mut, as_raw_elements, zeroed};
    }

    /// The verifying key's data in halo2-axiom's own byte layout.
    pub mod vk_layout {
        pub use crate::vk_layout::*;
    }
}
