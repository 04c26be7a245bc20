// The README's example uses the rawbytes backend; without it, a short summary stands in.
#![cfg_attr(feature = "rawbytes", doc = include_str!("../../README.md"))]
#![cfg_attr(
    not(feature = "rawbytes"),
    doc = "Save and load halo2 keys through pluggable, checked backends. See the README."
)]
#![forbid(unsafe_code)]

mod backend;
#[cfg(feature = "rawbytes")]
pub mod compat;
mod key;
mod location;
pub mod manifest;
mod options;
mod params;
mod proof;
mod replace;
mod start;

pub use backend::{Backend, ParseBackendError};
pub use key::{load_key, read_record, save_key};
pub use keycodec_core::record::{CircuitRecord, RecordableParams, Recorded};
pub use location::Location;
#[cfg(feature = "remote")]
pub use location::Object;
pub use options::{Key, KeyOptions, KeyPin};
pub use params::{open_params, save_params, ParamsOptions, ParamsPin};
pub use proof::{ProofVerifier, Scheme};
pub use start::{load_or_generate, ColdStart, Generated, Keygen, Origin, Selectors, Start};

pub use keycodec_core::{
    asks_for_huge_pages, halo2_proofs, halo2curves, points_checked_at_once, reads_past_page_cache,
    ArtifactKind, Checksum, Error, KeyDigest, KzgParams, Limits, ParseDigestError, Result,
    TestSetup, Validation,
};

#[cfg(feature = "remote")]
pub mod remote;
