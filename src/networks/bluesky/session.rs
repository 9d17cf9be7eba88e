//! The account's session: `createSession` with the app password, `refreshSession` when the
//! access token has expired (a login again when the refresh token is refused too), and the
//! session kept in the record store for the next process, tied to the PDS, the identifier and
//! the app password it was made with. The tokens live only here and in that store: never in
//! logs, errors or `Debug` output.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use super::xrpc::{Answer, Body, Op, Xrpc};
use super::{BlueskyAdapter, NETWORK};
use crate::networks::{PostError, SessionStore};
use crate::vars::Secret;

/// The account's session: tokens kept only here, never logged or shown.
#[derive(Clone)]
pub(super) struct Session {
    pub(super) access: Secret,
    pub(super) refresh: Secret,
    pub(super) did: String,
    pub(super) handle: String,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("did", &self.did)
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// The name the session is kept under in the record store ([`SessionStore::save_secret`]).
pub const SESSION_NAME: &str = "bluesky";

/// What ties a kept session to the app password it was made with (a digest, kept only inside
/// the session blob, itself a secret): a changed `BLUESKY_APP_PASSWORD` logs in afresh, so a
/// wrong one is found at once (doctor included) instead of at the next refresh.
fn password_digest(identifier: &str, password: &Secret) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"postonce/bluesky/session/v1\n");
    h.update(identifier.to_ascii_lowercase().as_bytes());
    h.update(b"\n");
    h.update(password.expose().as_bytes());
    hex::encode(h.finalize())
}

/// The kept form of a session: the PDS, identifier and app password it belongs to, and its
/// tokens.
fn session_blob(pds: &str, identifier: &str, password: &Secret, s: &Session) -> Secret {
    Secret::new(
        json!({
            "v": 1,
            "pds": pds,
            "identifier": identifier,
            "password_sha256": password_digest(identifier, password),
            "did": s.did,
            "handle": s.handle,
            "accessJwt": s.access.expose(),
            "refreshJwt": s.refresh.expose(),
        })
        .to_string(),
    )
}

/// A kept session, if it is one of this PDS, identifier and app password.
fn session_from_blob(
    pds: &str,
    identifier: &str,
    password: &Secret,
    blob: &Secret,
) -> Option<Session> {
    let v: Value = serde_json::from_str(blob.expose()).ok()?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    if text("pds")? != pds
        || !text("identifier")?.eq_ignore_ascii_case(identifier)
        || text("password_sha256")? != password_digest(identifier, password)
    {
        return None;
    }
    Some(Session {
        access: Secret::new(text("accessJwt")?),
        refresh: Secret::new(text("refreshJwt")?),
        did: text("did")?.to_owned(),
        handle: text("handle").or(text("did"))?.to_owned(),
    })
}

fn session_from(v: &Value) -> Result<Session, PostError> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    if v.get("active") == Some(&Value::Bool(false)) {
        let status = s("status").unwrap_or("inactive");
        return Err(PostError::Rejected {
            network: NETWORK,
            status: 200,
            message: format!(
                "the account is not active ({status}); it cannot post until it is reactivated"
            ),
        });
    }
    match (s("accessJwt"), s("refreshJwt"), s("did")) {
        (Some(access), Some(refresh), Some(did)) => Ok(Session {
            access: Secret::new(access),
            refresh: Secret::new(refresh),
            did: did.to_owned(),
            handle: s("handle").unwrap_or(did).to_owned(),
        }),
        _ => Err(PostError::InDoubt {
            network: NETWORK,
            message: "the session answer lacked accessJwt, refreshJwt or did".into(),
        }),
    }
}

impl BlueskyAdapter {
    /// Keeps the session in `store` (under [`SESSION_NAME`]), each store call bounded by
    /// `budget`: a new process reuses it, refreshing it when its access token has expired,
    /// and logs in (`createSession`, limited to 30 per 5 minutes per account and IP) only when
    /// there is none or it cannot be refreshed. The tokens are stored nowhere else.
    #[must_use]
    pub fn with_session_store(mut self, store: Arc<dyn SessionStore>, budget: Duration) -> Self {
        self.store = Some((store, budget));
        self
    }

