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
    write_frame(out, bytes.len())?;
    out.write_all(bytes).during("write")?;
    write_padding(out, bytes.len())
}

/// Writes a polynomial's section with rkyv serializing it straight into `out`: its elements
/// go from the caller's memory to `out` in one write, with no archive buffered in between (a
/// polynomial is 134 MB at k = 22). The frame needs the archive's length first: a pass of
/// the same serializer that only counts gives it, and the bytes written must match it.
pub(crate) fn write_poly_section(out: &mut dyn Write, poly: &PolyRef<'_>) -> Result<()> {
    let mut counted = SectionWriter {
        out: None,
        pos: 0,
        failure: None,
    };
    serialize_into(poly, &mut counted)?;
    let len = counted.pos;
    write_frame(out, len)?;
    let mut writing = SectionWriter {
        out: Some(&mut *out),
        pos: 0,
        failure: None,
    };
    serialize_into(poly, &mut writing)?;
    if writing.pos != len {
        return Err(Error::Internal(format!(
            "an rkyv section took {} bytes to write after counting {len}",
            writing.pos
        )));
    }
    write_padding(out, len)
}

/// Serializes `poly` into `writer`; a failure to write is reported as the I/O error it was.
fn serialize_into(poly: &PolyRef<'_>, writer: &mut SectionWriter<'_>) -> Result<()> {
    match rkyv::api::high::to_bytes_in::<_, rancor::Error>(poly, &mut *writer) {
        Ok(_) => Ok(()),
        Err(err) => match writer.failure.take() {
            Some(io) => Err(io).during("write"),
            None => Err(rkyv_error(err)),
        },
    }
}

/// An rkyv writer into a `Write` (or into nothing, counting: `out` is `None`), that keeps
/// the I/O error that stopped it.
struct SectionWriter<'w> {
    out: Option<&'w mut dyn Write>,
    pos: usize,
    failure: Option<std::io::Error>,
}

impl rkyv::ser::Positional for SectionWriter<'_> {
    fn pos(&self) -> usize {
        self.pos
    }
}

impl<E: rancor::Source> rkyv::ser::Writer<E> for SectionWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::result::Result<(), E> {
        if let Some(out) = self.out.as_mut() {
            if let Err(err) = out.write_all(bytes) {
                self.failure = Some(err);
                return Err(E::new(WriteFailed));
            }
        }
        self.pos += bytes.len();
        Ok(())
    }
}

/// What rkyv is told when its writer's `Write` failed; the I/O error itself is reported.
#[derive(Debug)]
struct WriteFailed;

impl std::fmt::Display for WriteFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the section could not be written")
    }
}

impl std::error::Error for WriteFailed {}

/// A section's frame: the archive's length, then 8 zero bytes.
fn write_frame(out: &mut dyn Write, archive_len: usize) -> Result<()> {
    let mut frame = [0u8; SECTION_ALIGN];
    frame[..8].copy_from_slice(&(archive_len as u64).to_le_bytes());
    out.write_all(&frame).during("write")
}

/// The zeros after an archive of `archive_len` bytes, up to the next section's alignment.
fn write_padding(out: &mut dyn Write, archive_len: usize) -> Result<()> {
    let zeros = [0u8; SECTION_ALIGN];
    out.write_all(zeros.get(..padding(archive_len)).unwrap_or_default())
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

    #[test]
    fn a_streamed_section_is_the_section_of_its_archive() -> Result<()> {
        for len in [0u64, 1, 3, 1000] {
            let values: Vec<Fr> = (0..len).map(|i| Fr::from(i * 0x9e37_79b9 + 7)).collect();
            let raw =
                keycodec_core::backend_api::raw_view::as_raw_elements(&values).unwrap_or_default();
            let mut buffered = Vec::new();
            write_section(&mut buffered, &archive(&raw.to_vec())?)?;
            let mut streamed = Vec::new();
            write_poly_section(&mut streamed, &PolyRef(raw))?;
            assert!(buffered.len() >= 16 + 32 * values.len());
            assert_eq!(streamed, buffered, "{len} elements");
        }
        Ok(())
    }

    #[test]
    fn a_failed_write_of_a_streamed_section_is_the_io_error() {
        /// Takes `room` bytes, then fails as a full disk does.
        struct Full {
            room: usize,
        }
        impl Write for Full {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.room == 0 {
                    return Err(std::io::Error::from_raw_os_error(28));
                }
                let n = buf.len().min(self.room);
                self.room -= n;
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let values: Vec<Fr> = (0..1000u64).map(Fr::from).collect();
        let raw =
            keycodec_core::backend_api::raw_view::as_raw_elements(&values).unwrap_or_default();
        // In the frame, in the elements, in the archive's root.
        for room in [4, 16 + 100, 16 + 32 * 1000 + 4] {
            let err = write_poly_section(&mut Full { room }, &PolyRef(raw));
            assert!(
                matches!(&err, Err(Error::Io { source, .. }) if source.raw_os_error() == Some(28)),
                "{room}: {err:?}"
            );
        }
    }
}
