//! What a [`Remote`] does with objects: heads, headers and ranges, uploads of keys,
//! parameters and files, loads decoded as their ranges arrive, downloads to a file.

use super::*;

impl Remote {
    /// The object's size, ETag and version.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around [`Error::ObjectStore`] (a missing object
    /// among others).
    pub fn head(&self, location: &ObjectPath) -> Result<ObjectInfo> {
        let head = || {
            let meta = self
                .handle()?
                .block_on(self.store.head(location))
                .map_err(|err| store_error("read the metadata of", err))?;
            Ok(ObjectInfo::from(meta))
        };
        head().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// The container header of the object at `location` (one ranged GET of its first bytes),
    /// checked: which codec, kind, `k` and circuit it holds, before anything else is read.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around the store's errors and the header's
    /// ([`Error::BadMagic`], [`Error::HeaderChecksum`], [`Error::Truncated`]...).
    pub fn header(&self, location: &ObjectPath) -> Result<Header> {
        let info = self.head(location)?;
        self.header_of(location, &info)
    }

    /// The container header of the object at `location` as [`Remote::head`] described it
    /// (`info`): its first bytes, by one ranged GET conditional on that version.
    ///
    /// # Errors
    ///
    /// As [`Remote::header`].
    pub fn header_of(&self, location: &ObjectPath, info: &ObjectInfo) -> Result<Header> {
        let read = || {
            let len = usize::try_from(info.size.min(HEADER_LEN as u64)).unwrap_or(HEADER_LEN);
            let mut bytes = [0u8; HEADER_LEN];
            let head = bytes.get_mut(..len).unwrap_or_default();
            self.read_range(location, info, head, 0)?;
            Header::from_bytes(bytes.get(..len).unwrap_or_default())
        };
        read().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// Fills `buf` with the object's bytes from `offset`, as [`Remote::head`] described it
    /// (`info`): ranged GETs conditional on that version.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around [`Error::Truncated`] for a range past its
    /// end, [`Error::ObjectChanged`] and the store's errors.
    pub fn read_range(
        &self,
        location: &ObjectPath,
        info: &ObjectInfo,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<()> {
        let mut read = || {
            let source = self.source(location, info, None)?;
            let read = transport::ReadAt::read_exact_at(&source, buf, offset);
            if let Some(failure) = source.take_failure() {
                return Err(failure);
            }
            read.map_err(|err| Error::from_read(err, "a range of the object"))
        };
        read().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// Saves a key to `location` (see the module docs: nothing appears under that name
    /// unless the whole upload succeeds); returns its digest, which the object records.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around the store's errors and the codec's.
    pub fn save<C: Circuit<Fr>, K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        key: &K,
        circuit_params: C::Params,
    ) -> Result<KeyDigest>
    where
        C::Params: RecordableParams,
    {
        let circuit = Described::of::<C>(circuit_params);
        let keep = self.kept_payload(codec);
        self.upload(location, None, &|_| {}, keep, |writer| {
            let item = ItemRef::Key(key.as_key_ref());
            transport::write_in_order(codec, item, &circuit, writer, keep)
        })
    }

    /// Saves KZG parameters to `location`, as [`Remote::save`] saves keys.
    ///
    /// # Errors
    ///
    /// As [`Remote::save`], and [`Error::KindNotSupported`] from codecs that do not store
    /// parameters.
    pub fn save_params(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        params: &KzgParams,
    ) -> Result<KeyDigest> {
        let keep = self.kept_payload(codec);
        self.upload(location, None, &|_| {}, keep, |writer| {
            let item = ItemRef::Params(params);
            transport::write_in_order(codec, item, &Described::none(), writer, keep)
        })
    }

    /// Bytes of a save's first encoding kept to be uploaded as they are: half of
    /// [`RemoteOptions::memory`] for a codec whose encoding is costly (the parts in flight
    /// get the other half), none for the rest, which are encoded twice.
    fn kept_payload(&self, codec: &dyn KeyCodec) -> usize {
        match codec.costly_encoding() {
            true => self.options.memory / 2,
            false => 0,
        }
    }

    /// Uploads the open `file` as it is (a container saved earlier: check it first, from the
    /// same open file), from its start whatever its cursor, to `location`, reporting bytes
    /// sent to `progress`; returns the bytes uploaded. `path` names it in errors. A file that
    /// changes while it is uploaded (its length, times or inode move) is not uploaded: the
    /// upload is aborted, and no object appears.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file, [`Error::FileChanged`], and as [`Remote::save`].
    pub fn upload_file(
        &self,
        file: &File,
        path: &Path,
        location: &ObjectPath,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64> {
        let before = keycodec_core::FileStamp::of(file).map_err(|err| err.at_path(path))?;
        let size = file
            .metadata()
            .map_err(|err| Error::io("read the size of", err).at_path(path))?
            .len();
        self.upload(location, Some(size), progress, 0, |writer| {
            let mut reader = PositionedReader { file, offset: 0 };
            let sent = std::io::copy(&mut reader, writer)
                .map_err(|err| Error::from_read(err, "the file").at_path(path))?;
            // Checked before the upload completes: a changed file aborts it.
            if sent != size || keycodec_core::FileStamp::of(file).ok().as_ref() != Some(&before) {
                return Err(Error::FileChanged {
                    path: path.to_path_buf(),
                });
            }
            Ok(sent)
        })
    }

    /// Uploads what `write` writes, in parts sized for `size` bytes when it is known (or
    /// for the container whose header the bytes begin with), the parts in flight within
    /// [`RemoteOptions::memory`] less the `held` bytes `write` may hold itself.
    fn upload<T>(
        &self,
        location: &ObjectPath,
        size: Option<u64>,
        progress: &(dyn Fn(u64) + Sync),
        held: usize,
        write: impl FnOnce(&mut dyn std::io::Write) -> Result<T>,
    ) -> Result<T> {
        let upload = || {
            let handle = self.handle()?;
            let (store, at) = (Arc::clone(&self.store), location.clone());
            let started = handle.spawn(async move { store.put_multipart(&at).await });
            let options = RemoteOptions {
                memory: self.options.memory.saturating_sub(held),
                ..self.options
            };
            let mut writer = UploadWriter::new(handle, started, size, options, progress);
            // Small writes (a verifying key's fields) are gathered before they reach the
            // part buffer.
            let written = {
                let mut buffered = std::io::BufWriter::with_capacity(1 << 20, &mut writer);
                write(&mut buffered).and_then(|written| {
                    std::io::Write::flush(&mut buffered)
                        .map_err(|err| Error::io("upload", err))
                        .map(|()| written)
                })
            };
            match written {
                Ok(written) => writer.finish().map(|()| written),
                Err(err) => Err(writer.abort(err)),
            }
        };
        upload().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// Loads a key from `location` (see the module docs), with every check a file load
    /// makes: the object's size stands for the file's length.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around what a file load reports (a truncated or
    /// corrupt object, a pin mismatch...), [`Error::ObjectStore`] and
    /// [`Error::ObjectChanged`].
    pub fn load<C: Circuit<Fr>, K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        self.load_key(
            codec,
            location,
            configure::<C>(circuit_params),
            options,
            None,
        )
    }

    /// Loads a key from `location` as [`Remote::load`] does, for the circuit whose constraint
    /// system `configure` built (`cs`, as `keycodec_core::backend_api::circuit::configure` gives
    /// it), from the version of the object `info` describes (as [`Remote::head`] gave it),
    /// writing every byte of that version into `file` too (sized to `info.size` first; ranges
    /// the load did not need are fetched after it): a cache's miss, whose file holds exactly
    /// the bytes the load checked. A verifying key may come from a proving key's container.
    ///
    /// # Errors
    ///
    /// As [`Remote::load`], and [`Error::Io`] writing the file.
    pub fn load_into<K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        info: &ObjectInfo,
        file: &File,
        cs: ConstraintSystem<Fr>,
        options: &LoadOptions,
    ) -> Result<K> {
        let opened = Opened::of(info.clone());
        self.load_key(codec, location, cs, options, Some(Miss { file, opened }))
    }

    /// [`Remote::load_into`] of the object as [`Remote::open`] found it: its first bytes
    /// are not asked for again.
    pub(crate) fn load_opened_into<K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        opened: Opened,
        file: &File,
        cs: ConstraintSystem<Fr>,
        options: &LoadOptions,
    ) -> Result<K> {
        self.load_key(codec, location, cs, options, Some(Miss { file, opened }))
    }

    /// The object's version by [`Remote::head`], for a load that will not need its header
    /// before it downloads it.
    ///
    /// # Errors
    ///
    /// As [`Remote::head`].
    pub(crate) fn open_head(&self, location: &ObjectPath) -> Result<Opened> {
        self.head(location).map(Opened::of)
    }

    /// The object's version and, when one ranged GET could bring both, its first bytes (see
    /// [`Remote::describe`]); else its version by [`Remote::head`]. With `first_round`, for a
    /// proving key that will be downloaded, its first round goes with that request.
    ///
    /// # Errors
    ///
    /// As [`Remote::head`].
    pub(crate) fn open(&self, location: &ObjectPath, first_round: bool) -> Result<Opened> {
        let (info, first, round) = self.describe(location, first_round)?;
        Ok(Opened { info, first, round })
    }

    /// The object's version and, when one ranged GET could bring both, its container header's
    /// bytes (and no more: what the object must be is read from them before its size is
    /// believed); else its version by [`Remote::head`].
    ///
    /// # Errors
    ///
    /// As [`Remote::head`].
    pub(crate) fn open_header(&self, location: &ObjectPath) -> Result<Opened> {
        let (info, first, round) = self.describe_with(location, HEADER_LEN as u64, false)?;
        Ok(Opened { info, first, round })
    }

    /// The container header of the object as [`Remote::open`] found it: from its first
    /// bytes, else by [`Remote::header_of`].
    ///
    /// # Errors
    ///
    /// As [`Remote::header`].
    pub(crate) fn header_opened(&self, location: &ObjectPath, opened: &Opened) -> Result<Header> {
        match opened.first(HEADER_LEN) {
            Some(first) => {
                Header::from_bytes(first).map_err(|err| err.in_object(&self.name(location)))
            }
            None => self.header_of(location, &opened.info),
        }
    }

    /// A key of kind `K` from any container that holds one ([`Request::for_key`]), written
    /// into a cache's file too on a `miss` (see [`Remote::read`]).
    fn load_key<K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        cs: ConstraintSystem<Fr>,
        options: &LoadOptions,
        miss: Option<Miss<'_>>,
    ) -> Result<K> {
        let decoded = self.read(
            codec,
            location,
            Request::for_key(K::KIND),
            Some(cs),
            options,
            miss,
        )?;
        into_key(decoded, &self.name(location))
    }

    /// Loads KZG parameters from `location`, as [`Remote::load`] loads keys.
    ///
    /// # Errors
    ///
    /// As [`Remote::load`].
    pub fn load_params(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        options: &LoadOptions,
    ) -> Result<KzgParams> {
        let decoded = self.read(
            codec,
            location,
            Request::of(ArtifactKind::Params),
            None,
            options,
            None,
        )?;
        transport::into_params(decoded)
    }

    /// Downloads the object, as [`Remote::head`] described it (`info`), into `file` (from
    /// its start, by ranged GETs at once, each conditional on that version), reporting bytes
    /// received to `progress`. The file is sized to `info.size` first: a size is the server's
    /// claim, so bound it by what the object should hold before calling this (a container's
    /// header, parameters' `k`). The bytes are not checked: load or verify the file before
    /// trusting it.
    ///
    /// # Errors
    ///
    /// As [`Remote::load`] ([`Error::ObjectChanged`] when the object is no longer that
    /// version), and [`Error::Io`] writing the file.
    pub fn download_to(
        &self,
        location: &ObjectPath,
        info: &ObjectInfo,
        file: &File,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        let download = || {
            file.set_len(info.size)
                .map_err(|err| Error::io("size the download file", err))?;
            let source = self.source(location, info, Some(file))?;
            self.fill(&source, 0..info.size, progress)
        };
        download().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// A source of the object's bytes, writing them to `tee` too, if given.
    fn source(
        &self,
        location: &ObjectPath,
        info: &ObjectInfo,
        tee: Option<&File>,
    ) -> Result<ObjectSource> {
        let tee = match tee {
            Some(file) => Some(Tee {
                file: file
                    .try_clone()
                    .map_err(|err| Error::io("open again the download file", err))?,
                written: Mutex::new(Vec::new()),
            }),
            None => None,
        };
        let ceiling = self.options.ceiling();
        Ok(ObjectSource {
            fetcher: Arc::new(Fetcher {
                store: Arc::clone(&self.store),
                location: location.clone(),
                info: info.clone(),
                tee,
                flow: Flow::new(Growth::new(self.options.starting(), ceiling)),
            }),
            handle: self.handle()?.clone(),
            range_size: self.options.largest_range(),
            threads: ceiling,
            pool: OnceLock::new(),
            readahead: Mutex::new(ReadAhead::default()),
            read_ahead: self.options.read_ahead_bytes(),
            failure: Mutex::new(None),
            held: HeldRanges::default(),
        })
    }

    /// The object's size, ETag and version, with its first bytes when one ranged GET could
    /// bring both (one ranged GET of them), else by [`Remote::head`] alone; with
    /// `first_round`, the ranges that follow the first bytes are asked for at the same time
    /// (see [`held`]).
    fn describe(
        &self,
        location: &ObjectPath,
        first_round: bool,
    ) -> Result<(ObjectInfo, Option<Vec<u8>>, Vec<Held>)> {
        self.describe_with(location, object::OPENING, first_round)
    }

    /// [`Remote::describe`] with a first request of `opening` bytes.
    fn describe_with(
        &self,
        location: &ObjectPath,
        opening: u64,
        first_round: bool,
    ) -> Result<(ObjectInfo, Option<Vec<u8>>, Vec<Held>)> {
        let handle = self.handle()?;
        let bytes = match first_round {
            true => self.options.first_round_bytes(),
            false => 0,
        };
        let round = opening..opening + bytes;
        let held = Held::first_round(handle, &self.store, location, round);
        // One ranged GET both describes the object and brings the bytes read first (a HEAD
        // and then a GET would take two); where the store did not answer so (a missing or
        // empty object, a server that ignores ranges, a failed request), a HEAD's answer or
        // error stands.
        let opened = handle
            .block_on(held::unconditional(&*self.store, location, 0..opening))
            .map_err(|err| err.in_object(&self.name(location)))?;
        match opened {
            Some((info, bytes)) => Ok((info, Some(bytes), held)),
            None => Ok((self.head(location)?, None, held)),
        }
    }

    /// Fetches `range` of the object into `source`'s tee, in ranges sized for the object, as
    /// many in flight as its flow allows.
    fn fill(
        &self,
        source: &ObjectSource,
        range: std::ops::Range<u64>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        let piece = self.options.download_piece(source.fetcher.info.size);
        let filled = source
            .handle
            .block_on(source.fetcher.download(range, piece, progress));
        match source.take_failure() {
            Some(failure) => Err(failure),
            None => filled,
        }
    }

    /// Reads one container from the object; on a cache's `miss`, every byte of the object
    /// (the version it was opened at) ends up in the miss's file too (ranges the load did not
    /// need are fetched after it); without, the object's version is asked for first.
    fn read(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        request: Request,
        cs: Option<ConstraintSystem<Fr>>,
        options: &LoadOptions,
        miss: Option<Miss<'_>>,
    ) -> Result<Decoded> {
        // Proving keys and parameters are large: their first round is worth its requests,
        // to a decoder that reads in bulk (one that reads in order is served first things
        // first by the read-ahead).
        let large = request.kind != ArtifactKind::Verifying && !codec.reads_in_order();
        let (tee, info, first, first_round, ahead) = match miss {
            Some(Miss { file, opened }) => {
                // Without a first round sent with its first request: one now, of the
                // version known, conditional on it, stopping at the object's end and
                // starting with its first bytes where they are not in hand.
                let ahead = if large && opened.round.is_empty() {
                    let start = opened.first.as_ref().map_or(0, |first| first.len() as u64);
                    let bytes = self.options.first_round_bytes();
                    let end = start.saturating_add(bytes).min(opened.info.size);
                    Held::pieces(start..end, object::OPENING).collect()
                } else {
                    Vec::new()
                };
                let round = if large { opened.round } else { Vec::new() };
                (Some(file), opened.info, opened.first, round, ahead)
            }
            None => {
                let (info, first, round) = self.describe(location, large)?;
                (None, info, first, round, Vec::new())
            }
        };
        let info = &info;
        let read = || {
            if let Some(file) = tee {
                file.set_len(info.size)
                    .map_err(|err| Error::io("size the cache file", err))?;
            }
            let mut source = self.source(location, info, tee)?;
            let first = first.map(|bytes| Held::fetched(0, info.clone(), bytes));
            source.hold(first.into_iter().chain(first_round));
            source.fetch_ahead(ahead);
            source.fetch_tail();
            let decoded = transport::read(
                codec,
                request,
                cs,
                Input::At {
                    source: &source,
                    len: info.size,
                    buffer: options.buffers.file_read_capacity(),
                },
                options,
            );
            // The store's failure, not what it made the reader see (a short read...).
            let decoded = match source.take_failure() {
                Some(failure) => Err(failure),
                None => decoded,
            }?;
            if let Some(tee) = &source.fetcher.tee {
                source.write_held_to_tee()?;
                for gap in tee.gaps(info.size) {
                    self.fill(&source, gap, &|_| {})?;
                }
            }
            Ok(decoded)
        };
        read().map_err(|err: Error| err.in_object(&self.name(location)))
    }
}

/// An object as its first answer described it: its version, and its first bytes if that
/// answer brought them.
pub(crate) struct Opened {
    pub(crate) info: ObjectInfo,
    first: Option<Vec<u8>>,
    /// Its first round, if it went with the first request.
    round: Vec<Held>,
}

impl Opened {
    /// The object as a HEAD described it: no bytes in hand.
    pub(crate) fn of(info: ObjectInfo) -> Opened {
        Opened {
            info,
            first: None,
            round: Vec::new(),
        }
    }

    /// Its first `len` bytes, if they are in hand (all of them, if it is smaller).
    pub(crate) fn first(&self, len: usize) -> Option<&[u8]> {
        let first = self.first.as_deref()?;
        first.get(..len.min(first.len()))
    }
}

/// A cache's miss: the file every byte of the object goes into as it loads, and the object
/// as it was opened.
struct Miss<'f> {
    file: &'f File,
    opened: Opened,
}

/// Reads a file from an offset by positioned reads (its cursor, shared with every clone of
/// the handle, is left alone).
struct PositionedReader<'f> {
    file: &'f File,
    offset: u64,
}

