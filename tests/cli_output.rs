//! What a new user sees in a terminal, from the real `postonce` binary in local mode with no
//! credentials (the README's first command): the answer is not buried in the log, the dry
//! run's requests are readable blocks, times are RFC 3339, and the help and doctor name what
//! exists (issue 20, findings 11 and 12).

use std::path::Path;
use std::process::{Command, Output};

/// Runs `postonce` with only `vars` set (no `RUST_LOG` unless given), in a fresh data folder.
fn postonce(dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_postonce"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("POSTONCE_DATA_DIR", dir)
        .envs(vars.iter().copied())
        .output()
        .expect("run postonce")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn cover() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cover.png").to_owned()
}

fn post_args<'a>(slug: &'a str, image: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "post",
        "--kind",
        "blog",
        "--slug",
        slug,
        "--caption",
        "Hello, #rust world (first post)",
        "--image",
        image,
    ];
    args.extend_from_slice(extra);
    args
}

/// Lines that look like log lines at a level (the fmt layout: `<time>  INFO …`).
fn log_lines<'a>(stderr: &'a str, level: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| l.contains(&format!(" {level} ")))
        .collect()
}

#[test]
fn post_in_a_terminal_shows_the_answer_and_the_requests_as_blocks_not_info_lines() {
    let dir = tempfile::tempdir().expect("dir");
    let image = cover();
    let out = postonce(dir.path(), &post_args("hello-world", &image, &[]), &[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("posted: blog-hello-world (dry run"),
        "{stdout}"
    );
    // No INFO log lines by default: the log says only what went wrong.
    assert!(log_lines(&stderr, "INFO").is_empty(), "{stderr}");
    // The requests, one block each: method and URL, a header a line (secrets as
    // placeholders), the JSON body pretty-printed (one field a line).
    assert!(
        stderr.contains("POST https://api.linkedin.com/rest/posts\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("\n  Authorization: Bearer <LINKEDIN_ACCESS_TOKEN>\n"),
        "{stderr}"
    );
    assert!(stderr.contains("\n  LinkedIn-Version: "), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.trim_start().starts_with("\"commentary\": ")),
        "the body is pretty-printed: {stderr}"
    );
    assert!(
        stderr.contains("PUT https://api.linkedin.com/dry-run-upload/"),
        "{stderr}"
    );
    assert!(
        stderr.lines().all(|l| l.chars().count() <= 200),
        "no long lines: {stderr}"
    );

    // -v brings the INFO lines back (and RUST_LOG decides when set).
    let out = postonce(
        dir.path(),
        &post_args("hello-verbose", &image, &["-v"]),
        &[],
    );
    assert!(
        !log_lines(&text(&out.stderr), "INFO").is_empty(),
        "{}",
        text(&out.stderr)
    );
    let out = postonce(
        dir.path(),
        &post_args("hello-rust-log", &image, &[]),
        &[("RUST_LOG", "postonce=info")],
    );
    assert!(!log_lines(&text(&out.stderr), "INFO").is_empty());

    // Sent again: the answer's time is RFC 3339 (UTC), never a raw Unix time.
    let out = postonce(dir.path(), &post_args("hello-world", &image, &[]), &[]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("already_posted: blog-hello-world"),
        "{stdout}"
    );
    let recorded = stdout
        .lines()
        .find(|l| l.contains("recorded at "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let when = recorded
        .split("recorded at ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_default();
    assert!(
        time::OffsetDateTime::parse(when, &time::format_description::well_known::Rfc3339).is_ok()
            && when.ends_with('Z'),
        "not RFC 3339 UTC: {recorded}"
    );
    // The same in the JSON detail, and in `status`.
    let out = postonce(
        dir.path(),
        &post_args("hello-world", &image, &["--json"]),
        &[],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        v["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("recorded at {when} by cli"))),
        "{v}"
    );
    let out = postonce(
        dir.path(),
        &["status", "--kind", "blog", "--slug", "hello-world"],
        &[],
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains(&format!(" at {when} by cli")), "{stdout}");
}

/// The Lambda function's text log (CloudWatch shows what it is given): a start that fails on
/// its configuration says so on stdout in plain text, with no ANSI colour escapes.
#[test]
fn the_lambda_functions_text_log_carries_no_colour_escapes() {
    let dir = tempfile::tempdir().expect("dir");
    // Nothing answers there; the start fails on its configuration before it would ask.
    let out = postonce(
        dir.path(),
        &[],
        &[("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("ERROR ") && l.contains("configuration")),
        "the refusal is a plain ERROR line on stdout: {stdout:?}"
    );
    assert!(!stdout.contains('\u{1b}'), "no colour escapes: {stdout:?}");
}

#[test]
fn help_and_doctor_name_what_exists() {
    let dir = tempfile::tempdir().expect("dir");
    let out = postonce(dir.path(), &["--help"], &[]);
    let help = text(&out.stdout);
    assert!(
        !help.contains("Publish a draft to LinkedIn exactly once"),
        "{help}"
    );
    for network in [
        "LinkedIn", "X", "Telegram", "Mastodon", "Bluesky", "Threads", "Discord",
    ] {
        assert!(help.contains(network), "{network} missing from: {help}");
    }
    assert!(help.contains("-v, --verbose"), "{help}");
    assert!(
        !env!("CARGO_PKG_DESCRIPTION").contains("to LinkedIn exactly once"),
        "Cargo.toml's description"
    );

    // Local mode: claims are files, and doctor says so instead of "Redis".
    let out = postonce(dir.path(), &["doctor"], &[]);
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("Redis"), "{stdout}");
    assert!(stdout.contains("claims (files)"), "{stdout}");
}

/// A run's end is logged once per target only when the draft has more than one: with one, the
/// run's `run ended` line says the outcome and the post's id, and no `target ended` line
/// repeats it.
#[test]
fn a_runs_end_is_one_line_per_target_only_when_there_are_several() {
    let dir = tempfile::tempdir().unwrap();
    let image = cover();
    let ended = |stderr: &str, what: &str| -> Vec<String> {
        log_lines(stderr, "INFO")
            .into_iter()
            .filter(|l| l.contains(&format!(": {what} ")))
            .map(str::to_owned)
            .collect()
    };
    let out = postonce(dir.path(), &post_args("one-target", &image, &["-v"]), &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(ended(&stderr, "target ended").is_empty(), "{stderr}");
    let run = ended(&stderr, "run ended");
    assert_eq!(run.len(), 1, "{stderr}");
    assert!(
        run[0].contains(" outcome=\"posted\" id=\"urn:li:share:"),
        "{}",
        run[0]
    );

    // A data folder of its own: the same caption in the first folder is held by the first draft.
    let other = tempfile::tempdir().unwrap();
    let out = postonce(
        other.path(),
        &post_args("two-targets", &image, &["-v", "--targets", "linkedin,x"]),
        &[],
    );
    let stderr = text(&out.stderr);
    let targets = ended(&stderr, "target ended");
    assert_eq!(targets.len(), 2, "{stderr}");
    assert!(
        targets.iter().any(|l| l.contains("id=\"urn:li:share:")),
        "{stderr}"
    );
    let run = ended(&stderr, "run ended");
    assert_eq!(run.len(), 1, "{stderr}");
    assert!(
        !run[0].contains(" id="),
        "several targets, no one id: {}",
        run[0]
    );
}
