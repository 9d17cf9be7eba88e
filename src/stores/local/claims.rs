//! File-backed claims for local mode (no `REDIS_URL`): the Redis semantics, shared by every
//! postonce process on one machine (`serve`, a cron `sweep`, a CLI `post`) through one folder.
//!
//! One file per claim name holds the value and its expiry (wall-clock Unix milliseconds: the
//! only clock two processes share). Every operation runs under an exclusive OS file lock on the
//! folder's `lock` file, so each check-and-set is atomic across processes, exactly like a
//! Redis command or script. The lock is taken on a fresh open of the lock file each time:
//! `flock`-style locks belong to the open file description, so this excludes threads of one
//! process as well as other processes, and the kernel drops the lock if a holder dies.
//!
//! Writes go to a temporary file that is fsynced and renamed over the claim file, then the folder
//! is fsynced: a crash leaves either the old claim or the new one, never a torn file, and a
//! claim that was reported taken is still there after a power loss. The lock file is separate
//! from the claim files because a rename replaces the inode a lock would be held on.
//!
//! The folder must be on a local file system: locks on network file systems are not reliable.
//! Expiry follows the wall clock, so setting the clock back lengthens claims (fail closed) and
//! setting it forward shortens them, as with a Redis server whose clock jumps.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::claim::{claim_name, Acquire, ClaimError, ClaimStore, ClaimValue};
use crate::key::PostKey;
use crate::stores::local::{ensure_dir, open_lock_file, replace_durably, sync_dir};

/// Claim file extension. An encoded name never contains `.`, so `<encoded>.claim` and
/// `<sha256>.long.claim` can never be taken for one another.
const CLAIM_EXT: &str = "claim";
/// Extension of a name too long to encode into a file name (stored under its SHA-256).
const LONG_EXT: &str = "long.claim";
/// Extension of temporary files (see [`replace_durably`]); only ever present while their
/// writer holds the lock, or after it crashed.
const TMP_EXT: &str = crate::stores::local::TMP_EXT;
/// Longest encoded name used as is; file names are limited to 255 bytes on common systems.
const MAX_STEM: usize = 200;
/// How often one process clears expired claim files (Redis evicts them by itself).
const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// Claims as files under one folder.
pub struct FileClaims {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    /// When this process last removed expired claim files.
    last_sweep: Mutex<Option<Instant>>,
}

/// What a claim file holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// The claim's name, kept so a file can be checked against the name it was read for.
    name: String,
    value: String,
    /// Unix milliseconds after which the claim no longer exists.
    expires_at_ms: u64,
}

fn err(what: &str, path: &Path, e: &std::io::Error) -> ClaimError {
    ClaimError(format!("local claims: {what} {}: {e}", path.display()))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Redis `EX` takes whole seconds, at least 1: the same rounding keeps the two stores alike.
fn expiry(ttl: Duration) -> u64 {
    now_ms().saturating_add(ttl.as_secs().max(1).saturating_mul(1000))
}

/// The file name of a claim name. Bytes outside `[a-z0-9-]` become `_` and two lower-case hex
/// digits (`_` itself included), so the mapping is injective, the result never contains a path
/// separator, a dot or an upper-case letter (distinct names stay distinct on case-insensitive
/// file systems), and nothing a caller passes can escape the folder. A name whose encoding
/// would be too long for a file name is stored under its SHA-256 with a different extension;
/// the name kept inside the file guards against a collision.
pub fn file_name(name: &str) -> String {
    use std::fmt::Write as _;
    let mut stem = String::with_capacity(name.len());
    for b in name.bytes() {
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' => stem.push(char::from(b)),
            _ => {
                let _ = write!(stem, "_{b:02x}");
            }
        }
    }
    if stem.len() <= MAX_STEM {
        format!("{stem}.{CLAIM_EXT}")
    } else {
        format!(
            "{}.{LONG_EXT}",
            hex::encode(Sha256::digest(name.as_bytes()))
        )
    }
}

