//! What a load takes from this machine's memory: transparent huge pages, and the page cache
//! for a file read from the disk; neither where the machine's host takes back the memory its
//! guest frees.
//!
//! A VM whose balloon device reports free memory to its host (virtio-balloon's free page
//! reporting) hands the host every free block of 2 MiB or more that has been free for about
//! two seconds; the host drops what backs it, and the guest's next touch of it faults in the
//! host. Huge pages come from exactly those blocks, small pages mostly from smaller free
//! pieces. There a load asking for huge pages costs what the machine did before it (three
//! times as much after it idled, as a prover's start finds it), and one in small pages the
//! same either way (`docs/performance.md`, "How to measure"). Elsewhere (bare metal, VMs
//! without free page reporting) a huge page costs one fault where small pages cost 512, and
//! loads ask for them.
//!
//! The page cache takes its pages from the same blocks: there a file read from the disk
//! through the page cache costs whatever the machine did before (the k = 18 key, 1.13 GB,
//! loaded in a new process: 0.55-2.4 s), while a read past the page cache (`O_DIRECT`)
//! through buffers of the reader's own costs about the same in any state (0.6-1.06 s). So
//! there a file read from the disk is read past it ([`reads_past_page_cache`]), unless the
//! disk itself serves reads through the page cache much faster: on another such VM,
//! buffered reads of a file whose pages the guest had dropped ran at 3.5 GB/s (its host
//! caches the disk) and reads past the page cache at 0.8-1.4 GB/s, and there the key loaded
//! 1.4-1.8x faster through the page cache, and no slower after the machine idled.

use std::ffi::OsStr;
use std::sync::OnceLock;

/// Whether keycodec's loads ask the kernel to back the memory they fill with transparent
/// huge pages (`MADV_HUGEPAGE`) or, when not, keep it in small pages (`MADV_NOHUGEPAGE`,
/// which holds where `transparent_hugepage/enabled` is `always` too): as the environment
/// variable [`HUGE_PAGES_ENV`] says where it is `1` (ask) or `0` (do not); otherwise (unset,
/// or any other value) ask, unless this machine's memory balloon reports free memory to its
/// host (Linux: a virtio-balloon device with its `REPORTING` feature, bit 5 of
/// `/sys/bus/virtio/drivers/virtio_balloon/*/features`). Decided once per process, at the
/// first call (a load's, or a caller's), and the same for the rest of it.
pub fn asks_for_huge_pages() -> bool {
    static ASKS: OnceLock<bool> = OnceLock::new();
    *ASKS.get_or_init(|| {
        let set = std::env::var_os(HUGE_PAGES_ENV);
        parse_override(set.as_deref().and_then(OsStr::to_str))
            .unwrap_or_else(|| !host_takes_back_free_memory())
    })
}

/// The environment variable that decides [`asks_for_huge_pages`] over the machine's probe:
/// `1` asks for huge pages, `0` does not; any other value leaves it to the probe. For an
/// operator who knows the machine's memory better, and to measure a machine both ways; set
/// it in the process's environment before it starts.
pub const HUGE_PAGES_ENV: &str = "KEYCODEC_HUGE_PAGES";

/// Whether keycodec may read a file that is mostly not in the page cache (a start after a
/// reboot, or once the kernel dropped the file) past the page cache (`O_DIRECT`, through
/// buffers of its own, in aligned blocks), rather than through it: as the environment
/// variable [`DIRECT_READS_ENV`] says where it is `1` (past it, every such file) or `0`
/// (through it); otherwise only where this machine's memory balloon reports free memory to
/// its host (see [`asks_for_huge_pages`]), and there a file of 256 MiB or more only where
/// a first look at it finds reading past the page cache pays: 8 MiB read past it as a load
/// reads (requests of 1 MiB, four at once), then the file's first 64 MiB through it, and
/// the file is read through the page cache where that went over 1.5 times as fast (a VM
/// whose host serves its disk's buffered reads from a cache of its own, for one: there
/// 0.7-0.9 GB/s past the page cache, 1.8-2.5 GB/s through it). A file under 4 MiB is read
/// through the page cache all the same (reading past it costs more to start than such a
/// file takes to read). A file read past the page cache is not left in it (but for the
/// first look's 64 MiB): the next process to load it reads it from the disk again. Where
/// the file system refuses a read past the page cache, the file is read through it. Never
/// off Linux. Decided once per process, as [`asks_for_huge_pages`] is (the first look, once
/// per file, by the load's first read that would go past the page cache: after its header
/// is checked, and never for a load that reads only a file's small parts).
pub fn reads_past_page_cache() -> bool {
    page_cache_way() != PageCacheWay::Through
}

