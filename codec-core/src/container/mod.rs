//! Framing a backend's payload with the container header, and checking it on the way in:
//! one writer, and one reader for every source of bytes.

use std::io::{self, Read, Seek, SeekFrom, Write};

use halo2_proofs::plonk::{Circuit, ConstraintSystem};
use halo2curves::bn256::Fr;

use crate::circuit::{check_k, fingerprint_of};
use crate::codec::{DecodeContext, KeyCodec};
use crate::digest;
use crate::error::{Error, IoContext, Result};
use crate::header::{Header, HEADER_LEN, PREFIX_LEN};
use crate::ids::{ArtifactKind, Fingerprint, KeyDigest, WireMode};
use crate::item::{Item, ItemRef, Key};
use crate::options::{Checksum, LoadOptions};
use crate::payload::PayloadReader;
use crate::record::RecordableParams;
use crate::source::ReadAt;
use crate::xxh3::{xxh3_64, Xxh3};

mod read;
mod write;

pub use read::read;
pub(crate) use write::write;
pub use write::write_in_order;

/// Where a container is read from.
pub enum Input<'a> {
    /// Bytes in memory, exactly one container.
    Memory(&'a [u8]),
    /// A stream, read in order from its current position; its length is unknown, so
    /// allocations grow with the data actually read, and it may continue after the container.
    Stream(&'a mut dyn Read),
    /// A source of `len` bytes read at explicit offsets (a file), exactly one container: small
    /// reads through a buffer of `buffer` bytes, bulk reads straight into the key's memory
    /// from several threads.
    At {
        /// The bytes.
        source: &'a dyn ReadAt,
        /// How many there are.
        len: u64,
        /// Bytes of the buffer small reads go through.
        buffer: usize,
    },
}

/// What a container says of the circuit its key belongs to: the fingerprint, and the record
/// section that follows the payload (empty: none, as for parameters).
#[derive(Clone, Debug)]
pub struct Described {
    /// The circuit's fingerprint ([`Fingerprint::NONE`] for parameters).
    pub fingerprint: Fingerprint,
    /// The record section ([`CircuitRecord::to_section`](crate::record::CircuitRecord::to_section)), or empty.
    pub section: Vec<u8>,
}

impl Described {
    /// Parameters: no circuit.
    pub fn none() -> Described {
        Described {
            fingerprint: Fingerprint::NONE,
            section: Vec::new(),
        }
    }

    /// The circuit `C` with `circuit_params`: its fingerprint, and its record with those
    /// parameters when it can be recorded (see
    /// [`CircuitRecord::of`](crate::record::CircuitRecord::of); one that cannot, or whose
    /// record is over [`MAX_RECORD_BYTES`](crate::record::MAX_RECORD_BYTES), is described by
    /// its fingerprint alone).
    pub fn of<C: Circuit<Fr>>(circuit_params: C::Params) -> Described
    where
        C::Params: RecordableParams,
    {
        let params = circuit_params.to_recorded_json();
        let cs = crate::circuit::configure::<C>(circuit_params);
        let section = crate::record::CircuitRecord::of(&cs)
            .map(|record| record.with_params(params).to_section())
            .ok()
            .filter(|section| section.len() <= crate::record::MAX_RECORD_BYTES + 8)
            .unwrap_or_default();
        Described {
            fingerprint: fingerprint_of(&cs),
            section,
        }
    }

    /// The circuit `C` with `circuit_params` by its fingerprint alone, no record made
    /// ([`Recording::Omit`](crate::Recording::Omit)).
    pub fn unrecorded<C: Circuit<Fr>>(circuit_params: C::Params) -> Described {
        Described {
            fingerprint: crate::circuit::fingerprint::<C>(circuit_params),
            section: Vec::new(),
        }
    }

    /// The record's length in the header (0: none).
    fn record_len(&self) -> u32 {
        u32::try_from(self.section.len().saturating_sub(8)).unwrap_or(0)
    }
}

/// What a load asks for.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// The kind wanted.
    pub kind: ArtifactKind,
    /// A verifying key may be read from a proving key's container (its prefix: the
    /// polynomials are not decoded).
    pub from_proving_key: bool,
    /// Compute the digest (it is computed anyway when the options pin one).
    pub digest: bool,
}

impl Request {
    /// `kind`, from a container of that kind.
    pub fn of(kind: ArtifactKind) -> Self {
        Request {
            kind,
            from_proving_key: false,
            digest: false,
        }
    }

    /// A key of `kind` from any container that holds one: a verifying key from a verifying
    /// key's container or a proving key's (as `KeyCodecExt::load_verifying_key` reads it).
    /// What a load through a cache or an object asks for, so that a verifying key is found
    /// the same way wherever it is.
    pub fn for_key(kind: ArtifactKind) -> Self {
        Request {
            from_proving_key: kind == ArtifactKind::Verifying,
            ..Request::of(kind)
        }
    }
}

/// What a container held and, when the load computed it, its digest.
pub struct Decoded {
    /// The key or parameters.
    pub item: Item,
    /// Their digest, when the load computed it.
    pub digest: Option<KeyDigest>,
}
