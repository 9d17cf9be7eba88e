//! `postonce auth <network>` and `postonce auth status`: translation only. The flows are the
//! networks' ([`crate::networks::Definition::auth`]); storing and showing is
//! [`crate::credentials`].

use crate::config::Config;
use crate::credentials::{self, status, AuthContext, AuthOptions, Source, Stored};
use crate::networks::Network;
use crate::vars::Vars;

use super::{bad_input, EXIT_BAD_INPUT};

#[derive(clap::Args, Debug)]
pub(super) struct AuthArgs {
    /// The network to sign in to (linkedin, threads, …), or `status` to show every
    /// credential's source, account and expiry.
    network: String,
    /// No browser here: print the address, then read from standard input the address the
    /// browser was sent to (or the code it shows).
    #[arg(long)]
    paste: bool,
    /// Never open a browser (print the address only).
    #[arg(long)]
    no_browser: bool,
    /// The port of the redirect URI (http://127.0.0.1:PORT/callback), when the app registered a
    /// fixed one.
    #[arg(long)]
    port: Option<u16>,
    /// LinkedIn: post as this author (urn:li:organization:…) instead of the member.
    #[arg(long)]
    author: Option<String>,
    /// Mastodon: the instance (default MASTODON_URL).
    #[arg(long)]
    instance: Option<String>,
    /// Nostr: make a new key, store its secret and print only its public npub.
    #[arg(long)]
    generate: bool,
    /// `auth status`: print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `auth`; returns the exit code (2: a refusal; nothing was stored).
pub(super) async fn run(config: &Config, args: AuthArgs) -> i32 {
    let env = |name: &str| std::env::var(name).ok();
    if args.network == "status" {
        return show(config, args.json).await;
    }
    let Some(network) = Network::parse(&args.network) else {
        return bad_input(format!(
            "auth: {:?} is not a network; valid: status, {}",
            args.network,
            Network::names()
        ));
    };
    let Some(flow) = network.definition().auth else {
        return bad_input(format!(
            "auth: {} has no sign-in flow yet: set its variables (README \"Getting credentials\")",
            network.label()
        ));
    };
    let vars = Vars::new(&env);
    // A flow that checks a credential set by hand (a key made elsewhere) runs, and stores nothing.
    let checks = flow.checks_set_credential() && !args.generate;
    if let (Source::Variable(var) | Source::Parameter(var), false) =
        (Source::of(network, vars, &Stored::default()), checks)
    {
        return bad_input(format!(
            "auth {}: {var} is set and would take precedence over a stored credential: unset it first (nothing stored)",
            network.as_str()
        ));
    }
    let records = match crate::app::record_store(config).await {
        Ok(r) => r,
        Err(e) => return bad_input(format!("auth: the store cannot be opened: {e}")),
    };
    // The store must answer before anyone is sent to a browser.
    if let Err(e) = credentials::load(&*records).await {
        return bad_input(format!("auth: the store cannot be read: {e}; nothing done"));
    }
    let resolved =
        match crate::secrets::resolve_these(env, flow.app_variables().iter().copied()).await {
            Ok(r) => r,
            Err(e) => return bad_input(format!("auth: {e}")),
        };
    let lookup = |name: &str| resolved.get(name).cloned().or_else(|| env(name));
    let http = match crate::app::http_client() {
        Ok(h) => h,
        Err(e) => return bad_input(e),
    };
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut cx = AuthContext {
        http: &http,
        vars: Vars::new(&lookup),
        options: AuthOptions {
            paste: args.paste,
            no_browser: args.no_browser || args.paste,
            port: args.port,
            author: args.author,
            instance: args.instance,
            generate: args.generate,
        },
        input: &mut input,
    };
    let cred = match flow.obtain(&mut cx).await {
        Ok(Some(c)) => c,
        Ok(None) => return 0,
        Err(e) => return bad_input(format!("auth {}: {e}", network.as_str())),
    };
    let name = network.as_str().to_owned();
    let saved = credentials::update(&*records, |s| {
        s.networks.insert(name.clone(), cred.clone());
        s.state.remove(&name);
        Some(())
    })
    .await;
    if let Err(e) = saved {
        eprintln!(
            "postonce: auth {}: the credential could not be stored: {e}",
            network.as_str()
        );
        return 1;
    }
    let now = crate::record::now_s();
    let expiry = cred.expires_at.map_or_else(
        || "does not expire".to_owned(),
        |at| format!("expires {}", credentials::until(at, now)),
    );
    let upkeep = if flow.can_refresh(&cred) {
        "postonce refreshes it before it expires".to_owned()
    } else if cred.expires_at.is_some() {
        format!("postonce cannot refresh it: it tells you in Telegram ahead of the expiry; run `postonce auth {name}` again then")
    } else {
        "nothing to renew".to_owned()
    };
    println!(
        "Stored the {} credential for {} ({expiry}; {upkeep}).\nIt is used wherever {} is unset. Check with `postonce auth status`; post with `postonce post --targets {name} …`.",
        network.label(),
        cred.account,
        cred.secrets.keys().cloned().collect::<Vec<_>>().join(", "),
    );
    0
}

/// `auth status`: one line per network (or JSON); never a secret.
async fn show(config: &Config, json: bool) -> i32 {
    let env = |name: &str| std::env::var(name).ok();
    let stored = match crate::app::record_store(config).await {
        Ok(records) => credentials::load(&*records)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    let (stored, problem) = match stored {
        Ok(s) => (s, None),
        Err(e) => (Stored::default(), Some(e)),
    };
    let rows = status::rows(Vars::new(&env), &stored, crate::record::now_s());
    if json {
        let v = serde_json::json!({ "credentials": rows, "store_error": problem });
        println!("{v}");
    } else {
        for row in &rows {
            println!("{row}");
        }
        if let Some(p) = &problem {
            println!("the stored credentials cannot be read: {p}");
        }
    }
    if problem.is_some() {
        EXIT_BAD_INPUT
    } else {
        0
    }
}

/// `status --all`'s credential lines: every stored credential in use that the owner must renew
/// soon or now (as the sweeper tells it). Reads the store only when this process took some
/// credential from it.
pub(super) async fn print_lapsing(config: &Config) {
    if !credentials::in_use() {
        return;
    }
    let Ok(records) = crate::app::record_store(config).await else {
        return;
    };
    let Ok(stored) = credentials::load(&*records).await else {
        return;
    };
    let env = |name: &str| std::env::var(name).ok();
    let lapsing = credentials::tell::lapsing(Vars::new(&env), &stored, crate::record::now_s());
    if !lapsing.is_empty() {
        println!("{} credentials to renew:", lapsing.len());
        for l in &lapsing {
            println!("  {}", l.message);
        }
    }
}
