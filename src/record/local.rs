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

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    Draft, DraftContent, DraftStatus, DraftUpdate, Intent, PostedRecord, PutPosted, RecordStore,
    Slot, Snapshot, StoreError,
};
use crate::key::PostKey;
use crate::vars::Secret;

/// Extension of temporary files, which exist only while their writer holds a folder's lock (or
/// after it crashed).
pub(crate) const TMP_EXT: &str = "tmp";

/// Makes a change of a directory's entries (create, rename, link, unlink) durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    // Other systems cannot open a directory as a file (and journal renames as metadata).
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Creates `dir` and any missing parents, fsyncing each parent that gained an entry, so the
/// folder a durable file lives in survives a crash too.
pub(crate) fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        ensure_dir(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => sync_dir(parent.unwrap_or(Path::new("."))),
        // Another process made it meanwhile (and synced its parent).
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// A new temporary file in `tmp_dir` holding `bytes`, fsynced.
fn durable_temp(tmp_dir: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let path = tmp_dir.join(format!(
        "{}-{:016x}.{TMP_EXT}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let written = (|| {
        let mut f = File::create(&path)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    match written {
        Ok(()) => Ok(path),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(e)
        }
    }
}

/// Replaces `path` with `bytes` atomically and durably: a temporary file in `tmp_dir` (same
/// file system), fsynced, renamed over `path`, then `path`'s folder fsynced. A crash leaves the
/// old content or the new, never a torn file.
pub(crate) fn replace_durably(tmp_dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = durable_temp(tmp_dir, bytes)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

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

fn io(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError(format!("{what} {}: {e}", path.display()))
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

/// A held lock on the folder; dropping it closes the file and releases the lock.
struct Lock(#[allow(dead_code)] File);

impl Folder {
    fn lock(&self, exclusive: bool) -> Result<Lock, StoreError> {
        let path = self.dir.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io("cannot open", &path, e))?;
        let locked = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        locked.map_err(|e| io("cannot lock", &path, e))?;
        Ok(Lock(file))
    }

    /// Removes temporary files: under the exclusive lock none belongs to a live writer.
    fn clear_temp(&self) -> Result<(), StoreError> {
        let _lock = self.lock(true)?;
        let tmp = self.dir.join("tmp");
        let entries = std::fs::read_dir(&tmp).map_err(|e| io("cannot list", &tmp, e))?;
        for entry in entries.flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
        Ok(())
    }

    /// Gives every open draft an older version wrote its due-index entry (once, when the
    /// index folder is first made), so the sweeper still finds them.
    fn index_existing(&self) -> Result<(), StoreError> {
        let _lock = self.lock(true)?;
        let dir = self.dir.join("drafts");
        let entries = std::fs::read_dir(&dir).map_err(|e| io("cannot list", &dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| io("cannot list", &dir, e))?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Some(old) = Self::read_json::<Draft>(&path)? else {
                continue;
            };
            if old.due_at.is_some()
                || matches!(old.status, DraftStatus::Posted | DraftStatus::Cancelled)
            {
                continue;
            }
            let mut draft = old.clone();
            draft.due_at = Some(old.next_retry_at.unwrap_or(old.updated_at));
            self.write_draft(Some(&old), &draft)?;
        }
        Ok(())
    }

    fn record_path(&self, key: &str) -> PathBuf {
        self.dir.join("posted").join(format!("{key}.json"))
    }

    fn draft_path(&self, key: &str) -> PathBuf {
        self.dir.join("drafts").join(format!("{key}.json"))
    }

    fn caption_path(&self, caption_hash: &str) -> PathBuf {
        self.dir
            .join("captions")
            .join(format!("{caption_hash}.json"))
    }

    fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, StoreError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| StoreError(format!("{} is corrupt: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("cannot read", path, e)),
        }
    }

    /// Replaces a file durably; the caller holds the exclusive lock.
    fn replace(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        replace_durably(&self.dir.join("tmp"), path, bytes)
            .map_err(|e| io("cannot replace", path, e))
    }

    /// The due index's entry of a draft (an empty file named by status, due time and key, so
    /// listing the folder finds what is due without opening every draft), if it has one.
    fn due_entry(&self, draft: &Draft) -> Option<PathBuf> {
        draft.due_at.map(|at| {
            self.dir.join("due").join(format!(
                "{}.{:020}.{}",
                draft.status.as_str(),
                at.max(0),
                draft.key
            ))
        })
    }

    /// Writes `draft` (replacing `old`, if it existed) and keeps the due index in step: the
    /// draft first, then its entry, so a crash between the two leaves at worst an entry that
    /// names a draft no longer due (the sweeper reads the draft and skips it) or a missing
    /// entry for a draft whose status did not change.
    fn write_draft(&self, old: Option<&Draft>, draft: &Draft) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(draft).map_err(|e| StoreError(e.to_string()))?;
        self.replace(&self.draft_path(&draft.key), &bytes)?;
        let (before, after) = (old.and_then(|d| self.due_entry(d)), self.due_entry(draft));
        if before == after {
            return Ok(());
        }
        if let Some(path) = &after {
            File::create(path).map_err(|e| io("cannot create", path, e))?;
        }
        if let Some(path) = &before {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("cannot remove", path, e)),
            }
        }
        let due = self.dir.join("due");
        sync_dir(&due).map_err(|e| io("cannot sync", &due, e))
    }

    fn save_draft(
        &self,
        key: &str,
        content: DraftContent,
        source: &str,
        now: i64,
    ) -> Result<Draft, StoreError> {
        let _lock = self.lock(true)?;
        let old = Self::read_json::<Draft>(&self.draft_path(key))?;
        if let Some(posted) = old.as_ref().filter(|d| self.holds_record(d)) {
            return Ok(posted.clone());
        }
        let mut draft = old
            .clone()
            .unwrap_or_else(|| Draft::empty(key, DraftStatus::New, Some(source), now));
        draft.content = Some(content);
        draft.updated_at = now;
        self.write_draft(old.as_ref(), &draft)?;
        Ok(draft)
    }

    /// Whether `record` is a post here: in the real folder, a dry run's (only an older
    /// version could write one) is not.
    fn counts(&self, record: &PostedRecord) -> bool {
        !(self.real
            && record
                .urn
                .as_deref()
                .is_some_and(crate::networks::is_dry_run_urn))
    }

    /// Whether `draft` is posted and holds its record's copy (see [`Draft::record`]).
    fn holds_record(&self, draft: &Draft) -> bool {
        draft.status == DraftStatus::Posted && draft.record.as_ref().is_some_and(|r| self.counts(r))
    }

    /// The caller holds the lock (shared is enough).
    fn caption_owner(&self, caption_hash: &str) -> Result<Option<String>, StoreError> {
        if !caption_hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(None);
        }
        Ok(
            Self::read_json::<serde_json::Value>(&self.caption_path(caption_hash))?
                .and_then(|v| v.get("key").and_then(|k| k.as_str()).map(str::to_owned)),
        )
    }

    /// Record and draft under the shared lock, so no record write falls between the two reads.
    fn load(&self, key: &str, caption_hash: Option<&str>) -> Result<Snapshot, StoreError> {
        let _lock = self.lock(false)?;
        let caption_owner = match caption_hash {
            Some(h) => self.caption_owner(h)?,
            None => None,
        };
        Ok(Snapshot {
            record: Self::read_json(&self.record_path(key))?,
            draft: Self::read_json(&self.draft_path(key))?,
            caption_owner,
        })
    }

    fn put_posted(
        &self,
        record: &PostedRecord,
        now: i64,
        draft_expires_at: i64,
    ) -> Result<PutPosted, StoreError> {
        let bytes = serde_json::to_vec_pretty(record).map_err(|e| StoreError(e.to_string()))?;
        let _lock = self.lock(true)?;
        let tmp_dir = self.dir.join("tmp");
        let tmp = durable_temp(&tmp_dir, &bytes).map_err(|e| io("cannot write in", &tmp_dir, e))?;
        let path = self.record_path(&record.key);
        // `link` never replaces an existing name: the record is created only if absent.
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let existing = Self::read_json::<PostedRecord>(&path)?
                    .ok_or_else(|| StoreError(format!("{} vanished", path.display())))?;
                if self.counts(&existing) {
                    return Ok(PutPosted::Exists(existing));
                }
                // A dry run's record in the real folder (only an older version could write
                // one) proves nothing was posted: the real record replaces it, under the lock.
                self.replace(&path, &bytes)?;
            }
            Err(e) => return Err(io("cannot create", &path, e)),
        }
        let posted = self.dir.join("posted");
        sync_dir(&posted).map_err(|e| io("cannot sync", &posted, e))?;
        if let Some(h) = record
            .caption_hash
            .as_deref()
            .filter(|h| h.chars().all(|c| c.is_ascii_hexdigit()))
        {
            let entry = serde_json::json!({"key": record.key, "urn": record.urn});
            self.replace(&self.caption_path(h), entry.to_string().as_bytes())?;
        }
        let old = Self::read_json::<Draft>(&self.draft_path(&record.key))?;
        let mut draft = old
            .clone()
            .unwrap_or_else(|| Draft::empty(&record.key, DraftStatus::Posted, None, now));
        draft.status = DraftStatus::Posted;
        draft.pending = None;
        draft.next_retry_at = None;
        draft.due_at = None;
        draft.updated_at = now;
        draft.expires_at = Some(draft_expires_at);
        draft.record = Some(record.clone());
        self.write_draft(old.as_ref(), &draft)?;
        Ok(PutPosted::Created)
    }

    fn update_draft(
        &self,
        key: &str,
        update: &DraftUpdate,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<bool, StoreError> {
        let _lock = self.lock(true)?;
        self.update_locked(key, update, from, now)
    }

    /// [`Self::update_draft`]; the caller holds the exclusive lock.
    fn update_locked(
        &self,
        key: &str,
        update: &DraftUpdate,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<bool, StoreError> {
        let Some(old) = Self::read_json::<Draft>(&self.draft_path(key))? else {
            return Ok(false);
        };
        let mut draft = old.clone();
        if !from.is_empty() && !from.contains(&draft.status) {
            return Ok(false);
        }
        if let DraftUpdate::Resend { prev_run: run, .. } | DraftUpdate::IfAttempt { run, .. } =
            update
        {
            if draft.pending.as_ref().map(|p| &p.run) != Some(run) {
                return Ok(false);
            }
        }
        if matches!(update, DraftUpdate::DelayTold) && draft.delay_told {
            return Ok(false);
        }
        apply(&mut draft, update, now);
        self.write_draft(Some(&old), &draft)?;
        Ok(true)
    }

    /// The intent and its checks under one exclusive lock: nothing can fall between them.
    fn take_intent(
        &self,
        key: &str,
        update: &DraftUpdate,
        from: &[DraftStatus],
        caption_hash: Option<&str>,
        now: i64,
    ) -> Result<Intent, StoreError> {
        let _lock = self.lock(true)?;
        if let Some(record) = Self::read_json::<PostedRecord>(&self.record_path(key))? {
            if self.counts(&record) {
                return Ok(Intent::Recorded(record));
            }
        }
        if let Some(hash) = caption_hash {
            if let Some(other) = self.caption_owner(hash)?.filter(|o| o != key) {
                return Ok(Intent::CaptionOwner(other));
            }
        }
        Ok(if self.update_locked(key, update, from, now)? {
            Intent::Taken
        } else {
            Intent::Refused
        })
    }

    /// Lists the due index (one name per open draft) and reads only the drafts that are due.
    fn due_drafts(&self, statuses: &[DraftStatus], before: i64) -> Result<Vec<Draft>, StoreError> {
        let _lock = self.lock(false)?;
        let dir = self.dir.join("due");
        let entries = std::fs::read_dir(&dir).map_err(|e| io("cannot list", &dir, e))?;
        let mut due: Vec<(i64, String)> = Vec::new();
        for entry in entries {
            let name = entry.map_err(|e| io("cannot list", &dir, e))?.file_name();
            let Some(name) = name.to_str() else { continue };
            let mut parts = name.splitn(3, '.');
            let (Some(status), Some(at), Some(key)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (Some(status), Ok(at)) = (DraftStatus::parse(status), at.parse::<i64>()) else {
                continue;
            };
            if statuses.contains(&status) && at <= before {
                due.push((at, key.to_owned()));
            }
        }
        due.sort();
        let mut out = Vec::new();
        for (_, key) in due {
            // The entry may be stale (a crash between the draft and its entry): the draft says.
            if let Some(d) = Self::read_json::<Draft>(&self.draft_path(&key))? {
                if statuses.contains(&d.status) && d.due_at.is_some_and(|at| at <= before) {
                    out.push(d);
                }
            }
        }
        Ok(out)
    }

    fn pace_path(&self, network: &str) -> PathBuf {
        self.dir.join("pace").join(format!("{network}.json"))
    }

    /// The caller holds the lock.
    fn last_slot(&self, network: &str) -> Result<Option<i64>, StoreError> {
        Ok(
            Self::read_json::<serde_json::Value>(&self.pace_path(network))?
                .and_then(|v| v.get("last_ms").and_then(serde_json::Value::as_i64)),
        )
    }

    fn take_slot(&self, network: &str, interval_ms: i64, now_ms: i64) -> Result<Slot, StoreError> {
        let _lock = self.lock(true)?;
        if let Some(last_ms) = self.last_slot(network)? {
            if last_ms > now_ms.saturating_sub(interval_ms) {
                return Ok(Slot::Busy { last_ms });
            }
        }
        let entry = serde_json::json!({ "last_ms": now_ms });
        self.replace(&self.pace_path(network), entry.to_string().as_bytes())?;
        Ok(Slot::Taken)
    }

    fn secret_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        let file = super::secret_name(name)?.replace(':', "-");
        Ok(self.dir.join("secrets").join(file))
    }

    /// Replaces the secret file durably (as [`replace_durably`]), readable by its owner only.
    fn save_secret(&self, name: &str, value: &[u8]) -> Result<(), StoreError> {
        let path = self.secret_path(name)?;
        let _lock = self.lock(true)?;
        let tmp = self.dir.join("tmp").join(format!(
            "{}-{:016x}.{TMP_EXT}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let written = (|| {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&tmp)?;
            f.write_all(value)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            sync_dir(path.parent().unwrap_or(Path::new(".")))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(|e| io("cannot write", &path, e))
    }

    fn load_secret(&self, name: &str) -> Result<Option<String>, StoreError> {
        let path = self.secret_path(name)?;
        let _lock = self.lock(false)?;
        match std::fs::read_to_string(&path) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("cannot read", &path, e)),
        }
    }

    /// Writes and removes a durable temporary file under the lock (shared: it touches nothing
    /// another writer reads, and the exclusive clean-up cannot run meanwhile).
    fn check(&self) -> Result<String, StoreError> {
        let _lock = self.lock(false)?;
        let tmp_dir = self.dir.join("tmp");
        let tmp = durable_temp(&tmp_dir, b"{}").map_err(|e| io("cannot write in", &tmp_dir, e))?;
        std::fs::remove_file(&tmp).map_err(|e| io("cannot remove", &tmp, e))?;
        Ok(format!(
            "local store at {} is writable and lockable",
            self.dir.display()
        ))
    }
}

/// Applies a draft update in memory (the local twin of the DynamoDB update expressions).
fn apply(draft: &mut Draft, update: &DraftUpdate, now: i64) {
    match update {
        DraftUpdate::IfAttempt { update, .. } => apply(draft, update, now),
        DraftUpdate::Intent(pending) => {
            draft.status = DraftStatus::Unknown;
            draft.pending = Some(pending.clone());
            draft.reminded = false;
            draft.retryable = true;
        }
        DraftUpdate::Failed {
            error,
            retryable,
            next_retry_at,
        } => {
            draft.status = DraftStatus::Failed;
            draft.reminded = false;
            draft.attempts += 1;
            draft.last_error = Some(error.clone());
            draft.retryable = *retryable;
            draft.next_retry_at = *next_retry_at;
            draft.pending = None;
        }
        DraftUpdate::Ambiguous { error, ask_owner } => {
            draft.status = DraftStatus::Unknown;
            draft.reminded = false;
            draft.attempts += 1;
            draft.last_error = Some(error.clone());
            draft.retryable = !ask_owner;
        }
        DraftUpdate::Resend { at, run, .. } => {
            if let Some(p) = draft.pending.as_mut() {
                p.last_sent_at = Some(*at);
                p.run = run.clone();
            }
        }
        DraftUpdate::NeedsReview { error } => {
            draft.status = DraftStatus::NeedsReview;
            draft.last_error = Some(error.clone());
            draft.next_retry_at = None;
            draft.reminded = false;
        }
        DraftUpdate::Reminded => draft.reminded = true,
        DraftUpdate::DelayTold => draft.delay_told = true,
        DraftUpdate::Recorded { expires_at, record } => {
            draft.record = Some(PostedRecord::clone(record));
            draft.status = DraftStatus::Posted;
            draft.expires_at = Some(*expires_at);
            draft.pending = None;
            draft.next_retry_at = None;
        }
        DraftUpdate::Schedule { at } => {
            draft.status = DraftStatus::Scheduled;
            draft.publish_at = Some(*at);
            draft.reminded = false;
            draft.delay_told = false;
            draft.retryable = true;
            draft.last_error = None;
            draft.next_retry_at = None;
            draft.pending = None;
        }
        DraftUpdate::Defer { reason, told, .. } => {
            draft.delay_told |= *told;
            draft.status = DraftStatus::Scheduled;
            draft.last_error = Some(reason.clone());
            draft.retryable = true;
            draft.pending = None;
        }
        DraftUpdate::Revive => {
            draft.status = DraftStatus::New;
            draft.publish_at = None;
            draft.reminded = false;
            draft.retryable = true;
        }
        DraftUpdate::Cancel => {
            draft.status = DraftStatus::Cancelled;
            draft.next_retry_at = None;
            draft.pending = None;
        }
    }
    if let Some(due) = update.due_at(now) {
        draft.due_at = due;
    }
    draft.updated_at = now;
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
}
