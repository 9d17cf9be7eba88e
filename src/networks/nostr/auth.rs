//! `postonce auth nostr`: Nostr has no account, a key pair is the identity.
//! `--generate` makes a new key and stores its secret (`nsec`) as the Nostr credential, printing
//! only the public `npub`: the secret is never shown, and can be read back from the store only
//! by postonce. Without `--generate`: with `NOSTR_SECRET_KEY` (or its `_PARAM`) set, the key is
//! checked (its `npub` printed) and every relay of `NOSTR_RELAYS` is reached, nothing stored;
//! otherwise an existing key is read without echo, checked and stored.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::relay::parse_relays;
use super::event::Keys;
use super::relay;
use crate::networks::auth::{AuthContext, AuthError, AuthFlow, Credential};
use crate::vars::Secret;

/// The flow, as the registry holds it.
pub static FLOW: NostrAuth = NostrAuth;

pub struct NostrAuth;

/// How long each relay gets to take a connection.
const REACH: Duration = Duration::from_secs(5);

/// Reaches every relay of `NOSTR_RELAYS` (when set) and says how each went.
async fn reach_relays(cx: &AuthContext<'_>) -> Result<(), AuthError> {
    let Some(value) = cx.vars.get("NOSTR_RELAYS") else {
        cx.say("NOSTR_RELAYS is not set: set it to the relays to post to (wss://…, comma-separated).");
        return Ok(());
    };
    let relays = parse_relays(&value).map_err(|e| AuthError::new(e.to_string()))?;
    let mut reached = 0;
    for url in &relays {
        match relay::reach(url, REACH).await {
            Ok(()) => {
                reached += 1;
                cx.say(&format!("  {url}: reachable"));
            }
            Err(e) => cx.say(&format!("  {url}: NOT reachable ({e})")),
        }
    }
    if reached == 0 {
        return Err(AuthError::new("no relay of NOSTR_RELAYS could be reached"));
    }
    Ok(())
}

fn credential(keys: &Keys) -> Credential {
    Credential {
        account: keys.npub(),
        scopes: Vec::new(),
        obtained_at: crate::record::now_s(),
        expires_at: None,
        refresh_token: None,
        refresh_expires_at: None,
        secrets: [("NOSTR_SECRET_KEY".to_owned(), keys.nsec())].into(),
        settings: BTreeMap::new(),
        kept: BTreeMap::new(),
    }
}

#[async_trait(?Send)]
impl AuthFlow for NostrAuth {
    fn app_variables(&self) -> &'static [(&'static str, &'static str)] {
        &[("NOSTR_SECRET_KEY", "NOSTR_SECRET_KEY_PARAM")]
    }

    fn checks_set_credential(&self) -> bool {
        true
    }

    async fn obtain(&self, cx: &mut AuthContext<'_>) -> Result<Option<Credential>, AuthError> {
        if cx.options.generate {
            let keys = Keys::generate();
            println!("{}", keys.npub());
            cx.say("A new Nostr key: its public key (npub) is above; its secret is stored by postonce and never shown.");
            reach_relays(cx).await?;
            return Ok(Some(credential(&keys)));
        }
        if let Some(set) = cx.vars.get("NOSTR_SECRET_KEY") {
            let keys = Keys::parse(&set)
                .map_err(|e| AuthError::new(format!("NOSTR_SECRET_KEY {e}")))?;
            println!("{}", keys.npub());
            cx.say("NOSTR_SECRET_KEY is set and valid: its public key (npub) is above; nothing stored.");
            reach_relays(cx).await?;
            return Ok(None);
        }
        cx.say("Paste an existing Nostr secret key (nsec1… or 64 hex digits), or run `postonce auth nostr --generate` for a new one.");
        let secret: Secret = cx.ask_secret("Secret key (not shown): ")?;
        let keys = Keys::parse(secret.expose())
            .map_err(|e| AuthError::new(format!("that key {e}; nothing stored")))?;
        println!("{}", keys.npub());
        reach_relays(cx).await?;
        Ok(Some(credential(&keys)))
    }
}
