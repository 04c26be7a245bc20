//! The core's conformance kit, plus the compact layout's own cases.

// Test code: failing loudly is its job.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use codec_compact::CompactCodec;

codec_core::conformance_tests!(CompactCodec);
