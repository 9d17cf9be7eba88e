//! The due index's listing (what the sweeper reads) and the pacing slots.

use std::path::PathBuf;

use super::files::io;
use super::Folder;
use crate::record::{Draft, DraftStatus, Slot, StoreError};

impl Folder {
    /// Lists the due index (one name per open draft) and reads only the drafts that are due.
    pub(super) fn due_drafts(
        &self,
        statuses: &[DraftStatus],
        before: i64,
    ) -> Result<Vec<Draft>, StoreError> {
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

    pub(super) fn pace_path(&self, network: &str) -> PathBuf {
        self.dir.join("pace").join(format!("{network}.json"))
    }

    /// The caller holds the lock.
    pub(super) fn last_slot(&self, network: &str) -> Result<Option<i64>, StoreError> {
        Ok(
            Self::read_json::<serde_json::Value>(&self.pace_path(network))?
                .and_then(|v| v.get("last_ms").and_then(serde_json::Value::as_i64)),
        )
    }

    pub(super) fn take_slot(
        &self,
        network: &str,
        interval_ms: i64,
        now_ms: i64,
    ) -> Result<Slot, StoreError> {
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
}