/// The folder while its exclusive lock is held. Dropping it closes the lock file and so
/// releases the lock.
struct Locked<'a> {
    dir: &'a Path,
    _lock: File,
}

impl Locked<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(file_name(name))
    }

    /// The live entry of `name`; an expired one reads as absent, as in Redis.
    fn get(&self, name: &str) -> Result<Option<Entry>, ClaimError> {
        let path = self.path(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(err("cannot read", &path, &e)),
        };
        // A file that cannot be read as a claim may be a claim a run holds: fail closed
        // (nothing is posted without a claim) and say how to clear it.
        let entry: Entry = serde_json::from_slice(&bytes).map_err(|e| {
            ClaimError(format!(
                "local claims: {} is corrupt ({e}); remove it once no postonce run is posting",
                path.display()
            ))
        })?;
        if entry.name != name {
            return Err(ClaimError(format!(
                "local claims: {} holds another claim's name; remove it once no postonce run is posting",
                path.display()
            )));
        }
        Ok((entry.expires_at_ms > now_ms()).then_some(entry))
    }

    fn put(&self, name: &str, value: &str, ttl: Duration) -> Result<(), ClaimError> {
        let path = self.path(name);
        let entry = Entry {
            name: name.to_owned(),
            value: value.to_owned(),
            expires_at_ms: expiry(ttl),
        };
        let bytes = serde_json::to_vec(&entry).map_err(|e| ClaimError(e.to_string()))?;
        replace_durably(self.dir, &path, &bytes).map_err(|e| err("cannot write", &path, &e))
    }

    fn delete(&self, name: &str) -> Result<(), ClaimError> {
        let path = self.path(name);
        match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(self.dir).map_err(|e| err("cannot sync", self.dir, &e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(err("cannot remove", &path, &e)),
        }
    }

    /// Removes expired claim files and temporary files left by a crashed writer. Best effort:
    /// a file that cannot be read is left alone (it may be a claim, see [`Self::get`]).
    fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(self.dir) else {
            return;
        };
        let now = now_ms();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let stale = if name.ends_with(&format!(".{TMP_EXT}")) {
                // Every writer holds the lock while its temporary file exists, and so do we.
                true
            } else if name.ends_with(&format!(".{CLAIM_EXT}")) {
                std::fs::read(&path)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Entry>(&b).ok())
                    .is_some_and(|e| e.expires_at_ms <= now)
            } else {
                false
            };
            if stale {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

impl Inner {
    /// Runs `f` with the folder locked exclusively.
    fn locked<T>(
        &self,
        f: impl FnOnce(&Locked<'_>) -> Result<T, ClaimError>,
    ) -> Result<T, ClaimError> {
        let path = self.dir.join("lock");
        let file = open_lock_file(&path).map_err(|e| err("cannot open", &path, &e))?;
        file.lock().map_err(|e| err("cannot lock", &path, &e))?;
        let locked = Locked {
            dir: &self.dir,
            _lock: file,
        };
        let out = f(&locked)?;
        if self.sweep_due() {
            locked.sweep();
        }
        Ok(out)
    }

    fn sweep_due(&self) -> bool {
        let mut last = self.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < SWEEP_EVERY) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }
}

impl FileClaims {
    /// Uses (and creates) `dir` for claim files.
    ///
    /// # Errors
    /// When the folder cannot be created.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, ClaimError> {
        let dir = dir.into();
        ensure_dir(&dir).map_err(|e| err("cannot create", &dir, &e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                dir,
                last_sweep: Mutex::new(None),
            }),
        })
    }

    /// The folder the claim files live in.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Runs `f` under the lock on a blocking thread: waiting for another process's lock and
    /// fsyncing must not stall the runtime's workers (and with them every other run in `serve`).
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Locked<'_>) -> Result<T, ClaimError> + Send + 'static,
    ) -> Result<T, ClaimError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.locked(f))
            .await
            .map_err(|e| ClaimError(format!("local claims: the file operation failed: {e}")))?
    }
}

