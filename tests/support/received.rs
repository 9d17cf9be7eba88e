//! What a network's fake received as an image, judged by the fake from the bytes themselves
//! (never from the type the client declared): its SHA-256, size, format and pixel size, and
//! whether the fake refused it and why. Every fake keeps one of these per image that reached
//! it, so that a test can assert "the original went byte for byte" (the hash) and "each image
//! was within that network's limits" (the facts), and see what a fake refused.

/// One image as a fake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// SHA-256 of the bytes, hex ([`super::covers::sha256`]).
    pub sha256: String,
    pub bytes: usize,
    /// The type judged from the bytes (`image/png`, …); `None`: no image type the fake knows.
    pub format: Option<&'static str>,
    /// The size its header declares; `(0, 0)` when the header cannot be read.
    pub width: u32,
    pub height: u32,
    /// The content type the client declared (a part's or the request's), as sent.
    pub declared: String,
    /// Why the fake refused it (the network's error, in short); `None`: taken.
    pub refused: Option<String>,
}

impl Received {
    /// The facts of `bytes`, taken (the fake sets [`Received::refused`] when it refuses).
    pub fn of(bytes: &[u8], declared: &str) -> Self {
        let (width, height) = postonce::image::dimensions(bytes).unwrap_or((0, 0));
        Self {
            sha256: super::covers::sha256(bytes),
            bytes: bytes.len(),
            format: postonce::image::sniff(bytes),
            width,
            height,
            declared: declared.to_owned(),
            refused: None,
        }
    }

    pub fn refused(mut self, why: impl Into<String>) -> Self {
        self.refused = Some(why.into());
        self
    }

    pub fn taken(&self) -> bool {
        self.refused.is_none()
    }

    pub fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }

    /// The longer side over the shorter is more than `ratio`.
    pub fn shape_over(&self, ratio: u32) -> bool {
        let (long, short) = (
            self.width.max(self.height),
            self.width.min(self.height).max(1),
        );
        u64::from(long) > u64::from(ratio) * u64::from(short)
    }

    /// Whether the format is one of `mimes`.
    pub fn is_one_of(&self, mimes: &[&str]) -> bool {
        self.format.is_some_and(|f| mimes.contains(&f))
    }

    /// `image/png 3,000,123 bytes 1000×1000`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {} bytes {}×{}{}",
            self.format.unwrap_or("not an image"),
            self.bytes,
            self.width,
            self.height,
            self.refused
                .as_deref()
                .map_or(String::new(), |r| format!(" (refused: {r})"))
        )
    }
}
