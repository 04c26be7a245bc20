//! The [`KeyCodec`] trait a backend implements, and what its decoder is given and returns.

use std::io::Write;

use halo2_proofs::plonk::ConstraintSystem;
use halo2curves::bn256::Fr;

use crate::assembly::{assemble_pk, assemble_vk, check_shape, VkPlan};
use crate::circuit::check_k;
use crate::error::{Error, Result};
use crate::field::FR_BYTES;
use crate::ids::{ArtifactKind, CodecId, WireMode};
use crate::item::KzgParams;
use crate::item::{Key, KeyRef};
use crate::options::{Limits, Validation};
use crate::payload::PayloadReader;
use crate::pk_parts::{PkParts, PkShape};
use crate::vk_parts::VkParts;

/// A backend that stores halo2 keys (BN254, KZG) as a payload inside keycodec's container.
///
/// This is the backend author's interface: an id, the wire modes, one method per direction.
/// Everything a user calls (save, load, read, write...) is provided once for every codec by
/// [`KeyCodecExt`](crate::KeyCodecExt), which frames the payload in the container (header,
/// checksums, length checks) and reads it from memory, streams and files. The trait is
/// object-safe: `&dyn KeyCodec` is how codecs are chosen at run time.
///
/// A backend's tests run the conformance kit in one line
/// (`keycodec_testkit::conformance_tests!(MyCodec::default());`, in the `codec-testkit` crate).
pub trait KeyCodec: Send + Sync {
    /// The codec's name, as users type it (`rawbytes`).
    fn name(&self) -> &'static str;

    /// The id written into (and required from) the container header.
    fn id(&self) -> CodecId;

    /// Every wire mode this codec decodes. A header naming another mode is refused before
    /// decoding, so [`KeyCodec::decode`] only sees these.
    fn wire_modes(&self) -> &'static [WireMode];

    /// The wire mode [`KeyCodec::encode`] writes (one of [`KeyCodec::wire_modes`]).
    fn wire_mode(&self) -> WireMode;

    /// Encodes a key's payload (the part after the container header).
    ///
    /// # Errors
    ///
    /// The writer's I/O errors; [`Error::NotStorable`] for keys the layout cannot hold.
    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()>;

    /// Decodes a payload written by [`KeyCodec::encode`] in `context.mode`, reading only
    /// through `input` and checking every count before allocating.
    ///
    /// # Errors
    ///
    /// Any decode error; never panics on bad input.
    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key>;

    /// Whether this codec stores KZG parameters ([`KeyCodec::encode_params`]).
    fn stores_params(&self) -> bool {
        false
    }

    /// Whether encoding costs far more than writing the payload it makes (a codec that
    /// computes what it stores, as compact does): a container written in order, to a writer
    /// that cannot seek back (an upload), then keeps the first encoding's payload in memory,
    /// within what its caller allows, instead of encoding the item a second time. Default
    /// `false`: the item is encoded twice and nothing is held.
    fn costly_encoding(&self) -> bool {
        false
    }

    /// Whether its decoder reads the payload in order, as a stream (element by element),
    /// rather than by the bulk reads of [`PayloadReader`]'s polynomials. A load from object
    /// storage then sends no first round (whose ranges would all arrive together, not the
    /// first bytes first) and streams from its first answer instead. Default `false`.
    fn reads_in_order(&self) -> bool {
        false
    }

    /// Encodes KZG parameters' payload. The default refuses: only backends with a layout for
    /// them implement it.
    ///
    /// # Errors
    ///
    /// [`Error::KindNotSupported`] by default; the writer's I/O errors.
    fn encode_params(&self, params: &KzgParams, out: &mut dyn Write) -> Result<()> {
        let _ = (params, out);
        Err(Error::KindNotSupported {
            codec: self.name(),
            kind: ArtifactKind::Params,
        })
    }

    /// Decodes parameters written by [`KeyCodec::encode_params`], as [`KeyCodec::decode`]
    /// does keys: checking `k` ([`DecodeContext::check_payload_k`]) and every count before
    /// allocating. The default refuses.
    ///
    /// # Errors
    ///
    /// [`Error::KindNotSupported`] by default; any decode error.
    fn decode_params(
        &self,
        input: &mut PayloadReader<'_>,
        context: &DecodeContext,
    ) -> Result<KzgParams> {
        let _ = (input, context);
        Err(Error::KindNotSupported {
            codec: self.name(),
            kind: ArtifactKind::Params,
        })
    }

    /// The validation this codec applies to a payload in `mode` given the caller's choice: a
    /// layout that cannot skip the checks (compressed points, canonical scalars) returns
    /// [`Validation::Checked`], a codec configured to trust its files (rawbytes in halo2's
    /// `RawBytesUnchecked`) returns [`Validation::Trusted`].
    fn effective_validation(&self, mode: WireMode, requested: Validation) -> Validation {
        let _ = mode;
        requested
    }
}

