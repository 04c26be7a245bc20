//! A section as written: the archived types (the verifying key's data, a polynomial) and the
//! frame around each archive.

use std::io::Write;

use keycodec_core::backend_api::field::FR_BYTES;
use keycodec_core::backend_api::{Error, IoContext, Result};
use rkyv::rancor;
use rkyv::util::AlignedVec;
use rkyv::vec::ArchivedVec;

/// Alignment of every section's archive.
pub(crate) const SECTION_ALIGN: usize = 16;

/// The verifying key's data as archived.
#[derive(rkyv::Archive, rkyv::Serialize)]
pub(crate) struct VkSection {
    pub(crate) k: u32,
    pub(crate) compress_selectors: bool,
    pub(crate) fixed_commitments: Vec<[u8; 64]>,
    pub(crate) permutation_commitments: Vec<[u8; 64]>,
    /// Packed 8 rows per byte, as halo2 stores them.
    pub(crate) selectors: Vec<Vec<u8>>,
}

/// One polynomial as archived: its elements' raw bytes.
pub(crate) type PolySection = Vec<[u8; FR_BYTES]>;

/// A borrowed polynomial's raw elements, archived exactly as a [`PolySection`] is (an
/// `ArchivedVec<[u8; 32]>`), without first copying them into a `Vec`.
pub(crate) struct PolyRef<'a>(pub(crate) &'a [[u8; FR_BYTES]]);

impl rkyv::Archive for PolyRef<'_> {
    type Archived = ArchivedVec<[u8; FR_BYTES]>;
    type Resolver = rkyv::vec::VecResolver;

    fn resolve(&self, resolver: Self::Resolver, out: rkyv::Place<Self::Archived>) {
        ArchivedVec::resolve_from_slice(self.0, resolver, out);
    }
}

impl<S> rkyv::Serialize<S> for PolyRef<'_>
where
    S: rancor::Fallible + rkyv::ser::Allocator + rkyv::ser::Writer + ?Sized,
{
    fn serialize(&self, serializer: &mut S) -> std::result::Result<Self::Resolver, S::Error> {
        ArchivedVec::serialize_from_slice(self.0, serializer)
    }
}

pub(crate) fn archive<T>(value: &T) -> Result<AlignedVec>
where
    T: for<'a> rkyv::Serialize<
        rkyv::api::high::HighSerializer<
            AlignedVec,
            rkyv::ser::allocator::ArenaHandle<'a>,
            rancor::Error,
        >,
    >,
{
    rkyv::to_bytes::<rancor::Error>(value).map_err(rkyv_error)
}

pub(crate) fn write_section(out: &mut dyn Write, bytes: &[u8]) -> Result<()> {
    let zeros = [0u8; SECTION_ALIGN];
    let frame = (bytes.len() as u64).to_le_bytes();
    let parts = [
        &frame[..],
        &zeros[..8],
        bytes,
        zeros.get(..padding(bytes.len())).unwrap_or_default(),
    ];
    parts
        .iter()
        .try_for_each(|part| out.write_all(part))
        .during("write")
}

pub(crate) fn padding(len: usize) -> usize {
    (SECTION_ALIGN - len % SECTION_ALIGN) % SECTION_ALIGN
}

pub(crate) fn rkyv_error(err: rancor::Error) -> Error {
    Error::Backend {
        codec: "rkyv",
        source: Box::new(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keycodec_core::halo2curves::bn256::Fr;

    #[test]
    fn a_borrowed_polynomial_archives_to_the_same_bytes_as_a_vector() {
        let values: Vec<Fr> = (0..1000u64)
            .map(|i| Fr::from(i * 0x9e37_79b9 + 1))
            .collect();
        let raw =
            keycodec_core::backend_api::raw_view::as_raw_elements(&values).unwrap_or_default();
        assert_eq!(raw.len(), values.len());
        let owned: PolySection = raw.to_vec();
        let from_vec = rkyv::to_bytes::<rancor::Error>(&owned).map_err(rkyv_error);
        let from_slice = rkyv::to_bytes::<rancor::Error>(&PolyRef(raw)).map_err(rkyv_error);
        // Both archive (two failures would compare equal), to the same bytes.
        let (Ok(from_vec), Ok(from_slice)) = (from_vec, from_slice) else {
            panic!("both must archive");
        };
        assert!(from_vec.len() >= 32 * values.len());
        assert_eq!(from_vec.to_vec(), from_slice.to_vec());
    }
}