impl std::io::Read for PositionedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = keycodec_core::transport::ReadAt::read_at(self.file, buf, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// The key a load decoded, its errors naming `object`.
fn into_key<K: HaloKey>(decoded: Decoded, object: &str) -> Result<K> {
    transport::into_key(decoded).map_err(|err| err.in_object(object))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::PutPayload;

    /// A first round's bytes serve the reads that fall in them without a request of their
    /// own: once the object is gone they still read, where a read past them fails.
    #[test]
    fn reads_in_the_first_round_are_served_by_it() {
        let (remote, at) = Remote::from_url("memory:///round.bin").unwrap();
        let remote = remote.with_options(RemoteOptions {
            first_round: 1 << 20,
            ..RemoteOptions::default()
        });
        let bytes: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
        let handle = remote.handle().unwrap().clone();
        handle
            .block_on(remote.store().put(&at, PutPayload::from(bytes.clone())))
            .unwrap();
        let (info, opening, round) = remote.describe(&at, true).unwrap();
        assert_eq!(round.len(), 1, "one piece of 1 MiB");
        for held in &round {
            assert!(handle.block_on(held.bytes(&info)).is_some());
        }
        handle.block_on(remote.store().delete(&at)).unwrap();
        let mut source = remote.source(&at, &info, None).unwrap();
        let opening = Held::fetched(0, info.clone(), opening.unwrap());
        source.hold(std::iter::once(opening).chain(round));
        let held = (object::OPENING + (1 << 20)) as usize;
        let mut read = vec![0u8; held];
        transport::ReadAt::read_exact_at(&source, &mut read, 0).unwrap();
        assert!(read == bytes[..held]);
        let n = transport::ReadAt::read_at(&source, &mut read, 100).unwrap();
        assert!(n > 0 && read[..n] == bytes[100..100 + n], "in order too");
        let mut past = vec![0u8; 2];
        assert!(transport::ReadAt::read_exact_at(&source, &mut past, held as u64 - 1).is_err());
    }

    /// A first round of the 3 MiB object at `at`, all of whose bytes are 1, answered; then
    /// the object replaced by one as large whose bytes are 2: that second version, and the
    /// first version's round.
    fn round_of_a_replaced_version(remote: &Remote, at: &ObjectPath) -> (ObjectInfo, Vec<Held>) {
        let handle = remote.handle().unwrap();
        let put = |byte: u8| {
            let payload = PutPayload::from(vec![byte; 3 << 20]);
            handle.block_on(remote.store().put(at, payload)).unwrap();
        };
        put(1);
        let (first, _, round) = remote.describe(at, true).unwrap();
        for held in &round {
            let _ = handle.block_on(held.bytes(&first));
        }
        put(2);
        let second = remote.head(at).unwrap();
        assert_eq!(second.size, first.size);
        assert_ne!(second, first);
        (second, round)
    }

    /// A first round's answers are used only where they describe the object as the load's
    /// first answer did: those of a version replaced since are fetched again, of the version
    /// the load reads.
    #[test]
    fn a_first_round_of_another_version_is_not_used() {
        let (remote, at) = Remote::from_url("memory:///version.bin").unwrap();
        let (second, round) = round_of_a_replaced_version(&remote, &at);
        let mut source = remote.source(&at, &second, None).unwrap();
        source.hold(round);
        let mut read = vec![0u8; 3 << 20];
        transport::ReadAt::read_exact_at(&source, &mut read, 0).unwrap();
        assert!(
            read.iter().all(|&byte| byte == 2),
            "bytes of the second version only"
        );
    }

    /// A read that holds the flow's one place (a gap's GET) while held bytes before the gap
    /// must be fetched again (another version's) still completes: those are fetched outside
    /// the flow. (Through the flow, the second request waited for the first's place, which
    /// is freed only once the bytes before it are written: a hang.)
    #[test]
    fn bytes_fetched_again_do_not_wait_for_the_flow() {
        let (remote, at) = Remote::from_url("memory:///flow.bin").unwrap();
        let remote = Arc::new(remote.with_options(RemoteOptions {
            concurrency: 1,
            max_concurrency: 1,
            first_round: 1 << 20,
            ..RemoteOptions::default()
        }));
        let (second, round) = round_of_a_replaced_version(&remote, &at);
        let (done, finished) = std::sync::mpsc::channel();
        let reader = Arc::clone(&remote);
        std::thread::spawn(move || {
            let mut source = reader.source(&at, &second, None).unwrap();
            source.hold(round);
            let start = object::OPENING;
            let mut read = vec![0u8; (3 << 20) - start as usize];
            let result = transport::ReadAt::read_exact_at(&source, &mut read, start);
            let _ = done.send(result.map(|()| read));
        });
        let read = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the read completes")
            .unwrap();
        assert!(
            read.iter().all(|&byte| byte == 2),
            "bytes of the second version only"
        );
    }

    /// A reader that reads in order through held bytes has windows fetched beyond them, and
    /// reads on, the right bytes, where a held range did not come (another version's): the
    /// windows past it do not serve it.
    #[test]
    fn an_in_order_reader_reads_on_where_held_bytes_did_not_come() {
        let (remote, at) = Remote::from_url("memory:///in-order.bin").unwrap();
        let bytes: Vec<u8> = (0..3u32 << 20).map(|i| (i % 253) as u8).collect();
        let handle = remote.handle().unwrap().clone();
        handle
            .block_on(remote.store().put(&at, PutPayload::from(bytes.clone())))
            .unwrap();
        let info = remote.head(&at).unwrap();
        let mut source = remote.source(&at, &info, None).unwrap();
        let (start, piece) = (object::OPENING as usize, 1usize << 20);
        let good = Held::fetched(
            start as u64,
            info.clone(),
            bytes[start..start + piece].to_vec(),
        );
        let other = ObjectInfo {
            e_tag: Some("\"another\"".into()),
            ..info.clone()
        };
        let bad = Held::fetched((start + piece) as u64, other, vec![0; piece]);
        source.hold([good, bad]);
        let (mut read, mut buf) = (Vec::new(), vec![0u8; 16 << 10]);
        while start + read.len() < bytes.len() {
            let offset = (start + read.len()) as u64;
            let n = transport::ReadAt::read_at(&source, &mut buf, offset).unwrap();
            assert!(n > 0, "no end of the object at {offset}");
            read.extend_from_slice(&buf[..n]);
        }
        assert!(read == bytes[start..], "the object's bytes, in order");
    }

    /// The object's end, fetched as a load starts, serves the reads that fall in it without
    /// a request of their own: once the object is gone they still read, where a read
    /// elsewhere fails.
    #[test]
    fn reads_at_the_end_are_served_by_the_tail_fetched_at_the_start() {
        let (remote, at) = Remote::from_url("memory:///tail.bin").unwrap();
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let handle = remote.handle().unwrap();
        handle
            .block_on(remote.store().put(&at, PutPayload::from(bytes.clone())))
            .unwrap();
        let info = remote.head(&at).unwrap();
        let mut source = remote.source(&at, &info, None).unwrap();
        source.fetch_tail();
        let tail = usize::try_from(super::super::object::TAIL).unwrap();
        let mut end = vec![0u8; 100];
        transport::ReadAt::read_exact_at(&source, &mut end, info.size - 100).unwrap();
        assert_eq!(end, bytes[bytes.len() - 100..]);
        handle.block_on(remote.store().delete(&at)).unwrap();
        let mut last = vec![0u8; tail];
        transport::ReadAt::read_exact_at(&source, &mut last, info.size - tail as u64).unwrap();
        assert_eq!(last, bytes[bytes.len() - tail..]);
        let read = transport::ReadAt::read_at(&source, &mut last, info.size - tail as u64);
        assert_eq!(read.unwrap(), tail, "an in-order read there too");
        let mut start = vec![0u8; 100];
        assert!(transport::ReadAt::read_exact_at(&source, &mut start, 0).is_err());
    }
}
