//! The Telegram channel's text rule: the caption is HTML with three characters escaped, and
//! at most [`CAPTION_MAX`] UTF-16 units of the text itself, markup aside.

/// A photo's caption: 0–1,024 characters after entity parsing. Telegram does not say which
/// unit; its entity offsets are UTF-16 code units, so this adapter counts UTF-16 units. That is
/// never fewer than the Unicode scalar values, so a caption accepted here is accepted by
/// Telegram whichever of the two it counts (an emoji costs 2 here).
pub const CAPTION_MAX: usize = 1024;

/// The caption as HTML (`parse_mode: HTML`): `&`, `<` and `>` escaped, nothing else added.
/// A URL stays bare; Telegram makes it a link.
pub fn caption_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The length of a caption as Telegram counts it after entity parsing (see [`CAPTION_MAX`]):
/// the text itself, markup aside, in UTF-16 code units.
pub fn caption_len(text: &str) -> usize {
    text.encode_utf16().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_the_three_html_specials_and_nothing_else() {
        assert_eq!(
            caption_html(r#"a < b && c > d "q" https://e.com/p?x=1&y=2"#),
            r#"a &lt; b &amp;&amp; c &gt; d "q" https://e.com/p?x=1&amp;y=2"#
        );
        assert_eq!(caption_html("&lt;"), "&amp;lt;");
    }

    #[test]
    fn counts_utf16_units_of_the_text_not_of_the_markup() {
        assert_eq!(caption_len("abc"), 3);
        assert_eq!(caption_len("é"), 1);
        assert_eq!(caption_len("😀"), 2);
        assert_eq!(caption_len("<&>"), 3);
        assert_eq!(caption_len(&"😀".repeat(512)), CAPTION_MAX);
    }
}
