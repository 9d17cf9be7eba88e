//! Where a cover may come from and how much of it is read.
//!
//! A URL is fetched only from an allowed origin (`POSTONCE_IMAGE_HOSTS`; by default any public
//! https host). Names are resolved through a resolver that drops loopback, private, link-local
//! and other non-public addresses unless the origin was listed explicitly, so neither a hostile
//! URL nor a DNS answer can point the fetch at the metadata service or the VPC. Redirects are
//! followed only within the same origin. No proxy is ever used, whatever `HTTPS_PROXY`,
//! `HTTP_PROXY` or `ALL_PROXY` say: a proxy resolves the name itself, which would bypass that
//! filter (the network calls keep the environment's proxy). The body is streamed and cut at
//! 8 MiB; what it is is judged from its bytes ([`super::vet`]), never from the `Content-Type`.
//! A local file is read under the process's [`LocalCovers`] rule, on a blocking thread.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::BytesMut;

use super::{vet, Image, ImageError, LocalCovers, MAX_IMAGE_BYTES};

/// One allowed origin pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostRule {
    Exact(String),
    /// `*.example.com`: any subdomain (not the apex).
    Suffix(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct OriginRule {
    scheme: String,
    host: HostRule,
    port: Option<u16>,
}

/// Which origins images may be fetched from.
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    /// `None`: any public https host.
    rules: Option<Vec<OriginRule>>,
    /// The last URL [`Self::check`] allowed, as it parsed it, shared by the policy's clones
    /// (the trigger's, the image fetcher's). A run checks its cover's URL three times: when the
    /// trigger reads the draft, before anything is sent, and at the fetch; parsing it was
    /// some 9,000 instructions each time (issue 34). The rules never change, so the same text
    /// always gets the same answer; only an allowed URL is kept.
    last: Arc<Mutex<Option<(String, url::Url)>>>,
}

impl PartialEq for OriginPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.rules == other.rules
    }
}

impl Eq for OriginPolicy {}

impl OriginPolicy {
    pub fn any_public_https() -> Self {
        Self::with_rules(None)
    }

    fn with_rules(rules: Option<Vec<OriginRule>>) -> Self {
        Self {
            rules,
            last: Arc::default(),
        }
    }

    /// Parses `https://cdn.example.com, *.example.com, http://127.0.0.1:8080`.
    ///
    /// # Errors
    /// A message naming the entry that is not an origin.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (scheme, rest) = match entry.split_once("://") {
                Some((s, r)) => (s.to_ascii_lowercase(), r),
                None => ("https".to_owned(), entry),
            };
            if scheme != "https" && scheme != "http" {
                return Err(format!(
                    "{entry:?}: only https:// (or an explicit http:// origin) is allowed"
                ));
            }
            let rest = rest.trim_end_matches('/');
            if rest.contains('/') || rest.contains('@') || rest.is_empty() {
                return Err(format!(
                    "{entry:?} is not an origin (scheme://host[:port], or *.domain)"
                ));
            }
            let (host, port) = match rest.rsplit_once(':') {
                Some((h, p)) if !h.ends_with(']') || rest.starts_with('[') => {
                    match p.parse::<u16>() {
                        Ok(port) => (h.to_owned(), Some(port)),
                        Err(_) => return Err(format!("{entry:?}: {p:?} is not a port")),
                    }
                }
                _ => (rest.to_owned(), None),
            };
            let host = host.to_ascii_lowercase();
            let host = match host.strip_prefix("*.") {
                Some(suffix) if !suffix.is_empty() && !suffix.contains('*') => {
                    HostRule::Suffix(suffix.to_owned())
                }
                _ if host.contains('*') => {
                    return Err(format!("{entry:?}: a wildcard must be a leading *."))
                }
                _ => HostRule::Exact(
                    host.trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_owned(),
                ),
            };
            let loopback = matches!(&host, HostRule::Exact(h) if h == "localhost" || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()));
            if scheme == "http" && !loopback {
                return Err(format!(
                    "{entry:?}: http:// is only allowed for an explicit loopback origin such as http://127.0.0.1:8080 (local use)"
                ));
            }
            rules.push(OriginRule { scheme, host, port });
        }
        if rules.is_empty() {
            return Err("lists no origin".into());
        }
        Ok(Self::with_rules(Some(rules)))
    }

    /// Hosts listed exactly: these may resolve to (or be) non-public addresses.
    fn explicit_hosts(&self) -> HashSet<String> {
        self.rules
            .iter()
            .flatten()
            .filter_map(|r| match &r.host {
                HostRule::Exact(h) => Some(h.clone()),
                HostRule::Suffix(_) => None,
            })
            .collect()
    }

    /// Checks a URL against the policy before anything is sent.
    ///
    /// # Errors
    /// [`ImageError::Refused`] naming why.
    pub fn check(&self, raw: &str) -> Result<url::Url, ImageError> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, url)) = last.as_ref().filter(|(text, _)| text == raw) {
            return Ok(url.clone());
        }
        let url = self.judge(raw)?;
        *last = Some((raw.to_owned(), url.clone()));
        Ok(url)
    }

    /// [`Self::check`]'s verdict, worked out.
    fn judge(&self, raw: &str) -> Result<url::Url, ImageError> {
        let refuse = |why: &str| ImageError::Refused(format!("{}: {why}", shorten(raw)));
        let url = url::Url::parse(raw).map_err(|e| refuse(&format!("not a URL ({e})")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("URLs with credentials are not allowed"));
        }
        let scheme = url.scheme();
        if scheme != "https" && scheme != "http" {
            return Err(refuse("only https URLs are allowed"));
        }
        let host = match url.host() {
            Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err(refuse("no host")),
        };
        let port = url.port_or_known_default();
        let default_port = Some(if scheme == "https" { 443 } else { 80 });
        let explicit = match &self.rules {
            None => {
                if scheme != "https" {
                    return Err(refuse("only https URLs are allowed (list an http origin in POSTONCE_IMAGE_HOSTS to allow it)"));
                }
                false
            }
            Some(rules) => {
                let matched = rules.iter().find(|r| {
                    r.scheme == scheme
                        && r.port.or(default_port) == port
                        && match &r.host {
                            HostRule::Exact(h) => *h == host,
                            HostRule::Suffix(s) => host.ends_with(&format!(".{s}")),
                        }
                });
                match matched {
                    None => return Err(refuse("origin is not in POSTONCE_IMAGE_HOSTS")),
                    Some(r) => matches!(r.host, HostRule::Exact(_)),
                }
            }
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            if !explicit && !is_public(ip) {
                return Err(refuse("address is loopback, private or link-local"));
            }
        } else if (host == "localhost"
            || host.ends_with(".localhost")
            || host.ends_with(".internal"))
            && !explicit
        {
            return Err(refuse("host is local"));
        }
        Ok(url)
    }
}

fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(120).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// Whether an address is on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x64 && s[1] == 0xff9b))
        }
    }
}

/// A DNS resolver that drops non-public addresses for hosts that were not listed explicitly.
struct PublicOnlyResolver {
    explicit: Arc<HashSet<String>>,
}

impl reqwest::dns::Resolve for PublicOnlyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let explicit = self.explicit.clone();
        Box::pin(async move {
            let host = name.as_str().to_ascii_lowercase();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = if explicit.contains(&host) {
                addrs
            } else {
                addrs.into_iter().filter(|a| is_public(a.ip())).collect()
            };
            if allowed.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            let iter: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(iter)
        })
    }
}

/// Fetches cover images under the policy. Built once per process.
pub struct ImageFetcher {
    http: reqwest::Client,
    policy: OriginPolicy,
    local: LocalCovers,
}

impl ImageFetcher {
    /// Local files are read from anywhere ([`LocalCovers::Anywhere`]).
    ///
    /// # Errors
    /// When the HTTP client cannot be built (TLS backend).
    pub fn new(policy: OriginPolicy) -> Result<Self, String> {
        Self::with_local(policy, LocalCovers::Anywhere)
    }

    /// Local files are read only as `local` allows (the MCP server: beneath its folders).
    ///
    /// # Errors
    /// When the HTTP client cannot be built (TLS backend).
    pub fn with_local(policy: OriginPolicy, local: LocalCovers) -> Result<Self, String> {
        let resolver = PublicOnlyResolver {
            explicit: Arc::new(policy.explicit_hosts()),
        };
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let first = attempt.previous().first().map(url::Url::origin);
            if attempt.previous().len() > 3 {
                attempt.error("more than 3 redirects")
            } else if first.as_ref() != Some(&attempt.url().origin()) {
                attempt.error("redirect to another origin refused")
            } else {
                attempt.follow()
            }
        });
        let http = reqwest::Client::builder()
            .dns_resolver(Arc::new(resolver))
            .redirect(redirects)
            // Never through a proxy: it would resolve the name, past the resolver above.
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("postonce/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            http,
            policy,
            local,
        })
    }

    /// Whether `source` may be fetched at all (the origin policy), before anything is sent
    /// anywhere: a refused URL costs no call to any network.
    ///
    /// # Errors
    /// [`ImageError::Refused`] naming why.
    pub fn vet_source(&self, source: &str) -> Result<(), ImageError> {
        if source.starts_with('/') {
            return Ok(());
        }
        self.policy.check(source).map(|_| ())
    }

    /// Fetches an image URL (streamed, capped) or reads a local file (a draft from the CLI or
    /// the MCP server: its image is an absolute path) under the [`LocalCovers`] rule.
    ///
    /// # Errors
    /// [`ImageError`]: refused (permanent) or unavailable (transient).
    pub async fn fetch(&self, source: &str) -> Result<Image, ImageError> {
        if source.starts_with('/') {
            return self.read_file(source).await;
        }
        let url = self.policy.check(source)?;
        let mut resp = self.http.get(url).send().await.map_err(|e| {
            let text = error_chain(&e);
            if text.contains("redirect") || text.contains("no public address") {
                ImageError::Refused(text)
            } else {
                ImageError::Unavailable(text)
            }
        })?;
        let status = resp.status();
        if !status.is_success() {
            let why = format!("the image host answered {status}");
            return Err(
                if status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408 {
                    ImageError::Unavailable(why)
                } else {
                    ImageError::Refused(why)
                },
            );
        }
        if resp
            .content_length()
            .is_some_and(|l| l > MAX_IMAGE_BYTES as u64)
        {
            return Err(too_large());
        }
        // Sized once from the announced length (already checked against the cap), so the
        // body is not copied again at every doubling.
        let mut body = BytesMut::with_capacity(
            resp.content_length()
                .map_or(0, |l| usize::try_from(l).unwrap_or(0)),
        );
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| ImageError::Unavailable(error_chain(&e)))?
        {
            if body.len() + chunk.len() > MAX_IMAGE_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        vet(body.freeze())
    }
}

