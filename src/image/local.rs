//! Covers that are files on this machine.
//!
//! The CLI reads any path (`postonce post --image PATH`): the person at the terminal owns the
//! machine. The MCP server reads only beneath the folders of `POSTONCE_MCP_IMAGE_DIRS` (none
//! when it is unset): an agent, perhaps steered by text it read, must not publish or probe
//! whatever the server can read. There each folder is opened by its canonical path (resolved
//! once, at start-up) and the file is reached from that descriptor one name at a time with
//! `O_NOFOLLOW`, so no symbolic link is followed, in or out, even one planted after a check;
//! `..` is refused. Every path that cannot be used over MCP gets one message, whatever the
//! reason (missing, unreadable, outside, a link, not a file, too large), so the answers tell
//! nothing about the rest of the file system.
//!
//! Either way the file is opened without blocking (a FIFO is refused, not waited on), must be
//! a regular file by `fstat` of the opened descriptor, and is read through `take(MAX + 1)`: a
//! file that states 0 bytes (`/proc/self/pagemap`) is still read no further than the cap. The
//! reads block: call them from a blocking thread.

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use rustix::fs::{Mode, OFlags};

use super::MAX_IMAGE_BYTES;

/// The variable naming the folders the MCP server may read covers from.
pub const MCP_IMAGE_DIRS: &str = "POSTONCE_MCP_IMAGE_DIRS";

/// A folder covers may be read from: as configured, and canonical (resolved at start-up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageDir {
    given: PathBuf,
    canonical: PathBuf,
}

impl ImageDir {
    /// The folder as it was resolved at start-up.
    pub fn canonical(&self) -> &Path {
        &self.canonical
    }
}

/// Where a process may read local covers from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum LocalCovers {
    /// Any file the process can read (the CLI, `serve`, the sweeper: drafts the owner saved).
    #[default]
    Anywhere,
    /// Only beneath these folders, without following a link (the MCP server); none: no file.
    Beneath(Arc<[ImageDir]>),
}

/// Why a file cannot be used, for the message of each mode.
enum Unusable {
    NotAFile,
    /// Its size, when `fstat` told it.
    TooLarge(Option<u64>),
    Io(std::io::Error),
}

impl From<std::io::Error> for Unusable {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<rustix::io::Errno> for Unusable {
    fn from(e: rustix::io::Errno) -> Self {
        Self::Io(e.into())
    }
}

/// A regular file, opened without blocking and never through a final link.
const FILE_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);
/// A folder on the way, never through a link.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Reads an opened file: a regular file (by `fstat` of the descriptor), at most the cap.
fn read_capped(fd: OwnedFd) -> Result<Bytes, Unusable> {
    let file = File::from(fd);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Unusable::NotAFile);
    }
    if meta.len() > MAX_IMAGE_BYTES as u64 {
        return Err(Unusable::TooLarge(Some(meta.len())));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_IMAGE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(Unusable::TooLarge(None));
    }
    Ok(Bytes::from(bytes))
}

/// Opens `rel` (plain names only) beneath `dir`, one name at a time, following no link.
fn open_beneath(dir: &Path, rel: &Path) -> Result<OwnedFd, Unusable> {
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            _ => return Err(Unusable::NotAFile),
        }
    }
    let Some((last, parents)) = names.split_last() else {
        return Err(Unusable::NotAFile);
    };
    let mut at = rustix::fs::open(dir, DIR_FLAGS, Mode::empty())?;
    for name in parents {
        at = rustix::fs::openat(&at, *name, DIR_FLAGS, Mode::empty())?;
    }
    Ok(rustix::fs::openat(&at, *last, FILE_FLAGS, Mode::empty())?)
}

/// A path the owner gave, for a message to the owner: whole (as far as any path can be:
/// 4,096 characters, Linux's `PATH_MAX`), so that the message names the very file.
fn shown(raw: &str) -> String {
    format!("{:?}", raw.chars().take(4096).collect::<String>())
}

impl LocalCovers {
    /// No local file at all (the MCP server without `POSTONCE_MCP_IMAGE_DIRS`).
    pub fn none() -> Self {
        Self::Beneath(Arc::from(Vec::new()))
    }

