//! `postonce preview`: writes what each target of a draft would get into one folder (its exact
//! text, `<target>.txt`; its cover, `<target>.<jpg|png|gif|webp>`) and an `index.html` that
//! shows them side by side. The work is [`crate::triggers::preview`]'s, shared with the MCP
//! `preview` tool; this only checks the arguments, writes the files and says where.
//!
//! It writes nowhere but the folder: the names are fixed (a target's name, `index.html`), a
//! folder that is a symbolic link or a file is refused, the folder is opened once and every
//! file is looked at, removed and created relative to that descriptor ([`OutDir`]: a folder
//! swapped for a link afterwards cannot redirect a write), an output name that is a symbolic
//! link (or anything but a regular file) refuses the whole preview before any file is written,
//! and every file is created afresh (`O_EXCL | O_NOFOLLOW`: never through a link planted
//! meanwhile).

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::out_dir::{Found, OutDir};
use super::{bad_input, post_request, DraftArgs, EXIT_BAD_INPUT};
use crate::app::App;
use crate::budget::Deadline;
use crate::config::Config;
use crate::image::Format;
use crate::networks::Network;
use crate::triggers::preview::{preview, Preview, PreviewError, TargetPreview};
use crate::triggers::ParsedRun;

/// The arguments of `postonce preview`.
#[derive(Args, Debug)]
pub(super) struct PreviewArgs {
    #[command(flatten)]
    draft: DraftArgs,
    /// The folder to write into (made if missing); default ./postonce-preview/<kind>-<slug>.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the preview JSON (with the files written) instead of text.
    #[arg(long)]
    pub(super) json: bool,
}

/// What was checked before any client is built: the draft to preview and the folder.
pub(super) struct Checked {
    run: ParsedRun,
    out: PathBuf,
}

/// Checks the arguments as `post` checks its own, and the folder, before anything is built.
///
/// # Errors
/// The message for people (exit 2).
pub(super) fn check(config: &Config, a: &PreviewArgs) -> Result<Checked, String> {
    let req = post_request(config, &a.draft, &None)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| Path::new("postonce-preview").join(req.key.draft()));
    // Without its trailing `/` (`--out link/`): a trailing slash makes the kernel follow a
    // final symbolic link, in `lstat` and even under `O_NOFOLLOW`.
    let out: PathBuf = out.components().collect();
    check_folder(&out)?;
    Ok(Checked {
        run: ParsedRun {
            key: req.key,
            content: req.content,
            targets: req.targets,
            publish_at: None,
        },
        out,
    })
}

/// The folder must be a folder (or not exist yet), and not a symbolic link.
fn check_folder(out: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "--out {}: is a symbolic link; postonce preview writes only into a real folder: name the folder itself",
            out.display()
        )),
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "--out {}: is a file, not a folder; name a folder (it is made if missing)",
            out.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("--out {}: {e}", out.display())),
    }
}

/// `jpg`, `png`, `gif`, `webp`.
fn extension(format: Format) -> &'static str {
    match format {
        Format::Jpeg => "jpg",
        Format::Png => "png",
        Format::Gif => "gif",
        Format::Webp => "webp",
    }
}

/// Every name a preview may write for a target (its text, each image format).
fn names_of(network: Network) -> Vec<String> {
    std::iter::once("txt")
        .chain(Format::ALL.into_iter().map(extension))
        .map(|ext| format!("{}.{ext}", network.as_str()))
        .collect()
}

/// One file to write: its name in the folder and its bytes.
struct Output {
    name: String,
    bytes: Vec<u8>,
}

fn image_name(t: &TargetPreview) -> Option<String> {
    t.cover
        .as_ref()
        .ok()
        .map(|c| format!("{}.{}", t.network.as_str(), extension(c.format)))
}

