//! Local mode's record store: one JSON file per item under `POSTONCE_DATA_DIR`, shared safely by
//! every postonce process on the machine (`serve`, a cron `sweep`, a CLI `post`).
//!
//! - **Atomic across processes.** Every read-modify-write (a draft update, the record write with
//!   its draft and caption index) runs under an exclusive OS file lock on the folder's `lock`
//!   file; reads that must be consistent (record and draft together) take it shared. The lock is
//!   taken on a fresh open of the lock file each time: such locks belong to the open file
//!   description, so one process's threads exclude each other too, and the kernel releases the
//!   lock of a process that dies. One lock per folder keeps the multi-file record write simple
//!   to reason about; every critical section is a few small files.
//! - **Create-if-absent.** The record is written to a temporary file and hard-linked to its final
//!   name: `link` fails if the name exists, so a record is never overwritten, whoever holds or
//!   ignores the lock, and a reader never sees a half-written record. Drafts and the caption
//!   index are replaced by rename.
//! - **Durable.** Temporary files are fsynced before they are linked or renamed, and the folder
//!   is fsynced after, so an answer given (`posted`, a draft marked `unknown`) survives a crash
//!   or power loss. The folders themselves are made durable when first created.
//!
//! The folder must be on a local file system: locks on network file systems are not reliable.
//! File I/O runs on tokio's blocking pool: waiting for another process's lock or an fsync must
//! not stall the runtime's workers.
//!
//! The store's parts: `files` (durable writes, the lock, kept secrets), `drafts` (the record,
//! drafts, intents), `due` (the due index's listing, pacing slots) and `update` (a draft change
//! in memory). This file holds the store, its folder and the [`RecordStore`] impl, which runs
//! each operation on the blocking pool.

pub mod claims;
pub mod config;
mod drafts;
mod due;
mod files;
mod update;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use self::files::io;
pub(crate) use self::files::{ensure_dir, open_lock_file, replace_durably, sync_dir, TMP_EXT};
use crate::key::PostKey;
use crate::record::{
    Draft, DraftContent, DraftStatus, DraftUpdate, Intent, PostedRecord, PutPosted, RecordStore,
    Slot, Snapshot, StoreError,
};
use crate::vars::Secret;

/// Files under a data directory.
pub struct LocalStore {
    inner: Arc<Folder>,
}

/// The folder itself; its methods do blocking I/O and are run on the blocking pool.
struct Folder {
    dir: PathBuf,
    /// The real store (not the dry run's): a dry run's record found here may be replaced.
    real: bool,
}

impl LocalStore {
    /// The folder a store over `data_dir` uses: the dry-run publisher's runs use the sub-folder
    /// `dry-run/`, so a dry run never leaves a record (or a claim) that would stop the first
    /// real post.
    pub fn folder(data_dir: &Path, dry_run: bool) -> PathBuf {
        if dry_run {
            data_dir.join("dry-run")
        } else {
            data_dir.to_path_buf()
        }
    }

    /// Whether a secret is kept under `name` in `data_dir`'s real store, looked at without
    /// creating anything (a process that needs no kept secret leaves no folder behind).
    pub fn has_secret(data_dir: &Path, name: &str) -> bool {
        crate::record::secret_name(name).is_ok_and(|file| {
            Self::folder(data_dir, false)
                .join("secrets")
                .join(file.replace(':', "-"))
                .is_file()
        })
    }

    /// Uses (and creates) the folder of `data_dir` (see [`Self::folder`]), and clears temporary
    /// files a crashed writer left behind. Blocking, once per process at start-up, before any
    /// run is served.
    ///
    /// # Errors
    /// When the folders cannot be created or locked.
    pub fn open(data_dir: impl AsRef<Path>, dry_run: bool) -> Result<Self, StoreError> {
        let dir = Self::folder(data_dir.as_ref(), dry_run);
        // A folder an older version wrote has drafts but no due index yet: built once, below.
        let unindexed = dir.join("drafts").is_dir() && !dir.join("due").is_dir();
        for sub in [
            "posted", "drafts", "captions", "due", "pace", "secrets", "tmp",
        ] {
            let path = dir.join(sub);
            ensure_dir(&path).map_err(|e| io("cannot create", &path, e))?;
        }
        // Kept secrets (a network's session) are for this user's eyes only.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let secrets = dir.join("secrets");
            std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| io("cannot restrict", &secrets, e))?;
        }
        let folder = Folder {
            dir,
            real: !dry_run,
        };
        folder.clear_temp()?;
        if unindexed {
            folder.index_existing()?;
        }
        Ok(Self {
            inner: Arc::new(folder),
        })
    }

    /// The folder this store uses.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Runs `f` on the blocking pool (see the module comment).
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Folder) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| StoreError(format!("local store: the file operation failed: {e}")))?
    }
}

