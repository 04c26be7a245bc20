// The README's example uses the rawbytes backend; without it, a short summary stands in.
#![cfg_attr(feature = "rawbytes", doc = include_str!("../../README.md"))]
#![cfg_attr(
    not(feature = "rawbytes"),
    doc = "Save and load halo2 keys through pluggable, checked backends. See the README."
)]

mod backend;

pub use backend::{load_any, Backend};
#[cfg(feature = "bincode")]
pub use codec_bincode::{self as bincode, BincodeCodec};
#[cfg(feature = "compact")]
pub use codec_compact::{self as compact, CompactCodec};
pub use codec_core::{
    circuit, field, file, halo2_proofs, halo2curves, header, BufferConfig, CodecId, DecodeContext,
    Error, Fingerprint, HaloKey, Header, Key, KeyCodec, KeyKind, KeyRef, Limits, LoadOptions,
    PayloadReader, Result, SaveOptions, Size, Validation, MAX_K,
};
#[cfg(feature = "rawbytes")]
pub use codec_rawbytes::{self as rawbytes, RawBytesCodec};
#[cfg(feature = "rkyv")]
pub use codec_rkyv::{self as rkyv, RkyvCodec};
