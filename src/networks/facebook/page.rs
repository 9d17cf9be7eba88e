//! The Page's token and id variables, and what a Page id is: shared by the configuration and
//! `postonce auth facebook`.

use crate::vars::{bad, ConfigError};

pub const TOKEN_VAR: &str = "FACEBOOK_PAGE_TOKEN";
pub const PAGE_VAR: &str = "FACEBOOK_PAGE_ID";

/// Checks a `FACEBOOK_PAGE_ID`: the Page's numeric id (Page → About → Page transparency, or
/// `postonce auth facebook`).
///
/// # Errors
/// A [`ConfigError`] naming `FACEBOOK_PAGE_ID`.
pub fn parse_page_id(value: &str) -> Result<String, ConfigError> {
    let v = value.trim();
    if !v.is_empty() && v.len() <= 24 && v.bytes().all(|b| b.is_ascii_digit()) {
        Ok(v.to_owned())
    } else {
        Err(bad(
            PAGE_VAR,
            format!("{value:?} is not a Page id (digits only: the Page's About → Page transparency, or `postonce auth facebook`)"),
        ))
    }
}
