//! The log of a command line run: `serve`'s lines, or a person's warnings and the dry run's
//! requests as readable blocks.

/// The log of a command. `serve` logs as it always has (info, every line). The other commands
/// answer a person: warnings and errors only, unless `-v` (info) / `-vv` (debug) or `RUST_LOG`
/// says otherwise; and the requests a dry run would send are printed as readable blocks
/// ([`DryRunBlocks`]), not as log lines.
pub(super) fn init_logging(verbose: u8, serving: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};

    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let default = match (serving, verbose) {
        (true, _) | (false, 1) => "postonce=info,warn",
        (false, 0) => "warn",
        (false, _) => "postonce=debug,info",
    };
    let directives = from_env.as_deref().unwrap_or(default);
    let filter = if serving {
        EnvFilter::new(directives)
    } else {
        // The dry run's requests are shown by their own layer below.
        EnvFilter::new(format!("{directives},{}=off", crate::networks::show::SHOWN))
    };
    let registry = tracing_subscriber::registry();
    let _ = if serving {
        // One layer, so its filter is the subscriber's: a per-layer filter looks the span up in
        // the registry again at every enter and exit, and a run's spans are entered at each of
        // its polls (issue 34).
        registry.with(filter).with(lines()).try_init()
    } else {
        crate::networks::show::show_as_blocks();
        let blocks = DryRunBlocks.with_filter(tracing_subscriber::filter::filter_fn(|m| {
            m.target() == crate::networks::show::SHOWN
        }));
        registry
            .with(lines().with_filter(filter))
            .with(blocks)
            .try_init()
    };
}

/// The log's lines on stderr ([`crate::log_line::LineEvents`]), coloured on a terminal.
fn lines<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .fmt_fields(crate::log_line::LineFields)
        .event_format(crate::log_line::LineEvents { time: true })
}

/// Prints each request a dry run shows as a block on stderr: the method and URL, a header a
/// line, the body pretty-printed, a blank line after it.
struct DryRunBlocks;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for DryRunBlocks {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "message" {
                    value.clone_into(&mut self.0);
                }
            }
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        let block = m.0.strip_prefix("would send ").unwrap_or(&m.0);
        // One write: `eprintln!` writes each piece to the unbuffered stderr on its own.
        let text = format!("dry run, not sent: {block}\n\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
    }
}
