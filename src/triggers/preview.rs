//! What each target of a draft would get, worked out the way a run works it out, with nothing
//! sent and nothing stored: the exact text (the draft's text for that network, then the
//! adapter's own preparation of it), its length counted the network's way against the
//! network's limit, and the cover the network would get (the original where it fits, else a
//! rendition, made by the same [`crate::image::cover`] call a run makes), or why it gets none.
//!
//! One piece of logic for `postonce preview` (which writes the files and `index.html`) and the
//! MCP `preview` tool (which answers it as structured content); both only translate.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::app::App;
use crate::budget::Deadline;
use crate::image::{Cover, Image, ImageError, ImageLimits};
use crate::key::PostKey;
use crate::networks::{MediaRef, Network};
use crate::pipeline::full_text;
use crate::record::DraftContent;
use crate::triggers::{FieldError, ParsedRun};

/// Why there is no preview at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreviewError {
    /// Nothing to preview: no draft was given and none is stored for the key (bad input).
    #[error("{0}")]
    NoDraft(FieldError),
    /// The store could not be read (try again).
    #[error("could not read the state of {key}: {why}")]
    Unavailable { key: String, why: String },
}

/// Where the previewed content came from for one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptionFrom {
    /// The draft's own `caption`.
    Caption,
    /// The draft's caption for this network (`caption_for` / `--caption-for` / `captions`).
    CaptionFor(Network),
    /// The draft stored for this target.
    Stored,
    /// The draft stored for another target of the key (this one has none of its own).
    StoredFor(Network),
}

impl CaptionFrom {
    /// `caption`, `caption_for.<target>`, `stored`, `stored.<target>`.
    pub fn as_field(&self) -> String {
        match self {
            Self::Caption => "caption".into(),
            Self::CaptionFor(n) => format!("caption_for.{}", n.as_str()),
            Self::Stored => "stored".into(),
            Self::StoredFor(n) => format!("stored.{}", n.as_str()),
        }
    }
}

/// The cover image as the draft names it, and what it is.
#[derive(Debug, Clone)]
pub struct Original {
    /// The URL or absolute local path.
    pub source: String,
    pub alt: Option<String>,
    /// The fetched (or read) image, or why it could not be had.
    pub image: Result<Image, String>,
}

impl Original {
    pub fn is_remote(&self) -> bool {
        self.source.starts_with("https://") || self.source.starts_with("http://")
    }

    /// `{"source","kind":"url"|"file","alt","format","bytes","width","height","error"}`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "source": self.source,
            "kind": if self.is_remote() { "url" } else { "file" },
            "alt": self.alt,
        });
        match &self.image {
            Ok(img) => {
                v["format"] = json!(img.format.mime());
                v["bytes"] = json!(img.bytes.len());
                v["width"] = json!(img.width);
                v["height"] = json!(img.height);
                v["error"] = Value::Null;
            }
            Err(why) => v["error"] = json!(why),
        }
        v
    }
}

/// What one target would get.
#[derive(Debug, Clone)]
pub struct TargetPreview {
    pub network: Network,
    /// The exact text sent: [`TargetPreview::plain`] after the network's own markup
    /// (escapes or markup the network's adapter adds).
    pub text: String,
    /// The draft's text for this network (the caption, with the link appended when the
    /// caption does not carry it): what the network shows, and what is counted.
    pub plain: String,
    pub caption_from: CaptionFrom,
    /// [`TargetPreview::plain`] counted the network's way.
    pub length: usize,
    pub max: usize,
    pub counted_as: &'static str,
    /// Why a run would refuse this text for this target (empty, or over the limit).
    pub text_refused: Option<String>,
    pub dry_run: bool,
    /// The record, when the key is already on this network: `{"url","id","posted_at"}`.
    pub already_posted: Option<Value>,
    /// The network's image limits, for people ("JPEG, PNG or WebP; at most 1000000 bytes").
    pub limits: String,
    /// The cover this network gets, or why it gets none (nothing is sent to it then).
    pub cover: Result<Cover, String>,
}

impl TargetPreview {
    pub fn to_json(&self) -> Value {
        let (image, refused) = match &self.cover {
            Ok(c) => (serde_json::to_value(c.sent()).unwrap_or(Value::Null), None),
            Err(why) => (Value::Null, Some(why.clone())),
        };
        json!({
            "network": self.network.as_str(),
            "label": self.network.label(),
            "text": self.text,
            "plain_text": self.plain,
            "caption_from": self.caption_from.as_field(),
            "length": self.length,
            "max": self.max,
            "counted_as": self.counted_as,
            "text_refused": self.text_refused,
            "dry_run": self.dry_run,
            "already_posted": self.already_posted,
            "image": image,
            "image_refused": refused,
            "image_limits": self.limits,
        })
    }

