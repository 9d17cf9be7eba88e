//! The fields of a log line (`serve`'s, the CLI's and Lambda's text log): what
//! `tracing-subscriber`'s default fields write (`message` as is, then `name=value`, an error's
//! causes as `name.sources=[…]`, a `log` record's `log.*` fields left out; only the italic field
//! names on a terminal are gone), with every control character escaped, and written a run at a
//! time.
//!
//! `tracing-subscriber` escapes a message's terminal control characters one character at a
//! time, which was most of what a dry run's shown requests cost a run (issue 34). Here a value is
//! scanned for the bytes that need escaping and the runs between them are written whole. The
//! escaping covers more, not less: every C0 control character but the tab (a newline or a
//! carriage return too, so that a value can never break an event's one line), DEL, and the C1
//! controls (U+0080–U+009F), in every field, not only the message.
//!
//! [`LineTime`] writes the line's timestamp as `tracing-subscriber`'s `SystemTime` does
//! (`2026-12-06T21:58:09.123456Z`, UTC, microseconds), from digits on the stack rather than
//! through `format!`'s padding, which cost a run more than the rest of a line's set-up;
//! [`LineEvents`] writes the rest of the line around the fields as `tracing-subscriber`'s
//! default format does, without its `write!` calls.

use std::fmt::{self, Write};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The line's timestamp: `.with_timer(LineTime)` on a `fmt` layer.
pub struct LineTime;

impl FormatTime for LineTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        w.write_str(timestamp(since.as_secs(), since.subsec_micros()).as_str())
    }
}

/// A timestamp's text, on the stack.
struct Stamp([u8; 27]);

impl Stamp {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

/// `secs` after the epoch (UTC) and `micros` as `YYYY-MM-DDTHH:MM:SS.ffffffZ`: the civil date
/// from the day count (Howard Hinnant's `civil_from_days`), the digits written from the right
/// (divisions by ten, which the compiler makes multiplications), without an allocation.
fn timestamp(secs: u64, micros: u32) -> Stamp {
    let days = i64::try_from(secs / 86_400).unwrap_or(0) + 719_468;
    let rem = secs % 86_400;
    let (era, doe) = (days.div_euclid(146_097), days.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let unsigned = |n: i64| u64::try_from(n).unwrap_or(0);
    let mut out = *b"0000-00-00T00:00:00.000000Z";
    for (at, n, width) in [
        (0, unsigned(year), 4),
        (5, unsigned(month), 2),
        (8, unsigned(day), 2),
        (11, rem / 3600, 2),
        (14, rem / 60 % 60, 2),
        (17, rem % 60, 2),
        (20, u64::from(micros), 6),
    ] {
        put_digits(&mut out[at..at + width], n);
    }
    Stamp(out)
}

/// `n`'s last `to.len()` decimal digits into `to`, zero-padded.
fn put_digits(to: &mut [u8], mut n: u64) {
    for d in to.iter_mut().rev() {
        *d = b'0' + u8::try_from(n % 10).unwrap_or(0);
        n /= 10;
    }
}

/// A text line as `tracing-subscriber`'s default (`Full`) format writes it without the target
/// (`.with_target(false)`): the time when `time` ([`LineTime`]), the level padded to five, each
/// span from the root as `name{fields}:`, then the event's fields ([`LineFields`]). Written
/// piece by piece rather than through `write!` and the painted strings of the default, which
/// cost a line some 3,000 instructions even with no colours (issue 34). On a terminal that
/// takes colours it hands the line to the default format, which paints it.
/// `.event_format(LineEvents { time })` on a text `fmt` layer.
pub struct LineEvents {
    pub time: bool,
}

impl<S, N> FormatEvent<S, N> for LineEvents
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if w.has_ansi_escapes() {
            let full = tracing_subscriber::fmt::format().with_target(false);
            return if self.time {
                full.with_timer(LineTime).format_event(ctx, w, event)
            } else {
                full.without_time().format_event(ctx, w, event)
            };
        }
        if self.time {
            if LineTime.format_time(&mut w).is_err() {
                w.write_str("<unknown time>")?;
            }
            w.write_char(' ')?;
        }
        w.write_str(match *event.metadata().level() {
            Level::TRACE => "TRACE ",
            Level::DEBUG => "DEBUG ",
            Level::INFO => " INFO ",
            Level::WARN => " WARN ",
            Level::ERROR => "ERROR ",
        })?;
        if let Some(scope) = ctx.event_scope() {
            let mut seen = false;
            for span in scope.from_root() {
                w.write_str(span.metadata().name())?;
                seen = true;
                if let Some(fields) = span.extensions().get::<FormattedFields<N>>() {
                    if !fields.is_empty() {
                        w.write_char('{')?;
                        w.write_str(fields)?;
                        w.write_char('}')?;
                    }
                }
                w.write_char(':')?;
            }
            if seen {
                w.write_char(' ')?;
            }
        }
        ctx.format_fields(w.by_ref(), event)?;
        w.write_char('\n')
    }
}