#[async_trait]
impl ClaimStore for FileClaims {
    async fn acquire(
        &self,
        key: &PostKey,
        token: &str,
        ttl: Duration,
    ) -> Result<Acquire, ClaimError> {
        let (name, token) = (claim_name(key), token.to_owned());
        self.run(move |dir| match dir.get(&name)? {
            Some(held) => Ok(Acquire::Held(Some(ClaimValue::parse(&held.value)))),
            None => {
                dir.put(&name, &token, ttl)?;
                Ok(Acquire::Acquired)
            }
        })
        .await
    }

    async fn release(&self, key: &PostKey, value: &str) -> Result<bool, ClaimError> {
        let (name, value) = (claim_name(key), value.to_owned());
        self.run(move |dir| match dir.get(&name)? {
            Some(held) if held.value == value => {
                dir.delete(&name)?;
                Ok(true)
            }
            _ => Ok(false),
        })
        .await
    }

    async fn keep_posted(
        &self,
        key: &PostKey,
        token: &str,
        urn: &str,
        ttl: Duration,
    ) -> Result<bool, ClaimError> {
        let (name, token) = (claim_name(key), token.to_owned());
        let value = ClaimValue::Posted(urn.to_owned()).raw();
        self.run(move |dir| match dir.get(&name)? {
            // Held by another run (or already kept by another run): leave it.
            Some(held) if held.value != token => Ok(false),
            // Still ours, or expired meanwhile and free: set it.
            _ => {
                dir.put(&name, &value, ttl)?;
                Ok(true)
            }
        })
        .await
    }

    async fn inspect(
        &self,
        key: &PostKey,
    ) -> Result<Option<(ClaimValue, Option<Duration>)>, ClaimError> {
        let name = claim_name(key);
        self.run(move |dir| {
            Ok(dir.get(&name)?.map(|e| {
                let left = Duration::from_millis(e.expires_at_ms.saturating_sub(now_ms()));
                (ClaimValue::parse(&e.value), Some(left))
            }))
        })
        .await
    }

    async fn first_sighting(&self, name: &str, ttl: Duration) -> Result<bool, ClaimError> {
        let name = name.to_owned();
        self.run(move |dir| {
            if dir.get(&name)?.is_some() {
                return Ok(false);
            }
            dir.put(&name, "1", ttl)?;
            Ok(true)
        })
        .await
    }

    /// Takes and drops the lock: the folder is there and lockable.
    async fn ping(&self) -> Result<(), ClaimError> {
        self.run(|_| Ok(())).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe_and_distinct() {
        let names = [
            "claim:blog-hello",
            "claim:blog-hello@mastodon",
            "claim:blog-hello_40mastodon",
            "tg:update:123456",
            "claim:Blog-hello",
            "claim:blog-hello.json",
            "../../etc/passwd",
            "a/b",
            "a\\b",
            "",
            "é",
        ];
        let files: Vec<String> = names.iter().map(|n| file_name(n)).collect();
        for (n, f) in names.iter().zip(&files) {
            assert!(
                f.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b)),
                "{n:?} -> {f}"
            );
            assert_eq!(f.matches('.').count(), 1, "{n:?} -> {f}");
            assert!(f.len() <= 255);
        }
        let mut unique = files.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), files.len(), "{files:?}");
        assert_eq!(file_name("claim:blog-hello"), "claim_3ablog-hello.claim");
        assert_eq!(file_name("tg:update:7"), "tg_3aupdate_3a7.claim");
    }

    #[test]
    fn long_names_are_hashed_under_their_own_extension() {
        let long = "x".repeat(300);
        let f = file_name(&long);
        assert!(f.ends_with(".long.claim") && f.len() < 100, "{f}");
        assert_ne!(f, file_name(&"x".repeat(301)));
        // The longest encoding used as is stays below the limit.
        assert!(file_name(&"x".repeat(MAX_STEM)).ends_with("x.claim"));
    }

    #[test]
    fn expiry_rounds_like_redis_ex() {
        let before = now_ms();
        let at = expiry(Duration::from_millis(10));
        assert!(at >= before + 1000 && at <= now_ms() + 1000);
    }
}