/// How files from the disk are read, by [`reads_past_page_cache`]'s rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageCacheWay {
    /// Through the page cache.
    Through,
    /// Past it, as [`DIRECT_READS_ENV`] asks.
    Past,
    /// Past it where a first look at a large file finds that pays.
    PastWherePays,
}

/// [`reads_past_page_cache`]'s rule for this process.
pub(crate) fn page_cache_way() -> PageCacheWay {
    static WAY: OnceLock<PageCacheWay> = OnceLock::new();
    *WAY.get_or_init(|| {
        let set = std::env::var_os(DIRECT_READS_ENV);
        // Only Linux reads so (`O_DIRECT` through `/proc/self/fd`).
        if !cfg!(target_os = "linux") {
            return PageCacheWay::Through;
        }
        match parse_override(set.as_deref().and_then(OsStr::to_str)) {
            Some(true) => PageCacheWay::Past,
            Some(false) => PageCacheWay::Through,
            None if host_takes_back_free_memory() => PageCacheWay::PastWherePays,
            None => PageCacheWay::Through,
        }
    })
}

/// The environment variable that decides [`reads_past_page_cache`] over the machine's probe:
/// `1` reads files from the disk past the page cache (without a first look at them), `0`
/// through it; any other value leaves it to the probe.
pub const DIRECT_READS_ENV: &str = "KEYCODEC_DIRECT_READS";

/// What an override variable's value ([`HUGE_PAGES_ENV`]'s, [`DIRECT_READS_ENV`]'s,
/// [`crate::WIDE_POINT_CHECK_ENV`]'s) chooses: `Some` for `1` or `0`, `None` (the probe
/// decides) for anything else or no value.
pub(crate) fn parse_override(value: Option<&str>) -> Option<bool> {
    match value.map(str::trim) {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    }
}

/// Whether a balloon device of this machine reports free memory to its host.
#[cfg(target_os = "linux")]
fn host_takes_back_free_memory() -> bool {
    let Ok(devices) = std::fs::read_dir("/sys/bus/virtio/drivers/virtio_balloon") else {
        return false;
    };
    devices.filter_map(|entry| entry.ok()).any(|device| {
        std::fs::read_to_string(device.path().join("features"))
            .is_ok_and(|features| reports_free_pages(&features))
    })
}

/// Not probed on other systems: they are left to ask.
#[cfg(not(target_os = "linux"))]
fn host_takes_back_free_memory() -> bool {
    false
}

/// virtio-balloon's free page reporting feature (`VIRTIO_BALLOON_F_REPORTING`).
const REPORTING_BIT: usize = 5;

/// Whether a virtio device's `features` (one `0` or `1` per feature bit, bit 0 first, as
/// sysfs shows them) include free page reporting.
fn reports_free_pages(features: &str) -> bool {
    features.trim().as_bytes().get(REPORTING_BIT) == Some(&b'1')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_page_reporting_is_bit_five_of_the_features() {
        // This project's machine's balloon: stats (bit 1), deflate on OOM (2), reporting
        // (5), and bit 7 and bit 32 (transport features).
        assert!(reports_free_pages(
            "0110010100000000000000000000000010000000000000000000000000000000\n"
        ));
        assert!(!reports_free_pages("0110000100000000"));
        assert!(!reports_free_pages("01100"));
        assert!(!reports_free_pages(""));
    }

    #[test]
    fn the_variable_chooses_with_one_or_zero_and_leaves_the_rest_to_the_probe() {
        assert_eq!(parse_override(Some("1")), Some(true));
        assert_eq!(parse_override(Some("0\n")), Some(false));
        for other in [None, Some(""), Some("yes"), Some("2"), Some("true")] {
            assert_eq!(parse_override(other), None, "{other:?}");
        }
    }
}
