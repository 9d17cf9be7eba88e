//! Nostr. No account: a key pair is the identity, and a post is one signed kind-1 event sent
//! to every relay of `NOSTR_RELAYS`. Its idempotency primitive is the event itself: the id is
//! the hash of the event, so the event is built and signed once (with its `created_at` fixed)
//! by [`NetworkAdapter::stage`], before the intent, which keeps it; every send of the attempt,
//! a replay days later included, is that identical event, and a relay that has it answers
//! `duplicate:`. So it is the Bluesky shape ([`Idempotency::ClientChosenId`]): the pipeline
//! reads the id back on the relays first, and replays the kept event when it is not there.
//!
//! A post is `posted` once at least `NOSTR_MIN_RELAYS` relays hold it (accepted, or answered
//! duplicate); every relay's answer is logged. Fewer, with any relay holding it or any answer
//! lost, is an attempt in doubt: the pipeline settles it by reading back (enough relays hold
//! it: recorded) or by replaying the same event to every relay. Only when no relay can hold
//! it (each refused, or was never reached) does the attempt fail, so that a new event is
//! never made while an older one of the draft may be on a relay. Relays that still lack the
//! event once the post is recorded get it from later sweeps ([`NetworkAdapter::spread`]: the
//! same event, until every relay holds it).
//!
//! The cover goes to a Blossom server (`NOSTR_BLOSSOM_URL`, [`blossom`]) and its URL into the
//! text, with an `imeta` tag; without one, an http(s) cover URL is referenced as it is (the
//! network fetches it: [`Capabilities::fetches_image`], so a local cover is refused before any
//! call). Hashtags become lowercase `t` tags. Without a key or relays it is a dry run: the
//! event is shown, signed with a throwaway key, and nothing is sent. The secret key never
//! reaches a `Debug` output, a message or a log line.

pub mod auth;
pub mod blossom;
pub mod config;
pub mod event;
pub mod relay;

#[cfg(test)]
mod tests;

pub use config::DEFINITION;

use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::image::{Format, Formats};
use crate::networks::capabilities::{Counting, Idempotency, ImageLimits, TextLimit};
use crate::networks::show::{dry_id, show, ShownBody};
use crate::networks::{
    Capabilities, Created, Media, MediaRef, Network, NetworkAdapter, PostError, PreparedPost,
    Spread,
};
use crate::networks::fresh::FreshUploads;
use event::{hashtag_tags, imeta_tag, imeta_url, Event, Keys, KIND_NOTE};
use relay::Published;

/// How [`PostError`]s name this network.
pub const NETWORK: &str = "Nostr";
/// The longest text taken, in characters (the Python nostr-relay refuses content over 4,096;
/// the rest is room for the cover's URL).
pub const MAX_TEXT: usize = 3000;
/// The largest cover sent to a Blossom server (servers set their own limit and answer 413).
pub const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;

/// How long after an upload its blob is taken to be there for the create of the same attempt.
const FRESH_FOR: Duration = Duration::from_secs(60);

/// The public page of a note (a gateway's convention; Nostr has no canonical web URL).
pub fn note_url(note_id: &str) -> String {
    format!("https://njump.me/{note_id}")
}

/// Posts signed notes to a set of relays.
#[derive(Debug)]
pub struct NostrAdapter {
    http: reqwest::Client,
    /// The configured key; a dry run's throwaway key is made at its first signature, so that a
    /// start whose drafts never go to Nostr does not pay for one.
    keys: OnceLock<Keys>,
    relays: Vec<String>,
    min_relays: usize,
    blossom: Option<String>,
    timeout: Duration,
    dry: bool,
    /// The blobs this process uploaded a moment ago (by hash): the create of the same attempt
    /// does not look for them again; a replay does.
    fresh: FreshUploads,
}

impl NostrAdapter {
    /// `relays` checked by the configuration (`ws://`/`wss://`), `min_relays` from 1 to their
    /// number, `blossom` a media server's base, `timeout` one call's budget.
    pub fn new(
        http: reqwest::Client,
        keys: Keys,
        relays: Vec<String>,
        min_relays: usize,
        blossom: Option<String>,
        timeout: Duration,
    ) -> Self {
        Self::with_keys(http, OnceLock::from(keys), relays, min_relays, blossom, timeout)
    }

    /// Without a key or relays: shows the event (signed with a throwaway key) and sends
    /// nothing.
    pub fn dry_run(http: reqwest::Client, relays: Vec<String>, blossom: Option<String>) -> Self {
        let mut a = Self::with_keys(
            http,
            OnceLock::new(),
            relays,
            1,
            blossom,
            Duration::from_secs(10),
        );
        a.dry = true;
        a
    }

