//! What the runs of the harness measure: the files they write (saves are sampled as often as
//! loads) and the loads ("cases") they time, each case knowing the rows it is compared with.
//!
//! A run writes the files, then times each case once (the floors too; after the minimum of
//! runs, only the files and cases of the ratios still widest, `runs`), the loads of
//! each state one after the other, in an order rotated run by run (`runs`), so that
//! compared rows see the same moments of a noisy machine and their ratios can be taken run
//! by run (`stats::paired`). Each load
//! runs in one of two states: `warm`, in the harness's own process as a server reloading its
//! key (`exec::run_reloading`: the allocator hands back the memory of a copy just freed);
//! `fresh`, in a child process of its own (a prover's start).

mod local;
mod parts;

use std::path::{Path, PathBuf};

use halo2_proofs::plonk::ProvingKey;
use halo2curves::bn256::G1Affine;
use keycodec::{Backend, KzgParams};
use serde::Serialize;

use crate::exec::Target;
// The module the docs link to.
#[cfg(doc)]
use crate::exec;
use crate::workload::Workload;

pub use local::plan;
pub use parts::{Case, File, Plan};

/// The reference rows: halo2's own writer and reader.
pub const HALO2_NATIVE: &str = "halo2-native";

/// What a durable save row of `backend` timed: halo2's write and its sync, or keycodec's
/// durable save.
pub fn durable_save_name(backend: &str) -> &'static str {
    match backend {
        HALO2_NATIVE => "write + sync",
        _ => "durable save",
    }
}

/// The rows that bound every loader from below ([`exec::floor`]).
pub const FLOOR: &str = "floor";

/// The backends the harness knows, by the names `--backends` takes: keycodec's backend list
/// and halo2's own reader.
pub fn backend_names() -> Vec<&'static str> {
    Backend::compiled()
        .map(Backend::name)
        .chain([HALO2_NATIVE])
        .collect()
}

/// What a row loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A proving key.
    Pk,
    /// KZG parameters.
    Params,
    /// A prover's cold start: parameters and proving key.
    ColdStart,
    /// A proving key in object storage (`--remote`).
    Remote,
    /// A prover's cold start from storage: parameters by URL and the key in object storage,
    /// through a cache (`--remote`).
    RemoteStart,
}

/// The process a load runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The harness's own process reloading ([`exec::run_reloading`]): its allocator hands
    /// back the memory of a copy of the same key just freed (a server replacing its key).
    Warm,
    /// A new process for the load alone (a prover's start).
    Fresh,
    /// A new process for the load alone, its files' pages dropped from the page cache just
    /// before (a prover's start after a deploy or a reboot): the files are read from the disk.
    Cold,
}

impl State {
    /// The name the table shows.
    pub fn name(self) -> &'static str {
        match self {
            State::Warm => "warm",
            State::Fresh => "fresh",
            State::Cold => "cold",
        }
    }
}

/// How fresh-process loads are run: this harness's binary (`--child`), and the workload's
/// name and configuration it needs.
pub struct ChildSpec {
    /// The harness binary.
    pub exe: PathBuf,
    /// The workload.
    pub circuit: crate::CircuitName,
    /// Its configuration, JSON.
    pub circuit_params: String,
}

/// The artifacts measured, and what the plan includes.
pub struct Inputs<'a, C: Workload> {
    /// The benchmark key.
    pub pk: &'a ProvingKey<G1Affine>,
    /// Its circuit's configuration.
    pub circuit_params: &'a C::Params,
    /// The digests every load is checked against (and the key's, which pinned loads pin).
    pub target: Target,
    /// The parameters it was generated with.
    pub params: &'a KzgParams,
    /// Where the files go.
    pub scratch: &'a Path,
    /// The backends selected (`--backends`).
    pub backends: &'a [String],
    /// Every wire mode, pinned rows, halo2's `Processed` rows, the `Processed` parameter
    /// import and a cold start per backend (`--full`); otherwise each backend's default
    /// mode, checked and trusted.
    pub full: bool,
    /// The row that opens the parameters downsized to k - 1 (`--downsize`).
    pub downsize: bool,
    /// Each backend's key without its record too, loaded checked (`--record-cost`).
    pub record_cost: bool,
    /// The states loads run in.
    pub states: &'a [State],
    /// How fresh loads run.
    pub child: &'a ChildSpec,
}

/// The mode name of keycodec's import of a halo2 `Processed` parameters file.
pub const IMPORT_PROCESSED: &str = "import Processed";