/// The fields' formatter: `.fmt_fields(LineFields)` on a text `fmt` layer.
pub struct LineFields;

impl<'w> FormatFields<'w> for LineFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = Fields {
            out: writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct Fields<'w> {
    out: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl Fields<'_> {
    /// Writes ` name=` (no name for the message, no space before the first field), then the
    /// value that `write` writes, escaped.
    fn field(&mut self, field: &Field, write: impl FnOnce(&mut Escaped<'_, '_>) -> fmt::Result) {
        let name = field.name();
        // A `log` record's origin (`log.target`, `log.file`, …): the line's own target and
        // place say it, and tracing-subscriber leaves these out too.
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        self.result = (|| {
            if !std::mem::take(&mut self.first) {
                self.out.write_char(' ')?;
            }
            if name != "message" {
                self.out
                    .write_str(name.strip_prefix("r#").unwrap_or(name))?;
                self.out.write_char('=')?;
            }
            write(&mut Escaped(&mut self.out))
        })();
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.field(field, |out| out.write_str(value));
        } else if plain(value) {
            // What `{value:?}` writes, without its character-by-character escape walk.
            self.field(field, |out| {
                out.0.write_char('"')?;
                out.0.write_str(value)?;
                out.0.write_char('"')
            });
        } else {
            self.field(field, |out| write!(out, "{value:?}"));
        }
    }

    /// `name=error name.sources=[cause, its cause]`, as tracing-subscriber writes an error.
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let name = field.name();
        self.field(field, |out| {
            write!(out, "{value}")?;
            let mut source = value.source();
            if source.is_none() {
                return Ok(());
            }
            write!(out, " {name}.sources=[")?;
            while let Some(cause) = source {
                write!(out, "{cause}")?;
                source = cause.source();
                out.write_str(if source.is_some() { ", " } else { "]" })?;
            }
            Ok(())
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field, |out| write!(out, "{value:?}"));
    }
}

/// Whether `{s:?}` is `s` in double quotes: printable ASCII without a quote or a backslash, the
/// only characters `str`'s `Debug` writes as they are (a key, an outcome, a URN).
fn plain(s: &str) -> bool {
    s.bytes()
        .all(|b| matches!(b, b' '..=b'~') && b != b'"' && b != b'\\')
}

/// A writer that escapes control characters on their way to the log, writing the runs between
/// them whole.
struct Escaped<'a, 'w>(&'a mut Writer<'w>);

/// Whether any of the eight bytes in `w` may need escaping: a byte below 0x20, 0x7F or 0xC2 (a
/// tab counts too; the byte loop passes it). Exact in one direction: no such byte, `false`.
fn may_need_escaping(w: u64) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    (below(w, 0x20) | zero(w ^ (ONES * 0x7f)) | zero(w ^ (ONES * 0xc2))) != 0
}