    /// [`Self::new`] with the key given as the slot [`Self::keys`] reads: filled, or empty
    /// for a dry run's throwaway key.
    fn with_keys(
        http: reqwest::Client,
        keys: OnceLock<Keys>,
        relays: Vec<String>,
        min_relays: usize,
        blossom: Option<String>,
        timeout: Duration,
    ) -> Self {
        Self {
            http,
            keys,
            relays,
            min_relays: min_relays.max(1),
            blossom,
            timeout,
            dry: false,
            fresh: FreshUploads::new(FRESH_FOR),
        }
    }

    /// The key that signs: the configured one, or a dry run's throwaway key.
    fn keys(&self) -> &Keys {
        self.keys.get_or_init(Keys::generate)
    }

    /// One relay's share of the budget: the create as a whole runs under the same budget in
    /// the pipeline, so each relay's exchange ends a little before it.
    fn per_relay(&self) -> Duration {
        self.timeout.mul_f64(0.9)
    }

    /// The event a kept request carries.
    fn kept_event(post: &PreparedPost) -> Result<Event, PostError> {
        post.body
            .get("event")
            .cloned()
            .and_then(|v| serde_json::from_value::<Event>(v).ok())
            // Signed by this adapter: its id must still be the hash of its parts.
            .filter(Event::id_matches)
            .ok_or_else(|| PostError::Rejected {
                network: NETWORK,
                status: 0,
                message: "the kept request holds no valid signed event".into(),
            })
    }

    /// The note for `text` and the cover at `image_url` (with its hash when a Blossom server
    /// holds it), signed now.
    fn note(&self, text: &str, media: &Value, image_url: Option<&str>) -> Event {
        let mut tags = hashtag_tags(text);
        let mut content = text.to_owned();
        if let Some(url) = image_url {
            content = format!("{}\n\n{url}", text.trim_end());
            let m = media.get("m").and_then(Value::as_str).unwrap_or("");
            let x = media.get("sha256").and_then(Value::as_str);
            let alt = media.get("alt").and_then(Value::as_str);
            tags.push(imeta_tag(url, m, x, alt));
        }
        let now = u64::try_from(crate::record::now_s()).unwrap_or(0);
        self.keys().sign(now, KIND_NOTE, tags, content)
    }

    fn created(&self, event: &Event) -> Created {
        let note = event.note_id();
        Created {
            id: Some(event.id.clone()),
            url: Some(note_url(&note)),
            cid: None,
        }
    }

    /// Before a replay of a note whose cover is on the Blossom server (`media`, fetched again
    /// by the pipeline: its hash names the blob): the blob is looked for there and put back
    /// when it is gone, within a quarter of the budget (the relays get the rest). Not for the
    /// create right after this process's own upload, nor for a blob on another server than
    /// `NOSTR_BLOSSOM_URL` now names. Whatever happens, the note goes out: it is the same
    /// event either way, and the check only saves its picture.
    async fn blob_still_there(&self, event: &Event, media: &Media) {
        let Some(base) = self.blossom.as_deref().filter(|_| !media.bytes.is_empty()) else {
            return;
        };
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&media.bytes));
        let Some(url) = imeta_url(event, &sha).filter(|u| u.starts_with(&format!("{base}/"))) else {
            return;
        };
        if self.fresh.take(&sha) {
            return;
        }
        let share = self.timeout / 4;
        let checked = tokio::time::timeout(
            share,
            blossom::ensure(&self.http, base, self.keys(), &url, media, share),
        )
        .await;
        let why = match checked {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {share:?}"),
        };
        tracing::warn!(network = NETWORK, error = %why, "could not make sure the cover's blob is on the Blossom server; the note goes out as it is");
    }

    /// `event` to every relay at once, each answer logged.
    /// `spent`: what the call used of its budget already.
    async fn send_everywhere(&self, event: &Event, spent: Duration) -> Vec<(String, Published)> {
        let budget = self.per_relay().saturating_sub(spent);
        let sends = self.relays.iter().map(|url| async move {
            (url.clone(), relay::publish(url, event, budget).await)
        });
        let answers = futures_util::future::join_all(sends).await;
        for (url, answer) in &answers {
            tracing::info!(network = NETWORK, relay = %url, event = %event.id, answer = %answer.describe(), "relay answered");
        }
        answers
    }

    /// What the relays' answers mean for the post.
    fn judge(&self, event: &Event, answers: &[(String, Published)]) -> Result<Created, PostError> {
        let holding = answers.iter().filter(|(_, a)| a.holds()).count();
        let each = describe(answers);
        if holding >= self.min_relays {
            tracing::info!(network = NETWORK, event = %event.id, holding, relays = answers.len(), "the note is on enough relays");
            return Ok(self.created(event));
        }
        let lost = answers
            .iter()
            .any(|(_, a)| matches!(a, Published::NoAnswer(_)));
        if holding > 0 || lost {
            return Err(PostError::InDoubt {
                network: NETWORK,
                message: format!(
                    "the event {} is on {holding} relay(s), {} needed (NOSTR_MIN_RELAYS); {each}",
                    event.id, self.min_relays
                ),
            });
        }
        let transient = answers.iter().any(|(_, a)| {
            matches!(a, Published::NotSent(_) | Published::Refused { transient: true, .. })
        });
        let rate_limited = answers.iter().all(|(_, a)| {
            matches!(a, Published::Refused { message, .. } if message.starts_with("rate-limited:"))
        });
        let key_refused = answers.iter().all(|(_, a)| {
            matches!(a, Published::Refused { message, .. } if ["restricted:", "blocked:", "auth-required:"].iter().any(|p| message.starts_with(p)))
        });
        if key_refused {
            return Err(PostError::CredentialRefused {
                network: NETWORK,
                message: format!(
                    "every Nostr relay refused this key ({each}): it may not write there; use another key (`postonce auth nostr`) or other relays (NOSTR_RELAYS)"
                ),
            });
        }
        if rate_limited {
            return Err(PostError::RateLimited {
                network: NETWORK,
                retry_after: None,
                message: each,
            });
        }
        if transient {
            return Err(PostError::NotSent {
                network: NETWORK,
                message: format!("no relay took the event: {each}"),
            });
        }
        Err(PostError::Rejected {
            network: NETWORK,
            status: 0,
            message: format!("every relay refused the event: {each}"),
        })
    }
}

