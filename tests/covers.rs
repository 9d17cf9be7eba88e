//! The cover itself (the images issue): strict decoding of real files made by the tests, a
//! rendition only where a network's limits need one, and the same bytes every time.

use crate::support;

use bytes::Bytes;
use postonce::image::{cover_blocking, vet, Cover, Format, Formats, ImageError, ImageLimits};
use support::covers;

fn bluesky() -> ImageLimits {
    ImageLimits {
        formats: Formats::of(&[Format::Jpeg, Format::Png, Format::Webp]),
        max_bytes: 1_000_000,
        ..ImageLimits::default()
    }
}

fn telegram() -> ImageLimits {
    ImageLimits {
        formats: Formats::of(&[Format::Jpeg, Format::Png]),
        max_bytes: 10_000_000,
        max_side_sum: Some(10_000),
        max_ratio: Some(20),
        ..ImageLimits::default()
    }
}

fn threads() -> ImageLimits {
    ImageLimits {
        formats: Formats::of(&[Format::Jpeg, Format::Png]),
        max_bytes: 8_000_000,
        min_width: Some(320),
        max_width: Some(1440),
        max_ratio: Some(10),
        ..ImageLimits::default()
    }
}

fn cover_of(bytes: Vec<u8>, limits: &ImageLimits, can_render: bool) -> Result<Cover, ImageError> {
    let image = vet(Bytes::from(bytes))?;
    cover_blocking(&image, limits, can_render)
}

