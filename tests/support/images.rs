//! An image host fake: valid PNG/JPEG/GIF, an oversized image, HTML, a lying content type,
//! same- and cross-origin redirects, a flaky path and a slow one. Counts hits per path.

use std::sync::Arc;
use std::time::Duration;

use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A tiny valid PNG (the repository's example cover).
pub fn png_bytes() -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cover.png"))
        .expect("examples/cover.png")
}

/// A 1080×1080 JPEG: what `/cover.jpg` serves.
pub fn cover_jpeg() -> Vec<u8> {
    super::covers::jpeg(1080, 1080, 85)
}

/// A minimal valid 1x1 GIF.
pub fn gif_bytes() -> Vec<u8> {
    let mut g = b"GIF89a".to_vec();
    g.extend_from_slice(&[1, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF]);
    g.extend_from_slice(&[
        0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3B,
    ]);
    g
}

pub struct ImageHost {
    server: Arc<MockServer>,
}

impl ImageHost {
    pub async fn start() -> Self {
        let server = Arc::new(MockServer::start().await);
        let png = png_bytes();
        let serve = |p: &str, t: ResponseTemplate| {
            Mock::given(method("GET"))
                .and(path(p.to_owned()))
                .respond_with(t)
        };
        serve(
            "/cover.png",
            ResponseTemplate::new(200).set_body_raw(png.clone(), "image/png"),
        )
        .mount(&server)
        .await;
        // A square JPEG every network takes as it is (Instagram takes JPEG only, from 4:5 to
        // 1.91:1; the PNG above is wider than 1.91:1).
        serve(
            "/cover.jpg",
            ResponseTemplate::new(200).set_body_raw(cover_jpeg(), "image/jpeg"),
        )
        .mount(&server)
        .await;
        serve(
            "/cover.gif",
            ResponseTemplate::new(200).set_body_raw(gif_bytes(), "image/gif"),
        )
        .mount(&server)
        .await;
        let mut huge = png.clone();
        huge.resize(9 * 1024 * 1024, 0);
        serve(
            "/huge.png",
            ResponseTemplate::new(200).set_body_raw(huge.clone(), "image/png"),
        )
        .mount(&server)
        .await;
        // No Content-Length: the cap must hold while streaming.
        serve(
            "/huge-chunked.png",
            ResponseTemplate::new(200)
                .set_body_raw(huge, "image/png")
                .insert_header("transfer-encoding", "chunked"),
        )
        .mount(&server)
        .await;
        serve(
            "/page.html",
            ResponseTemplate::new(200).set_body_raw(b"<html>hi</html>".to_vec(), "text/html"),
        )
        .mount(&server)
        .await;
        serve(
            "/fake.png",
            ResponseTemplate::new(200)
                .set_body_raw(b"<html>not a png</html>".to_vec(), "image/png"),
        )
        .mount(&server)
        .await;
        serve("/missing.png", ResponseTemplate::new(404))
            .mount(&server)
            .await;
        serve(
            "/redirect-same",
            ResponseTemplate::new(302).insert_header("location", "/cover.png"),
        )
        .mount(&server)
        .await;
        serve(
            "/slow.png",
            ResponseTemplate::new(200)
                .set_body_raw(png.clone(), "image/png")
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
        // Flaky: two 503s, then the image.
        Mock::given(method("GET"))
            .and(path("/flaky.png"))
            .respond_with(ResponseTemplate::new(503))
            .up_to_n_times(2)
            .with_priority(1)
            .mount(&server)
            .await;
        serve(
            "/flaky.png",
            ResponseTemplate::new(200).set_body_raw(png, "image/png"),
        )
        .with_priority(2)
        .mount(&server)
        .await;
        Self { server }
    }

    /// Adds `/redirect-away` → `target` (another origin).
    pub async fn redirect_away_to(&self, target: &str) {
        Mock::given(method("GET"))
            .and(path("/redirect-away"))
            .respond_with(ResponseTemplate::new(302).insert_header("location", target))
            .mount(&self.server)
            .await;
    }

    /// Serves the cover at `p` `times` times, then answers 404 there: an image that vanishes
    /// after the run fetched it.
    pub async fn vanishing(&self, p: &str, times: u64) {
        self.vanishing_as(p, times, png_bytes(), "image/png").await;
    }

    /// [`Self::vanishing`] with these bytes of this type.
    pub async fn vanishing_as(&self, p: &str, times: u64, bytes: Vec<u8>, content_type: &str) {
        Mock::given(method("GET"))
            .and(path(p.to_owned()))
            .respond_with(ResponseTemplate::new(200).set_body_raw(bytes, content_type))
            .up_to_n_times(times)
            .with_priority(1)
            .mount(&self.server)
            .await;
        Mock::given(method("GET"))
            .and(path(p.to_owned()))
            .respond_with(ResponseTemplate::new(404))
            .with_priority(2)
            .mount(&self.server)
            .await;
    }

    /// Serves `bytes` at `p` with `content_type` (covers made by [`super::covers`]).
    pub async fn serve(&self, p: &str, bytes: Vec<u8>, content_type: &str) {
        Mock::given(method("GET"))
            .and(path(p.to_owned()))
            .respond_with(ResponseTemplate::new(200).set_body_raw(bytes, content_type))
            .mount(&self.server)
            .await;
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    pub fn url(&self, p: &str) -> String {
        format!("{}{p}", self.server.uri())
    }

    pub async fn hits(&self, p: &str) -> usize {
        self.server
            .received_requests()
            .await
            .map_or(0, |r| r.iter().filter(|r| r.url.path() == p).count())
    }

    /// Hits of `p` whose `User-Agent` starts with `agent` (postonce's fetcher sends
    /// `postonce/<version>`), and the others.
    pub async fn hits_by(&self, p: &str, agent: &str) -> (usize, usize) {
        let requests = self.server.received_requests().await.unwrap_or_default();
        let of_p = requests.iter().filter(|r| r.url.path() == p);
        let by = of_p
            .clone()
            .filter(|r| {
                r.headers
                    .get("user-agent")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with(agent))
            })
            .count();
        (by, of_p.count() - by)
    }

    pub async fn total_hits(&self) -> usize {
        self.server.received_requests().await.map_or(0, |r| r.len())
    }
}