impl Write for Escaped<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let bytes = s.as_bytes();
        // Eight bytes at a time while none of them may need escaping (most of a log line).
        let mut clean = 0;
        for chunk in bytes.chunks_exact(8) {
            let word = u64::from_ne_bytes(chunk.try_into().unwrap_or([0; 8]));
            if may_need_escaping(word) {
                break;
            }
            clean += 8;
        }
        if clean == bytes.len() {
            return self.0.write_str(s);
        }
        let mut run = 0;
        let mut i = clean;
        while i < bytes.len() {
            let b = bytes[i];
            // A C1 control is U+0080–U+009F: 0xC2 then 0x80–0x9F in UTF-8. Both ends of every
            // escaped stretch are character boundaries (ASCII, or a lead byte and its one
            // continuation byte).
            let width = match b {
                b'\t' => 0,
                0..=0x1f | 0x7f => 1,
                0xc2 if matches!(bytes.get(i + 1), Some(0x80..=0x9f)) => 2,
                _ => 0,
            };
            if width == 0 {
                i += 1;
                continue;
            }
            self.0.write_str(&s[run..i])?;
            match b {
                b'\n' => self.0.write_str("\\n")?,
                b'\r' => self.0.write_str("\\r")?,
                0xc2 => write!(self.0, "\\u{{{:x}}}", u32::from(bytes[i + 1]))?,
                _ => write!(self.0, "\\x{b:02x}")?,
            }
            i += width;
            run = i;
        }
        self.0.write_str(&s[run..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        Escaped(&mut Writer::new(&mut out)).write_str(s).unwrap();
        out
    }

    /// The same text as `tracing-subscriber`'s `SystemTime` (dates checked with Python's
    /// `datetime.fromtimestamp(secs, timezone.utc)`).
    #[test]
    fn timestamps_are_rfc_3339_in_utc_to_the_microsecond() {
        for (secs, micros, text) in [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, 7, "2000-02-29T00:00:00.000007Z"),
            (1_796_601_489, 123_456, "2026-12-06T23:58:09.123456Z"),
            (4_107_542_399, 999_999, "2100-02-28T23:59:59.999999Z"),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000000Z"),
            (253_402_300_799, 0, "9999-12-31T23:59:59.000000Z"),
        ] {
            assert_eq!(timestamp(secs, micros).as_str(), text);
        }
    }

    #[test]
    fn control_characters_are_escaped_and_the_rest_written_as_is() {
        assert_eq!(escaped("plain text, é ü 日本"), "plain text, é ü 日本");
        assert_eq!(escaped("a\x1b[31mred"), "a\\x1b[31mred");
        assert_eq!(escaped("one\ntwo\r\n"), "one\\ntwo\\r\\n");
        assert_eq!(
            escaped("bell\x07 bs\x08 ff\x0c del\x7f nul\0"),
            "bell\\x07 bs\\x08 ff\\x0c del\\x7f nul\\x00"
        );
        assert_eq!(escaped("tab\tstays"), "tab\tstays");
        assert_eq!(
            escaped("c1 \u{9b}31m \u{85} but not \u{a0}"),
            "c1 \\u{9b}31m \\u{85} but not \u{a0}"
        );
        assert_eq!(escaped("\n"), "\\n");
        assert_eq!(escaped(""), "");
    }

    /// The word-at-a-time scan finds every control character wherever it sits in a long value.
    #[test]
    fn a_control_character_anywhere_in_a_long_value_is_escaped() {
        let naive = |s: &str| -> String {
            s.chars()
                .map(|c| match c {
                    '\t' => "\t".to_owned(),
                    '\n' => "\\n".to_owned(),
                    '\r' => "\\r".to_owned(),
                    c if (c as u32) < 0x20 || c == '\x7f' => format!("\\x{:02x}", c as u32),
                    c if (0x80..=0x9f).contains(&(c as u32)) => format!("\\u{{{:x}}}", c as u32),
                    c => c.to_string(),
                })
                .collect()
        };
        for special in [
            '\x1b', '\n', '\0', '\x1f', '\x7f', '\u{80}', '\u{9f}', '\t', '\u{a0}', 'é', ' ',
        ] {
            for at in 0..40 {
                let mut s: String = "abcdefghijklmnopqrstuvwxyz0123456789ABCD".into();
                s.insert(at, special);
                assert_eq!(escaped(&s), naive(&s), "{special:?} at {at}");
            }
        }
    }

    /// A text field is written as `{value:?}` writes it, whether it takes the quick path
    /// (quoted as it is) or not.
    #[test]
    fn a_text_field_is_written_as_its_debug_form() {
        let values = [
            "already_posted",
            "urn:li:share:7000 x",
            "",
            "say \"hi\"",
            "back\\slash",
            "it's",
            "tab\there",
            "é ü 日本",
            "\u{7f}",
            "~ and !",
        ];
        for value in values {
            let text = lines_of(|| tracing::info!(v = value));
            assert_eq!(
                text,
                format!(" INFO v={}\n", escaped(&format!("{value:?}")))
            );
            if plain(value) {
                assert_eq!(format!("{value:?}"), format!("\"{value}\""));
            }
        }
        assert!(plain("already_posted") && plain("urn:li:share:7000 x") && plain("it's"));
        assert!(!plain("say \"hi\"") && !plain("back\\slash") && !plain("tab\there"));
    }

    /// The lines that `events` logs through a text layer with [`LineFields`] (no time, no
    /// target, no colours).
    fn lines_of(events: impl FnOnce()) -> String {
        use tracing_subscriber::layer::SubscriberExt;
        let sink = Sink::default();
        let out = sink.clone();
        let layer = tracing_subscriber::fmt::layer()
            .without_time()
            .with_target(false)
            .with_ansi(false)
            .fmt_fields(LineFields)
            .with_writer(move || sink.clone());
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), events);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text
    }

    #[test]
    fn a_line_holds_the_message_then_its_fields_escaped() {
        let text = lines_of(|| {
            let span = tracing::info_span!("run", key = "blog-a\nb");
            let _in = span.enter();
            let err = std::io::Error::other("disk\x1b full");
            tracing::info!(
                n = 3,
                text = "x\ny",
                error = &err as &dyn std::error::Error,
                log.target = "hidden",
                "caption \"a\nb\" \u{9b}"
            );
            let inner = std::io::Error::other("no space");
            let wrapped = std::io::Error::new(inner.kind(), Wrapped(inner));
            tracing::info!(error = &wrapped as &dyn std::error::Error, "wrapped");
        });
        assert_eq!(
            text,
            " INFO run{key=\"blog-a\\nb\"}: caption \"a\\nb\" \\u{9b} n=3 text=\"x\\ny\" error=disk\\x1b full\n \
             INFO run{key=\"blog-a\\nb\"}: wrapped error=could not write error.sources=[no space]\n"
        );
        assert_eq!(text.lines().count(), 2);
    }

    /// The same events through `tracing-subscriber`'s default format and through
    /// [`LineEvents`] (both with [`LineFields`], no target, no colours): the same bytes. With
    /// the time, the line is the timestamp, a space, then the same.
    #[test]
    fn line_events_write_what_the_default_format_writes() {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::Layer;
        fn events() {
            tracing::info!("no span");
            let outer = tracing::info_span!("run", key = "blog-a", source = "ci");
            let _o = outer.enter();
            tracing::warn!(n = 3, "in one span");
            let inner = tracing::info_span!("target");
            let _i = inner.enter();
            tracing::error!(target = "x", text = "a\nb", "a span without fields");
            let third = tracing::debug_span!("call", attempt = 2);
            let _t = third.enter();
            tracing::debug!(only = true);
            tracing::trace!("trace");
        }
        let run = |events_format: Option<bool>| {
            let sink = Sink::default();
            let out = sink.clone();
            let layer = tracing_subscriber::fmt::layer()
                .with_target(false)
                .with_ansi(false)
                .fmt_fields(LineFields)
                .with_writer(move || sink.clone());
            let filter = tracing_subscriber::filter::LevelFilter::TRACE;
            match events_format {
                None => tracing::subscriber::with_default(
                    tracing_subscriber::registry().with(layer.without_time().with_filter(filter)),
                    events,
                ),
                Some(time) => tracing::subscriber::with_default(
                    tracing_subscriber::registry()
                        .with(layer.event_format(LineEvents { time }).with_filter(filter)),
                    events,
                ),
            }
            let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
            text
        };
        let default = run(None);
        assert_eq!(default.lines().count(), 5, "{default}");
        assert_eq!(run(Some(false)), default);
        let timed = run(Some(true));
        for (line, plain) in timed.lines().zip(default.lines()) {
            let (time, rest) = line.split_at(27);
            assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{line}");
            assert_eq!(&rest[1..], plain);
        }
    }

    /// A log writer the tests read back.
    #[derive(Clone, Default)]
    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// An error with a cause, as the pipeline's errors are.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("could not write")
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
}