fn refused(r: Result<Cover, ImageError>) -> String {
    match r {
        Err(ImageError::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_original_that_fits_goes_byte_for_byte() {
    let png = covers::smooth_png(1200, 630);
    let c = cover_of(png.clone(), &bluesky(), true).unwrap();
    assert!(!c.rendition);
    assert_eq!(c.bytes.as_ref(), png.as_slice());
    assert_eq!((c.format, c.width, c.height), (Format::Png, 1200, 630));
}

#[test]
fn a_noise_png_over_the_limit_gets_a_jpeg_that_fits_keeping_the_shape() {
    let png = covers::noise_png(1000, 1000, 1);
    assert!(png.len() > 2_900_000, "{}", png.len());
    let c = cover_of(png, &bluesky(), true).unwrap();
    assert!(c.rendition);
    assert_eq!(c.format, Format::Jpeg);
    assert!(c.bytes.len() <= 1_000_000, "{}", c.bytes.len());
    assert_eq!(c.width, c.height, "the aspect ratio is kept");
    assert!(c.width <= 1000, "never enlarged");
    assert_eq!(covers::size_of(&c.bytes), (c.width, c.height));
}

#[test]
fn the_same_original_under_the_same_limits_gives_the_same_bytes() {
    let png = covers::noise_png(900, 700, 3);
    let a = cover_of(png.clone(), &bluesky(), true).unwrap();
    let b = cover_of(png, &bluesky(), true).unwrap();
    assert_eq!(covers::sha256(&a.bytes), covers::sha256(&b.bytes));
}

#[test]
fn webp_is_read_and_given_as_is_where_taken_and_rendered_where_not() {
    let webp = covers::webp(1200, 630);
    let c = cover_of(webp.clone(), &bluesky(), true).unwrap();
    assert!(!c.rendition && c.format == Format::Webp);
    let t = cover_of(webp, &telegram(), true).unwrap();
    assert!(t.rendition && t.format == Format::Jpeg);
    assert_eq!((t.width, t.height), (1200, 630));
}

#[test]
fn telegram_sides_are_brought_within_ten_thousand() {
    let png = covers::smooth_png(6000, 5000);
    let c = cover_of(png, &telegram(), true).unwrap();
    assert!(
        c.rendition && c.width + c.height <= 10_000,
        "{}×{}",
        c.width,
        c.height
    );
    let ratio = f64::from(c.width) / f64::from(c.height);
    assert!((ratio - 1.2).abs() < 0.01, "{ratio}");
}

#[test]
fn a_shape_no_rendition_can_fix_is_refused_with_the_reason() {
    let banner = covers::smooth_png(2100, 100);
    let why = refused(cover_of(banner, &telegram(), true));
    assert!(why.contains("20:1"), "{why}");
}

#[test]
fn threads_gets_the_original_or_nothing() {
    let fits = covers::smooth_png(1200, 630);
    assert!(!cover_of(fits, &threads(), false).unwrap().rendition);
    let wide = covers::smooth_png(2000, 1000);
    let why = refused(cover_of(wide, &threads(), false));
    assert!(why.contains("1440") && why.contains("URL"), "{why}");
    let narrow = covers::smooth_png(200, 200);
    let why = refused(cover_of(narrow, &threads(), false));
    assert!(why.contains("320"), "{why}");
}

/// Instagram's limits, from its capabilities: a JPEG that fits goes as it is; a PNG, or a
/// JPEG wider than 1440, gets a JPEG rendition that fits where a rendition can reach it (and,
/// as for Threads, is refused while the network fetches the draft's own URL); a shape outside
/// 4:5 to 1.91:1 would need cropping and is refused with the reason.
#[test]
fn instagram_covers_follow_its_capabilities() {
    let ig = postonce::networks::instagram::capabilities().images;
    let fits = covers::jpeg(1080, 1350, 85);
    let c = cover_of(fits.clone(), &ig, true).unwrap();
    assert!(!c.rendition && c.bytes.as_ref() == fits.as_slice());
    for original in [covers::smooth_png(1080, 1080), covers::jpeg(2000, 1500, 85)] {
        let c = cover_of(original.clone(), &ig, true).unwrap();
        assert!(
            c.rendition && c.format == Format::Jpeg && c.width <= 1440,
            "{}x{}",
            c.width,
            c.height
        );
        assert!(c.width >= 320 && c.bytes.len() <= 8_000_000);
        assert_eq!(
            cover_of(original.clone(), &ig, true).unwrap().bytes,
            c.bytes,
            "the same bytes"
        );
        let why = refused(cover_of(original, &ig, false));
        assert!(why.contains("URL"), "{why}");
    }
    let why = refused(cover_of(covers::jpeg(1000, 2000, 85), &ig, true));
    assert!(why.contains("too tall") && why.contains("4:5"), "{why}");
    let why = refused(cover_of(covers::smooth_png(2000, 1000), &ig, true));
    assert!(why.contains("too wide") && why.contains("191:100"), "{why}");
}

#[test]
fn a_decompression_bomb_is_refused_from_its_header() {
    let bomb = covers::bomb_png(100_000);
    assert!(bomb.len() < 2_000, "{}", bomb.len());
    let why = match vet(Bytes::from(bomb)) {
        Err(ImageError::Refused(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(
        why.contains("100000×100000") && why.contains("not decoded"),
        "{why}"
    );
}

#[test]
fn cut_short_files_are_refused_naming_the_cause() {
    let jpeg = covers::jpeg(800, 600, 90);
    let why = refused(cover_of(
        covers::truncated(&jpeg, jpeg.len() * 2 / 3),
        &bluesky(),
        true,
    ));
    assert!(why.contains("cut short"), "{why}");
    let png = covers::noise_png(300, 300, 5);
    let why = refused(cover_of(
        covers::truncated(&png, png.len() / 2),
        &bluesky(),
        true,
    ));
    assert!(why.contains("PNG"), "{why}");
    let webp = covers::webp(400, 300);
    let why = refused(cover_of(
        covers::truncated(&webp, webp.len() - 10),
        &bluesky(),
        true,
    ));
    assert!(why.contains("WebP") && why.contains("cut short"), "{why}");
}

#[test]
fn a_type_that_lies_about_itself_is_refused() {
    let why = refused(cover_of(covers::lying_png(), &bluesky(), true));
    assert!(why.contains("PNG"), "{why}");
    let why = refused(cover_of(b"<html>a page</html>".to_vec(), &bluesky(), true));
    assert!(why.contains("not a JPEG, PNG, GIF or WebP"), "{why}");
}

#[test]
fn a_cmyk_jpeg_is_converted_never_sent_as_it_is() {
    let cmyk = covers::cmyk_jpeg(640, 480);
    let c = cover_of(cmyk.clone(), &bluesky(), true).unwrap();
    assert!(c.rendition && c.format == Format::Jpeg);
    assert_ne!(c.bytes.as_ref(), cmyk.as_slice());
    assert_eq!((c.width, c.height), (640, 480));
}

#[test]
fn an_animation_is_flattened_where_gif_is_not_taken_and_refused_when_too_large() {
    let gif = covers::animated_gif(200, 150, 3);
    let x = ImageLimits {
        formats: Formats::of(&[Format::Jpeg, Format::Png, Format::Gif, Format::Webp]),
        max_bytes: 5_000_000,
        ..ImageLimits::default()
    };
    assert!(!cover_of(gif.clone(), &x, true).unwrap().rendition);
    let t = cover_of(gif, &telegram(), true).unwrap();
    assert!(t.rendition && t.format == Format::Jpeg && (t.width, t.height) == (200, 150));
    // 101 frames of 1000×1000: more than the 100 million pixels decoded to check one.
    let huge = covers::animated_gif(1000, 1000, 101);
    let why = refused(cover_of(huge, &x, true));
    assert!(why.contains("too large to check and flatten"), "{why}");
}

#[test]
fn a_local_cover_is_checked_before_anything_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("cover.webp");
    std::fs::write(&good, covers::webp(300, 200)).unwrap();
    assert!(postonce::image::check_local(good.to_str().unwrap()).is_ok());
    let bad = dir.path().join("cut.jpg");
    let jpeg = covers::jpeg(300, 200, 90);
    std::fs::write(&bad, covers::truncated(&jpeg, jpeg.len() / 2)).unwrap();
    let why = postonce::image::check_local(bad.to_str().unwrap()).unwrap_err();
    assert!(
        why.contains("cut short") && why.contains("cut.jpg"),
        "{why}"
    );
}

/// A fake proxy: counts every connection made to it and answers each with a 502.
async fn counting_proxy() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let _ = conn
                    .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                    .await;
            });
        }
    });
    (url, count)
}

