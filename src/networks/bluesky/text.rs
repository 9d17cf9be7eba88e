//! Bluesky's text rules: the 300-grapheme (and 3,000-byte) limit, and the facets that make
//! links and `#tags` in the text what the app shows as such (UTF-8 byte offsets, as the
//! lexicon `app.bsky.richtext.facet` wants them). Mentions get no facet: handles are not
//! resolved, so an `@handle` stays text.

use serde_json::{json, Value};
use unicode_segmentation::UnicodeSegmentation;

use super::{MAX_TEXT, MAX_TEXT_BYTES};
use crate::networks::links::{url_end, UrlRules};

/// The text's length in extended grapheme clusters (an emoji family, a flag, `e` with a
/// combining accent each count 1), as the lexicon counts `maxGraphemes`.
pub fn grapheme_len(text: &str) -> usize {
    text.graphemes(true).count()
}

/// The length [`NetworkAdapter::text_len`](crate::networks::NetworkAdapter::text_len) answers: graphemes; a text over
/// [`MAX_TEXT_BYTES`] UTF-8 bytes (possible within 300 graphemes when they are long emoji
/// sequences) counts as at least `MAX_TEXT + 1`, because the network refuses it too.
pub fn text_len(text: &str) -> usize {
    let graphemes = grapheme_len(text);
    if text.len() > MAX_TEXT_BYTES {
        graphemes.max(MAX_TEXT + 1)
    } else {
        graphemes
    }
}

// ---------------------------------------------------------------------------------------------
// Links.

/// A link in a post's text: UTF-8 byte offsets (start inclusive, end exclusive) and the URI
/// its facet points to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub start: usize,
    pub end: usize,
    pub uri: String,
}

/// How the app finds links: `http(s)://` URLs, and bare domains with a common generic
/// top-level domain; not inside a word, a mention, a tag or another URL.
const URLS: UrlRules = UrlRules {
    bare_tlds: Some(&[
        "com", "net", "org", "info", "biz", "edu", "gov", "io", "co", "me", "app", "dev", "page",
        "blog", "xyz", "online", "site", "tech", "store", "shop", "news", "club", "link", "live",
        "cloud", "art", "design", "studio", "social", "email", "website", "space", "ai",
    ]),
    not_after: |p| {
        p.is_alphanumeric() || matches!(p, '@' | '$' | '#' | '.' | '/' | '-' | '_' | ':')
    },
    localhost: false,
};

