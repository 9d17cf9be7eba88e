//! The identity of a draft: `kind` and `slug`, written `<kind>-<slug>`.
//!
//! Every stored name (`claim:<key>`, `posted:<key>`, `draft:<key>`) and every Telegram callback
//! (`retry:<key>`, at most 64 bytes) is built from this, so the rules live here once (pipeline
//! rule 9): `kind` is `[a-z0-9]{1,16}`, `slug` is `[a-z0-9]+(-[a-z0-9]+)*`, and the whole key is
//! at most 48 bytes. Nothing volatile ever goes into a key.

use std::fmt;

use crate::networks::Network;

/// Longest `<kind>-<slug>`: `force:` + 48 bytes stays well inside Telegram's 64-byte callback data.
pub const MAX_KEY_LEN: usize = 48;
/// Longest `kind`.
pub const MAX_KIND_LEN: usize = 16;

/// A validated draft key. Construct it with [`PostKey::new`] or [`PostKey::parse`].
///
/// A key may name one target of the draft ([`PostKey::on`]): every per-target name is then
/// `<kind>-<slug>@<network>` (`claim:`, `posted:`, `draft:`), except the first network's
/// ([`Network::bare_names`]), which keeps the bare key so that records written before targets
/// existed still count (README "Targets").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PostKey {
    kind: String,
    slug: String,
    /// The target this key names; `None` is the first network (the bare key).
    target: Option<Network>,
}

/// Why a kind, slug or key was refused. The message names the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("kind {0:?} is invalid: use 1 to 16 of a-z and 0-9")]
    Kind(String),
    #[error("slug {0:?} is invalid: use a-z and 0-9 in words joined by single hyphens, e.g. hello-world")]
    Slug(String),
    #[error("key {0:?} is too long: <kind>-<slug> may have at most 48 bytes")]
    TooLong(String),
    #[error("key {0:?} is invalid: expected <kind>-<slug>, e.g. blog-hello-world")]
    Shape(String),
    #[error("target {0:?} is unknown: use {names}", names = Network::names())]
    Target(String),
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn show(s: &str) -> String {
    // Keep error messages short even for hostile input.
    s.chars().take(64).collect()
}

impl PostKey {
    /// Validates `kind` and `slug` and their combined length.
    ///
    /// # Errors
    /// [`KeyError`] naming the part that breaks the rule.
    pub fn new(kind: &str, slug: &str) -> Result<Self, KeyError> {
        if kind.is_empty() || kind.len() > MAX_KIND_LEN || !kind.chars().all(is_word_char) {
            return Err(KeyError::Kind(show(kind)));
        }
        let slug_ok = !slug.is_empty()
            && slug
                .split('-')
                .all(|w| !w.is_empty() && w.chars().all(is_word_char));
        if !slug_ok {
            return Err(KeyError::Slug(show(slug)));
        }
        if kind.len() + 1 + slug.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong(show(&format!("{kind}-{slug}"))));
        }
        Ok(Self {
            kind: kind.to_owned(),
            slug: slug.to_owned(),
            target: None,
        })
    }

    /// Parses `<kind>-<slug>`, optionally followed by `@<network>` (a per-target name, as in
    /// `retry:<key>@x`). A kind never contains a hyphen, so the first hyphen splits.
    ///
    /// # Errors
    /// [`KeyError`] when the text is not a valid key.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let (base, target) = match text.split_once('@') {
            Some((base, net)) => (
                base,
                Some(Network::parse(net).ok_or_else(|| KeyError::Target(show(net)))?),
            ),
            None => (text, None),
        };
        if base.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong(show(base)));
        }
        let (kind, slug) = base
            .split_once('-')
            .ok_or_else(|| KeyError::Shape(show(base)))?;
        let key = Self::new(kind, slug)?;
        Ok(match target {
            Some(n) => key.on(n),
            None => key,
        })
    }

    /// This draft's key for `network`'s claim, record and state.
    #[must_use]
    pub fn on(&self, network: Network) -> Self {
        Self {
            kind: self.kind.clone(),
            slug: self.slug.clone(),
            target: (!network.bare_names()).then_some(network),
        }
    }

    /// The draft's own key, without a target.
    #[must_use]
    pub fn base(&self) -> Self {
        Self {
            target: None,
            ..self.clone()
        }
    }

    /// The network this key's per-target names belong to (the bare key is the first network's).
    pub fn network(&self) -> Network {
        self.target.unwrap_or_default()
    }

    /// Whether the key named a target other than the first network explicitly.
    pub fn has_target(&self) -> bool {
        self.target.is_some()
    }

    /// `<kind>-<slug>`, without a target.
    pub fn draft(&self) -> String {
        format!("{}-{}", self.kind, self.slug)
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    pub fn slug(&self) -> &str {
        &self.slug
    }
}

impl fmt::Display for PostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.kind, self.slug)?;
        match self.target {
            Some(n) => write!(f, "@{}", n.as_str()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_keys_and_round_trips() {
        let key = PostKey::new("blog", "hello-world-2").unwrap();
        assert_eq!(key.to_string(), "blog-hello-world-2");
        assert_eq!(PostKey::parse("blog-hello-world-2").unwrap(), key);
    }

    #[test]
    fn refuses_bad_kinds_and_slugs() {
        for (kind, slug) in [
            ("", "a"),
            ("Blog", "a"),
            ("blog-x", "a"),
            ("abcdefghijklmnopq", "a"),
            ("blog", ""),
            ("blog", "-a"),
            ("blog", "a-"),
            ("blog", "a--b"),
            ("blog", "A"),
            ("blog", "a_b"),
            ("blog", "a/b"),
            ("blog", "é"),
            ("blog", "a b"),
        ] {
            assert!(PostKey::new(kind, slug).is_err(), "{kind:?} {slug:?}");
        }
    }

    #[test]
    fn the_longest_key_fits_callback_data() {
        let slug = "a".repeat(MAX_KEY_LEN - 5);
        let key = PostKey::new("blog", &slug).unwrap();
        assert_eq!(key.to_string().len(), MAX_KEY_LEN);
        assert!(format!("force:{key}").len() <= 64);
        assert!(PostKey::new("blog", &format!("{slug}a")).is_err());
        assert!(PostKey::parse(&format!("blog-{slug}a")).is_err());
    }

    #[test]
    fn targets_name_their_own_state_and_linkedin_keeps_the_bare_key() {
        let key = PostKey::new("blog", "hello").unwrap();
        assert_eq!(key.on(Network::X).to_string(), "blog-hello@x");
        assert_eq!(key.on(Network::Linkedin).to_string(), "blog-hello");
        assert_eq!(key.on(Network::Linkedin), key);
        let x = PostKey::parse("blog-hello@x").unwrap();
        assert_eq!(x.network(), Network::X);
        assert_eq!(x.base(), key);
        assert_eq!(x.draft(), "blog-hello");
        assert_eq!(PostKey::parse("blog-hello@linkedin").unwrap(), key);
        assert!(matches!(
            PostKey::parse("blog-hello@myspace"),
            Err(KeyError::Target(_))
        ));
        let slug = "a".repeat(MAX_KEY_LEN - 5);
        let long = PostKey::new("blog", &slug).unwrap();
        for n in Network::ALL {
            for action in ["retry", "done", "force"] {
                let data = format!("{action}:{}@{}", long, n.as_str());
                assert!(data.len() <= 64, "{data}");
            }
        }
    }

    #[test]
    fn parse_refuses_shapes_without_a_hyphen() {
        assert!(matches!(PostKey::parse("blog"), Err(KeyError::Shape(_))));
    }
}
