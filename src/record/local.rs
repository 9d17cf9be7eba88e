//! Local mode's record store: one JSON file per item under `POSTONCE_DATA_DIR`.
//!
//! The record is written to a temporary file and then hard-linked to its final name: `link`
//! fails if the name exists, so creation is atomic and create-if-absent across processes, and a
//! reader never sees a half-written record. Drafts are replaced by rename. Draft updates are
//! serialized within the process; across processes the last writer of a draft wins (the record,
//! not the draft, is what prevents a second post).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;

use super::{
    Draft, DraftContent, DraftStatus, DraftUpdate, PostedRecord, PutPosted, RecordStore, Snapshot,
    StoreError,
};
use crate::key::PostKey;

/// Files under a data directory.
pub struct LocalStore {
    dir: PathBuf,
    drafts_lock: Mutex<()>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError(format!("{what} {}: {e}", path.display()))
}

impl LocalStore {
    /// Uses (and creates) `dir`.
    /// # Errors
    /// When the folders cannot be created.
    ///
    /// The dry-run publisher's runs use the sub-folder `dry-run/`, so a dry run never leaves a
    /// record that would stop the first real post.
    pub fn open(dir: impl Into<PathBuf>, dry_run: bool) -> Result<Self, StoreError> {
        let mut dir = dir.into();
        if dry_run {
            dir = dir.join("dry-run");
        }
        for sub in ["posted", "drafts", "captions", "tmp"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(|e| io("cannot create", &path, e))?;
        }
        Ok(Self {
            dir,
            drafts_lock: Mutex::new(()),
        })
    }

    fn record_path(&self, key: &str) -> PathBuf {
        self.dir.join("posted").join(format!("{key}.json"))
    }

    fn draft_path(&self, key: &str) -> PathBuf {
        self.dir.join("drafts").join(format!("{key}.json"))
    }

