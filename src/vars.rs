//! Reading variables: the [`Secret`] wrapper, the [`ConfigError`] that names the variable, and
//! [`Vars`], the trimmed lookup with the parsers every part of the configuration shares (the
//! core's in [`crate::config`], each network's in its own folder). It imports nothing of the
//! crate, so that the core's configuration and the networks' can both use it without a circle.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A secret value (token, webhook secret, a URL with a password). `Debug` and `Display` print
/// `***`; the value is only reachable through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::from(value.into()))
    }

    /// The raw value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A configuration value that is missing or malformed. The message starts with the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {problem}")]
pub struct ConfigError {
    pub var: &'static str,
    pub problem: String,
}

/// The error for `var`.
pub fn bad(var: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        problem: problem.into(),
    }
}

/// The environment (or a map, in tests) as configuration reads it: values trimmed, an empty
/// value the same as an unset one.
#[derive(Clone, Copy)]
pub struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Vars<'a> {
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self { lookup }
    }

    /// The value of `var`, trimmed; `None` when unset or empty.
    pub fn get(&self, var: &str) -> Option<String> {
        (self.lookup)(var)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// An http(s) base URL without its trailing `/`; `default` when unset.
    ///
    /// # Errors
    /// Not a URL, or not http(s) with a host.
    pub fn base_url(&self, var: &'static str, default: &str) -> Result<String, ConfigError> {
        let value = self.get(var).unwrap_or_else(|| default.to_owned());
        let parsed = url::Url::parse(&value)
            .map_err(|e| bad(var, format!("{value:?} is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(bad(var, format!("{value:?} must be an http(s) URL")));
        }
        Ok(value.trim_end_matches('/').to_owned())
    }

    /// A positive whole number of `unit`s (at most 31 days' worth of milliseconds).
    ///
    /// # Errors
    /// Not a positive whole number.
    pub fn number(&self, var: &'static str, default: u64, unit: &str) -> Result<u64, ConfigError> {
        match self.get(var) {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0 && *n <= 31 * 24 * 3600 * 1000)
                .ok_or_else(|| {
                    bad(
                        var,
                        format!("{v:?} is not a positive whole number of {unit}"),
                    )
                }),
        }
    }

    /// Whole seconds.
    ///
    /// # Errors
    /// As [`Self::number`].
    pub fn seconds(&self, var: &'static str, default: u64) -> Result<Duration, ConfigError> {
        self.number(var, default, "seconds")
            .map(Duration::from_secs)
    }

    /// Whole milliseconds (a per-call budget).
    ///
    /// # Errors
    /// As [`Self::number`].
    pub fn millis(&self, var: &'static str, default: u64) -> Result<Duration, ConfigError> {
        self.number(var, default, "milliseconds")
            .map(Duration::from_millis)
    }

    /// A gap in seconds (decimals allowed, `0.5`), at most a day.
    ///
    /// # Errors
    /// Not a number of seconds in that range.
    pub fn gap(&self, var: &'static str) -> Result<Option<Duration>, ConfigError> {
        let Some(raw) = self.get(var) else {
            return Ok(None);
        };
        let secs: f64 = raw.parse().map_err(|_| {
            bad(
                var,
                format!("{raw:?} is not a number of seconds (e.g. 90 or 0.5)"),
            )
        })?;
        if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
            return Err(bad(
                var,
                format!("{raw:?} must be between 0 and 86400 seconds"),
            ));
        }
        Ok(Some(Duration::from_secs_f64(secs)))
    }
}
