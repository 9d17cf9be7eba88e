//! `postonce post`: the draft from the flags, checked before anything is built or stored.

use crate::config::Config;
use crate::key::PostKey;
use crate::networks::Network;
use crate::pipeline::{new_run_id, Action, PostRequest, Source};
use crate::record::DraftContent;

/// The draft a command acts on, as `post` and `preview` take it: its key and, optionally, its
/// content (without --caption/--image, the stored draft).
#[derive(clap::Args, Debug)]
pub(super) struct DraftArgs {
    #[arg(long)]
    kind: String,
    #[arg(long)]
    slug: String,
    #[arg(long)]
    caption: Option<String>,
    /// An https URL, or a local JPEG/PNG/GIF/WebP file.
    #[arg(long)]
    image: Option<String>,
    #[arg(long)]
    link: Option<String>,
    #[arg(long)]
    alt: Option<String>,
    /// The networks, comma-separated (linkedin,x,telegram); default: the draft's, or
    /// POSTONCE_TARGETS.
    #[arg(long, value_delimiter = ',')]
    targets: Vec<String>,
    /// A caption for one network instead of --caption there: NETWORK=TEXT (repeatable).
    #[arg(long = "caption-for", value_name = "NETWORK=TEXT")]
    caption_for: Vec<String>,
}

pub(super) fn post_request(
    config: &Config,
    draft: &DraftArgs,
    at: &Option<String>,
) -> Result<PostRequest, String> {
    let DraftArgs {
        kind,
        slug,
        caption,
        image,
        link,
        alt,
        targets,
        caption_for,
    } = draft;
    let key = PostKey::new(kind, slug).map_err(|e| e.to_string())?;
    let publish_at = match at {
        Some(raw) => Some(
            crate::triggers::parse_publish_at(raw, crate::record::now_s(), "--at")
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    if publish_at.is_some() && (caption.is_none() || image.is_none()) {
        return Err("--at needs --caption and --image (the draft to schedule)".into());
    }
    let mut networks = Vec::new();
    for name in targets {
        let n = Network::parse(name.trim()).ok_or_else(|| {
            format!(
                "--targets: {name:?} is not a network: use {}",
                Network::names()
            )
        })?;
        if !networks.contains(&n) {
            networks.push(n);
        }
    }
    let mut captions = std::collections::BTreeMap::new();
    for pair in caption_for {
        let (name, text) = pair
            .split_once('=')
            .ok_or_else(|| format!("--caption-for {pair:?}: expected NETWORK=TEXT"))?;
        let n = Network::parse(name.trim()).ok_or_else(|| {
            format!(
                "--caption-for: {name:?} is not a network: use {}",
                Network::names()
            )
        })?;
        if text.trim().is_empty() {
            return Err(format!("--caption-for {name}=: the caption is empty"));
        }
        captions.insert(n, text.to_owned());
    }
    if !captions.is_empty() && caption.is_none() {
        return Err(
            "--caption-for needs --caption and --image (the caption for the other targets)".into(),
        );
    }
    let content = match (caption, image) {
        (None, None) => {
            if link.is_some() || alt.is_some() {
                return Err("--link and --alt need --caption and --image".into());
            }
            None
        }
        (Some(_), None) => {
            return Err("--caption needs --image (an https URL or a local file)".into())
        }
        (None, Some(_)) => return Err("--image needs --caption".into()),
        (Some(caption), Some(image)) => {
            if caption.trim().is_empty() {
                return Err("--caption is empty".into());
            }
            let image = if image.starts_with("https://") || image.starts_with("http://") {
                config
                    .image_hosts
                    .check(image)
                    .map_err(|e| format!("--image: {e}"))?;
                image.clone()
            } else {
                crate::image::check_local(image).map_err(|why| format!("--image: {why}"))?
            };
            if let Some(l) = link {
                if !url::Url::parse(l).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
                    return Err("--link must be an http(s) URL".into());
                }
            }
            Some(DraftContent {
                caption: caption.clone(),
                image,
                link: link.clone(),
                alt: alt.clone(),
                captions,
            })
        }
    };
    Ok(PostRequest {
        key,
        content,
        action: Action::Post,
        source: Source::Cli,
        run_id: new_run_id(),
        reply_to: None,
        targets: networks,
        publish_at,
    })
}
