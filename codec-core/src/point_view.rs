//! G1 points viewed as their raw bytes, without conversion: the bulk path of parameters.
//!
//! halo2's `RawBytes` stores a G1 point as `x ‖ y`, each coordinate's Montgomery limbs
//! little-endian: on a little-endian machine, what a `G1Affine` holds in memory if its
//! fields are laid out in that order. `G1Affine` is not `repr(C)`, so this module relies on
//! the layout only where it is proven, as [`crate::raw_view`] does for scalars:
//! - at compile time, `G1Affine` has the size of two 32-byte coordinates and the alignment
//!   of `u64` (so no padding, and any bytes are valid limbs);
//! - at run time, once per process, `layout_matches` compares the view with halo2curves'
//!   own `write_raw` / `from_raw_bytes_unchecked` on points whose coordinates differ. If it
//!   disagrees, every function here returns `None` and callers take the converting path.

use std::alloc::Layout;
use std::sync::OnceLock;

use halo2_proofs::halo2curves::group::prime::PrimeCurveAffine;
use halo2_proofs::halo2curves::group::Curve;
use halo2curves::bn256::{Fr, G1Affine, G1};
use halo2curves::serde::SerdeObject;

use crate::error::{Error, Result};

/// Bytes of one raw G1 point in memory and in the raw encoding.
const G1_BYTES: usize = 64;

// The compile-time half of the layout argument (see the module docs).
const _: () = assert!(std::mem::size_of::<G1Affine>() == G1_BYTES);
const _: () = assert!(std::mem::align_of::<G1Affine>() == std::mem::align_of::<u64>());

/// Whether `G1Affine`'s memory is its raw encoding (checked once, then cached).
pub(crate) fn layout_matches() -> bool {
    static MATCHES: OnceLock<bool> = OnceLock::new();
    *MATCHES.get_or_init(check_layout)
}

fn check_layout() -> bool {
    let generator = G1Affine::generator();
    let samples = [
        generator,
        (G1::from(generator) * Fr::from(0x0123_4567_89ab_cdef_u64)).to_affine(),
        G1Affine::identity(),
    ];
    samples.iter().all(|point| {
        let mut encoded = Vec::with_capacity(G1_BYTES);
        let written = point.write_raw(&mut encoded).is_ok();
        let viewed = bytes_of(std::slice::from_ref(point));
        let mut copy = [G1Affine::identity()];
        bytes_of_mut(&mut copy).copy_from_slice(&encoded);
        written
            && viewed == encoded.as_slice()
            && copy.first() == Some(&G1Affine::from_raw_bytes_unchecked(&encoded))
    })
}

/// `points`' memory as bytes: their raw encoding, when the layout check passed.
#[cfg(test)]
pub(crate) fn as_raw_bytes(points: &[G1Affine]) -> Option<&[u8]> {
    layout_matches().then(|| bytes_of(points))
}

/// `points`' memory as writable bytes: writing a raw encoding into it sets the points, when
/// the layout check passed. Whether the coordinates are canonical and on the curve is the
/// caller's to check.
pub(crate) fn as_raw_bytes_mut(points: &mut [G1Affine]) -> Option<&mut [u8]> {
    layout_matches().then(|| bytes_of_mut(points))
}

/// `count` points at infinity (all-zero memory, halo2curves' encoding of the identity) in
/// memory obtained zeroed from the allocator, when the layout check passed.
///
/// # Errors
///
/// [`Error::OutOfMemory`] when the allocator cannot provide the memory.
pub(crate) fn zeroed(count: usize) -> Result<Option<Vec<G1Affine>>> {
    if !layout_matches() {
        return Ok(None);
    }
    let out_of_memory = || Error::OutOfMemory {
        what: "curve points",
        bytes: (count as u64).saturating_mul(G1_BYTES as u64),
    };
    if count == 0 {
        return Ok(Some(Vec::new()));
    }
    let layout = Layout::array::<G1Affine>(count).map_err(|_| out_of_memory())?;
    // SAFETY: `layout` has a non-zero size (`count > 0`, a point is 64 bytes).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(out_of_memory());
    }
    // SAFETY: allocated by the global allocator with `Layout::array::<G1Affine>(count)`, as
    // `Vec::from_raw_parts` requires for capacity `count`. The `count` points are
    // initialised: zeroed memory holds zero limbs in both coordinates, which the layout check
    // showed to be the identity's memory (the test
    // `zeroed_points_are_the_identity` checks the values). The pointer has one owner.
    Ok(Some(unsafe {
        Vec::from_raw_parts(ptr.cast::<G1Affine>(), count, count)
    }))
}

fn bytes_of(points: &[G1Affine]) -> &[u8] {
    // SAFETY: `G1Affine` is 64 bytes of two 32-byte coordinates (its size, compile-time
    // asserts above), so there is no padding and every byte is initialised; `u8` has
    // alignment 1; the length is the same memory's and the borrow is shared for the same
    // lifetime. The test `views_agree_with_halo2curves_encoding` checks the bytes.
    unsafe {
        std::slice::from_raw_parts(points.as_ptr().cast::<u8>(), std::mem::size_of_val(points))
    }
}

fn bytes_of_mut(points: &mut [G1Affine]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`; in addition each coordinate is plain limbs (`[u64; 4]` in
    // halo2curves' `Fq`) without invalid bit patterns, so any bytes written leave valid
    // `G1Affine` values. The borrow is exclusive for the same lifetime. The test
    // `writing_through_the_view_sets_points` checks it.
    unsafe {
        std::slice::from_raw_parts_mut(
            points.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(points),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(count: u64) -> Vec<G1Affine> {
        let generator = G1::from(G1Affine::generator());
        (1..=count)
            .map(|i| (generator * Fr::from(i * 0x9e37_79b9 + 1)).to_affine())
            .collect()
    }

    #[test]
    fn the_layout_check_passes_on_this_target() {
        assert!(layout_matches());
    }

    #[test]
    fn views_agree_with_halo2curves_encoding() {
        let points = points(50);
        let bytes = as_raw_bytes(&points).unwrap();
        for (point, chunk) in points.iter().zip(bytes.chunks_exact(G1_BYTES)) {
            assert_eq!(chunk, point.to_raw_bytes());
        }
    }

    #[test]
    fn writing_through_the_view_sets_points() {
        let points = points(50);
        let encoded: Vec<u8> = points.iter().flat_map(|p| p.to_raw_bytes()).collect();
        let mut target = zeroed(points.len()).unwrap().unwrap();
        as_raw_bytes_mut(&mut target)
            .unwrap()
            .copy_from_slice(&encoded);
        assert_eq!(target, points);
    }

    #[test]
    fn zeroed_points_are_the_identity() {
        let zeros = zeroed(1000).unwrap().unwrap();
        assert!(zeros.iter().all(|p| *p == G1Affine::identity()));
        assert!(matches!(
            zeroed(usize::MAX / 32),
            Err(Error::OutOfMemory { .. })
        ));
    }
}
