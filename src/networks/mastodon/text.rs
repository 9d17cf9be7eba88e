//! Mastodon's text rules: how the server counts a status's length (URLs at the instance's
//! fixed length, a mention by its username, grapheme clusters), and how a status read back
//! (its HTML `content`) is brought to the form its text was sent in, to compare it.

use serde_json::Value;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

use crate::networks::links::{url_end, UrlRules};

/// The length of a status as Mastodon counts it (its `StatusLengthValidator`): grapheme
/// clusters, where every `http://` / `https://` URL counts `per_url` whatever its length and a
/// mention `@user@domain` counts as `@user`. URLs without a scheme count by their letters (the
/// server extracts only URLs with a protocol for this).
pub fn status_len(text: &str, per_url: usize) -> usize {
    short_mentions(text, |_, out| {
        out.extend(std::iter::repeat_n('\u{1}', per_url));
    })
    .graphemes(true)
    .count()
}

/// `text` with every mention `@user@domain` as `@user`, and every `http(s)://` URL (where an
/// `@` is not a mention) written by `url`.
fn short_mentions(text: &str, mut url: impl FnMut(&[char], &mut String)) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if let Some(end) = url_end(&chars, i, &URLS) {
            url(&chars[i..end], &mut out);
            i = end;
        } else if let Some((user_end, end)) = mention_at(&chars, i) {
            out.extend(&chars[i..user_end]);
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// How the server finds URLs for the count: `http(s)://` only (a host of at least two labels,
/// or `localhost`), not after a word character, `@`, `/`, `.`, `-`, `=` or `#`.
const URLS: UrlRules = UrlRules {
    bare_tlds: None,
    not_after: |p| is_word(p) || matches!(p, '@' | '/' | '.' | '-' | '=' | '#'),
    localhost: true,
};

/// A mention `@user` or `@user@domain` starting at `i`: (end of `@user`, end of the mention).
/// Not after a word character, `=` or `/` (an e-mail address, a URL).
fn mention_at(chars: &[char], i: usize) -> Option<(usize, usize)> {
    if chars[i] != '@' {
        return None;
    }
    if i > 0 && (is_word(chars[i - 1]) || matches!(chars[i - 1], '=' | '/' | '@')) {
        return None;
    }
    let user_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    let mut j = i + 1;
    while j < chars.len() && user_ok(chars[j]) {
        j += 1;
    }
    // A username ends with a letter, digit or `_`.
    while j > i + 1 && matches!(chars[j - 1], '.' | '-') {
        j -= 1;
    }
    if j == i + 1 {
        return None;
    }
    let user_end = j;
    if j < chars.len() && chars[j] == '@' {
        let mut k = j + 1;
        while k < chars.len() && (is_word(chars[k]) || matches!(chars[k], '.' | '-')) {
            k += 1;
        }
        while k > j + 1 && !is_word(chars[k - 1]) {
            k -= 1;
        }
        if k > j + 1 {
            return Some((user_end, k));
        }
    }
    Some((user_end, user_end))
}

// Reading a status back.

fn decode_entity(entity: &str) -> Option<String> {
    let named = match entity {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some('\u{a0}'),
        _ => None,
    };
    if let Some(c) = named {
        return Some(c.to_string());
    }
    let num = entity.strip_prefix('#')?;
    let code = match num.strip_prefix(['x', 'X']) {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => num.parse().ok()?,
    };
    char::from_u32(code).map(String::from)
}

/// A status's HTML `content` as the text it was written from: tags removed (a link's hidden
/// `https://` and its cut-off tail are text, so a URL comes back whole), `<br>` as a line break,
/// a new paragraph as a blank line, and entities (`&amp;`, `&#39;`, numeric) decoded.
pub fn plain_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                // The tag runs to the first `>` outside quotes.
                let mut quote: Option<char> = None;
                let mut end = None;
                for (k, ch) in rest.char_indices().skip(1) {
                    match (quote, ch) {
                        (None, '"' | '\'') => quote = Some(ch),
                        (Some(q), ch) if ch == q => quote = None,
                        (None, '>') => {
                            end = Some(k);
                            break;
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else {
                    // Not a tag: a lone `<` (never in Mastodon's output, which escapes it).
                    out.push('<');
                    rest = &rest[1..];
                    continue;
                };
                let tag = rest[1..end].trim().to_ascii_lowercase();
                let name: String = tag
                    .trim_start_matches('/')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                let closing = tag.starts_with('/');
                match (name.as_str(), closing) {
                    ("br", _) => out.push('\n'),
                    ("p", false) if !out.is_empty() => {
                        while out.ends_with('\n') {
                            out.pop();
                        }
                        out.push_str("\n\n");
                    }
                    _ => {}
                }
                rest = &rest[end + 1..];
            }
            '&' => {
                let decoded = rest[1..]
                    .find(';')
                    .filter(|&semi| semi <= 10)
                    .and_then(|semi| decode_entity(&rest[1..=semi]).map(|d| (d, semi + 2)));
                match decoded {
                    Some((text, len)) => {
                        out.push_str(&text);
                        rest = &rest[len..];
                    }
                    None => {
                        out.push('&');
                        rest = &rest[1..];
                    }
                }
            }
            c => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// A text in the form both sides are compared in: NFC, line breaks as `\n`, the surrounding
/// space trimmed (the server strips a status's text), blank lines between paragraphs as one
/// (the server renders any run of them as one paragraph break), and mentions `@user@domain`
/// as `@user` (the server shows a mention by its username).
pub fn comparable(text: &str) -> String {
    let text: String = text
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .nfc()
        .collect();
    let text = text.trim();
    let mut collapsed = String::with_capacity(text.len());
    let mut newlines = 0;
    for c in text.chars() {
        if c == '\n' {
            newlines += 1;
            continue;
        }
        if newlines > 0 {
            collapsed.push_str(if newlines == 1 { "\n" } else { "\n\n" });
            newlines = 0;
        }
        collapsed.push(c);
    }
    short_mentions(&collapsed, |url, out| out.extend(url))
}

/// The text of a status as it was sent, in [`comparable`] form: its `text` when the server
/// gives it (it does only in some answers), else its HTML `content` made plain.
pub fn status_text(status: &Value) -> String {
    match status.get("text").and_then(Value::as_str) {
        Some(text) if !text.is_empty() => comparable(text),
        _ => comparable(&plain_text(
            status.get("content").and_then(Value::as_str).unwrap_or(""),
        )),
    }
}
