//! OAuth 1.0a request signing with HMAC-SHA1 (RFC 5849 §3.4), the way X's "OAuth 1.0a user
//! context" takes it.
//!
//! The signature covers the method, the URL without its query, and the sorted, percent-encoded
//! parameters: every `oauth_*` parameter, the query string, and the body's fields **only** when
//! the body is `application/x-www-form-urlencoded`. JSON and multipart bodies are not signed
//! (RFC 5849 §3.4.1.3.1; X's own v2 samples sign only method and URL for them), so callers pass
//! form fields only for form bodies.
//!
//! Nothing here logs, and [`Credentials`]' `Debug` shows no secret.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rand::distr::{Alphanumeric, SampleString};
use sha1::Sha1;

use crate::vars::Secret;

/// Everything but the unreserved characters `A-Z a-z 0-9 - . _ ~` is encoded (RFC 5849 §3.6),
/// with upper-case hex; a space is `%20`, never `+`.
const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// RFC 5849 §3.6 percent-encoding of a UTF-8 string.
pub fn encode(s: &str) -> String {
    utf8_percent_encode(s, RESERVED).to_string()
}

/// The app's keys and the account's access token (X: `X_API_KEY`, `X_API_SECRET`,
/// `X_ACCESS_TOKEN`, `X_ACCESS_TOKEN_SECRET`). All four are kept as [`Secret`]s.
#[derive(Clone)]
pub struct Credentials {
    pub consumer_key: Secret,
    pub consumer_secret: Secret,
    pub token: Secret,
    pub token_secret: Secret,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials(***)")
    }
}

/// The signature base string (RFC 5849 §3.4.1): `METHOD&pct(base URL)&pct(normalized params)`.
/// `url` may carry a query; its pairs are decoded and signed, and it is dropped from the base
/// URL. `params` are the other signed pairs (the `oauth_*` ones and, for form bodies only, the
/// form fields), not encoded yet.
///
/// # Errors
/// `url` is not an absolute URL.
pub fn base_string(
    method: &str,
    url: &str,
    params: &[(String, String)],
) -> Result<String, url::ParseError> {
    let parsed = url::Url::parse(url)?;
    let mut pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(k, v)| (encode(&k), encode(&v)))
        .chain(params.iter().map(|(k, v)| (encode(k), encode(v))))
        .collect();
    // Sorted by encoded name, then encoded value (§3.4.1.3.2).
    pairs.sort();
    let normalized = pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    // §3.4.1.2: scheme and host lower case, default port left out, no query or fragment; the
    // `url` crate's serialization does the first two.
    let mut base = parsed;
    base.set_query(None);
    base.set_fragment(None);
    Ok(format!(
        "{}&{}&{}",
        method.to_ascii_uppercase(),
        encode(base.as_str()),
        encode(&normalized)
    ))
}

/// `base64(HMAC-SHA1(pct(consumer_secret)&pct(token_secret), base))` (§3.4.2).
pub fn sign(base: &str, consumer_secret: &str, token_secret: &str) -> String {
    let key = format!("{}&{}", encode(consumer_secret), encode(token_secret));
    // HMAC takes a key of any length, so the error branch is never taken.
    Hmac::<Sha1>::new_from_slice(key.as_bytes())
        .map(|mut mac| {
            mac.update(base.as_bytes());
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
        })
        .unwrap_or_default()
}

/// A fresh nonce: 32 random alphanumeric characters.
pub fn nonce() -> String {
    Alphanumeric.sample_string(&mut rand::rng(), 32)
}

