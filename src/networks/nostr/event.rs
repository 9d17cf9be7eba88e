//! Nostr events (NIP-01): the key pair (`nsec`/hex secret, `npub`), the event id computed here
//! (never trusted from a relay), the BIP-340 Schnorr signature (libsecp256k1, through the
//! `secp256k1` crate: no cryptography is written here), the note's tags (lowercase `t`
//! hashtags, NIP-24; an `imeta` tag per image, NIP-92), and the Blossom authorization event
//! (kind 24242, BUD-01/02).
//!
//! The id is the lowercase hex SHA-256 of the compact JSON `[0,<pubkey>,<created_at>,<kind>,
//! <tags>,<content>]`. NIP-01 escapes only `\n \" \\ \r \t \b \f` in strings and leaves every
//! other character as it is (no `\uXXXX` for non-ASCII): `serde_json`'s compact writer does
//! exactly that for any text a caption can hold (other control characters, which NIP-01 leaves
//! undefined, come out as `\u00XX`, as every client that uses a JSON library writes them).

use std::fmt;
use std::sync::LazyLock;

use bech32::{Bech32, Hrp};
use secp256k1::{schnorr, Keypair, Secp256k1, XOnlyPublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::vars::Secret;

/// A short text note.
pub const KIND_NOTE: u32 = 1;
/// A Blossom authorization (BUD-01).
pub const KIND_BLOSSOM_AUTH: u32 = 24242;

static SECP: LazyLock<Secp256k1<secp256k1::All>> = LazyLock::new(Secp256k1::new);

/// The key pair that signs. `Debug` shows only the public `npub`.
#[derive(Clone)]
pub struct Keys {
    keypair: Keypair,
    public: String,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Keys({})", self.npub())
    }
}

impl Keys {
    /// Reads a secret key: `nsec1…` (NIP-19) or 64 hex digits. The error never repeats the
    /// value.
    ///
    /// # Errors
    /// Neither form, or not a valid secp256k1 secret.
    pub fn parse(value: &str) -> Result<Self, String> {
        let v = value.trim();
        let bytes = if v.starts_with("nsec1") {
            let (hrp, data) = bech32::decode(v)
                .map_err(|_| "is not a valid nsec (its bech32 checksum or characters are wrong)")?;
            if hrp.as_str() != "nsec" || data.len() != 32 {
                return Err("is not a valid nsec (it must hold 32 bytes)".into());
            }
            data
        } else if v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(v).map_err(|_| "is not 64 hex digits")?
        } else {
            return Err("must be an nsec1… key or 64 hex digits (the value is not shown)".into());
        };
        let keypair = Keypair::from_seckey_slice(&SECP, &bytes)
            .map_err(|_| "is not a valid secp256k1 secret key")?;
        Ok(Self::from_keypair(keypair))
    }

    /// A new random key (`postonce auth nostr --generate`).
    pub fn generate() -> Self {
        loop {
            let bytes: [u8; 32] = rand::random();
            if let Ok(keypair) = Keypair::from_seckey_slice(&SECP, &bytes) {
                return Self::from_keypair(keypair);
            }
        }
    }

    fn from_keypair(keypair: Keypair) -> Self {
        let (xonly, _) = keypair.x_only_public_key();
        Self {
            keypair,
            public: hex::encode(xonly.serialize()),
        }
    }

    /// The x-only public key, 64 hex digits (an event's `pubkey`).
    pub fn public_hex(&self) -> &str {
        &self.public
    }

    /// The public key as NIP-19 `npub1…`.
    pub fn npub(&self) -> String {
        bech32_of("npub", &self.keypair.x_only_public_key().0.serialize())
    }

    /// The secret as `nsec1…`, wrapped: only to store it.
    pub fn nsec(&self) -> Secret {
        Secret::new(bech32_of("nsec", &self.keypair.secret_bytes()))
    }

    /// Signs an event made of these parts: the id computed here, then its signature.
    pub fn sign(&self, created_at: u64, kind: u32, tags: Vec<Vec<String>>, content: String) -> Event {
        let id = event_id(&self.public, created_at, kind, &tags, &content);
        let aux: [u8; 32] = rand::random();
        let sig = SECP.sign_schnorr_with_aux_rand(&id, &self.keypair, &aux);
        Event {
            id: hex::encode(id),
            pubkey: self.public.clone(),
            created_at,
            kind,
            tags,
            content,
            sig: hex::encode(sig.to_byte_array()),
        }
    }
}

/// NIP-19 encoding of 32 bytes under `hrp` (`npub`, `nsec`, `note`).
pub fn bech32_of(hrp: &str, data: &[u8]) -> String {
    let hrp = Hrp::parse(hrp).unwrap_or_else(|_| Hrp::parse_unchecked("npub"));
    bech32::encode::<Bech32>(hrp, data).unwrap_or_default()
}