    /// The session kept in the store, if any (and usable for this PDS and identifier).
    async fn kept_session(&self) -> Option<Session> {
        let (store, budget) = self.store.as_ref()?;
        match tokio::time::timeout(*budget, store.load_secret(SESSION_NAME)).await {
            Ok(Ok(Some(blob))) => {
                let s = session_from_blob(&self.pds, &self.identifier, &self.password, &blob);
                if s.is_none() {
                    tracing::info!(
                        "Bluesky: the kept session is for another PDS or account; logging in"
                    );
                }
                s
            }
            Ok(Ok(None)) => None,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "Bluesky: could not read the kept session; logging in");
                None
            }
            Err(_) => {
                tracing::warn!("Bluesky: reading the kept session took too long; logging in");
                None
            }
        }
    }

    /// Keeps `s` in the store for the next process (a failure is logged: the next process
    /// logs in again).
    async fn keep_session(&self, s: &Session) {
        let Some((store, budget)) = self.store.as_ref() else {
            return;
        };
        let blob = session_blob(&self.pds, &self.identifier, &self.password, s);
        match tokio::time::timeout(*budget, store.save_secret(SESSION_NAME, &blob)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "Bluesky: could not keep the session"),
            Err(_) => tracing::warn!("Bluesky: keeping the session took too long"),
        }
    }

    /// `createSession` with the app password.
    async fn login(&self) -> Result<Session, PostError> {
        let body = json!({"identifier": self.identifier, "password": self.password.expose()});
        let answer = self
            .xrpc(
                Method::POST,
                "com.atproto.server.createSession",
                &[],
                None,
                Body::Json(body),
            )
            .await?;
        let session = session_from(&answer.result(Op::Login)?)?;
        if !self.transport.is_dry_run() {
            tracing::info!(did = %session.did, handle = %session.handle, "Bluesky: logged in with the app password");
        }
        Ok(session)
    }

    /// `refreshSession` with the refresh token.
    async fn refresh(&self, stale: &Session) -> Result<Session, PostError> {
        let answer = self
            .xrpc(
                Method::POST,
                "com.atproto.server.refreshSession",
                &[],
                Some(&stale.refresh),
                Body::None,
            )
            .await?;
        session_from(&answer.result(Op::Refresh)?)
    }

    /// The process's session: the one it has, else the kept one (refreshed when a call finds
    /// its access token expired), else a new login (kept for the next process).
    pub(super) async fn session(&self) -> Result<Session, PostError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            return Ok(s.clone());
        }
        if let Some(s) = self.kept_session().await {
            tracing::info!(did = %s.did, "Bluesky: reusing the kept session");
            *guard = Some(s.clone());
            return Ok(s);
        }
        let s = self.login().await?;
        self.keep_session(&s).await;
        *guard = Some(s.clone());
        Ok(s)
    }

    /// A new session after `stale`'s access token was refused: refreshed with its refresh
    /// token, or, when that is refused too, logged in again. A caller that finds the session
    /// already renewed by another uses that one.
    async fn renew(&self, stale: &Session) -> Result<Session, PostError> {
        let mut guard = self.session.lock().await;
        if let Some(current) = guard.as_ref() {
            if current.access != stale.access {
                return Ok(current.clone());
            }
        }
        let fresh = match self.refresh(stale).await {
            Ok(s) => {
                tracing::info!("Bluesky: the access token had expired; the session was refreshed");
                s
            }
            Err(PostError::Rejected { message, .. }) => {
                tracing::info!(
                    "Bluesky: the session could not be refreshed ({message}); logging in again"
                );
                self.login().await?
            }
            Err(e) => return Err(e),
        };
        self.keep_session(&fresh).await;
        *guard = Some(fresh.clone());
        Ok(fresh)
    }

    /// One authorized call; when the access token is refused, the session is renewed and the
    /// call sent once more (a refused token means the PDS did nothing).
    pub(super) async fn authed(
        &self,
        method: Method,
        nsid: &str,
        query: &[(&str, &str)],
        body: Body,
    ) -> Result<(Session, Answer), PostError> {
        let session = self.session().await?;
        let answer = self
            .xrpc(
                method.clone(),
                nsid,
                query,
                Some(&session.access),
                body.clone(),
            )
            .await?;
        if !answer.token_refused() {
            return Ok((session, answer));
        }
        let session = self.renew(&session).await?;
        let answer = self
            .xrpc(method, nsid, query, Some(&session.access), body)
            .await?;
        Ok((session, answer))
    }
}
