//! Key assembly with the evaluation domain built beside the polynomial reads
//! (`VkPlan::finish_while`, `DecodeContext::assemble`).

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec_core::backend_api::circuit::configure;
use keycodec_core::backend_api::{
    ArtifactKind, DecodeContext, Error, Limits, PayloadReader, PkShape, Validation, VkParts,
    VkPlan, WireMode,
};
use keycodec_core::halo2_proofs::poly::EvaluationDomain;
use keycodec_core::halo2curves::bn256::Fr;
use keycodec_testkit::{standard_plonk, vk_bytes, StandardPlonk, STANDARD_PLONK_K};

fn plan() -> VkPlan {
    let vk = standard_plonk().vk();
    VkPlan::new(
        configure::<StandardPlonk>(()),
        VkParts::of(vk).unwrap(),
        &Limits::default(),
    )
    .unwrap()
}

#[test]
fn finish_while_builds_the_same_verifying_key_and_gives_the_work_its_shape() {
    let original = standard_plonk().vk();
    let (vk, seen) = plan().finish_while(|shape| Ok(*shape)).unwrap();
    assert_eq!(seen, PkShape::of(original));
    assert_eq!(vk_bytes(&vk), vk_bytes(original));
    assert_eq!(vk.transcript_repr(), original.transcript_repr());
}

#[test]
fn finish_while_reports_the_work_error() {
    let err = plan()
        .finish_while(|_| Err::<(), _>(Error::Malformed("the work failed".into())))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Malformed(m) if m == "the work failed"),
        "{err}"
    );
}

#[test]
fn finish_refuses_a_domain_built_for_another_k_or_degree() {
    let degree = standard_plonk().vk().cs().degree() as u32;
    for (j, k) in [
        (degree, STANDARD_PLONK_K + 1),
        (degree + 2, STANDARD_PLONK_K),
    ] {
        let err = plan()
            .finish(EvaluationDomain::<Fr>::new(j, k))
            .unwrap_err();
        assert!(matches!(err, Error::Structure { .. }), "{err}");
    }
}

#[test]
fn a_payload_shorter_than_the_polynomials_is_refused_before_reading() {
    let vk = standard_plonk().vk();
    let context = DecodeContext {
        kind: ArtifactKind::Proving,
        payload_kind: ArtifactKind::Proving,
        mode: WireMode::new(0, "test"),
        k: Some(STANDARD_PLONK_K),
        validation: Validation::Checked,
        limits: Limits::default(),
        cs: configure::<StandardPlonk>(()),
    };
    let shape = PkShape::of(vk);
    // One byte short of the polynomials' 32 bytes per element.
    let bytes = vec![0u8; (shape.total_elements() * 32 - 1) as usize];
    let mut input = PayloadReader::from_slice(&bytes);
    let mut called = false;
    let err = context
        .assemble(VkParts::of(vk).unwrap(), &mut input, |_, _| {
            called = true;
            Err(Error::Malformed("unreachable".into()))
        })
        .unwrap_err();
    assert!(matches!(err, Error::LimitExceeded { .. }), "{err}");
    assert!(
        !called,
        "the polynomials were read from a payload too short to hold them"
    );
}
