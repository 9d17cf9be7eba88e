//! LinkedIn's "little text" format for post commentary.
//!
//! Reserved characters `| { } @ [ ] ( ) < > # \ * _ ~` must be escaped with a backslash to stay
//! plain text; unescaped, LinkedIn cuts the published text at the first one. Two
//! elements are kept on purpose: `#word` hashtags and exact mentions `@[Name](urn:li:person:…)` /
//! `@[Name](urn:li:organization:…)`. Everything else reserved is escaped.

/// The composer's limit, in characters (not bytes).
pub const MAX_CHARS: usize = 3000;

/// The characters little text reserves, escaped with a backslash outside hashtags and mentions
/// (one `match`, not a scan of a list per character).
fn reserved(c: char) -> bool {
    matches!(
        c,
        '|' | '{' | '}' | '@' | '[' | ']' | '(' | ')' | '<' | '>' | '#' | '\\' | '*' | '_' | '~'
    )
}

/// Turns a caption into commentary: plain text stays plain, hashtags and exact mentions stay.
pub fn escape(caption: &str) -> String {
    let chars: Vec<char> = caption.chars().collect();
    let mut out = String::with_capacity(caption.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' && starts_hashtag(&chars, i) {
            out.push('#');
            i += 1;
            while i < chars.len() && chars[i].is_alphanumeric() {
                out.push(chars[i]);
                i += 1;
            }
            continue;
        }
        if c == '@' {
            if let Some(len) = mention_len(&chars[i..]) {
                out.extend(&chars[i..i + len]);
                i += len;
                continue;
            }
        }
        if reserved(c) {
            out.push('\\');
        }
        out.push(c);
        i += 1;
    }
    out
}

/// `#` begins a hashtag when a letter or digit follows and no word character precedes it
/// (so `C#` and `a#b` stay plain).
fn starts_hashtag(chars: &[char], i: usize) -> bool {
    let next_ok = chars.get(i + 1).is_some_and(|c| c.is_alphanumeric());
    let prev_ok =
        i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_' || chars[i - 1] == '#');
    next_ok && prev_ok
}

/// Length of an exact mention `@[Name](urn:li:person:ID)` at the start of `s`, if there is one.
fn mention_len(s: &[char]) -> Option<usize> {
    if s.get(1) != Some(&'[') {
        return None;
    }
    let close = s.iter().position(|&c| c == ']')?;
    let name = &s[2..close];
    if name.is_empty() || name.iter().any(|&c| matches!(c, '[' | '(' | ')' | '\n')) {
        return None;
    }
    if s.get(close + 1) != Some(&'(') {
        return None;
    }
    let end = close + 2 + s[close + 2..].iter().position(|&c| c == ')')?;
    let urn: String = s[close + 2..end].iter().collect();
    let id = urn
        .strip_prefix("urn:li:person:")
        .or_else(|| urn.strip_prefix("urn:li:organization:"))?;
    let id_ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    id_ok.then_some(end + 1)
}

/// Characters as LinkedIn's composer counts them (Unicode scalar values, not bytes).
pub fn char_count(caption: &str) -> usize {
    caption.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reserved characters as the module doc lists them, kept apart from [`reserved`] so that
    /// a character missing there cannot also go missing from what these tests expect.
    const API_NOTES_RESERVED: &str = r"|{}@[]()<>#\*_~";

    /// Reads commentary back the way LinkedIn renders it: drops escapes; returns `None` where an
    /// unescaped reserved character outside a hashtag or mention would cut the text.
    fn rendered_plain(commentary: &str) -> Option<String> {
        let chars: Vec<char> = commentary.chars().collect();
        let mut out = String::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => {
                    out.push(*chars.get(i + 1)?);
                    i += 2;
                }
                '#' if starts_hashtag(&chars, i) => {
                    out.push('#');
                    i += 1;
                }
                '@' if mention_len(&chars[i..]).is_some() => {
                    let len = mention_len(&chars[i..])?;
                    out.extend(&chars[i..i + len]);
                    i += len;
                }
                c if API_NOTES_RESERVED.contains(c) => return None,
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        Some(out)
    }

    #[test]
    fn every_reserved_character_outside_elements_is_escaped() {
        let caption = r"a|b{c}d@e[f]g(h)i<j>k#l\m*n_o~p";
        let got = escape(caption);
        assert_eq!(got, r"a\|b\{c\}d\@e\[f\]g\(h\)i\<j\>k\#l\\m\*n\_o\~p");
        assert_eq!(rendered_plain(&got).as_deref(), Some(caption));
    }

    /// Each reserved character on its own, at the start, inside a word and at the end: exactly
    /// one backslash before it, nothing else changed. (`#` is followed by a space or ends the
    /// text here, so it never starts a hashtag; `@` is never followed by `[`.)
    #[test]
    fn each_reserved_character_is_escaped_exactly_once_wherever_it_stands() {
        assert_eq!(API_NOTES_RESERVED.chars().count(), 15);
        for c in API_NOTES_RESERVED.chars() {
            for (caption, expected) in [
                (format!("{c}"), format!("\\{c}")),
                (format!("{c} x"), format!("\\{c} x")),
                (format!("a{c}b"), format!("a\\{c}b")),
                (format!("end {c}"), format!("end \\{c}")),
                (format!("{c}{c}"), format!("\\{c}\\{c}")),
            ] {
                assert_eq!(escape(&caption), expected, "{c:?} in {caption:?}");
            }
        }
    }

    #[test]
    fn hashtags_stay_hashtags() {
        assert_eq!(
            escape("Shipping #rust and #AWS2026 today"),
            "Shipping #rust and #AWS2026 today"
        );
        assert_eq!(escape("#first"), "#first");
        assert_eq!(escape("(#rust)"), r"\(#rust\)");
        // Not hashtags: no word after, or glued to a word.
        assert_eq!(
            escape("C# and # alone and a#b ##x"),
            r"C\# and \# alone and a\#b \#\#x"
        );
    }

    #[test]
    fn exact_mentions_stay_mentions_and_near_misses_are_escaped() {
        let m = "Thanks @[Ada Lovelace](urn:li:person:abc123)!";
        assert_eq!(escape(m), m);
        let org = "@[ACME](urn:li:organization:42)";
        assert_eq!(escape(org), org);
        assert_eq!(escape("@[Ada](https://x.y)"), r"\@\[Ada\]\(https://x.y\)");
        assert_eq!(escape("mail me @ home"), r"mail me \@ home");
    }

    #[test]
    fn unicode_is_untouched_and_counted_as_characters() {
        let caption = "Grüße 👋 — naïve café";
        assert_eq!(escape(caption), caption);
        assert_eq!(char_count(&"é".repeat(3000)), 3000);
        assert!("é".repeat(3000).len() > MAX_CHARS);
    }

    #[test]
    fn fuzzed_captions_render_back_to_themselves() {
        let alphabet: Vec<char> = "ab #@[]()|{}<>\\*_~é\n:urn".chars().collect();
        let mut seed = 0x2545_f491_u64;
        for _ in 0..3000 {
            let len = (seed % 40) as usize;
            let mut caption = String::new();
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                caption.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            let commentary = escape(&caption);
            assert_eq!(
                rendered_plain(&commentary).as_deref(),
                Some(caption.as_str()),
                "{caption:?}"
            );
        }
    }
}
