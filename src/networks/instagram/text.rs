//! Instagram's caption rule: at most [`MAX_CAPTION`] characters, [`MAX_HASHTAGS`] hashtags and
//! [`MAX_MENTIONS`] @-mentions (the IG User Media reference as third parties mirror it). The
//! tags are counted by [`crate::networks::capabilities::TagLimits`], every occurrence (a
//! repeated hashtag too): whether Instagram counts a repeat once is unconfirmed, and this
//! reading refuses only what the other might take.
//!
//! How Instagram counts a character is not stated either: a scalar value and a UTF-16 unit
//! are both plausible (an emoji outside the BMP is one or two). The count used is the larger,
//! so a caption it lets through fits both readings.

/// The most characters a caption may have.
pub const MAX_CAPTION: usize = 2200;
/// The most hashtags a caption may carry.
pub const MAX_HASHTAGS: usize = 30;
/// The most @-mentions a caption may carry.
pub const MAX_MENTIONS: usize = 20;

/// A caption's length: the larger of its scalar values and its UTF-16 units.
pub fn caption_len(text: &str) -> usize {
    text.chars().count().max(text.encode_utf16().count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::networks::capabilities::count_tags;

    #[test]
    fn both_readings_of_a_character() {
        assert_eq!(caption_len("hello"), 5);
        assert_eq!(caption_len("日本語"), 3);
        assert_eq!(caption_len("😀"), 2);
        let fits = format!("{}😀", "a".repeat(MAX_CAPTION - 2));
        assert_eq!(caption_len(&fits), MAX_CAPTION);
        assert!(caption_len(&format!("a{fits}")) > MAX_CAPTION);
    }

    #[test]
    fn tags_are_counted_where_they_stand() {
        assert_eq!(count_tags("#a #b #a", '#'), 3);
        assert_eq!(count_tags("issue#5 ## # #_x #é", '#'), 2);
        assert_eq!(count_tags("mail me@example.com or @ada_l, @b.c", '@'), 2);
        assert_eq!(count_tags("(#one)\n#two,#three", '#'), 3);
    }
}
