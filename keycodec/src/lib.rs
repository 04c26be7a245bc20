// The README's example uses the rawbytes backend; without it, a short summary stands in.
#![cfg_attr(feature = "rawbytes", doc = include_str!("../../README.md"))]
#![cfg_attr(
    not(feature = "rawbytes"),
    doc = "Save and load halo2 keys through pluggable, checked backends. See the README."
)]
#![forbid(unsafe_code)]

mod backend;
#[cfg(feature = "remote")]
mod cache;
#[cfg(feature = "rawbytes")]
pub mod compat;
mod location;
pub mod manifest;
mod params;
mod replace;
pub mod start;

pub use backend::{load_any, Backend, ParseBackendError};
pub use keycodec_core::{
    downsize, halo2_proofs, halo2curves, replace_atomically, BufferConfig, Checksum, CodecId,
    CodecSet, Error, Fingerprint, HaloKey, KeyCodec, KeyCodecExt, KeyDigest, KeyKind, KzgParams,
    Limits, LoadOptions, ParseDigestError, ParseSizeError, Result, SaveOptions, Size, TestSetup,
    Validation, WireMode, MAX_K,
};

/// The container header, for tools that look at files without decoding them.
pub use keycodec_core::header;

/// KZG parameters made from a public seed (halo2-base's `gen_srs`), recognised.
pub use keycodec_core::test_setup;

/// For backend authors: the payload reader, the decode context, the key's parts and the
/// field encodings a backend is written with (see the module's docs).
pub use keycodec_core::backend_api;

#[cfg(feature = "remote")]
pub mod remote;

#[cfg(feature = "bincode")]
pub use keycodec_bincode::BincodeCodec;
#[cfg(feature = "compact")]
pub use keycodec_compact::CompactCodec;
#[cfg(feature = "rawbytes")]
pub use keycodec_rawbytes::RawBytesCodec;
#[cfg(feature = "rkyv")]
pub use keycodec_rkyv::RkyvCodec;
