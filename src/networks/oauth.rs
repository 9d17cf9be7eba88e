//! The shared parts of an OAuth 2.0 authorization-code flow (RFC 6749, RFC 8252 for native
//! apps): a random `state`, PKCE (S256), the one-shot listener on 127.0.0.1 that catches the
//! redirect, `--paste` (the redirected address or the bare code read from standard input), and
//! opening a browser only where there is one. The token exchange itself is each network's (their
//! token endpoints differ in method and shape), over the shared HTTP client.

use std::collections::HashMap;
use std::io::BufRead;
use std::time::Duration;

use base64::Engine;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A refusal of `auth`: the message names the cause and the fix; nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(pub String);

impl AuthError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// What the command line asked of a flow.
#[derive(Debug, Clone, Default)]
pub struct AuthOptions {
    /// Read the redirected address (or the bare code) from standard input.
    pub paste: bool,
    /// Never open a browser.
    pub no_browser: bool,
    /// The listener's (and the redirect URI's) fixed port.
    pub port: Option<u16>,
    /// LinkedIn: post as this author (`urn:li:organization:…`) instead of the member.
    pub author: Option<String>,
    /// Mastodon: the instance.
    pub instance: Option<String>,
    /// Nostr: make a new key.
    pub generate: bool,
}

/// How long the listener waits for the browser.
const LISTEN_FOR: Duration = Duration::from_secs(600);

/// The port `--paste` puts in the redirect URI when `--port` does not say.
pub const PASTE_PORT: u16 = 8080;

/// The path of the redirect URI.
pub const CALLBACK_PATH: &str = "/callback";

/// What the authorization gave back.
#[derive(Debug)]
pub struct Granted {
    /// The code (single use, short-lived): exchanged at once.
    pub code: String,
    /// The redirect URI the authorization URL named (the token request repeats it).
    pub redirect_uri: String,
    /// The PKCE verifier whose challenge the URL carried.
    pub verifier: String,
    pub state: String,
}

/// 32 random bytes, base64url without padding (43 characters): a `state` or a PKCE verifier.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The S256 challenge of a PKCE verifier (RFC 7636 §4.2).
pub fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// `k=v&…`, each part percent-encoded as a query.
pub fn query(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// Runs the browser part: builds the URL with `url(redirect_uri, state, S256 challenge)`, catches the redirect
/// (listener, or `--paste`), and checks it: an error answer (refused consent), a `state` that
/// does not match, no code: each a refusal.
///
/// # Errors
/// As above, and a port that is in use.
pub async fn authorize(
    options: &AuthOptions,
    scheme: &str,
    url: impl Fn(&str, &str, &str) -> String,
    input: &mut dyn BufRead,
) -> Result<Granted, AuthError> {
    let state = random_token();
    let verifier = random_token();
    if options.paste {
        let port = options.port.unwrap_or(PASTE_PORT);
        let redirect_uri = format!("{scheme}://127.0.0.1:{port}{CALLBACK_PATH}");
        let address = url(&redirect_uri, &state, &challenge(&verifier));
        eprintln!("Open this address in a browser, sign in and approve:\n\n  {address}\n");
        eprintln!("Then paste here the address the browser was sent to (it starts with {redirect_uri}), or the code it shows:");
        let mut line = String::new();
        let n = input
            .read_line(&mut line)
            .map_err(|e| AuthError::new(format!("cannot read standard input: {e}")))?;
        if n == 0 || line.trim().is_empty() {
            return Err(AuthError::new(
                "nothing was pasted: run it again and paste the address or the code; nothing stored",
            ));
        }
        let code = check_answer(&pasted(line.trim()), &state, true)?;
        return Ok(Granted {
            code,
            redirect_uri,
            verifier,
            state,
        });
    }
    let port = options.port.unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                AuthError::new(format!(
                    "port {port} on 127.0.0.1 is in use: stop what listens there, or choose another --port (and register http://127.0.0.1:<port>{CALLBACK_PATH} with the app); nothing stored"
                ))
            } else {
                AuthError::new(format!("cannot listen on 127.0.0.1:{port}: {e}; nothing stored"))
            }
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| AuthError::new(format!("cannot listen: {e}")))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let address = url(&redirect_uri, &state, &challenge(&verifier));
    eprintln!("Open this address in a browser, sign in and approve (waiting on {redirect_uri}):\n\n  {address}\n");
    if !options.no_browser {
        open_browser(&address);
    }
    let answer = tokio::time::timeout(LISTEN_FOR, catch(&listener))
        .await
        .map_err(|_| {
            AuthError::new(format!(
                "no answer from the browser within {} minutes: run it again (or use --paste); nothing stored",
                LISTEN_FOR.as_secs() / 60
            ))
        })??;
    drop(listener);
    let code = check_answer(&answer, &state, false)?;
    Ok(Granted {
        code,
        redirect_uri,
        verifier,
        state,
    })
}

/// Accepts connections until one asks for the callback path; answers it with a page that says
/// what happened. Other requests (a favicon) get a 404.
async fn catch(listener: &tokio::net::TcpListener) -> Result<HashMap<String, String>, AuthError> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| AuthError::new(format!("the listener failed: {e}")))?;
        let mut buf = vec![0u8; 8192];
        let mut len = 0;
        // Read up to the end of the request line (a browser sends it in one segment).
        while len < buf.len() {
            let n = match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf[len..]))
                .await
            {
                Ok(Ok(n)) => n,
                _ => 0,
            };
            len += n;
            if n == 0 || buf[..len].windows(2).any(|w| w == b"\r\n") {
                break;
            }
        }
        let head = String::from_utf8_lossy(&buf[..len]);
        let target = head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("/");
        let (path, q) = target.split_once('?').unwrap_or((target, ""));
        if path != CALLBACK_PATH {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let params: HashMap<String, String> = url::form_urlencoded::parse(q.as_bytes())
            .into_owned()
            .collect();
        let body = if params.contains_key("code") {
            "postonce received the authorization. You may close this tab and return to the terminal."
        } else {
            "postonce did not receive an authorization. Return to the terminal to see why."
        };
        let page = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(page.as_bytes()).await;
        let _ = stream.shutdown().await;
        return Ok(params);
    }
}