/// Each relay's answer, in one line.
fn describe(answers: &[(String, Published)]) -> String {
    answers
        .iter()
        .map(|(url, a)| format!("{url}: {}", a.describe()))
        .collect::<Vec<_>>()
        .join("; ")
}

fn capabilities(blossom: bool) -> Capabilities {
    Capabilities {
        idempotency: Idempotency::ClientChosenId,
        reads_back: true,
        text: TextLimit {
            max: MAX_TEXT,
            counting: Counting::Chars,
        },
        images: ImageLimits {
            formats: Formats::of(&[Format::Jpeg, Format::Png, Format::Gif, Format::Webp]),
            max_bytes: MAX_IMAGE_BYTES,
            ..ImageLimits::default()
        },
        fetches_image: !blossom,
        links_image: !blossom,
        spreads: true,
        ..Capabilities::default()
    }
}

#[async_trait]
impl NetworkAdapter for NostrAdapter {
    fn network(&self) -> Network {
        Network::Nostr
    }

    fn capabilities(&self) -> Capabilities {
        capabilities(self.blossom.is_some())
    }

    fn is_dry_run(&self) -> bool {
        self.dry
    }

    fn text_len(&self, text: &str) -> usize {
        text.chars().count()
    }

    /// With a Blossom server: the cover uploaded there (content-addressed: safe to repeat).
    /// Without one: nothing to upload (the note names the cover's own URL).
    async fn upload(&self, media: &Media) -> Result<MediaRef, PostError> {
        let Some(base) = &self.blossom else {
            return Ok(MediaRef(json!({"alt": media.alt})));
        };
        if self.dry {
            show(
                "PUT",
                &format!("{base}/upload"),
                &[("Authorization", "Nostr <signed kind 24242 event>")],
                ShownBody::Lines(vec![format!("<{} bytes, {}>", media.bytes.len(), media.content_type)]),
            );
            let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&media.bytes));
            return Ok(MediaRef(json!({"url": format!("{base}/{sha}"), "sha256": sha, "m": media.content_type, "alt": media.alt})));
        }
        let mut uploaded =
            blossom::upload(&self.http, base, self.keys(), media, self.timeout).await?;
        if let Some(sha) = uploaded.0.get("sha256").and_then(Value::as_str) {
            self.fresh.mark(sha);
        }
        if let (Some(obj), Some(alt)) = (uploaded.0.as_object_mut(), &media.alt) {
            obj.insert("alt".into(), json!(alt));
        }
        Ok(uploaded)
    }

    /// The text and the cover's reference; the event is made by [`Self::stage`].
    fn prepare(&self, text: &str, media: &MediaRef, _idempotency: &str) -> PreparedPost {
        PreparedPost {
            body: json!({"text": text, "media": media.0}),
            text: text.to_owned(),
            key: None,
        }
    }

    /// The note, signed once with its `created_at` fixed: what the intent keeps and every
    /// send repeats. The cover's URL is the Blossom blob's, else the draft's own http(s) URL.
    async fn stage(&self, post: &PreparedPost, image: &str) -> Result<PreparedPost, PostError> {
        if post.body.get("event").is_some() {
            return Ok(post.clone());
        }
        let text = post.body.get("text").and_then(Value::as_str).unwrap_or(&post.text);
        let media = post.body.get("media").cloned().unwrap_or(Value::Null);
        let url = match media.get("url").and_then(Value::as_str) {
            Some(url) => Some(url.to_owned()),
            None if image.starts_with("https://") || image.starts_with("http://") => {
                Some(image.to_owned())
            }
            None if image.is_empty() => None,
            None => {
                return Err(PostError::Rejected {
                    network: NETWORK,
                    status: 0,
                    message: "a local cover cannot go to Nostr without a media server: set NOSTR_BLOSSOM_URL, or give the draft an https image URL".into(),
                })
            }
        };
        let event = self.note(text, &media, url.as_deref());
        Ok(PreparedPost {
            body: json!({"event": event.to_json(), "relays": self.relays}),
            text: event.content.clone(),
            key: Some(event.id.clone()),
        })
    }

    /// The kept event to every relay at once; `posted` once enough of them hold it.
    async fn create(&self, post: &PreparedPost, media: &Media) -> Result<Created, PostError> {
        let event = Self::kept_event(post)?;
        if self.dry {
            for url in &self.relays {
                show("EVENT", url, &[], ShownBody::Json(&json!(["EVENT", event.to_json()])));
            }
            return Ok(Created {
                id: Some(dry_id()),
                url: None,
                cid: None,
            });
        }
        let started = std::time::Instant::now();
        self.blob_still_there(&event, media).await;
        let answers = self.send_everywhere(&event, started.elapsed()).await;
        self.judge(&event, &answers)
    }

    /// Reads the kept event back by its id on every relay: found on enough of them, it is the
    /// post; on fewer, `None` (the replay of the same event completes it).
    async fn find(&self, post: &PreparedPost, _since: i64) -> Result<Option<Created>, PostError> {
        let event = Self::kept_event(post)?;
        if self.dry {
            return Ok(None);
        }
        let budget = self.per_relay();
        let reads = self.relays.iter().map(|url| {
            let id = event.id.as_str();
            async move { (url.clone(), relay::fetch(url, id, budget).await) }
        });
        let answers = futures_util::future::join_all(reads).await;
        let mut holding = 0;
        let mut errors = Vec::new();
        for (url, answer) in &answers {
            match answer {
                // `fetch` checked the id; the signature is the one this adapter made, so it is
                // this very event (a copy with another signature is not counted).
                Ok(Some(found)) if found.sig == event.sig => holding += 1,
                Ok(_) => {}
                Err(e) => errors.push(format!("{url}: {e}")),
            }
            tracing::info!(network = NETWORK, relay = %url, event = %event.id, found = matches!(answer, Ok(Some(_))), error = answer.as_ref().err().map(String::as_str), "read back");
        }
        if holding >= self.min_relays {
            return Ok(Some(self.created(&event)));
        }
        if errors.len() == answers.len() {
            return Err(PostError::NotSent {
                network: NETWORK,
                message: format!("no relay could be read: {}", errors.join("; ")),
            });
        }
        Ok(None)
    }

    /// The kept event again to every relay: those that hold it answer `duplicate:`, the
    /// others take it now (the same event, never a new one). Complete once every relay
    /// holds it.
    async fn spread(&self, post: &PreparedPost) -> Result<Spread, PostError> {
        let event = Self::kept_event(post)?;
        if self.dry {
            return Ok(Spread {
                complete: true,
                detail: String::new(),
            });
        }
        let answers = self.send_everywhere(&event, Duration::ZERO).await;
        let holding = answers.iter().filter(|(_, a)| a.holds()).count();
        Ok(Spread {
            complete: holding == answers.len(),
            detail: format!(
                "the event {} is on {holding} of {} relays: {}",
                event.id,
                answers.len(),
                describe(&answers)
            ),
        })
    }

    /// Every relay takes a connection; says which key posts.
    async fn check(&self) -> Result<String, PostError> {
        if self.dry {
            return Ok("dry run: NOSTR_SECRET_KEY and NOSTR_RELAYS are not both set, nothing is sent to Nostr".into());
        }
        let mut failed = Vec::new();
        for url in &self.relays {
            if let Err(e) = relay::reach(url, self.per_relay()).await {
                failed.push(format!("{url}: {e}"));
            }
        }
        let reachable = self.relays.len() - failed.len();
        if reachable < self.min_relays {
            return Err(PostError::NotSent {
                network: NETWORK,
                message: format!(
                    "{reachable} of {} relays reachable, {} needed (NOSTR_MIN_RELAYS): {}",
                    self.relays.len(),
                    self.min_relays,
                    failed.join("; ")
                ),
            });
        }
        Ok(format!(
            "{} posts to {reachable} of {} relays (at least {} must take each note)",
            self.keys().npub(),
            self.relays.len(),
            self.min_relays
        ))
    }
}
