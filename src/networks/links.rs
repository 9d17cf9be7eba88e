//! URLs in a post's text, found one way for every network's text rules. A network's rules say
//! which characters may not stand right before a URL (it would be part of a word, a mention or
//! a path), whether a URL needs its `http://` / `https://`, which bare domains count, and
//! whether `localhost` is a host; the extent of a URL is the same everywhere.
//!
//! Not the `linkify` crate: without a scheme it takes any label as a top-level domain
//! (`file.txt`, `9292.nl`, `1.0.0.0`), where the networks that count bare domains at all count
//! only known ones, and a two-letter country domain only when a path follows; its boundaries
//! (e-mail addresses, userinfo) are not the networks' either. Filtering its answers would keep
//! all of the code below and add a crate to the Lambda artifact.

/// How a network finds URLs in a text.
#[derive(Debug, Clone, Copy)]
pub struct UrlRules {
    /// Top-level domains that make a bare `name.tld` (no scheme) a URL; a two-letter country
    /// domain counts too when a path, query or fragment follows (`t.co/x`). `None`: only
    /// `http://` and `https://` URLs count.
    pub bare_tlds: Option<&'static [&'static str]>,
    /// Characters after which no URL starts.
    pub not_after: fn(char) -> bool,
    /// `localhost` counts as a host (with a scheme).
    pub localhost: bool,
}

/// The end (exclusive, an index into `chars`) of a URL starting at `chars[i]`, if one does:
/// an optional scheme, a host of at least two labels whose last is at least two letters (or
/// `localhost` where the rules take it), an optional port, and where a `/`, `?` or `#` follows,
/// everything up to the next white space, less trailing sentence punctuation and an unbalanced
/// closing bracket (`https://en.wikipedia.org/wiki/Rust_(language)` keeps its own).
pub fn url_end(chars: &[char], i: usize, rules: &UrlRules) -> Option<usize> {
    if i > 0 && (rules.not_after)(chars[i - 1]) {
        return None;
    }
    let scheme = scheme_len(&chars[i..]);
    if scheme == 0 && rules.bare_tlds.is_none() {
        return None;
    }
    let host_start = i + scheme;
    let mut j = host_start;
    while j < chars.len() && (chars[j].is_alphanumeric() || matches!(chars[j], '-' | '.')) {
        j += 1;
    }
    let host: String = chars[host_start..j].iter().collect();
    let host = host.trim_end_matches('.');
    let host_end = host_start + host.chars().count();
    let labels: Vec<&str> = host.split('.').collect();
    let tld = labels.last().copied().unwrap_or("");
    let named = labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty())
        && tld.chars().count() >= 2
        && tld.chars().all(char::is_alphabetic);
    let local = rules.localhost && scheme > 0 && host.eq_ignore_ascii_case("localhost");
    if !(named || local) {
        return None;
    }
    let mut end = host_end;
    if end < chars.len() && chars[end] == ':' {
        let digits = chars[end + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            end += 1 + digits;
        }
    }
    let has_path = end < chars.len() && matches!(chars[end], '/' | '?' | '#');
    if scheme == 0 {
        let tld = tld.to_ascii_lowercase();
        let known = rules.bare_tlds.is_some_and(|l| l.contains(&tld.as_str()));
        let country = tld.len() == 2 && tld.chars().all(|c| c.is_ascii_lowercase());
        if !(known || (country && has_path)) {
            return None;
        }
    }
    if has_path {
        while end < chars.len() && !chars[end].is_whitespace() {
            end += 1;
        }
        // Trailing punctuation belongs to the sentence, and a closing bracket to the text
        // around the URL unless the URL opened one.
        while end > host_end {
            let c = chars[end - 1];
            let url = &chars[host_end..end];
            let count = |b: char| url.iter().filter(|&&x| x == b).count();
            let unbalanced = match c {
                ')' => count('(') < count(')'),
                ']' => count('[') < count(']'),
                _ => false,
            };
            if matches!(c, '.' | ',' | ':' | ';' | '!' | '?' | '\'' | '"') || unbalanced {
                end -= 1;
            } else {
                break;
            }
        }
    }
    Some(end)
}

/// The length of an `http://` or `https://` (any case) at the start of `chars`, or 0.
fn scheme_len(chars: &[char]) -> usize {
    let starts = |p: &str| {
        p.len() <= chars.len() && p.chars().zip(chars).all(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    if starts("https://") {
        8
    } else if starts("http://") {
        7
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BARE: UrlRules = UrlRules {
        bare_tlds: Some(&["com", "org"]),
        not_after: |p| p.is_alphanumeric() || matches!(p, '@' | '.' | '/'),
        localhost: false,
    };
    const SCHEME_ONLY: UrlRules = UrlRules {
        bare_tlds: None,
        not_after: |p| p.is_alphanumeric() || matches!(p, '@' | '.' | '/'),
        localhost: true,
    };

    fn found(text: &str, rules: &UrlRules) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut out = vec![];
        let mut i = 0;
        while i < chars.len() {
            match url_end(&chars, i, rules) {
                Some(end) => {
                    out.push(chars[i..end].iter().collect());
                    i = end;
                }
                None => i += 1,
            }
        }
        out
    }

    #[test]
    fn extent_and_rules() {
        assert_eq!(found("see https://a.com/p.", &BARE), ["https://a.com/p"]);
        assert_eq!(found("(https://a.com/p)", &BARE), ["https://a.com/p"]);
        assert_eq!(
            found("(https://en.wikipedia.org/wiki/Rust_(language))", &BARE),
            ["https://en.wikipedia.org/wiki/Rust_(language)"]
        );
        assert_eq!(
            found("HTTPS://A.COM:8080/x", &BARE),
            ["HTTPS://A.COM:8080/x"]
        );
        assert_eq!(found("a.com and b.org", &BARE), ["a.com", "b.org"]);
        assert_eq!(found("a.jp, t.co/x, file.txt", &BARE), ["t.co/x"]);
        assert!(found("me@a.com x.y 1.5", &BARE).is_empty());
        assert!(found("a.com", &SCHEME_ONLY).is_empty());
        assert_eq!(
            found("http://localhost:3000/x", &SCHEME_ONLY),
            ["http://localhost:3000/x"]
        );
        assert!(found("http://localhost/x", &BARE).is_empty());
        assert_eq!(found("https://ü.com/ä", &BARE), ["https://ü.com/ä"]);
    }
}