/// What a decoder is told besides the payload bytes.
#[derive(Debug)]
pub struct DecodeContext {
    /// The kind requested.
    pub kind: ArtifactKind,
    /// The kind the payload holds (the header's): [`ArtifactKind::Proving`] when a verifying key is
    /// read from a proving key's payload, which then continues after it.
    pub payload_kind: ArtifactKind,
    /// The codec's wire mode recorded in the header: one of the codec's
    /// [`KeyCodec::wire_modes`].
    pub mode: WireMode,
    /// The circuit size recorded in the header; `None` for headerless imports, where the
    /// payload's own `k` is the only one.
    pub k: Option<u32>,
    /// Check values, or trust them.
    pub validation: Validation,
    /// Limits from the load options.
    pub limits: Limits,
    /// The circuit's freshly configured constraint system (selectors not yet converted).
    pub cs: ConstraintSystem<Fr>,
}

impl DecodeContext {
    /// Checks the `k` a payload declares: equal to the header's (when there is one) and
    /// within the field's and the caller's limits. Call it before anything sized by `2^k`.
    ///
    /// # Errors
    ///
    /// [`Error::Structure`] when payload and header disagree, [`Error::KOutOfRange`].
    pub fn check_payload_k(&self, k: u32) -> Result<()> {
        if let Some(header_k) = self.k {
            if k != header_k {
                return Err(Error::Structure {
                    what: "k in the payload against the header",
                    expected: u64::from(header_k),
                    found: u64::from(k),
                });
            }
        }
        check_k(k, &self.limits)
    }

    /// Builds the requested key for a backend that stores every polynomial element in
    /// [`FR_BYTES`] bytes (rawbytes, rkyv): a verifying key from `vk` alone, or a proving key
    /// whose polynomials `read_polys` decodes from `input`. Before anything `2^k`-sized is
    /// allocated, the payload must hold [`FR_BYTES`] per polynomial element, so that a short
    /// forged file cannot claim a large key. When the payload's length is the source's (a
    /// file, a slice), the verifying key's evaluation domain is built on another thread while
    /// the polynomials are read ([`VkPlan::finish_while`]); from a stream, whose declared
    /// length proves nothing, the polynomials are read first, as their bytes arrive, and the
    /// domain after them.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] when the payload is shorter than the polynomials,
    /// [`Error::OverBudget`], the errors of [`VkPlan::new`], `read_polys`'s, and those of
    /// [`assemble_pk`].
    pub fn assemble(
        &self,
        vk: VkParts,
        input: &mut PayloadReader<'_>,
        read_polys: impl FnOnce(&mut PayloadReader<'_>, &PkShape) -> Result<PkParts>,
    ) -> Result<Key> {
        if self.kind == ArtifactKind::Verifying {
            return self.assemble_vk(vk);
        }
        let plan = VkPlan::new(self.cs.clone(), vk, &self.limits)?;
        let poly_bytes = plan.pk_shape().total_elements() * FR_BYTES as u128;
        input.ensure_available(poly_bytes, "proving key polynomials")?;
        let poly_bytes = u64::try_from(poly_bytes).unwrap_or(u64::MAX);
        let what = "a proving key's evaluation domain";
        let (vk, polys) = if input.length_verified() {
            plan.check_budget(what, poly_bytes, 0)?;
            plan.finish_while(|shape| read_polys(input, shape))?
        } else {
            let polys = read_polys(input, &plan.pk_shape())?;
            // The polynomials' bytes have arrived: they justify the domain.
            plan.check_budget(what, poly_bytes, 0)?;
            let domain = plan.build_domain();
            (plan.finish(domain)?, polys)
        };
        assemble_pk(vk, polys).map(Key::Proving)
    }

    /// Builds a verifying key from decoded parts, checking them against the circuit. Its
    /// evaluation domain is memory the key's bytes do not justify: it must fit the budget.
    ///
    /// # Errors
    ///
    /// Those of [`VkPlan::new`], and [`Error::OverBudget`].
    pub fn assemble_vk(&self, vk: VkParts) -> Result<Key> {
        assemble_vk(self.cs.clone(), vk, &self.limits).map(Key::Verifying)
    }

    /// Builds a proving key from parts decoded in full, checking them against the circuit:
    /// every polynomial count and length first, then the verifying key, whose evaluation
    /// domain the polynomials' bytes justify.
    ///
    /// # Errors
    ///
    /// Those of [`VkPlan::new`] and [`assemble_pk`], and [`Error::OverBudget`].
    pub fn assemble_pk(&self, vk: VkParts, pk: PkParts) -> Result<Key> {
        let plan = VkPlan::new(self.cs.clone(), vk, &self.limits)?;
        let shape = plan.pk_shape();
        check_shape(&pk, &shape)?;
        let poly_bytes = shape.total_elements() * FR_BYTES as u128;
        plan.check_budget(
            "a proving key's evaluation domain",
            u64::try_from(poly_bytes).unwrap_or(u64::MAX),
            0,
        )?;
        let domain = plan.build_domain();
        assemble_pk(plan.finish(domain)?, pk).map(Key::Proving)
    }
}
