//! What a load case does, as data: a [`Load`] is run in the harness's own process (a warm
//! one, whose allocator hands back memory freed by the previous load) or sent to a child
//! process of its own (fresh, as a prover's start is), and what it loaded is checked against
//! the original (parameters by digest, a key by [`KeyValues`]).

mod floor_read;
mod fresh;
mod in_process;

use halo2_proofs::plonk::ProvingKey;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::{Fr, G1Affine};
use keycodec::{KeyDigest, Validation};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use twox_hash::XxHash3_64;

pub use floor_read::{floor, Floor, Way, SMALL_FILE};
pub use fresh::{child, prime, prime_in_child, run_in_child, ChildRequest};
pub use in_process::{codec, run_here, run_reloading};

/// halo2's file layouts, as the cases name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Format {
    /// `SerdeFormat::RawBytes`: raw, each value checked.
    RawBytes,
    /// `SerdeFormat::RawBytesUnchecked`: raw, trusted.
    RawBytesUnchecked,
    /// `SerdeFormat::Processed`: compressed.
    Processed,
}

impl Format {
    /// halo2's own value.
    pub fn serde(self) -> SerdeFormat {
        match self {
            Format::RawBytes => SerdeFormat::RawBytes,
            Format::RawBytesUnchecked => SerdeFormat::RawBytesUnchecked,
            Format::Processed => SerdeFormat::Processed,
        }
    }
}

/// How values are treated, as the cases name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Values {
    /// Every value checked.
    Checked,
    /// Values trusted.
    Trusted,
    /// Checked, and the key's digest pinned.
    Pinned,
}

impl Values {
    /// The validation a keycodec load uses.
    pub fn validation(self) -> Validation {
        match self {
            Values::Trusted => Validation::Trusted,
            Values::Checked | Values::Pinned => Validation::Checked,
        }
    }
}

/// One load, as data (so that a child process can run it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Load {
    /// The proving key with a keycodec backend's codec of this wire mode.
    Key {
        /// Backend name.
        backend: String,
        /// Wire mode name.
        mode: String,
        /// Checked, trusted or pinned.
        values: Values,
    },
    /// The proving key with halo2's `ProvingKey::read` through a 1 MiB `BufReader`, as
    /// halo2-lib's snark-verifier-sdk calls it.
    NativeKey(Format),
    /// The KZG parameters with a backend's codec.
    Params {
        /// Backend name.
        backend: String,
        /// Wire mode name.
        mode: String,
        /// Checked or trusted.
        values: Values,
    },
    /// The parameters with halo2's `ParamsKZG::read_custom`.
    NativeParams(Format),
    /// keycodec's import of halo2's parameters file in this layout.
    ImportParams(Format),
    /// `open_params` of the (larger) parameters file, downsized to this `k`.
    Downsize(u32),
    /// keycodec's cold start: parameters and key from their files, checked.
    ColdStart {
        /// Backend name.
        backend: String,
    },
    /// halo2's: `ParamsKZG::read_custom` then `ProvingKey::read`, checked.
    NativeColdStart,
    /// The floor: the file read, nothing decoded (see [`floor`]).
    Floor {
        /// Bytes of each of the key's polynomials (a key file is read into memory allocated
        /// as a key's is: one vector each); `None` for parameters.
        polynomial_bytes: Option<u64>,
        /// `(degree, k)` of the key's evaluation domain, built on another thread meanwhile.
        domain: Option<(u32, u32)>,
        /// Which visit of its case this is (a cold floor may take one way per visit, in turn).
        #[serde(default)]
        visit: usize,
    },
}

impl Load {
    /// This load as its case's `visit`th (only a floor's differs by visit).
    pub fn at_visit(&self, visit: usize) -> Load {
        let mut load = self.clone();
        if let Load::Floor { visit: at, .. } = &mut load {
            *at = visit;
        }
        load
    }
}

