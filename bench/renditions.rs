//! The cover's cost (README "Performance"; the images issue): a 4000×3000 PNG made into a
//! JPEG of at most 1,000,000 bytes (Bluesky's blob limit), in CPU time and peak memory, and
//! the cost of a cover that fits as it is (decoded to check it, sent byte for byte). Each case
//! runs in a child process of its own, so that its peak memory is its own. Prints ratios to
//! the budgets (300 ms of CPU, 64 MB more peak memory). Not a timed test.
//!
//! `cargo bench --bench renditions [-- RUNS]` (default 7 runs per case).

use std::process::Command;

use bytes::Bytes;
use postonce::image::{cover_blocking, vet, Format, Formats, ImageLimits};

const CPU_BUDGET_MS: f64 = 300.0;
const MEMORY_BUDGET_MB: f64 = 64.0;

/// CPU time of this thread, in milliseconds (`/proc/thread-self/schedstat`: nanoseconds).
fn cpu_ms() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns: f64 = s
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("on-CPU time");
    ns / 1e6
}

/// Peak resident memory of this process, in MB (`VmHWM`).
fn peak_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("status");
    let kb: f64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM");
    kb / 1024.0
}

/// A 4000×3000 cover like a blog's: gradients, thousands of flat shapes with hard edges and
/// striped ones. Its PNG is under the 8 MiB download cap; as a JPEG at full size it is over
/// 1,000,000 bytes, so the rendition must shrink it.
fn cover_png(w: u32, h: u32) -> Vec<u8> {
    let mut s: u32 = 12345;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    };
    let mut img = image::RgbImage::from_fn(w, h, |x, y| {
        let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
        image::Rgb([
            (200.0 * fx) as u8,
            (150.0 * fy) as u8,
            (120.0 + 80.0 * ((fx + fy) * 7.0).sin()) as u8,
        ])
    });
    for _ in 0..(6000 * u64::from(w) * u64::from(h) / 12_000_000) {
        let (x0, y0) = (next() % w, next() % h);
        let (rw, rh) = (4 + next() % 120, 4 + next() % 60);
        let c = image::Rgb([next() as u8, next() as u8, next() as u8]);
        let stripes = next() % 3 == 0;
        for y in y0..(y0 + rh).min(h) {
            for x in x0..(x0 + rw).min(w) {
                if !stripes || (x + y) % 4 < 2 {
                    img.put_pixel(x, y, c);
                }
            }
        }
    }
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("encode the PNG");
    out.into_inner()
}

fn bluesky() -> ImageLimits {
    ImageLimits {
        formats: Formats::of(&[Format::Jpeg, Format::Png, Format::Webp]),
        max_bytes: 1_000_000,
        ..ImageLimits::default()
    }
}

/// One case in this process: prints `cpu_ms peak_rise_mb out_bytes width height rendition`.
fn child(path: &str) {
    let bytes = Bytes::from(std::fs::read(path).expect("the cover"));
    let image = vet(bytes).expect("a cover");
    let before = peak_mb();
    let start = cpu_ms();
    let cover = cover_blocking(&image, &bluesky(), true).expect("a cover for Bluesky");
    let cpu = cpu_ms() - start;
    println!(
        "{cpu:.1} {:.1} {} {} {} {}",
        peak_mb() - before,
        cover.bytes.len(),
        cover.width,
        cover.height,
        cover.rendition
    );
}

struct Case {
    cpu: Vec<f64>,
    peak: Vec<f64>,
    out: String,
}

fn run(path: &str, runs: usize) -> Case {
    let me = std::env::current_exe().expect("this benchmark");
    let mut case = Case {
        cpu: Vec::new(),
        peak: Vec::new(),
        out: String::new(),
    };
    for _ in 0..runs {
        let o = Command::new(&me)
            .args(["--child", path])
            .output()
            .expect("run a case");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let line = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        let f: Vec<&str> = line.split_whitespace().collect();
        case.cpu.push(f[0].parse().expect("cpu"));
        case.peak.push(f[1].parse().expect("peak"));
        case.out = format!(
            "{} bytes, {}×{}, {}",
            f[2],
            f[3],
            f[4],
            if f[5] == "true" {
                "a rendition"
            } else {
                "the original"
            }
        );
    }
    case
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1]);
        return;
    }
    let runs: usize = args
        .iter()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(7);
    let dir = std::env::temp_dir().join(format!("postonce-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let big = dir.join("cover-4000x3000.png");
    let png = cover_png(4000, 3000);
    std::fs::write(&big, &png).expect("write the cover");
    let small = dir.join("cover-1200x630.png");
    std::fs::write(&small, cover_png(1200, 630)).expect("write the cover");
    println!(
        "a 4000×3000 PNG of {} bytes (the download cap is 8,388,608), {runs} runs per case, each in its own process\n",
        png.len()
    );
    println!(
        "{:<46} {:>9} {:>11} {:>13} {:>11}",
        "case", "CPU ms", "÷ 300 ms", "peak +MB", "÷ 64 MB"
    );
    for (name, path) in [
        ("4000×3000 PNG → Bluesky (≤ 1,000,000 B)", &big),
        ("1200×630 PNG → Bluesky (fits: checked, as is)", &small),
    ] {
        let c = run(path.to_str().expect("a UTF-8 path"), runs);
        let (cpu, peak) = (median(&c.cpu), median(&c.peak));
        println!(
            "{name:<46} {cpu:>9.1} {:>11.2} {peak:>13.1} {:>11.2}",
            cpu / CPU_BUDGET_MS,
            peak / MEMORY_BUDGET_MB
        );
        println!("{:<46} gave {}", "", c.out);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
