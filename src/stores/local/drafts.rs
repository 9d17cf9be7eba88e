//! Drafts and records: the record created only if absent (with its draft's `posted` mark and
//! the caption index), draft changes under their conditions, an intent with its checks, and
//! the due index's entry kept in step with each draft.

use std::fs::File;
use std::path::PathBuf;

use super::files::{durable_temp, io, sync_dir};
use super::update::apply;
use super::Folder;
use crate::record::{
    Draft, DraftContent, DraftStatus, DraftUpdate, Intent, PostedRecord, PutPosted, Snapshot,
    StoreError,
};

impl Folder {
    /// Gives every open draft an older version wrote its due-index entry (once, when the
    /// index folder is first made), so the sweeper still finds them.
    pub(super) fn index_existing(&self) -> Result<(), StoreError> {
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

    pub(super) fn record_path(&self, key: &str) -> PathBuf {
        self.dir.join("posted").join(format!("{key}.json"))
    }

    pub(super) fn draft_path(&self, key: &str) -> PathBuf {
        self.dir.join("drafts").join(format!("{key}.json"))
    }

    pub(super) fn caption_path(&self, caption_hash: &str) -> PathBuf {
        self.dir
            .join("captions")
            .join(format!("{caption_hash}.json"))
    }

    /// The due index's entry of a draft (an empty file named by status, due time and key, so
    /// listing the folder finds what is due without opening every draft), if it has one.
    pub(super) fn due_entry(&self, draft: &Draft) -> Option<PathBuf> {
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
    pub(super) fn write_draft(&self, old: Option<&Draft>, draft: &Draft) -> Result<(), StoreError> {
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

    pub(super) fn save_draft(
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
        draft.started = true;
        self.write_draft(old.as_ref(), &draft)?;
        Ok(draft)
    }

    /// [`crate::record::RecordStore::start_attempt`], under the lock.
    pub(super) fn start_attempt(
        &self,
        key: &str,
        from: &[DraftStatus],
        now: i64,
    ) -> Result<Option<Draft>, StoreError> {
        let _lock = self.lock(true)?;
        let Some(old) = Self::read_json::<Draft>(&self.draft_path(key))? else {
            return Ok(None);
        };
        let due = old.status != DraftStatus::Scheduled || old.due_at.is_some_and(|d| d <= now);
        if !from.contains(&old.status) || !due {
            return Ok(None);
        }
        let mut draft = old.clone();
        draft.attempts += u32::from(draft.started);
        draft.started = true;
        draft.updated_at = now;
        self.write_draft(Some(&old), &draft)?;
        Ok(Some(draft))
    }

    /// [`crate::record::RecordStore::save_scheduled`]: the content and the schedule in one
    /// replace of the draft's file, under the lock.
    pub(super) fn save_scheduled(
        &self,
        key: &str,
        content: DraftContent,
        source: &str,
        at: i64,
        now: i64,
    ) -> Result<Option<Draft>, StoreError> {
        let _lock = self.lock(true)?;
        let old = Self::read_json::<Draft>(&self.draft_path(key))?;
        if old
            .as_ref()
            .is_some_and(|d| !crate::record::SCHEDULABLE.contains(&d.status))
        {
            return Ok(None);
        }
        let mut draft = old
            .clone()
            .unwrap_or_else(|| Draft::empty(key, DraftStatus::New, Some(source), now));
        draft.content = Some(content);
        apply(&mut draft, &DraftUpdate::Schedule { at }, now);
        self.write_draft(old.as_ref(), &draft)?;
        Ok(Some(draft))
    }

    /// Whether `record` is a post here: in the real folder, a dry run's (only an older
    /// version could write one) is not.
    pub(super) fn counts(&self, record: &PostedRecord) -> bool {
        !(self.real
            && record
                .post_id
                .as_deref()
                .is_some_and(crate::networks::is_dry_run_urn))
    }

    /// Whether `draft` is posted and holds its record's copy (see [`Draft::record`]).
    pub(super) fn holds_record(&self, draft: &Draft) -> bool {
        draft.status == DraftStatus::Posted && draft.record.as_ref().is_some_and(|r| self.counts(r))
    }

    /// The caller holds the lock (shared is enough).
    pub(super) fn caption_owner(&self, caption_hash: &str) -> Result<Option<String>, StoreError> {
        if !caption_hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(None);
        }
        Ok(
            Self::read_json::<serde_json::Value>(&self.caption_path(caption_hash))?
                .and_then(|v| v.get("key").and_then(|k| k.as_str()).map(str::to_owned)),
        )
    }

    /// Record and draft under the shared lock, so no record write falls between the two reads.
    pub(super) fn load(
        &self,
        key: &str,
        caption_hash: Option<&str>,
    ) -> Result<Snapshot, StoreError> {
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

    pub(super) fn put_posted(
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
            let entry = serde_json::json!({"key": record.key, "urn": record.post_id});
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

    pub(super) fn update_draft(
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
    pub(super) fn update_locked(
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
    pub(super) fn take_intent(
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
}
