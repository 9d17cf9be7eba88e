//! The file primitives every write rests on: durable temporary files, atomic replace, the
//! folder's lock, reads of a JSON file that may be absent; and the kept secrets, which are
//! files readable by their owner only.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Folder;
use crate::record::StoreError;

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

/// A fresh name for a temporary file in `tmp_dir`.
fn temp_path(tmp_dir: &Path) -> PathBuf {
    tmp_dir.join(format!(
        "{}-{:016x}.{TMP_EXT}",
        std::process::id(),
        rand::random::<u64>()
    ))
}

/// A new temporary file in `tmp_dir` holding `bytes`, fsynced.
pub(super) fn durable_temp(tmp_dir: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let path = temp_path(tmp_dir);
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

pub(super) fn io(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError(format!("{what} {}: {e}", path.display()))
}

/// Opens (creating it if absent, never truncating it) the file a folder's lock is taken on: a
/// fresh open each time, since such locks belong to the open file description.
pub(crate) fn open_lock_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// A held lock on the folder; dropping it closes the file and releases the lock.
pub(super) struct Lock(#[allow(dead_code)] File);

impl Folder {
    pub(super) fn lock(&self, exclusive: bool) -> Result<Lock, StoreError> {
        let path = self.dir.join("lock");
        let file = open_lock_file(&path).map_err(|e| io("cannot open", &path, e))?;
        let locked = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        locked.map_err(|e| io("cannot lock", &path, e))?;
        Ok(Lock(file))
    }

    /// Removes temporary files: under the exclusive lock none belongs to a live writer.
    pub(super) fn clear_temp(&self) -> Result<(), StoreError> {
        let _lock = self.lock(true)?;
        let tmp = self.dir.join("tmp");
        let entries = std::fs::read_dir(&tmp).map_err(|e| io("cannot list", &tmp, e))?;
        for entry in entries.flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
        Ok(())
    }

    pub(super) fn read_json<T: serde::de::DeserializeOwned>(
        path: &Path,
    ) -> Result<Option<T>, StoreError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| StoreError(format!("{} is corrupt: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("cannot read", path, e)),
        }
    }

    /// Replaces a file durably; the caller holds the exclusive lock.
    pub(super) fn replace(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        replace_durably(&self.dir.join("tmp"), path, bytes)
            .map_err(|e| io("cannot replace", path, e))
    }

    pub(super) fn secret_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        let file = crate::record::secret_name(name)?.replace(':', "-");
        Ok(self.dir.join("secrets").join(file))
    }

    /// Replaces the secret file durably (as [`replace_durably`]), readable by its owner only.
    pub(super) fn save_secret(&self, name: &str, value: &[u8]) -> Result<(), StoreError> {
        let path = self.secret_path(name)?;
        let _lock = self.lock(true)?;
        self.write_secret(&path, value)
    }

    /// Replaces the secret file only if it holds `expected` (`None`: only if there is none),
    /// under the folder's exclusive lock: `Ok(false)` when it did not.
    pub(super) fn swap_secret(
        &self,
        name: &str,
        expected: Option<&str>,
        value: &[u8],
    ) -> Result<bool, StoreError> {
        let path = self.secret_path(name)?;
        let _lock = self.lock(true)?;
        let now = match std::fs::read_to_string(&path) {
            Ok(v) => Some(v),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("cannot read", &path, e)),
        };
        if now.as_deref() != expected {
            return Ok(false);
        }
        self.write_secret(&path, value).map(|()| true)
    }

    /// Writes the secret file durably, 0600; the caller holds the exclusive lock.
    fn write_secret(&self, path: &Path, value: &[u8]) -> Result<(), StoreError> {
        let tmp = temp_path(&self.dir.join("tmp"));
        let written = (|| {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&tmp)?;
            f.write_all(value)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            sync_dir(path.parent().unwrap_or(Path::new(".")))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(|e| io("cannot write", path, e))
    }

    pub(super) fn load_secret(&self, name: &str) -> Result<Option<String>, StoreError> {
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
    pub(super) fn check(&self) -> Result<String, StoreError> {
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