/// Seconds since the Unix epoch, as OAuth wants them.
pub fn timestamp() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Credentials {
    /// The `Authorization` header value for a request, with a fresh nonce and timestamp.
    /// `form` are the body's fields when (and only when) the body is
    /// `application/x-www-form-urlencoded`; pass `&[]` for JSON and multipart bodies.
    ///
    /// # Errors
    /// `url` is not an absolute URL.
    pub fn authorization(
        &self,
        method: &str,
        url: &str,
        form: &[(String, String)],
    ) -> Result<String, url::ParseError> {
        self.authorization_with(method, url, form, &nonce(), timestamp())
    }

    /// [`Self::authorization`] with a given nonce and timestamp (tests, test vectors).
    ///
    /// # Errors
    /// `url` is not an absolute URL.
    pub fn authorization_with(
        &self,
        method: &str,
        url: &str,
        form: &[(String, String)],
        nonce: &str,
        timestamp: u64,
    ) -> Result<String, url::ParseError> {
        let mut oauth: Vec<(String, String)> = vec![
            (
                "oauth_consumer_key".into(),
                self.consumer_key.expose().into(),
            ),
            ("oauth_nonce".into(), nonce.into()),
            ("oauth_signature_method".into(), "HMAC-SHA1".into()),
            ("oauth_timestamp".into(), timestamp.to_string()),
            ("oauth_token".into(), self.token.expose().into()),
            ("oauth_version".into(), "1.0".into()),
        ];
        let mut signed = oauth.clone();
        signed.extend_from_slice(form);
        let base = base_string(method, url, &signed)?;
        let signature = sign(
            &base,
            self.consumer_secret.expose(),
            self.token_secret.expose(),
        );
        oauth.push(("oauth_signature".into(), signature));
        oauth.sort();
        let fields = oauth
            .iter()
            .map(|(k, v)| format!("{}=\"{}\"", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join(", ");
        Ok(format!("OAuth {fields}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    // The worked example of X's (then Twitter's) developer documentation, "Creating a
    // signature" and "Authorizing a request" (developer.twitter.com docs/auth/oauth/
    // creating-signature, same values on docs.x.com/fundamentals/authentication/oauth-1-0a/
    // authorizing-a-request): a form-encoded POST of `status` to
    // https://api.twitter.com/1/statuses/update.json?include_entities=true, whose documented
    // signature base string and signature (tnnArxj06cWHq44gCs1OSKk/jLY=) are below.
    const CONSUMER_KEY: &str = "xvz1evFS4wEEPTGEFPHBog";
    const CONSUMER_SECRET: &str = "kAcSOqF21Fu85e7zjz7ZN2U4ZRhfV3WpwPAoE3Z7kBw";
    const TOKEN: &str = "370773112-GmHxMAgYyLbNEtIKZeRNFsMKPR9EyMZeS9weJAEb";
    const TOKEN_SECRET: &str = "LswwdoUaIvS8ltyTt5jkRh4J50vUPVVHtR2YPi5kE";
    const NONCE: &str = "kYjzVBB8Y0ZFabxSWbWovY3uYSQ2pTgmZeNu2VS4cg";
    const TIMESTAMP: u64 = 1_318_622_958;
    const URL: &str = "https://api.twitter.com/1/statuses/update.json?include_entities=true";
    const STATUS: &str = "Hello Ladies + Gentlemen, a signed OAuth request!";
    const BASE: &str = "POST&https%3A%2F%2Fapi.twitter.com%2F1%2Fstatuses%2Fupdate.json&include_entities%3Dtrue%26oauth_consumer_key%3Dxvz1evFS4wEEPTGEFPHBog%26oauth_nonce%3DkYjzVBB8Y0ZFabxSWbWovY3uYSQ2pTgmZeNu2VS4cg%26oauth_signature_method%3DHMAC-SHA1%26oauth_timestamp%3D1318622958%26oauth_token%3D370773112-GmHxMAgYyLbNEtIKZeRNFsMKPR9EyMZeS9weJAEb%26oauth_version%3D1.0%26status%3DHello%2520Ladies%2520%252B%2520Gentlemen%252C%2520a%2520signed%2520OAuth%2520request%2521";
    const SIGNATURE: &str = "tnnArxj06cWHq44gCs1OSKk/jLY=";

    fn creds() -> Credentials {
        Credentials {
            consumer_key: Secret::new(CONSUMER_KEY),
            consumer_secret: Secret::new(CONSUMER_SECRET),
            token: Secret::new(TOKEN),
            token_secret: Secret::new(TOKEN_SECRET),
        }
    }

    #[test]
    fn documented_base_string_and_signature() {
        let params = pairs(&[
            ("status", STATUS),
            ("oauth_consumer_key", CONSUMER_KEY),
            ("oauth_nonce", NONCE),
            ("oauth_signature_method", "HMAC-SHA1"),
            ("oauth_timestamp", "1318622958"),
            ("oauth_token", TOKEN),
            ("oauth_version", "1.0"),
        ]);
        let base = base_string("POST", URL, &params).unwrap();
        assert_eq!(base, BASE);
        assert_eq!(sign(&base, CONSUMER_SECRET, TOKEN_SECRET), SIGNATURE);
    }

    #[test]
    fn documented_header_with_fixed_nonce_and_timestamp() {
        let header = creds()
            .authorization_with("POST", URL, &pairs(&[("status", STATUS)]), NONCE, TIMESTAMP)
            .unwrap();
        assert_eq!(
            header,
            format!(
                "OAuth oauth_consumer_key=\"{CONSUMER_KEY}\", oauth_nonce=\"{NONCE}\", oauth_signature=\"{}\", oauth_signature_method=\"HMAC-SHA1\", oauth_timestamp=\"1318622958\", oauth_token=\"{TOKEN}\", oauth_version=\"1.0\"",
                encode(SIGNATURE)
            )
        );
        assert!(header.contains("oauth_signature=\"tnnArxj06cWHq44gCs1OSKk%2FjLY%3D\""));
    }

    #[test]
    fn json_and_multipart_bodies_sign_only_method_url_and_query() {
        // The same request without the form field is a different signature: the body's
        // fields are in the base string only when the caller passes them (form bodies).
        let c = creds();
        let with_form = c
            .authorization_with("POST", URL, &pairs(&[("status", STATUS)]), NONCE, TIMESTAMP)
            .unwrap();
        let without = c
            .authorization_with("POST", URL, &[], NONCE, TIMESTAMP)
            .unwrap();
        assert_ne!(with_form, without);
        let base = base_string(
            "post",
            "https://API.X.com:443/2/tweets",
            &pairs(&[("oauth_nonce", "n")]),
        )
        .unwrap();
        assert_eq!(
            base,
            "POST&https%3A%2F%2Fapi.x.com%2F2%2Ftweets&oauth_nonce%3Dn"
        );
    }

    #[test]
    fn percent_encoding_is_rfc5849_not_form_encoding() {
        assert_eq!(encode("a b+c"), "a%20b%2Bc");
        assert_eq!(encode("-._~AZaz09"), "-._~AZaz09");
        assert_eq!(encode("*!'()"), "%2A%21%27%28%29");
        assert_eq!(encode("é☃"), "%C3%A9%E2%98%83");
        assert_eq!(encode("="), "%3D");
    }

    #[test]
    fn query_pairs_are_decoded_sorted_and_signed() {
        // Same name sorted by value; a `+` in a query means a space (form decoding).
        let base = base_string(
            "GET",
            "https://api.x.com/2/users/1/tweets?b=2&a=z&a=y&q=a+b",
            &[],
        )
        .unwrap();
        assert_eq!(
            base,
            "GET&https%3A%2F%2Fapi.x.com%2F2%2Fusers%2F1%2Ftweets&a%3Dy%26a%3Dz%26b%3D2%26q%3Da%2520b"
        );
    }

    #[test]
    fn nonces_differ_and_secrets_stay_out_of_debug() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), 32);
        let shown = format!("{:?}", creds());
        assert!(!shown.contains(CONSUMER_SECRET) && !shown.contains(TOKEN_SECRET));
        assert!(!shown.contains(TOKEN) && !shown.contains(CONSUMER_KEY));
    }
}