#[async_trait]
impl RecordStore for LocalStore {
    async fn save_draft(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        now: i64,
    ) -> Result<Draft, StoreError> {
        let (key, content, source) = (key.to_string(), content.clone(), source.to_owned());
        self.run(move |f| f.save_draft(&key, content, &source, now))
            .await
    }

    async fn save_scheduled(
        &self,
        key: &PostKey,
        content: &DraftContent,
        source: &str,
        at: i64,
        now: i64,
    ) -> Result<Option<Draft>, StoreError> {
        let (key, content, source) = (key.to_string(), content.clone(), source.to_owned());
        self.run(move |f| f.save_scheduled(&key, content, &source, at, now))
            .await
    }

    async fn start_attempt(
        &self,
        key: &PostKey,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<Option<Draft>, StoreError> {
        let (key, from) = (key.to_string(), from.to_vec());
        self.run(move |f| f.start_attempt(&key, &from, now)).await
    }

    async fn load(
        &self,
        key: &PostKey,
        caption_hash: Option<&str>,
    ) -> Result<Snapshot, StoreError> {
        let (key, hash) = (key.to_string(), caption_hash.map(str::to_owned));
        self.run(move |f| f.load(&key, hash.as_deref())).await
    }

    async fn caption_owner(&self, caption_hash: &str) -> Result<Option<String>, StoreError> {
        let hash = caption_hash.to_owned();
        self.run(move |f| {
            let _lock = f.lock(false)?;
            f.caption_owner(&hash)
        })
        .await
    }

    async fn put_posted(
        &self,
        record: &PostedRecord,
        now: i64,
        draft_expires_at: i64,
    ) -> Result<PutPosted, StoreError> {
        let record = record.clone();
        self.run(move |f| f.put_posted(&record, now, draft_expires_at))
            .await
    }

    async fn update_draft(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<bool, StoreError> {
        let (key, update, from) = (key.to_string(), update.clone(), from.to_vec());
        self.run(move |f| f.update_draft(&key, &update, &from, now))
            .await
    }

    async fn take_intent(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        caption_hash: Option<&str>,
        now: i64,
    ) -> Result<Intent, StoreError> {
        let (key, update, from) = (key.to_string(), update.clone(), from.to_vec());
        let hash = caption_hash.map(str::to_owned);
        self.run(move |f| f.take_intent(&key, &update, &from, hash.as_deref(), now))
            .await
    }

    async fn due_drafts(
        &self,
        statuses: &[DraftStatus],
        before: i64,
    ) -> Result<Vec<Draft>, StoreError> {
        let statuses = statuses.to_vec();
        self.run(move |f| f.due_drafts(&statuses, before)).await
    }

    async fn take_slot(
        &self,
        network: &str,
        interval_ms: i64,
        now_ms: i64,
    ) -> Result<Slot, StoreError> {
        let network = network.to_owned();
        self.run(move |f| f.take_slot(&network, interval_ms, now_ms))
            .await
    }

    async fn last_slot(&self, network: &str) -> Result<Option<i64>, StoreError> {
        let network = network.to_owned();
        self.run(move |f| {
            let _lock = f.lock(false)?;
            f.last_slot(&network)
        })
        .await
    }

    async fn check(&self) -> Result<String, StoreError> {
        self.run(Folder::check).await
    }

    async fn load_secret(&self, name: &str) -> Result<Option<Secret>, StoreError> {
        let name = name.to_owned();
        let value = self.run(move |f| f.load_secret(&name)).await?;
        Ok(value.map(Secret::new))
    }

    async fn save_secret(&self, name: &str, value: &Secret) -> Result<(), StoreError> {
        let name = name.to_owned();
        let bytes = value.expose().as_bytes().to_vec();
        self.run(move |f| f.save_secret(&name, &bytes)).await
    }

    async fn swap_secret(
        &self,
        name: &str,
        expected: Option<&Secret>,
        value: &Secret,
    ) -> Result<bool, StoreError> {
        let name = name.to_owned();
        let old = expected.map(|e| e.expose().to_owned());
        let bytes = value.expose().as_bytes().to_vec();
        self.run(move |f| f.swap_secret(&name, old.as_deref(), &bytes))
            .await
    }
}
