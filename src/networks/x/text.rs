//! X's text rule: the weighted count X limits a post to ([`weighted_len`], [`super::MAX_TEXT`]),
//! with the URL and emoji detection it needs.

use unicode_normalization::UnicodeNormalization;

use crate::networks::links::{url_end, UrlRules};

/// X's weighted length (twitter-text configuration v3, the one X counts with): NFC first;
/// every URL counts 23 (it becomes a t.co link); an emoji, sequences included (ZWJ families,
/// skin tones, flags, keycaps), counts 2; a code point in U+0000–U+10FF, U+2000–U+200D,
/// U+2010–U+201F or U+2032–U+2037 counts 1; every other code point (CJK, most symbols) 2.
///
/// URLs with `http://` / `https://` are found exactly as far as their extent goes (to the next
/// space, less trailing punctuation). URLs without a scheme are recognised for common generic
/// top-level domains, and for two-letter country domains only when a path follows (`t.co/x`);
/// twitter-text knows every IANA domain, so a bare `name.tld` with a rare domain may count by
/// its letters here where X counts 23.
pub fn weighted_len(text: &str) -> usize {
    let chars: Vec<char> = text.nfc().collect();
    let mut total = 0;
    let mut i = 0;
    while i < chars.len() {
        if let Some(end) = url_end(&chars, i, &URLS) {
            total += 23;
            i = end;
        } else if let Some(end) = emoji_at(&chars, i) {
            total += 2;
            i = end;
        } else {
            total += char_weight(chars[i]);
            i += 1;
        }
    }
    total
}

fn char_weight(c: char) -> usize {
    match u32::from(c) {
        0..=0x10FF | 0x2000..=0x200D | 0x2010..=0x201F | 0x2032..=0x2037 => 1,
        _ => 2,
    }
}

/// How X finds URLs (twitter-text): not inside a word, a mention, a cashtag or a hashtag;
/// bare domains with a common generic top-level domain.
const URLS: UrlRules = UrlRules {
    bare_tlds: Some(&[
        "com", "net", "org", "info", "biz", "edu", "gov", "mil", "int", "name", "pro", "mobi",
        "app", "dev", "page", "blog", "xyz", "online", "site", "tech", "store", "shop", "news",
        "club", "link", "live", "cloud", "art", "design", "studio", "social", "email", "website",
        "space",
    ]),
    not_after: |p| p.is_alphanumeric() || matches!(p, '@' | '$' | '#' | '.' | '/' | '-' | '_'),
    localhost: false,
};

fn is_pictographic(c: u32) -> bool {
    matches!(c,
        0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2300..=0x23FF | 0x2B00..=0x2BFF
        | 0x2190..=0x21FF | 0x25A0..=0x25FF | 0x2900..=0x297F | 0x3030 | 0x303D
        | 0x3297 | 0x3299 | 0x203C | 0x2049 | 0x2122 | 0x2139 | 0x24C2 | 0xA9 | 0xAE)
}

/// The end of an emoji (with its modifiers and joined parts) starting at `i`, if one does.
/// Characters that are also plain text (`©`, `#`, digits) are emoji only with U+FE0F or as a
/// keycap.
fn emoji_at(chars: &[char], i: usize) -> Option<usize> {
    let c = u32::from(chars[i]);
    let next = |k: usize| chars.get(k).map(|&c| u32::from(c));
    // Keycap: [0-9#*] FE0F? 20E3.
    if chars[i].is_ascii_digit() || matches!(chars[i], '#' | '*') {
        return match (next(i + 1), next(i + 2)) {
            (Some(0x20E3), _) => Some(i + 2),
            (Some(0xFE0F), Some(0x20E3)) => Some(i + 3),
            _ => None,
        };
    }
    // Flag: two regional indicators.
    if (0x1F1E6..=0x1F1FF).contains(&c) {
        return match next(i + 1) {
            Some(n) if (0x1F1E6..=0x1F1FF).contains(&n) => Some(i + 2),
            _ => Some(i + 1),
        };
    }
    if !is_pictographic(c) || (char_weight(chars[i]) == 1 && next(i + 1) != Some(0xFE0F)) {
        return None;
    }
    let mut j = i + 1;
    loop {
        match next(j) {
            Some(0xFE0F | 0xFE0E | 0x20E3) | Some(0x1F3FB..=0x1F3FF) | Some(0xE0020..=0xE007F) => {
                j += 1;
            }
            Some(0x200D) if next(j + 1).is_some_and(is_pictographic) => j += 2,
            _ => break,
        }
    }
    Some(j)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_length_follows_x_counting() {
        let cases: &[(&str, usize)] = &[
            ("hello", 5),
            ("日本語", 6),
            ("Ж and é", 7),
            ("ሀ", 2),
            ("a\u{2014}b \u{201C}q\u{201D}", 7),
            ("cafe\u{301}", 4),
            ("😀", 2),
            ("👍🏽", 2),
            ("👨\u{200D}👩\u{200D}👧\u{200D}👦", 2),
            ("🇫🇷", 2),
            ("1\u{FE0F}\u{20E3}", 2),
            ("H🐱☺👨\u{200D}👩\u{200D}👧\u{200D}👦", 7),
            ("© 2026", 6),
            ("©\u{FE0F}", 2),
            ("#1 and 42", 9),
            ("Visit https://example.com/a/very/long/path?x=1 today", 35),
            ("see https://example.com/p.", 28),
            ("(https://example.com/p)", 25),
            ("HTTP://EXAMPLE.COM", 23),
            ("example.com", 23),
            ("t.co/abc", 23),
            ("example.jp", 10),
            ("x.y", 3),
            ("me@example.com", 14),
            ("#tag", 4),
        ];
        for (text, want) in cases {
            assert_eq!(weighted_len(text), *want, "{text:?}");
        }
        assert_eq!(weighted_len(&"x".repeat(280)), 280);
        assert_eq!(weighted_len(&"字".repeat(140)), 280);
        let with_url = format!(
            "{} https://example.com/{}",
            "a".repeat(256),
            "p".repeat(500)
        );
        assert_eq!(weighted_len(&with_url), 280);
    }
}
