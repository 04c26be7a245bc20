//! The conformance kit: every backend must pass every case here.
//!
//! A backend's test file runs them all with one line, `keycodec_testkit::conformance_tests!(codec);`,
//! which expands to one `#[test]` per case so that a failure names its case.

#[cfg(unix)]
mod changed_during_load;
#[cfg(unix)]
mod changing_file;
mod damage;
mod failed_save;
mod files;
mod mismatch;
mod pins;
mod round_trip;

use halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use halo2curves::bn256::G1Affine;

#[cfg(unix)]
pub use changed_during_load::{
    a_file_changed_by_another_thread_never_loads_other_bytes,
    a_file_changed_while_it_loads_is_refused_or_loads_as_it_was,
};
pub use damage::{
    damaged_files_are_refused, empty_and_short_inputs_are_truncated, every_bit_flip_is_detected,
    every_truncation_is_an_error, forged_corruption_never_panics, huge_declared_payload_is_refused,
    reported_as_corruption, skipping_the_checksum_is_explicit, trailing_bytes_are_refused,
};
pub use failed_save::failed_save_keeps_previous_file;
pub use files::{
    leftover_temp_files, refresh_checksums, rewrite_header, small_pk_file, without_record,
};
pub use mismatch::{
    wrong_circuit_is_refused, wrong_codec_is_refused, wrong_k_is_refused, wrong_kind_is_refused,
};
pub use pins::{
    a_forged_recorded_digest_is_refused_when_the_digest_is_computed,
    a_verifying_key_loads_from_a_proving_keys_file,
    pinned_loads_check_the_key_digest_from_every_source,
};
pub use round_trip::{round_trip_real_keys, round_trip_through_files, trusted_mode_round_trips};

type Pk = ProvingKey<G1Affine>;
type Vk = VerifyingKey<G1Affine>;

/// Runs every case against `codec`, one `#[test]` each.
#[macro_export]
macro_rules! conformance_tests {
    ($codec:expr) => {
        $crate::conformance_tests!(@cases $codec;
            round_trip_real_keys,
            round_trip_through_files,
            trusted_mode_round_trips,
            every_truncation_is_an_error,
            every_bit_flip_is_detected,
            damaged_files_are_refused,
            skipping_the_checksum_is_explicit,
            forged_corruption_never_panics,
            wrong_circuit_is_refused,
            wrong_codec_is_refused,
            wrong_kind_is_refused,
            wrong_k_is_refused,
            trailing_bytes_are_refused,
            empty_and_short_inputs_are_truncated,
            huge_declared_payload_is_refused,
            failed_save_keeps_previous_file,
            pinned_loads_check_the_key_digest_from_every_source,
            a_verifying_key_loads_from_a_proving_keys_file,
            a_forged_recorded_digest_is_refused_when_the_digest_is_computed
        );
        #[cfg(unix)]
        $crate::conformance_tests!(@cases $codec;
            a_file_changed_while_it_loads_is_refused_or_loads_as_it_was,
            a_file_changed_by_another_thread_never_loads_other_bytes
        );
    };
    (@cases $codec:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                $crate::conformance::$case(&$codec);
            }
        )*
    };
}
