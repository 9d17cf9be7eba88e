//! `GET /covers/<sha256>.<ext>` (and `HEAD`): the covers this process's folder host wrote
//! ([`crate::covers::folder`]), for the networks that fetch the image themselves. Only `serve`
//! answers it, and only with `POSTONCE_PUBLIC_URL` set. The name is taken strictly (64 lower-case
//! hex digits and `jpg`, `png`, `gif` or `webp`); anything else, a file that is not there, a
//! link, or one older than a day is a 404 that says nothing more. Never a panic.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use crate::covers::CoverHosting;

/// The answer to `method` on `path` when `path` is under `/covers/`; `None` otherwise (the
/// router answers it).
pub async fn answer(
    hosting: &CoverHosting,
    method: &str,
    path: &str,
) -> Option<Response<Full<Bytes>>> {
    let name = path.strip_prefix("/covers/")?;
    if !matches!(method, "GET" | "HEAD") {
        let mut refused = plain(405, "only GET and HEAD are allowed on /covers/")?;
        refused.headers_mut().insert(
            "allow",
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return Some(refused);
    }
    let CoverHosting::Folder { dir, .. } = hosting else {
        return plain(404, "not found");
    };
    let (dir, name) = (dir.clone(), name.to_owned());
    let found = tokio::task::spawn_blocking(move || crate::covers::folder::read(&dir, &name))
        .await
        .ok()
        .flatten();
    let Some((name, bytes)) = found else {
        return plain(404, "not found");
    };
    let len = bytes.len();
    let body = if method == "HEAD" {
        Bytes::new()
    } else {
        Bytes::from(bytes)
    };
    Response::builder()
        .status(200)
        .header("content-type", name.format.mime())
        .header("content-length", len)
        // The name is the hash of the bytes: they never change under it.
        .header("cache-control", "public, max-age=86400, immutable")
        .header("x-content-type-options", "nosniff")
        .body(Full::new(body))
        .ok()
}

fn plain(status: u16, text: &'static str) -> Option<Response<Full<Bytes>>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(text.as_bytes())))
        .ok()
}