/// The links in `text`: every `http://` / `https://` URL, and bare domains (`example.com/p`)
/// with a common generic top-level domain, or a two-letter country domain followed by a path
/// ([`url_end`] says where one ends). A bare domain's facet points to `https://` + the text.
pub fn links(text: &str) -> Vec<Link> {
    let chars: Vec<char> = text.chars().collect();
    // The UTF-8 offset of every character, and of the text's end.
    let offsets: Vec<usize> = text
        .char_indices()
        .map(|(at, _)| at)
        .chain([text.len()])
        .collect();
    let mut out = vec![];
    let mut i = 0;
    while i < chars.len() {
        let Some(end) = url_end(&chars, i, &URLS) else {
            i += 1;
            continue;
        };
        let (start, end_at) = (offsets[i], offsets[end]);
        let shown = &text[start..end_at];
        let has_scheme = ["http://", "https://"]
            .iter()
            .any(|p| shown.get(..p.len()).is_some_and(|s| s.eq_ignore_ascii_case(p)));
        let uri = if has_scheme {
            shown.to_owned()
        } else {
            format!("https://{shown}")
        };
        out.push(Link {
            start,
            end: end_at,
            uri,
        });
        i = end;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Tags.

/// A `#tag` in a post's text: UTF-8 byte offsets of `#tag` (the `#` included, start
/// inclusive, end exclusive) and the tag without its `#`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub start: usize,
    pub end: usize,
    pub tag: String,
}

/// The most graphemes a tag may have (`app.bsky.richtext.facet#tag`, `maxGraphemes`).
pub const MAX_TAG_GRAPHEMES: usize = 64;

/// The most UTF-8 bytes a tag may have (`maxLength`).
pub const MAX_TAG_BYTES: usize = 640;

/// Whitespace as JavaScript's `\s` counts it (the official clients' regular expressions).
fn js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// The invisible characters that end a tag in the official clients (soft hyphen, word
/// joiner, hair space, zero-width space / non-joiner / joiner, combining enclosing keycap).
fn zero_width(c: char) -> bool {
    matches!(
        c,
        '\u{ad}' | '\u{2060}' | '\u{200a}' | '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{20e2}'
    )
}

/// Unicode punctuation (general category P*), JavaScript's `\p{P}`.
fn punctuation(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    matches!(
        get_general_category(c),
        G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
    )
}

/// The `#tags` in `text`, by the rules of the official clients (`@atproto/api`'s
/// `detectFacets`): `#` (or the full-width `＃`) at the start or after whitespace, then
/// everything up to the next whitespace or invisible separator, less trailing punctuation.
/// A tag that is only digits and punctuation (`#2024`, `#1.5`), empty, over
/// [`MAX_TAG_GRAPHEMES`] graphemes or [`MAX_TAG_BYTES`] bytes, or that starts with the emoji
/// variation selector (`#️⃣`) is none. Inner punctuation stays (`#c++`, `#foo.bar`).
pub fn tags(text: &str) -> Vec<Tag> {
    let mut out = vec![];
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        let after_space = prev.is_none_or(js_space);
        prev = Some(c);
        if !(matches!(c, '#' | '＃') && after_space) {
            continue;
        }
        let body_start = i + c.len_utf8();
        let rest = &text[body_start..];
        if rest.starts_with('\u{fe0f}') {
            continue;
        }
        let body_len: usize = rest
            .chars()
            .take_while(|&c| !js_space(c) && !zero_width(c))
            .map(char::len_utf8)
            .sum();
        let body = &rest[..body_len];
        if !body.chars().any(|c| !c.is_ascii_digit() && !punctuation(c)) {
            continue;
        }
        let tag = body.trim_end_matches(punctuation);
        if tag.is_empty() || tag.len() > MAX_TAG_BYTES || grapheme_len(tag) > MAX_TAG_GRAPHEMES {
            continue;
        }
        out.push(Tag {
            start: i,
            end: body_start + tag.len(),
            tag: tag.to_owned(),
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Facets.

/// The facets of `text`, in the order of their start: its links
/// (`app.bsky.richtext.facet#link`) and its tags (`#tag`), UTF-8 byte offsets. A pure
/// function of the text, so the record built from it is the same every time. Mentions get no
/// facet: a `#mention` needs the account's DID, and handles are not resolved, so an `@handle`
/// stays text.
pub fn facets(text: &str) -> Vec<Value> {
    let links = links(text).into_iter().map(|l| {
        (
            l.start,
            json!({
                "index": {"byteStart": l.start, "byteEnd": l.end},
                "features": [{"$type": "app.bsky.richtext.facet#link", "uri": l.uri}]
            }),
        )
    });
    let tags = tags(text).into_iter().map(|t| {
        (
            t.start,
            json!({
                "index": {"byteStart": t.start, "byteEnd": t.end},
                "features": [{"$type": "app.bsky.richtext.facet#tag", "tag": t.tag}]
            }),
        )
    });
    let mut all: Vec<(usize, Value)> = links.chain(tags).collect();
    all.sort_by_key(|(start, _)| *start);
    all.into_iter().map(|(_, f)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_found_with_utf8_byte_offsets() {
        let text = "New post: example.com/p";
        assert_eq!(
            links(text),
            vec![Link {
                start: 10,
                end: 23,
                uri: "https://example.com/p".into()
            }]
        );
        let text = "Café ☕ — voir https://example.com/é?x=1. Et (https://a.io/b) me@example.com";
        let found = links(text);
        assert_eq!(found.len(), 2, "{found:?}");
        let first = "https://example.com/é?x=1";
        assert_eq!(found[0].start, text.find(first).unwrap());
        assert_eq!(&text[found[0].start..found[0].end], first);
        assert_eq!(found[0].uri, first);
        assert_eq!(&text[found[1].start..found[1].end], "https://a.io/b");
        assert!(links("x.y and example.jp and 1.5 and e.g.").is_empty());
        assert_eq!(links("httpbin.org")[0].uri, "https://httpbin.org");
        assert_eq!(links("see t.co/abc")[0].uri, "https://t.co/abc");
        assert_eq!(links("HTTPS://EXAMPLE.COM")[0].end, 19);
        assert_eq!(
            links("(https://en.wikipedia.org/wiki/Rust_(language))")[0].end,
            46
        );
    }

    #[test]
    fn tags_follow_the_official_clients_rules() {
        let found = |text: &str| -> Vec<(String, String)> {
            tags(text)
                .into_iter()
                .map(|t| (text[t.start..t.end].to_owned(), t.tag))
                .collect()
        };
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect()
        };
        assert_eq!(found("#rust"), pairs(&[("#rust", "rust")]));
        // Ends at whitespace; trailing punctuation left out, inner punctuation kept.
        assert_eq!(
            found("Hi #rust, #c++ #foo.bar! #end..."),
            pairs(&[
                ("#rust", "rust"),
                ("#c++", "c++"),
                ("#foo.bar", "foo.bar"),
                ("#end", "end")
            ])
        );
        // Only after whitespace or at the start.
        assert!(found("a#b (#c) x.com/#d").is_empty());
        // Not all digits (or digits and punctuation).
        assert!(found("#2024 #1.5 #!!! # #").is_empty());
        assert_eq!(found("#2024a"), pairs(&[("#2024a", "2024a")]));
        // UTF-8 byte offsets, the full-width sign, other scripts.
        let text = "Café ☕ #日本語 ＃été";
        let t = tags(text);
        assert_eq!(t[0].start, text.find("#日本語").unwrap());
        assert_eq!(t[0].end, t[0].start + "#日本語".len());
        assert_eq!(
            (t[1].tag.as_str(), &text[t[1].start..t[1].end]),
            ("été", "＃été")
        );
        // Invisible separators end a tag; the emoji keycap is not one.
        assert_eq!(found("#ab\u{200b}cd"), pairs(&[("#ab", "ab")]));
        assert!(found("#\u{fe0f}\u{20e3}").is_empty());
        // At most 64 graphemes.
        let ok = "é".repeat(64);
        assert_eq!(tags(&format!("#{ok}")).len(), 1);
        assert!(tags(&format!("#{ok}x")).is_empty());
        // Links and tags, in text order; mentions stay text.
        let f = facets("#a example.com/p #b @alice.bsky.social");
        let kinds: Vec<&str> = f
            .iter()
            .map(|x| x["features"][0]["$type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "app.bsky.richtext.facet#tag",
                "app.bsky.richtext.facet#link",
                "app.bsky.richtext.facet#tag"
            ]
        );
        assert_eq!(f[2]["features"][0]["tag"], json!("b"));
    }

    #[test]
    fn graphemes_count_as_bluesky_counts() {
        assert_eq!(text_len("👨\u{200D}👩\u{200D}👧\u{200D}👦"), 1);
        assert_eq!(text_len("🇫🇷"), 1);
        assert_eq!(text_len("cafe\u{301}"), 4);
        assert_eq!(text_len("日本語"), 3);
        assert_eq!(text_len(&"x".repeat(300)), 300);
        // 300 families fit the grapheme limit but not the byte limit.
        let families = "👨\u{200D}👩\u{200D}👧\u{200D}👦".repeat(300);
        assert_eq!(grapheme_len(&families), 300);
        assert!(text_len(&families) > MAX_TEXT);
    }
}