    /// `<target>: 61/3000 characters; image: PNG 3000000 bytes, 1000×1000, the original`.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{}: {}/{} {}",
            self.network.as_str(),
            self.length,
            self.max,
            self.counted_as
        );
        if self.dry_run {
            line.push_str(" (dry run)");
        }
        if self.already_posted.is_some() {
            line.push_str(" (already posted)");
        }
        if let Some(why) = &self.text_refused {
            line.push_str(&format!("; text refused: {why}"));
        }
        match &self.cover {
            Ok(c) => line.push_str(&format!("; image: {}", c.sent().describe())),
            Err(why) => line.push_str(&format!("; no image: {why}")),
        }
        line
    }
}

/// The preview of one draft.
#[derive(Debug, Clone)]
pub struct Preview {
    pub key: PostKey,
    pub publish_at: Option<i64>,
    /// Every image source the targets name (one, unless stored targets differ), by source.
    pub originals: Vec<Original>,
    pub targets: Vec<TargetPreview>,
}

impl Preview {
    /// `{"key","sent":false,"publish_at","image","targets":[…]}` (MCP structured content,
    /// `postonce preview --json`).
    pub fn to_json(&self) -> Value {
        json!({
            "key": self.key.draft(),
            "sent": false,
            "publish_at": self.publish_at.map(crate::record::rfc3339),
            "image": self.originals.first().map(Original::to_json),
            "targets": self.targets.iter().map(TargetPreview::to_json).collect::<Vec<_>>(),
        })
    }
}

/// The draft content each target would post, and where it came from.
fn contents(
    parsed: &ParsedRun,
    stored: &crate::triggers::stored::KeyStatus,
    app: &App,
) -> Result<Vec<(Network, DraftContent, CaptionFrom)>, FieldError> {
    let key = &parsed.key;
    if let Some(content) = &parsed.content {
        return Ok(app
            .pipeline
            .targets_for(&parsed.targets)
            .into_iter()
            .map(|n| {
                let from = if content.captions.contains_key(&n) {
                    CaptionFrom::CaptionFor(n)
                } else {
                    CaptionFrom::Caption
                };
                (n, content.for_target(n), from)
            })
            .collect());
    }
    // A stored draft: each target keeps the content it posts.
    let own: BTreeMap<Network, DraftContent> = stored
        .targets
        .iter()
        .filter_map(|(_, n, s, _)| Some((*n, s.snapshot.draft.as_ref()?.content.clone()?)))
        .collect();
    let Some((first_network, first)) = own.iter().next() else {
        return Err(FieldError::new(
            "caption",
            format!(
                "is required: no draft is stored for {key}; give caption and image to preview them"
            ),
        ));
    };
    // As a run without a draft picks them: the ones asked for, else every target the draft
    // has state for.
    let targets = if parsed.targets.is_empty() {
        stored
            .targets
            .iter()
            .filter(|(_, _, s, _)| s.snapshot.record.is_some() || s.snapshot.draft.is_some())
            .map(|(_, n, _, _)| *n)
            .collect()
    } else {
        app.pipeline.targets_for(&parsed.targets)
    };
    Ok(targets
        .into_iter()
        .map(|n| match own.get(&n) {
            Some(c) => (n, c.for_target(n), CaptionFrom::Stored),
            None => (
                n,
                first.for_target(n),
                CaptionFrom::StoredFor(*first_network),
            ),
        })
        .collect())
}

/// Why `plain` cannot go to `n` (`length` of at most `max`, counted its way; its tags), as a
/// run would refuse it.
fn text_refusal(
    caps: &crate::networks::Capabilities,
    plain: &str,
    (length, max): (usize, usize),
    n: Network,
) -> Option<String> {
    (plain.trim().is_empty() || length > max)
        .then(|| {
            format!(
                "the text is {length} long counted {}'s way; {} takes 1 to {max}",
                n.label(),
                n.label()
            )
        })
        .or_else(|| caps.tags.refusal(plain, n.label()))
}

/// `JPEG, PNG or WebP; at most 1000000 bytes; …`. `fetched_from`: where a network that
/// fetches the image itself gets it (`None` for the others).
fn describe_limits(l: &ImageLimits, fetched_from: Option<&str>) -> String {
    let mut parts = vec![l.formats.describe()];
    if l.max_bytes > 0 {
        parts.push(format!("at most {} bytes", l.max_bytes));
    }
    if let Some(p) = l.max_pixels {
        parts.push(format!("at most {p} pixels"));
    }
    if let Some(s) = l.max_side_sum {
        parts.push(format!("width + height at most {s}"));
    }
    match (l.min_width, l.max_width) {
        (Some(min), Some(max)) => parts.push(format!("{min} to {max} pixels wide")),
        (Some(min), None) => parts.push(format!("at least {min} pixels wide")),
        (None, Some(max)) => parts.push(format!("at most {max} pixels wide")),
        (None, None) => {}
    }
    if let Some(r) = l.max_ratio {
        parts.push(format!("a shape of at most {r}:1"));
    }
    if let (Some((a, b)), Some((c, d))) = (l.min_aspect, l.max_aspect) {
        parts.push(format!("width:height from {a}:{b} to {c}:{d}"));
    }
    if let Some(from) = fetched_from {
        parts.push(format!("fetched by the network from {from}"));
    }
    parts.join("; ")
}