/// Image fetches never go through a proxy (issue 30, finding 5): with `HTTPS_PROXY`,
/// `HTTP_PROXY` and `ALL_PROXY` all pointing at a proxy that counts its connections, the cover
/// is fetched from its host directly (the proxy would resolve the name itself, past the
/// public-address filter) and the post goes out; the proxy is never touched. The networks keep
/// the environment's proxy settings (here `NO_PROXY` sends their fakes, at 127.0.0.1, around
/// it; the image host is named `localhost`, which `NO_PROXY` does not cover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_fetch_never_uses_the_environments_proxy() {
    use support::env::{Env, Stores};
    let env = Env::with(Stores::Local, &[]).await;
    let (proxy, count) = counting_proxy().await;
    let localhost = |v: &str| v.replace("127.0.0.1", "localhost");
    let slug = support::services::unique("proxy-");
    let image = localhost(&env.images.url("/cover.png"));
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_postonce"))
        .args(["post", "--kind", "blog", "--slug", &slug, "--json"])
        .args(["--caption", "Through no proxy", "--image", &image])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(&env.vars)
        .env(
            "POSTONCE_IMAGE_HOSTS",
            localhost(&env.vars["POSTONCE_IMAGE_HOSTS"]),
        )
        .env("HTTPS_PROXY", &proxy)
        .env("HTTP_PROXY", &proxy)
        .env("ALL_PROXY", &proxy)
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .await
        .expect("run postonce");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        count.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the proxy was used: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("\"outcome\":\"posted\""), "{stdout}");
    assert_eq!(env.images.hits("/cover.png").await, 1);
    assert_eq!(env.linkedin.create_requests(), 1);
}

/// Issue 30, findings 3 and 9: the covers that take a decoder the most memory, each run through
/// `postonce post` (local mode, every target a dry run; LinkedIn takes the original, the
/// channel a rendition) under the memory the template gives the function: `prlimit --as` of
/// 256 MiB (util-linux), with glibc's arenas kept to two so that the limit measures what is
/// used. The process never dies: each cover is handled (exit 0) or refused before it is
/// decoded (exit 2) with its size and the memory it would need named, never as "corrupt".
/// Without the estimate, the progressive JPEG's coefficients (which the decoder's own
/// allocation limit does not count) end the process on a failed allocation.
#[test]
fn the_worst_covers_never_kill_the_process_in_the_functions_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, bool); 4] = [
        // 36 MP, progressive, 4:4:4: about 324 MB in the decoder.
        ("progressive", covers::progressive_jpeg(6000, 6000), false),
        // 16.8 MP, two frames: about 280 MB in the decoder.
        ("animated", covers::animated_gif(4200, 4000, 2), false),
        // 14 MP of 16-bit RGBA: 112 MB decoded, then a rendition's copies.
        ("deep", covers::png16(4000, 3500), false),
        // 12 MP, baseline: within the budget, posted (dry run) with a rendition.
        ("baseline", covers::jpeg(4000, 3000, 85), true),
    ];
    for (i, (name, bytes, handled)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("{name}.img"));
        std::fs::write(&path, &bytes).unwrap();
        let out = std::process::Command::new("prlimit")
            .arg(format!("--as={}", 256u64 << 20))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_postonce"))
            .args(["post", "--kind", "cover", "--slug"])
            .arg(format!("worst-{i}"))
            .args(["--caption", &format!("The {name} cover"), "--image"])
            .arg(&path)
            .args(["--targets", "linkedin,telegram"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("POSTONCE_DATA_DIR", dir.path().join("data"))
            .env("MALLOC_ARENA_MAX", "2")
            .env("RUST_LOG", "off")
            .output()
            .expect("prlimit (util-linux) runs the binary: apt-get install -y util-linux");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code().is_some(),
            "{name}: the process died under 256 MiB ({}): {err}",
            out.status
        );
        if handled {
            assert_eq!(out.status.code(), Some(0), "{name}: {err}");
            continue;
        }
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name}: refused as bad input: {err}"
        );
        assert!(
            err.contains("MB of memory") && err.contains(" pixels") && !err.contains("corrupt"),
            "{name}: the refusal names the size and the memory: {err}"
        );
    }
}
