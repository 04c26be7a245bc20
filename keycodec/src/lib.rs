#![doc = include_str!("../../README.md")]

mod backend;

pub use backend::{load_any, Backend};
pub use codec_core::{
    circuit, field, file, halo2_proofs, halo2curves, header, BufferConfig, CodecId, DecodeContext,
    Error, Fingerprint, HaloKey, Header, Key, KeyCodec, KeyKind, KeyRef, Limits, LoadOptions,
    PayloadReader, Result, SaveOptions, Size, Validation, MAX_K,
};
#[cfg(feature = "rawbytes")]
pub use codec_rawbytes::{self as rawbytes, RawBytesCodec};