impl ImageFetcher {
    /// A local file, read on a blocking thread (never on the async threads) and capped.
    async fn read_file(&self, source: &str) -> Result<Image, ImageError> {
        let local = self.local.clone();
        let source = source.to_owned();
        let read = tokio::task::spawn_blocking(move || local.read(&source))
            .await
            .map_err(|e| ImageError::Unavailable(format!("the file could not be read ({e})")))?;
        let (_, bytes) = read.map_err(ImageError::Refused)?;
        vet(bytes)
    }
}

fn too_large() -> ImageError {
    ImageError::Refused(format!(
        "larger than {} MiB",
        MAX_IMAGE_BYTES / (1024 * 1024)
    ))
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        parts.push(s.to_string());
        src = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_allowed_url_is_kept_for_the_same_text_only() {
        let p = OriginPolicy::parse("https://cdn.example.com").unwrap();
        let clone = p.clone();
        let first = p.check("https://cdn.example.com/a.png").unwrap();
        // The clone shares what was kept, and answers the same text with the same URL.
        assert_eq!(clone.check("https://cdn.example.com/a.png").unwrap(), first);
        assert!(clone.last.lock().unwrap().is_some());
        // Any other text is judged afresh: a refusal is never taken from what was kept.
        for bad in [
            "https://cdn.example.com.evil.com/a.png",
            "https://evil.com/a.png",
            "http://cdn.example.com/a.png",
        ] {
            assert!(matches!(p.check(bad), Err(ImageError::Refused(_))), "{bad}");
        }
        assert_eq!(
            p.last
                .lock()
                .unwrap()
                .as_ref()
                .map(|(t, _)| t.clone())
                .as_deref(),
            Some("https://cdn.example.com/a.png"),
            "a refused URL is not kept"
        );
        assert_eq!(p, OriginPolicy::parse("https://cdn.example.com").unwrap());
    }

    #[test]
    fn default_policy_allows_public_https_only() {
        let p = OriginPolicy::any_public_https();
        assert!(p.check("https://cdn.example.com/a.png").is_ok());
        for bad in [
            "http://cdn.example.com/a.png",
            "file:///etc/passwd",
            "https://127.0.0.1/a.png",
            "https://169.254.169.254/latest/meta-data",
            "https://10.0.0.1/a.png",
            "https://192.168.1.1/a.png",
            "https://[::1]/a.png",
            "https://[fd00::1]/a.png",
            "https://[::ffff:127.0.0.1]/a.png",
            "https://localhost/a.png",
            "https://user:pw@cdn.example.com/a.png",
            "gopher://x/",
            "not a url",
        ] {
            assert!(matches!(p.check(bad), Err(ImageError::Refused(_))), "{bad}");
        }
    }

    #[test]
    fn listed_origins_and_wildcards() {
        let p =
            OriginPolicy::parse("https://cdn.example.com, *.example.org, http://127.0.0.1:8080")
                .unwrap();
        assert!(p.check("https://cdn.example.com/a.png").is_ok());
        assert!(p.check("https://img.example.org/a.png").is_ok());
        assert!(p.check("http://127.0.0.1:8080/a.png").is_ok());
        assert!(p.check("https://example.org/a.png").is_err());
        assert!(p.check("http://127.0.0.1:8081/a.png").is_err());
        assert!(p.check("https://cdn.example.com:8443/a.png").is_err());
        assert!(p.check("http://cdn.example.com/a.png").is_err());
        assert!(p.check("https://evil.com/a.png").is_err());
        assert!(OriginPolicy::parse("http://*.example.org").is_err());
        assert!(OriginPolicy::parse("http://cdn.example.org").is_err());
        assert!(OriginPolicy::parse("http://localhost:8080").is_ok());
        assert!(OriginPolicy::parse("ftp://x").is_err());
        assert!(OriginPolicy::parse("https://a/b").is_err());
    }

    #[test]
    fn public_addresses() {
        assert!(is_public("93.184.216.34".parse().unwrap()));
        assert!(is_public("2606:2800:220:1::".parse().unwrap()));
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fc00::1",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
    }
}
