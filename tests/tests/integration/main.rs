//! The integration tests that share a process: one test binary for all of them, so that the
//! workspace's test build links halo2 (and the S3 client) once instead of once per file.
//!
//! The files left beside this folder need a process of their own: a counting global allocator
//! (`bounded_memory`, `fuzz_replay`), process-wide environment variables (`compat`,
//! `test_setup`, `faults`) or a machine otherwise idle (`speed_guard`).

mod assembly;
mod backends;
mod cold_start;
mod crash;
mod format_stability;
mod manifest;
mod pinning;
mod proofs;
mod properties;
mod record;
mod remote;
mod start_failures;