    /// The entries of `POSTONCE_MCP_IMAGE_DIRS`: comma-separated absolute paths (as the other
    /// list variables), at least one. Checked by every command; only the MCP server resolves
    /// them ([`LocalCovers::parse_dirs`]), so a folder that one service cannot reach never stops
    /// the others that share the environment.
    ///
    /// # Errors
    /// The entry that is not an absolute path, or an empty list.
    pub fn dir_entries(list: &str) -> Result<Vec<PathBuf>, String> {
        let mut dirs = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let given = PathBuf::from(entry);
            if !given.is_absolute() {
                return Err(format!(
                    "{entry:?} is not an absolute path; name each folder from the root, e.g. /home/me/covers"
                ));
            }
            dirs.push(given);
        }
        if dirs.is_empty() {
            return Err("lists no folder; unset it to read no local file over MCP".into());
        }
        Ok(dirs)
    }

    /// Parses `POSTONCE_MCP_IMAGE_DIRS` ([`LocalCovers::dir_entries`]), each folder resolved now
    /// to its canonical path.
    ///
    /// # Errors
    /// The entry that is not an absolute path to an existing folder, and why.
    pub fn parse_dirs(list: &str) -> Result<Self, String> {
        let mut dirs = Vec::new();
        for given in Self::dir_entries(list)? {
            let entry = given.display();
            let canonical = std::fs::canonicalize(&given)
                .map_err(|e| format!("\"{entry}\": {e}; name folders that exist"))?;
            if !canonical.is_dir() {
                return Err(format!("\"{entry}\" is not a folder"));
            }
            dirs.push(ImageDir { given, canonical });
        }
        Ok(Self::Beneath(Arc::from(dirs)))
    }

    /// The folders, for people: `/a, /b`, or `None` for anywhere or no folder at all.
    pub fn folders(&self) -> Option<String> {
        match self {
            Self::Beneath(dirs) if !dirs.is_empty() => Some(
                dirs.iter()
                    .map(|d| d.given.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            _ => None,
        }
    }

    /// The one answer for a path that cannot be used beneath the folders.
    fn unusable(&self) -> String {
        match self.folders() {
            Some(dirs) => format!(
                "this path cannot be used; give an https URL, or the absolute path of a JPEG, PNG, GIF or WebP file of at most {} MiB inside {dirs} ({MCP_IMAGE_DIRS}), reached without a symbolic link",
                MAX_IMAGE_BYTES / (1024 * 1024)
            ),
            None => format!(
                "this server reads no local file ({MCP_IMAGE_DIRS} is not set); give an https URL"
            ),
        }
    }

    /// Reads the local cover `raw` under this rule (blocking). Returns the path to keep in the
    /// draft (canonical) and the bytes, not yet judged.
    ///
    /// # Errors
    /// The message for the caller: for [`LocalCovers::Anywhere`] the cause and the fix; beneath
    /// folders, one message whatever the cause.
    pub fn read(&self, raw: &str) -> Result<(String, Bytes), String> {
        match self {
            Self::Anywhere => read_anywhere(raw),
            Self::Beneath(dirs) => {
                let path = Path::new(raw);
                if !path.is_absolute() {
                    return Err(self.unusable());
                }
                for dir in dirs.iter() {
                    let rel = path
                        .strip_prefix(&dir.given)
                        .or_else(|_| path.strip_prefix(&dir.canonical));
                    let Ok(rel) = rel else { continue };
                    // `a/./b` is kept as `a/b`; `..` stays, and is refused on the way.
                    let rel: PathBuf = rel
                        .components()
                        .filter(|c| !matches!(c, Component::CurDir))
                        .collect();
                    if let Ok(bytes) = open_beneath(&dir.canonical, &rel).and_then(read_capped) {
                        let kept = dir.canonical.join(&rel);
                        return Ok((kept.to_string_lossy().into_owned(), bytes));
                    }
                }
                Err(self.unusable())
            }
        }
    }
}

impl LocalCovers {
    /// Checks a local cover before anything is stored: readable under this rule, and decoding
    /// strictly (blocking: CPU and file system). Returns the path to keep in the draft.
    ///
    /// # Errors
    /// As [`LocalCovers::read`], or why the image is not sound.
    pub fn check(&self, raw: &str) -> Result<String, String> {
        let (kept, bytes) = self.read(raw)?;
        super::decode::decode(&bytes).map_err(|e| format!("{}: {e}", shown(raw)))?;
        Ok(kept)
    }
}

/// The CLI's rule: any readable regular file, named in the message with its cause.
fn read_anywhere(raw: &str) -> Result<(String, Bytes), String> {
    let shown = shown(raw);
    let path = std::fs::canonicalize(raw).map_err(|e| {
        format!("{shown}: {e}; give an https URL or the path of a JPEG, PNG, GIF or WebP file on this machine")
    })?;
    let read = rustix::fs::open(&path, FILE_FLAGS, Mode::empty())
        .map_err(Unusable::from)
        .and_then(read_capped);
    let cap = MAX_IMAGE_BYTES / (1024 * 1024);
    match read {
        Ok(bytes) => Ok((path.to_string_lossy().into_owned(), bytes)),
        Err(Unusable::NotAFile) => Err(format!(
            "{shown} is not a file; give an https URL or the path of a JPEG, PNG, GIF or WebP file"
        )),
        Err(Unusable::TooLarge(Some(n))) => Err(format!(
            "{shown} is {n} bytes, more than the {cap} MiB a cover may have"
        )),
        Err(Unusable::TooLarge(None)) => Err(format!(
            "{shown} is more than the {cap} MiB a cover may have"
        )),
        Err(Unusable::Io(e)) => Err(format!("{shown}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beneath(dir: &Path) -> LocalCovers {
        LocalCovers::parse_dirs(&dir.display().to_string()).unwrap()
    }

    #[test]
    fn only_plain_names_beneath_the_folder_and_no_link_on_the_way() {
        let root = tempfile::tempdir().unwrap();
        let allowed = root.path().join("covers");
        std::fs::create_dir_all(allowed.join("sub")).unwrap();
        std::fs::write(allowed.join("sub/a.png"), b"png").unwrap();
        std::fs::write(root.path().join("secret.png"), b"secret").unwrap();
        std::os::unix::fs::symlink(root.path(), allowed.join("up")).unwrap();
        std::os::unix::fs::symlink(allowed.join("sub/a.png"), allowed.join("inner.png")).unwrap();
        let rule = beneath(&allowed);
        let (kept, bytes) = rule
            .read(&allowed.join("sub/./a.png").display().to_string())
            .unwrap();
        assert_eq!(&bytes[..], b"png");
        assert!(kept.ends_with("covers/sub/a.png"), "{kept}");
        let one = rule.unusable();
        for bad in [
            allowed.join("up/secret.png"),
            allowed.join("inner.png"),
            allowed.join("sub/../../secret.png"),
            allowed.join("missing.png"),
            allowed.join("sub"),
            root.path().join("secret.png"),
            PathBuf::from("covers/sub/a.png"),
            PathBuf::from("/proc/self/pagemap"),
        ] {
            assert_eq!(
                rule.read(&bad.display().to_string()).unwrap_err(),
                one,
                "{bad:?}"
            );
        }
        assert!(LocalCovers::none()
            .read(&allowed.join("sub/a.png").display().to_string())
            .unwrap_err()
            .contains("POSTONCE_MCP_IMAGE_DIRS is not set"));
    }

    #[test]
    fn a_file_that_states_no_size_is_read_no_further_than_the_cap() {
        let rule = beneath(Path::new("/proc/self"));
        assert_eq!(
            rule.read("/proc/self/pagemap").unwrap_err(),
            rule.unusable()
        );
        let why = LocalCovers::Anywhere
            .read("/proc/self/pagemap")
            .unwrap_err();
        assert!(why.contains("pagemap"), "{why}");
    }

    #[test]
    fn the_folders_must_be_absolute_and_exist() {
        assert!(LocalCovers::parse_dirs("covers").is_err());
        assert!(LocalCovers::parse_dirs("/no/such/folder").is_err());
        assert!(LocalCovers::parse_dirs(" , ").is_err());
        assert!(LocalCovers::parse_dirs("/proc/self/status").is_err());
    }
}
