//! What every dry run shares: the requests it would send, shown as tracing events (one line
//! each in `serve`'s and Lambda's log; the CLI prints them as blocks), and the mark on the ids
//! it makes up so that nobody mistakes them for real ones.

use std::sync::atomic::{AtomicBool, Ordering};

pub const SHOWN: &str = "postonce::dry_run";

/// Whether shown requests are readable blocks (the CLI, for a person) rather than one line
/// each (a log that a machine keeps: `serve`, Lambda). Set once, where the log is set up.
static AS_BLOCKS: AtomicBool = AtomicBool::new(false);

/// Shown requests as blocks from now on ([`request_block`]), for a person's terminal.
pub fn show_as_blocks() {
    AS_BLOCKS.store(true, Ordering::Relaxed);
}

/// The body of a shown request.
pub enum ShownBody<'a> {
    None,
    /// A JSON body: pretty-printed in a block, compact on a line.
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

/// A request on one line, for a log: the method and URL, the headers in brackets (secrets
/// already placeholders), then the body compact (form fields joined by `; `).
pub fn request_line(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &ShownBody<'_>,
) -> String {
    let mut out = format!("{method} {url}");
    if !headers.is_empty() {
        out.push_str(" [");
        for (i, (name, value)) in headers.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            out.push_str(name);
            out.push_str(": ");
            out.push_str(value);
        }
        out.push(']');
    }
    match body {
        ShownBody::None => {}
        ShownBody::Json(v) => {
            out.push(' ');
            // Written straight into bytes: `Display` (`to_string`) hands a formatter each piece
            // (some 9,000 instructions for a create-post's body).
            out.push_str(&serde_json::to_string(v).unwrap_or_default());
        }
        ShownBody::Lines(lines) if !lines.is_empty() => {
            out.push(' ');
            out.push_str(&lines.join("; "));
        }
        ShownBody::Lines(_) => {}
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
    let block = if AS_BLOCKS.load(Ordering::Relaxed) {
        request_block(method, url, headers, &body)
    } else {
        request_line(method, url, headers, &body)
    };
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

    #[test]
    fn a_log_gets_one_line_and_a_person_a_block() {
        let body = serde_json::json!({"commentary": "one\ntwo", "n": 1});
        let h = [
            ("Authorization", "Bearer <TOKEN>"),
            ("Linkedin-Version", "202601"),
        ];
        let line = request_line("POST", "https://x.test/p", &h, &ShownBody::Json(&body));
        assert_eq!(
            line,
            r#"POST https://x.test/p [Authorization: Bearer <TOKEN>; Linkedin-Version: 202601] {"commentary":"one\ntwo","n":1}"#
        );
        assert!(!line.contains('\n'));
        let form = ShownBody::Lines(vec!["chat_id=@c".into(), "caption=\"a\"".into()]);
        assert_eq!(
            request_line("POST", "https://x.test/s", &[], &form),
            r#"POST https://x.test/s chat_id=@c; caption="a""#
        );
        let block = request_block("POST", "https://x.test/p", &h, &ShownBody::Json(&body));
        assert!(block.starts_with("POST https://x.test/p\n  Authorization: Bearer <TOKEN>\n"));
        assert!(
            block.contains("\n  {\n    \"commentary\": \"one\\ntwo\","),
            "{block}"
        );
    }
}