/// Where `lane`'s network fetches its cover from, for a network that fetches it itself.
fn fetched_from(lane: &crate::pipeline::Lane) -> Option<String> {
    lane.adapter
        .capabilities()
        .fetches_image
        .then(|| match &lane.covers {
            Some(host) => format!("the cover {}", host.describe()),
            None => "the draft's URL".to_owned(),
        })
}

/// What `lane`'s network `n` gets of `original` (the image at `source`), by the same call, with
/// the same limits, as the run's cover phase: a network that fetches the image itself gets the
/// hosted bytes when covers are hosted (a rendition too), else the draft's own URL (the
/// original or nothing; never a local file).
async fn cover_for(
    lane: &crate::pipeline::Lane,
    n: Network,
    source: &str,
    original: Option<Result<Image, String>>,
) -> Result<Cover, String> {
    let caps = lane.adapter.capabilities();
    let hosted = caps.fetches_image && lane.covers.is_some();
    if caps.fetches_image && !hosted && source.starts_with('/') {
        let on = n.label();
        return Err(format!(
            "{on} fetches the image itself from its public URL, and this draft's cover is a local file, so it cannot go to {on}: give the draft an https image URL"
        ));
    }
    match original {
        Some(Ok(image)) => crate::image::cover(image, caps.images, !caps.fetches_image || hosted)
            .await
            .map_err(|e| match e {
                ImageError::Refused(why) => {
                    ImageError::Refused(format!("for {}: {why}", n.label())).to_string()
                }
                other => other.to_string(),
            }),
        Some(Err(why)) => Err(why),
        None => Err("the cover image was not read".into()),
    }
}

/// The preview of `parsed`: the draft it carries, or the one stored for its key. Reads the
/// store and the cover image (a URL is fetched under the image budget); sends nothing to any
/// network and stores nothing.
///
/// # Errors
/// [`PreviewError::NoDraft`] when there is nothing to preview, [`PreviewError::Unavailable`]
/// when the store cannot be read.
pub async fn preview(
    app: &App,
    parsed: &ParsedRun,
    dl: &Deadline,
) -> Result<Preview, PreviewError> {
    let key = &parsed.key;
    let stored = crate::triggers::stored::key_status(app, key, dl)
        .await
        .map_err(|why| PreviewError::Unavailable {
            key: key.draft(),
            why,
        })?;
    let contents = contents(parsed, &stored, app).map_err(PreviewError::NoDraft)?;

    let mut originals: Vec<Original> = Vec::new();
    let mut targets = Vec::new();
    for (n, content, caption_from) in contents {
        let Some(lane) = app.pipeline.lane(n) else {
            continue;
        };
        let adapter = &lane.adapter;
        let caps = adapter.capabilities();

        // The text, as a run builds it: the full text, checked, then the adapter's preparation
        // (the media does not change the text; no image is named here).
        let plain = full_text(&content);
        let (length, max) = (adapter.text_len(&plain), adapter.max_text());
        let text_refused = text_refusal(&caps, &plain, (length, max), n);
        let text = adapter
            .prepare(&plain, &MediaRef(Value::Null), &key.on(n).to_string())
            .text;

        // The cover: fetched once per source, then what this network gets of it.
        if !originals.iter().any(|o| o.source == content.image) {
            let image = match lane.images.vet_source(&content.image) {
                Err(e) => Err(e.to_string()),
                Ok(()) => match dl
                    .work(
                        lane.settings.timeouts.image,
                        lane.images.fetch(&content.image),
                    )
                    .await
                {
                    Ok(Ok(image)) => Ok(image),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(b) => Err(format!("cover image: {b}")),
                },
            };
            originals.push(Original {
                source: content.image.clone(),
                alt: content.alt.clone(),
                image,
            });
        }
        let original = originals
            .iter()
            .find(|o| o.source == content.image)
            .map(|o| o.image.clone());
        let cover = cover_for(lane, n, &content.image, original).await;

        let already_posted = stored
            .targets
            .iter()
            .find(|(_, net, _, _)| *net == n)
            .and_then(|(_, _, s, _)| s.snapshot.record.as_ref())
            .map(|r| {
                json!({
                    "url": r.url,
                    "id": r.post_id,
                    "posted_at": crate::record::rfc3339(r.posted_at),
                })
            });
        targets.push(TargetPreview {
            network: n,
            text,
            plain,
            caption_from,
            length,
            max,
            counted_as: caps.text.counting.describe(),
            text_refused,
            dry_run: adapter.is_dry_run(),
            already_posted,
            limits: describe_limits(&caps.images, fetched_from(lane).as_deref()),
            cover,
        });
    }
    Ok(Preview {
        key: key.clone(),
        publish_at: parsed.publish_at,
        originals,
        targets,
    })
}
