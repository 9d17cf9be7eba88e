//! What every dry run shares: the requests it would send, shown as tracing events (the CLI
//! prints them as blocks), and the mark on the ids it makes up so that nobody mistakes them
//! for real ones.

pub const SHOWN: &str = "postonce::dry_run";

/// The body of a shown request.
pub enum ShownBody<'a> {
    None,
    /// A JSON body, pretty-printed.
    Json(&'a serde_json::Value),
    /// Form fields or a description of raw bytes, one line each.
    Lines(Vec<String>),
}

/// A request as a person reads it: the method and URL, one header a line (secrets already
/// placeholders), then the body pretty-printed.
pub fn request_block(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &ShownBody<'_>,
) -> String {
    let mut out = format!("{method} {url}");
    for (name, value) in headers {
        out.push_str(&format!("\n  {name}: {value}"));
    }
    let lines: Vec<String> = match body {
        ShownBody::None => vec![],
        ShownBody::Json(v) => serde_json::to_string_pretty(v)
            .unwrap_or_else(|_| v.to_string())
            .lines()
            .map(str::to_owned)
            .collect(),
        ShownBody::Lines(lines) => lines.clone(),
    };
    if !lines.is_empty() {
        out.push('\n');
        for line in lines {
            out.push_str("\n  ");
            out.push_str(&line);
        }
    }
    out
}

/// A header's name as people write it (`content-type` → `Content-Type`).
pub fn header_name(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// Shows one request a dry run would send (at info, target [`SHOWN`]), sending nothing.
pub fn show(method: &str, url: &str, headers: &[(&str, &str)], body: ShownBody<'_>) {
    let block = request_block(method, url, headers, &body);
    tracing::info!(target: SHOWN, dry_run = true, "would send {block}");
}

/// What marks an id a dry run made up: the id starts with it (`dryrun-…`). The one mark of every
/// dry run; [`MARK`] is the same mark inside a URN.
pub const ID_MARK: &str = "dryrun-";

/// [`ID_MARK`] inside a URN-shaped id (`urn:li:share:dryrun-…`), as the stores look for it.
pub const MARK: &str = ":dryrun-";

/// An id a dry run makes up, marked ([`ID_MARK`]): every dry run's one id maker.
pub fn dry_id() -> String {
    format!("{ID_MARK}{:016x}", rand::random::<u64>())
}

/// Whether a post or image id was made up by a dry run. A real run never records, repairs
/// from or answers with such an id.
pub fn is_dry_run_urn(urn: &str) -> bool {
    urn.contains(MARK) || urn.starts_with(ID_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mark_inside_a_urn_or_at_the_start() {
        assert_eq!(MARK, format!(":{ID_MARK}"));
        assert!(is_dry_run_urn(&dry_id()));
        assert!(is_dry_run_urn(&format!("urn:li:share:{}", dry_id())));
        assert!(!is_dry_run_urn("urn:li:share:7"));
        assert_eq!(header_name("content-type"), "Content-Type");
    }
}
