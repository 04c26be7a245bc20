//! Which point check a process uses: several points at a time where the CPU has the
//! instructions ([`super::ifma`]: eight with AVX-512 IFMA; [`super::avx2`]: four with AVX2)
//! and the environment does not turn it off, else one at a time.

/// How many G1 points checked loads check at a time (the bulk of a checked load of
/// parameters): 8 with AVX-512 IFMA, else 4 with AVX2 (x86-64), else 1; 1 wherever the
/// environment variable [`WIDE_POINT_CHECK_ENV`] is `0`. Every way answers the same (a wide
/// check only confirms; what it does not confirm is decided point by point); `0` is for
/// measuring how a CPU without the instructions loads. Decided once per process, at the first
/// call (a load's, or a caller's).
pub fn points_checked_at_once() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        match check() {
            Some(Wide::Ifma(_)) => super::ifma::LANES,
            Some(Wide::Avx2(_)) => super::avx2::LANES,
            None => 1,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        1
    }
}

/// The environment variable that turns the wide checks off ([`points_checked_at_once`]):
/// `0` checks points one at a time; any other value (or none) leaves it to the CPU. Set it
/// in the process's environment before it starts.
pub const WIDE_POINT_CHECK_ENV: &str = "KEYCODEC_WIDE_POINT_CHECK";

/// A check of several points at a time, and the proof that the CPU has its instructions.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) enum Wide {
    /// Eight at a time, AVX-512 IFMA.
    Ifma(super::ifma::Ifma),
    /// Four at a time, AVX2.
    Avx2(super::avx2::Avx2),
}

/// The widest check this CPU has, unless [`WIDE_POINT_CHECK_ENV`] turns them off.
#[cfg(target_arch = "x86_64")]
pub(super) fn check() -> Option<Wide> {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let allowed = *ALLOWED.get_or_init(|| {
        let set = std::env::var_os(WIDE_POINT_CHECK_ENV);
        crate::memory::parse_override(set.as_deref().and_then(std::ffi::OsStr::to_str))
            != Some(false)
    });
    if !allowed {
        return None;
    }
    super::ifma::Ifma::detect()
        .map(Wide::Ifma)
        .or_else(|| super::avx2::Avx2::detect().map(Wide::Avx2))
}
