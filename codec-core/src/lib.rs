//! The core of keycodec: the [`KeyCodec`] trait every backend implements, the container
//! header every backend writes, typed options, the one [`enum@Error`] type, atomic file saves,
//! and (behind the `testing` feature) the conformance kit every backend's tests run.
//!
//! # The container
//!
//! Every file is a 64-byte [`Header`] followed by the backend's payload. The header names the
//! codec and its wire mode, the key kind, the curve, `k`, the payload's length and XXH3-64
//! checksum, and a [`Fingerprint`] of the circuit. Loading checks, in order: magic, version,
//! header checksum, codec, key kind, `k`, circuit fingerprint, declared length against the
//! real length (for files and slices); then the backend decodes with every count checked
//! before allocation, and the payload checksum is compared before the key is returned.
//!
//! # Trust
//!
//! [`Validation::Checked`] (the default) checks every field element and point.
//! [`Validation::Trusted`] skips value checks for files you wrote yourself; structure,
//! lengths and checksums are still checked.

pub mod circuit;
mod codec;
mod container;
mod error;
pub mod field;
pub mod file;
pub mod header;
mod options;
mod payload;
pub mod raw_view;
pub mod vk_layout;

#[cfg(feature = "testing")]
pub mod testing;

pub use codec::{DecodeContext, HaloKey, Key, KeyCodec, KeyRef, LoadMode};
pub use error::{Error, Result};
pub use header::{CodecId, Fingerprint, Header, KeyKind};
pub use options::{
    BufferConfig, Integrity, Limits, LoadOptions, SaveOptions, Size, Validation, MAX_K,
};
pub use payload::{PayloadReader, Release, RELEASE_STEP};

/// The halo2 and curve crates this workspace is built against, re-exported so that users
/// name exactly the same types.
pub use halo2_proofs;
pub use halo2curves;
