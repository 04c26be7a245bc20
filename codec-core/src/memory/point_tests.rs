use super::*;

fn layout_matches() -> bool {
    layout_matches_for::<G1Affine>()
}

fn as_raw_bytes(points: &[G1Affine]) -> Option<&[u8]> {
    raw_bytes_of(points)
}

fn as_raw_bytes_mut(points: &mut [G1Affine]) -> Option<&mut [u8]> {
    raw_bytes_mut_of(points)
}

fn zeroed(count: usize) -> Result<Option<Vec<G1Affine>>> {
    zeroed_of(count)
}

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