/// The files of `p`: each target's text and cover, and `index.html`.
fn outputs(p: &Preview) -> Vec<Output> {
    let mut files = Vec::new();
    for t in &p.targets {
        files.push(Output {
            name: format!("{}.txt", t.network.as_str()),
            bytes: t.text.clone().into_bytes(),
        });
        if let (Ok(c), Some(name)) = (&t.cover, image_name(t)) {
            files.push(Output {
                name,
                bytes: c.bytes.to_vec(),
            });
        }
    }
    files.push(Output {
        name: "index.html".into(),
        bytes: index_html(p).into_bytes(),
    });
    files
}

/// Writes `files` into `dir` (made if missing), opened once. Every name is checked before
/// anything is written; an earlier preview's files there are replaced (and its covers in other
/// formats removed), never written through.
fn write_all(dir: &Path, files: &[Output]) -> Result<Vec<PathBuf>, String> {
    check_folder(dir)?;
    let out = OutDir::open(dir)?;
    // First look at every name, writing nothing.
    let mut replace = Vec::new();
    for f in files {
        if let Found::File = out.inspect(&f.name)? {
            replace.push(f.name.clone());
        }
    }
    // An earlier preview's files this one does not write (a cover that was a PNG and is now a
    // JPEG): removed if they are regular files, left alone (not followed) otherwise.
    let stale: Vec<String> = Network::ALL
        .into_iter()
        .flat_map(names_of)
        .filter(|name| !files.iter().any(|f| &f.name == name))
        .filter(|name| matches!(out.inspect(name), Ok(Found::File)))
        .collect();
    for name in replace.iter().chain(&stale) {
        out.remove(name)?;
    }
    files
        .iter()
        .map(|f| out.create(&f.name, &f.bytes))
        .collect()
}