/// What every load of one run is measured against.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    /// `k` of the key.
    pub k: u32,
    /// The original key's digest: pinned loads pin it, and every loaded key must have it.
    pub key: String,
    /// The original key's values, when the harness holds the original (not when only its
    /// digest is given, `--original-digest`): a loaded key is checked by them, a cheaper
    /// check than its digest.
    pub key_values: Option<KeyValues>,
    /// The parameters' digest.
    pub params: String,
    /// The downsized parameters' digest, when a case downsizes.
    pub downsized: Option<String>,
}

/// A key's values as a load's check compares them: its verifying key's digest and the XXH3
/// of each polynomial's values (raw, in halo2's order). Any value a load lost, moved or
/// altered fails the check, as with the key's digest, at a fraction of its cost: the digest
/// (BLAKE3) of a k = 18 halo2-lib key took 0.2-0.3 s after every load, about as long as a
/// fresh load itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValues {
    vk: String,
    polynomials: Vec<u64>,
}

impl KeyValues {
    /// The values of `pk`, its polynomials hashed on every core.
    ///
    /// # Errors
    ///
    /// The verifying key's digest's, as text.
    pub fn of(pk: &ProvingKey<G1Affine>) -> Result<Self, String> {
        let polynomials: Vec<&[Fr]> = keycodec_core::backend_api::parts::polynomials(pk).collect();
        Ok(KeyValues {
            vk: KeyDigest::of_vk(pk.get_vk())
                .map_err(|e| e.to_string())?
                .to_string(),
            polynomials: polynomials.par_iter().map(|values| hash(values)).collect(),
        })
    }
}

/// The XXH3 of `values`' raw encodings (their memory where it is that, as on every
/// little-endian machine).
fn hash(values: &[Fr]) -> u64 {
    use halo2curves::serde::SerdeObject;
    match keycodec_core::backend_api::raw_view::as_raw_elements(values) {
        Some(elements) => XxHash3_64::oneshot(elements.as_flattened()),
        None => {
            let mut hasher = XxHash3_64::new();
            for value in values {
                std::hash::Hasher::write(&mut hasher, &value.to_raw_bytes());
            }
            std::hash::Hasher::finish(&hasher)
        }
    }
}

/// One measured load.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds the load took.
    pub seconds: f64,
    /// Whether it loaded the original.
    pub verified: bool,
    /// Rise of resident memory during the load, if measurable.
    pub rss_rise: Option<u64>,
    /// The process's memory in transparent huge pages right after the load (its key held).
    #[serde(default)]
    pub huge_pages: Option<u64>,
    /// The machine's compaction stalls during the load.
    #[serde(default)]
    pub compact_stalls: Option<u64>,
    /// The share of the load's files' pages in the page cache when it began (`mincore`; set
    /// by the runner, which drops them first for a cold load).
    #[serde(default)]
    pub cached_before: Option<f64>,
    /// A floor's way of reading that took these seconds; `None` for a load.
    #[serde(default)]
    pub way: Option<Way>,
    /// The processor time and page faults of the load, its process's threads together;
    /// `None` for a floor (which times only the fastest of its ways) or where not measured.
    #[serde(default)]
    pub cpu: Option<crate::measure::cpu::CpuUse>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key's values tell it from a key one polynomial value apart, as its digest does.
    #[test]
    fn key_values_tell_a_key_from_one_a_value_apart() {
        let fixture = keycodec_testkit::standard_plonk();
        let original = KeyValues::of(&fixture.pk).unwrap();
        let read = |bytes: &[u8]| {
            ProvingKey::<G1Affine>::read::<_, keycodec_testkit::StandardPlonk>(
                &mut &bytes[..],
                SerdeFormat::RawBytesUnchecked,
                (),
            )
            .unwrap()
        };
        let mut bytes = keycodec_testkit::pk_bytes(&fixture.pk);
        assert_eq!(KeyValues::of(&read(&bytes)).unwrap(), original);
        // The last byte of the last polynomial's last value (its highest, so still a value).
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        let altered = read(&bytes);
        assert_ne!(KeyValues::of(&altered).unwrap(), original);
        assert_ne!(
            KeyDigest::of_pk(&altered).unwrap(),
            KeyDigest::of_pk(&fixture.pk).unwrap()
        );
    }
}
