//! Object storage (feature `remote`): S3 and compatible stores, and public files by HTTP(S)
//! URL. An artifact there is a [`crate::Location::Object`] (made by
//! [`Location::url`](crate::Location::url), or from a [`Remote`] configured in code), loaded
//! with [`crate::load_key`] and [`crate::open_params`] through the machine's one cache.
//! [`fetch_params`] fills the cache ahead of a start and says whether it was warm; a
//! manifest's artifacts are fetched together with
//! [`Manifest::fetch`](crate::manifest::Manifest::fetch).

pub use keycodec_remote::{object_store, ObjectInfo, Remote, RemoteOptions};

pub use crate::cache::{fetch_params, CacheOutcome, Fetched};
