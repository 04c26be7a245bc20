//! Which point check a process uses: eight points at a time with AVX-512 IFMA ([`super::ifma`])
//! where the CPU has it and the environment does not turn it off, else one at a time.

/// Whether checked loads check G1 points (the bulk of a checked load of parameters) eight at
/// a time with AVX-512 IFMA: where this CPU has it (x86-64 with AVX-512F and IFMA), unless the
/// environment variable [`WIDE_POINT_CHECK_ENV`] is `0`. Both ways answer the same (the wide
/// check only confirms; what it does not confirm is decided point by point); `0` is for
/// measuring, on a CPU that has the instructions, how one without them loads. Decided once per
/// process, at the first call (a load's, or a caller's).
pub fn checks_points_eight_at_once() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        check().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The environment variable that turns [`checks_points_eight_at_once`] off: `0` checks points
/// one at a time; any other value (or none) leaves it to the CPU. Set it in the process's
/// environment before it starts.
pub const WIDE_POINT_CHECK_ENV: &str = "KEYCODEC_WIDE_POINT_CHECK";

/// The wide check, where this CPU has it and [`WIDE_POINT_CHECK_ENV`] does not turn it off.
#[cfg(target_arch = "x86_64")]
pub(super) fn check() -> Option<super::ifma::Ifma> {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let allowed = *ALLOWED.get_or_init(|| {
        let set = std::env::var_os(WIDE_POINT_CHECK_ENV);
        crate::memory::parse_override(set.as_deref().and_then(std::ffi::OsStr::to_str))
            != Some(false)
    });
    if allowed {
        super::ifma::Ifma::detect()
    } else {
        None
    }
}
