//! A folder a command writes into, opened once and used only through its descriptor.
//!
//! `postonce preview` writes fixed names into one folder. Checking the folder's path and then
//! writing by path again would let a folder swapped for a symbolic link between the two send
//! the deletes and the new files elsewhere. So the folder is opened once, `O_DIRECTORY |
//! O_NOFOLLOW` (its own name is never a link; the folders above it are resolved once, at that
//! open), and every look, delete and create afterwards is relative to that descriptor
//! (`fstatat`, `unlinkat`, `openat` with `O_CREAT | O_EXCL | O_NOFOLLOW`): whatever happens to
//! the path afterwards, the files land in the folder that was opened, and never through a link.

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// What is at a name in the folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Nothing,
    /// A regular file.
    File,
}

/// An opened output folder.
#[derive(Debug)]
pub struct OutDir {
    fd: OwnedFd,
    /// For messages only: never used to reach a file.
    path: PathBuf,
}

impl OutDir {
    /// Makes the folder if it is missing, then opens it once. A folder whose own name is a
    /// symbolic link, or that is not a folder, is refused.
    ///
    /// # Errors
    /// The message for people.
    pub fn open(path: &Path) -> Result<Self, String> {
        // A trailing `/` would make the kernel follow a final link even under O_NOFOLLOW.
        let path: &Path = &path.components().collect::<PathBuf>();
        let shown = path.display();
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(path).map_err(|e| format!("--out {shown}: {e}"))?;
            }
            _ => {}
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        // With O_DIRECTORY a final link answers ENOTDIR (Linux) or ELOOP: say which it was.
        let link = || std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR if link() => format!(
                "--out {shown}: is a symbolic link; postonce preview writes only into a real folder: name the folder itself"
            ),
            Errno::NOTDIR => format!(
                "--out {shown}: is a file, not a folder; name a folder (it is made if missing)"
            ),
            e => format!("--out {shown}: {}", std::io::Error::from(e)),
        })?;
        Ok(Self {
            fd,
            path: path.to_owned(),
        })
    }

    /// The path of `name`, for messages and the report.
    pub fn shown(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// A name in the folder: a plain name, nothing that could leave it.
    fn plain<'a>(&self, name: &'a str) -> Result<&'a str, String> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(format!("{name:?} is not a file name in the folder"));
        }
        Ok(name)
    }

    /// What is at `name`, refusing anything but a regular file (a link is never followed).
    ///
    /// # Errors
    /// A link or anything else that is not a regular file, naming it and the fix.
    pub fn inspect(&self, name: &str) -> Result<Found, String> {
        let shown = self.shown(name);
        let shown = shown.display();
        match rustix::fs::statat(&self.fd, self.plain(name)?, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => Ok(Found::File),
                FileType::Symlink => Err(format!(
                    "{shown} is a symbolic link; postonce preview never writes through one. Remove it, or choose another --out"
                )),
                _ => Err(format!(
                    "{shown} exists and is not a file; remove it, or choose another --out"
                )),
            },
            Err(Errno::NOENT) => Ok(Found::Nothing),
            Err(e) => Err(format!("{shown}: {}", std::io::Error::from(e))),
        }
    }

    /// Removes `name` from the folder (a link there is removed itself, never followed).
    ///
    /// # Errors
    /// The file and why.
    pub fn remove(&self, name: &str) -> Result<(), String> {
        rustix::fs::unlinkat(&self.fd, self.plain(name)?, AtFlags::empty()).map_err(|e| {
            format!(
                "{}: {}",
                self.shown(name).display(),
                std::io::Error::from(e)
            )
        })
    }

    /// Creates `name` afresh in the folder (never an existing file, never through a link) and
    /// writes `bytes`; returns its path for the report.
    ///
    /// # Errors
    /// The file and why.
    pub fn create(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
        let shown = self.shown(name);
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NOCTTY;
        let fd = rustix::fs::openat(
            &self.fd,
            self.plain(name)?,
            flags,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| {
            format!(
                "{}: {} (nothing is written through a link)",
                shown.display(),
                std::io::Error::from(e)
            )
        })?;
        let mut file = File::from(fd);
        file.write_all(bytes)
            .and_then(|()| file.flush())
            .map_err(|e| format!("{}: {e}", shown.display()))?;
        Ok(shown)
    }
}
