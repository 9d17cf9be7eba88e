//! The local store's configuration: `POSTONCE_DATA_DIR`, the folder that holds the records,
//! drafts, pacing and kept secrets (when no other record store is set) and the claims (when no
//! other claim store is set), shared by every postonce process on the machine.

use std::path::PathBuf;

use crate::vars::Vars;

#[derive(Clone, Debug)]
pub struct LocalConfig {
    pub data_dir: PathBuf,
}

impl LocalConfig {
    pub fn load(vars: Vars<'_>) -> Self {
        Self {
            data_dir: PathBuf::from(
                vars.get("POSTONCE_DATA_DIR")
                    .unwrap_or_else(|| ".postonce".into()),
            ),
        }
    }
}

/// Doctor's claims line when the claims are files.
pub const CLAIMS_DOCTOR: crate::stores::ClaimsDoctor = crate::stores::ClaimsDoctor {
    name: "claims (files)",
    ok: "file claims under POSTONCE_DATA_DIR (local mode): claim taken and released",
    fix: "REDIS_URL is not set, so claims are files under POSTONCE_DATA_DIR (local mode, shared by every postonce process on this machine): check that the folder is writable and on a local disk",
};

/// Doctor's fix when the records cannot be read.
pub fn records_fix(error: &str) -> String {
    format!("{error}; check POSTONCE_DATA_DIR")
}
