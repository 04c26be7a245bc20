//! The core's conformance kit, once per halo2 format.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod raw_bytes {
    use keycodec_rawbytes::RawBytesCodec;
    keycodec_testkit::conformance_tests!(RawBytesCodec::default());
}

mod raw_bytes_unchecked {
    use keycodec_core::halo2_proofs::SerdeFormat;
    use keycodec_rawbytes::RawBytesCodec;
    keycodec_testkit::conformance_tests!(RawBytesCodec::new(SerdeFormat::RawBytesUnchecked));
}

mod processed {
    use keycodec_core::halo2_proofs::SerdeFormat;
    use keycodec_rawbytes::RawBytesCodec;
    keycodec_testkit::conformance_tests!(RawBytesCodec::new(SerdeFormat::Processed));
}
