//! Threads' text rule: at most [`MAX_TEXT`] characters, where, in Meta's words, "emojis are
//! counted as the number of UTF-8 bytes".
//!
//! Meta does not say more, so two readings are possible and both are written here:
//! - [`by_characters`]: every Unicode scalar value counts one (an emoji such as 😀 counts 1,
//!   a family emoji joined with ZWJs counts each of its code points);
//! - [`by_emoji_bytes`]: every grapheme cluster that is an emoji counts the UTF-8 bytes of the
//!   whole cluster (😀 counts 4, ❤️ counts 6, 👨‍👩‍👧‍👦 counts 25); everything else counts one
//!   per scalar value, as in the first reading.
//!
//! A text that fits one reading and not the other would be refused by a server that counts the
//! other way, after the container was made. So the count used, [`threads_len`], is the larger
//! of the two: a text it lets through fits both readings. (The second reading is never smaller
//! than the first, since a scalar value takes at least one byte; the `max` keeps that explicit.)

use unicode_segmentation::UnicodeSegmentation;

/// The most characters a Threads post's text may have.
pub const MAX_TEXT: usize = 500;

/// The first reading: Unicode scalar values.
pub fn by_characters(text: &str) -> usize {
    text.chars().count()
}

/// The second reading: an emoji grapheme counts its UTF-8 bytes, anything else one per scalar
/// value.
pub fn by_emoji_bytes(text: &str) -> usize {
    text.graphemes(true)
        .map(|g| {
            if is_emoji(g) {
                g.len()
            } else {
                g.chars().count()
            }
        })
        .sum()
}

/// The count postonce uses for Threads: the larger of the two readings (the safe one).
pub fn threads_len(text: &str) -> usize {
    by_characters(text).max(by_emoji_bytes(text))
}

/// Whether a grapheme cluster is (or contains) an emoji. Generous on purpose: a symbol counted
/// as an emoji only makes the count larger, which is the safe side.
pub fn is_emoji(grapheme: &str) -> bool {
    grapheme.chars().any(|c| {
        let c = u32::from(c);
        matches!(
            c,
            // Variation selector 16 (emoji presentation), zero-width joiner, combining keycap.
            0xFE0F | 0x200D | 0x20E3
            // Mahjong and cards, enclosed alphanumerics and regional indicators, pictographs,
            // emoticons, transport, supplemental symbols, symbols and pictographs extended-A.
            | 0x1F000..=0x1FAFF
            // Miscellaneous symbols and dingbats (☀ ☕ ✂ ✅ ❤).
            | 0x2600..=0x27BF
            // Miscellaneous technical (⌚ ⌛ ⏩ ⏰).
            | 0x2300..=0x23FF
            // Miscellaneous symbols and arrows (⬆ ⭐ ⭕).
            | 0x2B00..=0x2BFF
            // Single emoji outside those blocks (‼ ⁉ ™ ℹ Ⓜ 〰 〽 ㊗ ㊙).
            | 0x203C | 0x2049 | 0x2122 | 0x2139 | 0x24C2 | 0x3030 | 0x303D | 0x3297 | 0x3299
            // Tag characters (subdivision flags 🏴󠁧󠁢󠁳󠁣󠁴󠁿).
            | 0xE0020..=0xE007F
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_readings() {
        let cases: &[(&str, usize, usize)] = &[
            ("hello", 5, 5),
            ("", 0, 0),
            ("日本語", 3, 3),
            ("é", 1, 1),
            ("e\u{301}", 2, 2),
            ("😀", 1, 4),
            ("hi 😀!", 5, 8),
            ("❤️", 2, 6),
            ("👍🏽", 2, 8),
            ("👨\u{200D}👩\u{200D}👧\u{200D}👦", 7, 25),
            ("🇫🇷", 2, 8),
            ("#️⃣", 3, 7),
            ("© 2026", 6, 6),
            ("™", 1, 3),
        ];
        for (text, chars, bytes) in cases {
            assert_eq!(by_characters(text), *chars, "characters of {text:?}");
            assert_eq!(by_emoji_bytes(text), *bytes, "emoji bytes of {text:?}");
            assert_eq!(threads_len(text), (*chars).max(*bytes), "{text:?}");
        }
    }

    #[test]
    fn the_safe_count_fits_both_readings() {
        // 496 letters and one emoji: 497 characters, 500 by bytes: fits both.
        let fits = format!("{}😀", "a".repeat(496));
        assert_eq!(by_characters(&fits), 497);
        assert_eq!(threads_len(&fits), 500);
        // One more letter: 498 characters (fits the first reading), 501 by bytes (does not).
        let over = format!("{}😀", "a".repeat(497));
        assert!(by_characters(&over) <= MAX_TEXT);
        assert!(threads_len(&over) > MAX_TEXT);
        // Without emoji both readings agree, up to the limit exactly.
        let plain = "é".repeat(MAX_TEXT);
        assert_eq!(threads_len(&plain), MAX_TEXT);
    }
}
