//! The content guard: a caption already posted under another key is refused unless the owner
//! says Post anyway. Captions are compared by a hash of their normalized text.

use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;

use super::*;

/// Hash of the normalized caption: NFC, whitespace collapsed and trimmed, `utm_*` and other
/// tracking parameters removed from links.
pub fn caption_hash(caption: &str) -> String {
    // ASCII text is its own NFC: the common caption skips the normalizer's walk.
    let nfc: std::borrow::Cow<'_, str> = if caption.is_ascii() {
        caption.into()
    } else {
        caption.nfc().collect::<String>().into()
    };
    let words: Vec<String> = nfc.split_whitespace().map(strip_tracking).collect();
    let digest = Sha256::digest(words.join(" ").as_bytes());
    hex::encode(digest)
}

fn strip_tracking(word: &str) -> String {
    if !(word.starts_with("http://") || word.starts_with("https://")) {
        return word.to_owned();
    }
    let Ok(mut url) = url::Url::parse(word) else {
        return word.to_owned();
    };
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| {
            !(k.starts_with("utm_")
                || matches!(k.as_ref(), "fbclid" | "gclid" | "mc_cid" | "mc_eid"))
        })
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    url.to_string()
}

/// The text of the post: the caption, and the link on its own line unless the caption has it.
pub fn full_text(content: &DraftContent) -> String {
    match &content.link {
        Some(link) if !content.caption.contains(link.as_str()) => {
            format!("{}\n\n{link}", content.caption.trim_end())
        }
        _ => content.caption.clone(),
    }
}

impl Lane {
    /// The answer when the intent found the caption (normalized) already posted under
    /// `other`: refused, offering the owner *Post anyway*. The check itself is a condition of
    /// the intent write ([`RecordStore::take_intent`]), so it is made while the claim is held
    /// and nothing can post the caption between the check and the attempt.
    pub(super) async fn caption_taken(
        &self,
        key: &PostKey,
        dl: &Deadline,
        other: &str,
        attempts: u32,
    ) -> (Outcome, Finish) {
        let why = format!(
            "this caption was already posted as {other}; press Post anyway if {key} should carry it too"
        );
        let (mut outcome, finish) = self.fail(key, dl, why, false, attempts, None).await;
        outcome.offer_force = true;
        (outcome, finish)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caption_hash_normalizes() {
        let a = caption_hash("Hello  world\n https://x.com/p?utm_source=li&id=3 ");
        let b = caption_hash("Hello world https://x.com/p?id=3");
        assert_eq!(a, b);
        assert_ne!(a, caption_hash("Hello world https://x.com/p?id=4"));
        assert_eq!(caption_hash("Cafe\u{301}"), caption_hash("Café"));
        // Stored index entries are named by these hashes: the ASCII path hashes the same text.
        assert_eq!(
            b,
            hex::encode(Sha256::digest(b"Hello world https://x.com/p?id=3"))
        );
        assert_eq!(
            caption_hash("Caf\u{e9} ok"),
            hex::encode(Sha256::digest("Caf\u{e9} ok".as_bytes()))
        );
    }
}
