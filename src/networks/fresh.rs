//! Uploads this process made a moment ago: the create of the same attempt need not upload the
//! image again, while a replay (a later attempt, or any second create) does, since the server
//! may have dropped the blob meanwhile (a PDS collects blobs no record references; a media
//! server may expire them).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What was uploaded, by a name the adapter chooses (a record key, a blob's hash), and when.
#[derive(Debug)]
pub struct FreshUploads {
    uploads: Mutex<HashMap<String, Instant>>,
    /// How long an upload is taken to be there: well inside the time the server keeps it.
    fresh_for: Duration,
}

impl FreshUploads {
    pub fn new(fresh_for: Duration) -> Self {
        Self {
            uploads: Mutex::new(HashMap::new()),
            fresh_for,
        }
    }

    /// `name` was uploaded just now.
    pub fn mark(&self, name: &str) {
        let mut uploads = self.uploads.lock().unwrap_or_else(PoisonError::into_inner);
        uploads.retain(|_, at| at.elapsed() < self.fresh_for);
        uploads.insert(name.to_owned(), Instant::now());
    }

    /// Whether `name` was uploaded recently enough; forgets it either way (only the first
    /// create may skip the upload).
    pub fn take(&self, name: &str) -> bool {
        let mut uploads = self.uploads.lock().unwrap_or_else(PoisonError::into_inner);
        uploads
            .remove(name)
            .is_some_and(|at| at.elapsed() < self.fresh_for)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_take_within_the_time_counts() {
        let f = FreshUploads::new(Duration::from_secs(60));
        assert!(!f.take("a"), "never uploaded");
        f.mark("a");
        assert!(f.take("a"), "uploaded a moment ago");
        assert!(!f.take("a"), "a second create uploads again");
        let stale = FreshUploads::new(Duration::ZERO);
        stale.mark("b");
        assert!(!stale.take("b"), "too long ago");
    }
}