    fn temp_file(&self, bytes: &[u8]) -> Result<PathBuf, StoreError> {
        let path = self.dir.join("tmp").join(format!(
            "{}-{:016x}.json",
            std::process::id(),
            rand::random::<u64>()
        ));
        let mut f = std::fs::File::create(&path).map_err(|e| io("cannot write", &path, e))?;
        f.write_all(bytes)
            .map_err(|e| io("cannot write", &path, e))?;
        f.sync_all().map_err(|e| io("cannot sync", &path, e))?;
        Ok(path)
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

    fn write_draft(&self, draft: &Draft) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(draft).map_err(|e| StoreError(e.to_string()))?;
        let tmp = self.temp_file(&bytes)?;
        let path = self.draft_path(&draft.key);
        std::fs::rename(&tmp, &path).map_err(|e| io("cannot replace", &path, e))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.drafts_lock.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Applies a draft update in memory (the local twin of the DynamoDB update expressions).
fn apply(draft: &mut Draft, update: &DraftUpdate, now: i64) {
    match update {
        DraftUpdate::Intent(pending) => {
            draft.status = DraftStatus::Unknown;
            draft.pending = Some(pending.clone());
            draft.reminded = false;
        }
        DraftUpdate::Failed {
            error,
            retryable,
            next_retry_at,
        } => {
            draft.status = DraftStatus::Failed;
            draft.attempts += 1;
            draft.last_error = Some(error.clone());
            draft.retryable = *retryable;
            draft.next_retry_at = *next_retry_at;
            draft.pending = None;
        }
        DraftUpdate::Ambiguous { error } => {
            draft.status = DraftStatus::Unknown;
            draft.attempts += 1;
            draft.last_error = Some(error.clone());
        }
        DraftUpdate::NeedsReview { error } => {
            draft.status = DraftStatus::NeedsReview;
            draft.last_error = Some(error.clone());
            draft.next_retry_at = None;
            draft.reminded = false;
        }
        DraftUpdate::Reminded => draft.reminded = true,
        DraftUpdate::Recorded { expires_at } => {
            draft.status = DraftStatus::Posted;
            draft.expires_at = Some(*expires_at);
            draft.pending = None;
            draft.next_retry_at = None;
        }
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
    ) -> Result<(), StoreError> {
        let _guard = self.lock();
        let key = key.to_string();
        let mut draft =
            Self::read_json::<Draft>(&self.draft_path(&key))?.unwrap_or_else(|| Draft {
                key: key.clone(),
                content: None,
                status: DraftStatus::New,
                attempts: 0,
                last_error: None,
                retryable: true,
                next_retry_at: None,
                pending: None,
                reminded: false,
                source: Some(source.to_owned()),
                created_at: now,
                updated_at: now,
                expires_at: None,
            });
        draft.content = Some(content.clone());
        draft.updated_at = now;
        self.write_draft(&draft)
    }

    async fn load(
        &self,
        key: &PostKey,
        caption_hash: Option<&str>,
    ) -> Result<Snapshot, StoreError> {
        let caption_owner = match caption_hash {
            Some(h) => self.caption_owner(h).await?,
            None => None,
        };
        let key = key.to_string();
        Ok(Snapshot {
            record: Self::read_json(&self.record_path(&key))?,
            draft: Self::read_json(&self.draft_path(&key))?,
            caption_owner,
        })
    }

    async fn caption_owner(&self, caption_hash: &str) -> Result<Option<String>, StoreError> {
        if !caption_hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let path = self
            .dir
            .join("captions")
            .join(format!("{caption_hash}.json"));
        Ok(Self::read_json::<serde_json::Value>(&path)?
            .and_then(|v| v.get("key").and_then(|k| k.as_str()).map(str::to_owned)))
    }

    async fn put_posted(
        &self,
        record: &PostedRecord,
        now: i64,
        draft_expires_at: i64,
    ) -> Result<PutPosted, StoreError> {
        let bytes = serde_json::to_vec_pretty(record).map_err(|e| StoreError(e.to_string()))?;
        let tmp = self.temp_file(&bytes)?;
        let path = self.record_path(&record.key);
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let existing = Self::read_json::<PostedRecord>(&path)?
                    .ok_or_else(|| StoreError(format!("{} vanished", path.display())))?;
                return Ok(PutPosted::Exists(existing));
            }
            Err(e) => return Err(io("cannot create", &path, e)),
        }
        if let Some(h) = record
            .caption_hash
            .as_deref()
            .filter(|h| h.chars().all(|c| c.is_ascii_hexdigit()))
        {
            let entry = serde_json::json!({"key": record.key, "urn": record.urn});
            let tmp = self.temp_file(entry.to_string().as_bytes())?;
            let path = self.dir.join("captions").join(format!("{h}.json"));
            std::fs::rename(&tmp, &path).map_err(|e| io("cannot replace", &path, e))?;
        }
        let _guard = self.lock();
        let mut draft =
            Self::read_json::<Draft>(&self.draft_path(&record.key))?.unwrap_or_else(|| Draft {
                key: record.key.clone(),
                content: None,
                status: DraftStatus::Posted,
                attempts: 0,
                last_error: None,
                retryable: false,
                next_retry_at: None,
                pending: None,
                reminded: false,
                source: None,
                created_at: now,
                updated_at: now,
                expires_at: None,
            });
        draft.status = DraftStatus::Posted;
        draft.pending = None;
        draft.next_retry_at = None;
        draft.updated_at = now;
        draft.expires_at = Some(draft_expires_at);
        self.write_draft(&draft)?;
        Ok(PutPosted::Created)
    }

    async fn update_draft(
        &self,
        key: &PostKey,
        update: &DraftUpdate,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<bool, StoreError> {
        let _guard = self.lock();
        let Some(mut draft) = Self::read_json::<Draft>(&self.draft_path(&key.to_string()))? else {
            return Ok(false);
        };
        if !from.is_empty() && !from.contains(&draft.status) {
            return Ok(false);
        }
        apply(&mut draft, update, now);
        self.write_draft(&draft)?;
        Ok(true)
    }

    async fn drafts_with_status(&self, statuses: &[DraftStatus]) -> Result<Vec<Draft>, StoreError> {
        let dir = self.dir.join("drafts");
        let entries = std::fs::read_dir(&dir).map_err(|e| io("cannot list", &dir, e))?;
        let mut out = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| io("cannot list", &dir, e))?.path();
            if path.extension().is_some_and(|e| e == "json") {
                if let Some(d) = Self::read_json::<Draft>(&path)? {
                    if statuses.contains(&d.status) {
                        out.push(d);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn check(&self) -> Result<String, StoreError> {
        let tmp = self.temp_file(b"{}")?;
        std::fs::remove_file(&tmp).map_err(|e| io("cannot remove", &tmp, e))?;
        Ok(format!("local store at {} is writable", self.dir.display()))
    }
}