/// A signed event, as it travels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub id: String,
    pub pubkey: String,
    pub created_at: u64,
    pub kind: u32,
    pub tags: Vec<Vec<String>>,
    pub content: String,
    pub sig: String,
}

impl Event {
    /// The event as compact JSON (what `["EVENT", …]` carries).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Whether the id is the hash of the event's parts (no signature check).
    pub fn id_matches(&self) -> bool {
        hex::encode(event_id(
            &self.pubkey,
            self.created_at,
            self.kind,
            &self.tags,
            &self.content,
        )) == self.id
    }

    /// Whether the id is the hash of the event's parts and the signature is the pubkey's. The
    /// adapter itself never verifies (it compares with the event it signed, see
    /// [`Self::id_matches`]): libsecp256k1's verification brings a table of 1 MiB into the
    /// Lambda artifact. The tests' fake relays verify with it.
    pub fn is_valid(&self) -> bool {
        let id = event_id(&self.pubkey, self.created_at, self.kind, &self.tags, &self.content);
        if hex::encode(id) != self.id {
            return false;
        }
        let (Ok(sig), Ok(pk)) = (hex::decode(&self.sig), hex::decode(&self.pubkey)) else {
            return false;
        };
        let (Ok(sig), Ok(pk)) = (schnorr::Signature::from_slice(&sig), XOnlyPublicKey::from_slice(&pk))
        else {
            return false;
        };
        SECP.verify_schnorr(&sig, &id, &pk).is_ok()
    }

    /// The id as NIP-19 `note1…`.
    pub fn note_id(&self) -> String {
        hex::decode(&self.id).map_or_else(|_| self.id.clone(), |b| bech32_of("note", &b))
    }
}

/// The serialization NIP-01 hashes: `[0,<pubkey>,<created_at>,<kind>,<tags>,<content>]`,
/// compact.
pub fn serialized(pubkey: &str, created_at: u64, kind: u32, tags: &[Vec<String>], content: &str) -> String {
    serde_json::to_string(&(0, pubkey, created_at, kind, tags, content)).unwrap_or_default()
}

/// The event id's 32 bytes.
pub fn event_id(pubkey: &str, created_at: u64, kind: u32, tags: &[Vec<String>], content: &str) -> [u8; 32] {
    Sha256::digest(serialized(pubkey, created_at, kind, tags, content).as_bytes()).into()
}

/// The note's hashtags as NIP-24 `t` tags: each `#tag` of the text, lowercase, once.
pub fn hashtag_tags(text: &str) -> Vec<Vec<String>> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut tags: Vec<String> = Vec::new();
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if c == '#' && !prev.is_some_and(|p| word(p) || p == '#') {
            let rest = &text[i + 1..];
            let end = rest.find(|ch: char| !word(ch)).unwrap_or(rest.len());
            let tag = rest[..end].to_lowercase();
            if !tag.is_empty() && !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        prev = Some(c);
    }
    tags.into_iter().map(|t| vec!["t".to_owned(), t]).collect()
}

/// The NIP-92 `imeta` tag of an image: its URL, type and hash (and alt text).
pub fn imeta_tag(url: &str, mime: &str, sha256: Option<&str>, alt: Option<&str>) -> Vec<String> {
    let mut tag = vec!["imeta".to_owned(), format!("url {url}")];
    if !mime.is_empty() {
        tag.push(format!("m {mime}"));
    }
    if let Some(x) = sha256 {
        tag.push(format!("x {x}"));
    }
    if let Some(alt) = alt.filter(|a| !a.trim().is_empty()) {
        tag.push(format!("alt {alt}"));
    }
    tag
}

/// The URL an `imeta` tag of `event` gives the blob whose hash (`x`) is `sha256`.
pub fn imeta_url(event: &Event, sha256: &str) -> Option<String> {
    let x = format!("x {sha256}");
    event
        .tags
        .iter()
        .filter(|t| t.first().map(String::as_str) == Some("imeta") && t.contains(&x))
        .find_map(|t| t.iter().find_map(|f| f.strip_prefix("url ")))
        .map(str::to_owned)
}

/// The Blossom upload authorization (BUD-01/02): kind 24242, `t upload`, the blob's `x`, an
/// `expiration` five minutes on; `Authorization: Nostr <base64url of it>`.
pub fn blossom_auth(keys: &Keys, sha256: &str, now: u64) -> String {
    use base64::Engine;
    let tags = vec![
        vec!["t".to_owned(), "upload".to_owned()],
        vec!["x".to_owned(), sha256.to_owned()],
        vec!["expiration".to_owned(), (now + 300).to_string()],
    ];
    let event = keys.sign(now, KIND_BLOSSOM_AUTH, tags, "Upload Blob".to_owned());
    let json = serde_json::to_string(&event).unwrap_or_default();
    format!(
        "Nostr {}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    )
}