/// Text for HTML: `&`, `<`, `>`, `"` and `'` escaped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5rem;background:#f4f4f5;color:#18181b}\
h1{font-size:1.3rem}.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:1rem}\
.card{background:#fff;border:1px solid #d4d4d8;border-radius:8px;padding:1rem}\
.card h2{font-size:1.1rem;margin:0 0 .5rem}pre{white-space:pre-wrap;word-break:break-word;\
background:#fafafa;border:1px solid #e4e4e7;padding:.5rem;font-size:.9rem}\
img{max-width:100%;height:auto;border:1px solid #e4e4e7}.facts{font-size:.85rem;color:#3f3f46}\
.refused{color:#b91c1c}.note{color:#71717a;font-size:.85rem}";

/// A label that starts in lower case (`the … channel`) → `The … channel`.
fn heading(label: &str) -> String {
    let mut chars = label.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The page: one card per target, side by side, each with its network, text, length and limit,
/// and its cover's facts or why it gets none. Self-contained; images by relative path.
fn index_html(p: &Preview) -> String {
    let key = escape(&p.key.draft());
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>postonce preview: {key}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>postonce preview: {key}</h1>\n<p class=\"note\">What each network would get. Nothing was sent and nothing was stored.</p>\n"
    );
    for o in &p.originals {
        let facts = match &o.image {
            Ok(i) => format!(
                "{} {} bytes, {}×{}",
                i.format.name(),
                i.bytes.len(),
                i.width,
                i.height
            ),
            Err(why) => format!("<span class=\"refused\">{}</span>", escape(why)),
        };
        html.push_str(&format!(
            "<p class=\"facts\">Cover: <code>{}</code>: {facts}{}</p>\n",
            escape(&o.source),
            o.alt
                .as_deref()
                .map(|a| format!("; alt text: {}", escape(a)))
                .unwrap_or_default()
        ));
    }
    html.push_str("<div class=\"grid\">\n");
    for t in &p.targets {
        let n = t.network;
        let mut flags = Vec::new();
        if t.dry_run {
            flags.push("dry run".to_owned());
        }
        if let Some(a) = &t.already_posted {
            let at = a["url"].as_str().or(a["id"].as_str()).unwrap_or("");
            flags.push(format!("already posted {at}"));
        }
        let flags = if flags.is_empty() {
            String::new()
        } else {
            format!(
                " <span class=\"note\">({})</span>",
                escape(&flags.join("; "))
            )
        };
        html.push_str(&format!(
            "<section class=\"card\" id=\"{id}\">\n<h2>{label}{flags}</h2>\n<pre>{text}</pre>\n<p class=\"facts\">{len} / {max} {counted}</p>\n",
            id = n.as_str(),
            label = escape(&heading(n.label())),
            text = escape(&t.text),
            len = t.length,
            max = t.max,
            counted = escape(t.counted_as),
        ));
        if t.text != t.plain {
            html.push_str(&format!(
                "<p class=\"note\">Sent with {}'s markup, as above; shown as:</p>\n<pre>{}</pre>\n",
                escape(n.label()),
                escape(&t.plain)
            ));
        }
        if let Some(why) = &t.text_refused {
            html.push_str(&format!(
                "<p class=\"refused\">Text refused: {}</p>\n",
                escape(why)
            ));
        }
        match (&t.cover, image_name(t)) {
            (Ok(c), Some(name)) => html.push_str(&format!(
                "<img src=\"{src}\" alt=\"{alt}\" width=\"{w}\" height=\"{h}\">\n<p class=\"facts\">{facts}</p>\n",
                src = escape(&name),
                alt = escape(t.network.label()),
                w = c.width,
                h = c.height,
                facts = escape(&c.sent().describe()),
            )),
            (Err(why), _) => html.push_str(&format!(
                "<p class=\"refused\">No image: {}</p>\n",
                escape(why)
            )),
            _ => {}
        }
        html.push_str(&format!(
            "<p class=\"note\">{} takes: {}</p>\n</section>\n",
            escape(n.label()),
            escape(&t.limits)
        ));
    }
    html.push_str("</div>\n</body>\n</html>\n");
    html
}

/// Runs the preview and writes it; returns the exit code.
pub(super) async fn run(app: &App, checked: Checked, json: bool, dl: Deadline) -> i32 {
    let Checked { run, out } = checked;
    if let Some(content) = &run.content {
        let all = app.pipeline.targets_for(&run.targets);
        if let Err(e) = app.pipeline.check_text(content, &all) {
            let flag = match e.field.strip_prefix("captions.") {
                Some(n) => format!("--caption-for {n}="),
                None if e.field == "targets" => "--targets".to_owned(),
                None => "--caption".to_owned(),
            };
            return bad_input(format!("{flag}: {e}"));
        }
    }
    if let Some(n) = run
        .targets
        .iter()
        .find(|n| app.pipeline.lane(**n).is_none())
    {
        return bad_input(format!(
            "--targets: {} is not supported by this version",
            n.as_str()
        ));
    }
    let p = match preview(app, &run, &dl).await {
        Ok(p) => p,
        Err(PreviewError::NoDraft(_)) => {
            return bad_input(format!(
                "no draft is stored for {}: give --caption and --image to preview one",
                run.key.draft()
            ))
        }
        Err(e @ PreviewError::Unavailable { .. }) => {
            eprintln!("postonce: {e}; nothing changed, try again");
            return 4;
        }
    };
    let written = match write_all(&out, &outputs(&p)) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("postonce: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    let index = out.join("index.html");
    if json {
        let mut v = p.to_json();
        v["out"] = json!(out.display().to_string());
        v["files"] = json!(written
            .iter()
            .map(|w| w.display().to_string())
            .collect::<Vec<_>>());
        println!("{v}");
        return 0;
    }
    println!(
        "preview of {}, nothing sent: {} files in {}",
        p.key.draft(),
        written.len(),
        out.display()
    );
    for t in &p.targets {
        let file = image_name(t).map(|n| format!(" → {n}")).unwrap_or_default();
        println!("  {}{file}", t.line());
    }
    println!("open {}", index.display());
    0
}