/// A pasted answer: an address (its query; Meta's `#_` and any fragment dropped) or a bare code.
fn pasted(line: &str) -> HashMap<String, String> {
    let line = line.split('#').next().unwrap_or(line);
    match line.split_once('?') {
        Some((_, q)) if line.contains("://") || line.starts_with('/') => {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        }
        _ => [("code".to_owned(), line.to_owned())].into(),
    }
}

/// The code of an answer, or why there is none. A pasted bare code carries no `state`; an
/// address must carry the one sent.
fn check_answer(
    answer: &HashMap<String, String>,
    state: &str,
    bare_ok: bool,
) -> Result<String, AuthError> {
    if let Some(error) = answer.get("error") {
        let why = answer
            .get("error_description")
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return Err(AuthError::new(format!(
            "the authorization was refused ({error}{why}); run it again and approve; nothing stored"
        )));
    }
    match answer.get("state") {
        Some(s) if s == state => {}
        None if bare_ok && answer.len() == 1 => {}
        _ => {
            return Err(AuthError::new(
                "the answer's state does not match the one this run sent: it comes from another (or an old) authorization; run it again and use the address it prints; nothing stored",
            ))
        }
    }
    match answer.get("code").filter(|c| !c.trim().is_empty()) {
        Some(code) => Ok(code.trim().to_owned()),
        None => Err(AuthError::new(
            "the answer carries no code: paste the whole address the browser was sent to; nothing stored",
        )),
    }
}

/// Opens `address` in a browser when there is one (a desktop session and an opener); otherwise
/// the printed address is all.
fn open_browser(address: &str) {
    let desktop = cfg!(target_os = "macos")
        || std::env::var_os("DISPLAY").is_some()
        || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if !desktop {
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(opener).is_file()));
    if found {
        let _ = std::process::Command::new(opener)
            .arg(address)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
}

/// The `error` / `error_description` of an OAuth error body, or the status, for a refusal's
/// message (never the body itself: it might echo a secret).
pub fn token_error(status: u16, body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let error = v
        .get("error")
        .and_then(|e| {
            e.as_str()
                .map(str::to_owned)
                .or_else(|| e.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        })
        .unwrap_or_else(|| format!("HTTP {status}"));
    let desc = v
        .get("error_description")
        .and_then(|d| d.as_str())
        .map(|d| format!(": {d}"))
        .unwrap_or_default();
    // At most 300 characters (a network's answer: never cut inside a character).
    format!("{error}{desc}").chars().take(300).collect()
}

/// Sends `request` and reads its JSON answer; a refusal names `what`, the status and the OAuth
/// error (never the URL or the body: either may carry a secret).
///
/// # Errors
/// Unreachable, a non-2xx answer, or an answer that is not JSON.
pub async fn call(
    request: reqwest::RequestBuilder,
    what: &str,
) -> Result<serde_json::Value, AuthError> {
    let answer = request.send().await.map_err(|e| {
        AuthError::new(format!(
            "{what}: could not be reached ({}); nothing stored",
            e.without_url()
        ))
    })?;
    let status = answer.status().as_u16();
    let body = answer.text().await.unwrap_or_default();
    if !(200..300).contains(&status) {
        return Err(AuthError::new(format!(
            "{what} was refused (HTTP {status}, {}); nothing stored",
            token_error(status, &body)
        )));
    }
    serde_json::from_str(&body)
        .map_err(|_| AuthError::new(format!("{what}: the answer is not JSON; nothing stored")))
}

/// A string field of `v`, or a number written as one (Meta's user ids).
pub fn text(v: &serde_json::Value, field: &str) -> Option<String> {
    match v.get(field)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_error_is_cut_between_characters_never_inside_one() {
        // Byte 300 falls inside a two-byte character: a cut by bytes would panic.
        let body = serde_json::json!({"error": format!("x{}", "é".repeat(400))}).to_string();
        let message = token_error(400, &body);
        assert_eq!(message.chars().count(), 300);
        assert!(message.starts_with("xé"));
    }

    #[test]
    fn pkce_matches_rfc_7636_appendix_b() {
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_eq!(random_token().len(), 43);
        assert_ne!(random_token(), random_token());
    }

    #[test]
    fn a_pasted_address_or_a_bare_code() {
        let got = pasted("https://127.0.0.1:8080/callback?code=abc&state=s1#_");
        assert_eq!(got["code"], "abc");
        assert_eq!(check_answer(&got, "s1", true).as_deref(), Ok("abc"));
        assert!(check_answer(&got, "s2", true)
            .unwrap_err()
            .0
            .contains("state"));
        let bare = pasted("AQTxyz");
        assert_eq!(check_answer(&bare, "s1", true).as_deref(), Ok("AQTxyz"));
        assert!(
            check_answer(&bare, "s1", false).is_err(),
            "the listener needs the state"
        );
        let refused = pasted("http://127.0.0.1:1/callback?error=access_denied&state=s1");
        assert!(check_answer(&refused, "s1", true)
            .unwrap_err()
            .0
            .contains("access_denied"));
    }
}
