//! Self-hosted covers: files in a folder (`POSTONCE_COVERS_DIR`, by default `covers` under
//! `POSTONCE_DATA_DIR`) that `postonce serve` answers at `<POSTONCE_PUBLIC_URL>/covers/<name>`.
//! Any process writes them (a CLI run too); only `serve` answers, so it must run at that URL.
//!
//! A file is written to a fresh temporary name (created exclusively, so never through a link)
//! and renamed into place, so a reader sees all of it or none; a rename replaces a link rather
//! than writing through it. Files older than [`KEPT_FOR`] are removed on the next put, and
//! never answered.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;

use super::{CoverHost, CoverName, KEPT_FOR};
use crate::image::{ImageError, MAX_IMAGE_BYTES};

/// The folder adapter.
pub struct FolderHost {
    dir: PathBuf,
    public_url: String,
}

impl FolderHost {
    pub fn new(dir: PathBuf, public_url: String) -> Self {
        Self { dir, public_url }
    }

    fn url(&self, name: &CoverName) -> String {
        format!("{}/covers/{name}", self.public_url)
    }
}

#[async_trait]
impl CoverHost for FolderHost {
    async fn put(&self, name: &CoverName, bytes: &Bytes) -> Result<String, ImageError> {
        let (dir, file, bytes) = (self.dir.clone(), name.to_string(), bytes.clone());
        tokio::task::spawn_blocking(move || {
            write(&dir, &file, &bytes)?;
            remove_old(&dir, SystemTime::now());
            Ok::<_, std::io::Error>(())
        })
        .await
        .map_err(|e| ImageError::Unavailable(format!("could not host the cover ({e})")))?
        .map_err(|e| {
            ImageError::Unavailable(format!(
                "could not host the cover in {} ({e}); check POSTONCE_COVERS_DIR",
                self.dir.display()
            ))
        })?;
        Ok(self.url(name))
    }

    async fn locate(&self, name: &CoverName) -> Result<String, ImageError> {
        Ok(self.url(name))
    }

    async fn check(&self) -> Result<String, String> {
        let dir = self.dir.clone();
        let probe = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!(".doctor-{:016x}", rand::random::<u64>()));
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            std::fs::remove_file(&tmp)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
        match probe {
            Ok(()) => Ok(format!(
                "covers are written to {} and fetched at {}/covers/<sha256>.<ext>: `postonce serve` must be running there",
                self.dir.display(),
                self.public_url
            )),
            Err(e) => Err(format!(
                "the covers folder {} is not writable ({e}); set POSTONCE_COVERS_DIR to a folder this user may write",
                self.dir.display()
            )),
        }
    }

    fn describe(&self) -> String {
        format!("hosted by `postonce serve` at {}/covers/", self.public_url)
    }
}

/// Writes `bytes` as `dir/name`: to a temporary file created exclusively, then renamed.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".tmp-{:016x}-{name}", rand::random::<u64>()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes the covers (and left-over temporary files) older than [`KEPT_FOR`]; what cannot be
/// removed now is tried again at the next put.
fn remove_old(dir: &Path, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = CoverName::parse(&name).is_some() || name.starts_with(".tmp-");
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age > KEPT_FOR);
        if ours && old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A hosted cover as `serve` answers it: its bytes, or `None` (not a cover name, no such
/// file, not a regular file, a link, older than [`KEPT_FOR`], or unreadable). Blocking.
pub fn read(dir: &Path, name: &str) -> Option<(CoverName, Vec<u8>)> {
    use rustix::fs::{Mode, OFlags};
    let parsed = CoverName::parse(name)?;
    let path = dir.join(parsed.to_string());
    // O_NOFOLLOW: a link planted in the folder is refused, never followed.
    let fd = rustix::fs::open(
        &path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata().ok()?;
    let young = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_some_and(|age| age <= KEPT_FOR);
    if !meta.is_file() || !young || meta.len() > MAX_IMAGE_BYTES as u64 {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_IMAGE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    Some((parsed, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Format;

    #[tokio::test]
    async fn put_then_read_the_same_bytes_under_their_hash() {
        let dir = tempfile::tempdir().expect("dir");
        let host = FolderHost::new(dir.path().join("covers"), "https://p.example".into());
        let bytes = Bytes::from_static(b"\x89PNG pretend");
        let name = CoverName::of(&bytes, Format::Png);
        let url = host.put(&name, &bytes).await.expect("put");
        assert_eq!(url, format!("https://p.example/covers/{name}"));
        // Again: the same name, the same bytes.
        assert_eq!(host.put(&name, &bytes).await.expect("again"), url);
        let (got, read_back) = read(&dir.path().join("covers"), &name.to_string()).expect("read");
        assert_eq!(got, name);
        assert_eq!(read_back, bytes.to_vec());
        assert!(read(&dir.path().join("covers"), "../covers").is_none());
        // Only the file: no temporary left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path().join("covers"))
            .expect("list")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn a_link_is_never_followed() {
        let dir = tempfile::tempdir().expect("dir");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"not a cover").expect("write");
        let name = CoverName::of(b"x", Format::Jpeg).to_string();
        std::os::unix::fs::symlink(&secret, dir.path().join(&name)).expect("link");
        assert!(read(dir.path(), &name).is_none());
        // A put replaces the link, and the file it pointed to is untouched.
        write(dir.path(), &name, b"x").expect("write");
        assert_eq!(std::fs::read(&secret).expect("read"), b"not a cover");
        assert_eq!(read(dir.path(), &name).expect("a file now").1, b"x");
    }

    #[test]
    fn old_covers_are_removed_and_never_answered() {
        let dir = tempfile::tempdir().expect("dir");
        let name = CoverName::of(b"old", Format::Gif).to_string();
        write(dir.path(), &name, b"old").expect("write");
        let later = SystemTime::now() + KEPT_FOR + std::time::Duration::from_secs(60);
        remove_old(dir.path(), later);
        assert!(!dir.path().join(&name).exists());
    }
}
