//! The networks a draft can go to (README "Targets"), one folder each, and the registry:
//! the one list every other part iterates (configuration, `POSTONCE_TARGETS`, `--targets`,
//! `--caption-for`, the pacing and budget variables, doctor, the dry run, the template check).
//!
//! A network's folder holds everything that is that network's: its adapter (create, and the
//! way it settles an ambiguous create), its wire types, its text rules, and its configuration
//! (variables, secrets and their `_PARAM` names, defaults, validation, the dry-run decision).
//! The pipeline never names a network: it reads a network's [`Capabilities`] and calls its
//! [`NetworkAdapter`]. Adding a network is one folder and one line in [`registry!`] below
//! (and its README and template rows).

pub mod adapter;
pub mod auth;
pub mod capabilities;
pub mod fresh;
pub mod graph;
pub mod http;
pub mod links;
pub mod oauth;
pub mod show;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use adapter::{
    Created, Media, MediaRef, NetworkAdapter, PostError, PreparedPost, SessionStore, Spread,
};
pub use capabilities::Capabilities;
pub use show::is_dry_run_urn;

use crate::vars::{ConfigError, Secret, Vars};

/// The longest caption taken at input, whatever its targets: the largest fixed limit of any
/// network (LinkedIn's 3,000 characters). Each target's own limit, counted its way, is checked
/// after this.
pub const INPUT_MAX_CHARS: usize = 3000;

/// Generates the [`Network`] enum, its names and its dispatch to each folder's
/// [`Definition`] from one line per network: `Variant = "target name" => folder`.
macro_rules! registry {
    ($($variant:ident = $name:literal => $folder:ident),+ $(,)?) => {
        $(pub mod $folder;)+

        /// A network a draft can go to; serialized as its target name.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        pub enum Network {
            $(#[serde(rename = $name)] $variant,)+
        }

        impl Network {
            /// Every network, in the registry's order (reports and listings follow it).
            pub const ALL: [Self; [$($name),+].len()] = [$(Self::$variant),+];

            /// The target name (`POSTONCE_TARGETS`, `--targets`, key suffixes `@<name>`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }

            /// What the network's folder says about it.
            pub fn definition(self) -> &'static Definition {
                match self {
                    $(Self::$variant => &$folder::DEFINITION,)+
                }
            }
        }
    };
}

registry! {
    Linkedin = "linkedin" => linkedin,
    X = "x" => x,
    Telegram = "telegram" => telegram_channel,
    Mastodon = "mastodon" => mastodon,
    Bluesky = "bluesky" => bluesky,
    Threads = "threads" => threads,
    Discord = "discord" => discord,
    Instagram = "instagram" => instagram,
    Facebook = "facebook" => facebook,
    Nostr = "nostr" => nostr,
}

impl Default for Network {
    /// The first network of the registry: a draft that names no target goes there, and its
    /// names are the ones from before targets existed ([`Self::bare_names`]).
    fn default() -> Self {
        Self::ALL[0]
    }
}

impl Network {
    /// The network's name for people.
    pub fn label(self) -> &'static str {
        self.definition().label
    }

    /// What the owner presses when they see the post there.
    pub fn confirm_label(self) -> &'static str {
        self.definition().confirm_label
    }

    /// Whether this network keeps the names from before targets: `claim:<key>`,
    /// `posted:<key>`, `done:<key>`, a bare caption hash (existing records still count).
    /// Every other network's names end in `@<name>`.
    pub fn bare_names(self) -> bool {
        self == Self::default()
    }

    /// The public URL of a post known only by its id, for a network whose ids make one
    /// (a record written before targets kept only the id).
    pub fn url_of(self, id: &str) -> Option<String> {
        self.definition().url_of.map(|url| url(id))
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == s)
    }

    /// The pacing variable (`POSTONCE_MIN_GAP_S_<NETWORK>`).
    pub fn min_gap_var(self) -> &'static str {
        self.definition().min_gap_var
    }

    /// Every target name, comma-separated (for errors that list the valid ones).
    pub fn names() -> String {
        Self::ALL
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What a network's folder tells the rest of postonce about it.
pub struct Definition {
    /// For people: `"LinkedIn"`, `"the Telegram channel"`.
    pub label: &'static str,
    /// The button the owner presses when they see the post there.
    pub confirm_label: &'static str,
    /// `POSTONCE_MIN_GAP_S_<NETWORK>`.
    pub min_gap_var: &'static str,
    /// The secrets it reads, each with the `<NAME>_PARAM` variable that may name an SSM
    /// parameter holding it.
    pub secrets: &'static [(&'static str, &'static str)],
    /// Builds a post's public URL from its id alone, where the id is enough.
    pub url_of: Option<fn(&str) -> String>,
    /// Reads and checks its variables.
    pub load: Loader,
    /// Its `postonce auth <network>` flow (its folder's `auth.rs`), if it has one.
    pub auth: Option<&'static dyn auth::AuthFlow>,
}

/// Reads and checks a network's variables.
pub type Loader = fn(Vars<'_>, &Shared) -> Result<Arc<dyn NetworkConfig>, ConfigError>;

/// What the core's configuration hands every network's: the parts networks share.
#[derive(Clone, Debug)]
pub struct Shared {
    /// `POSTONCE_FUNCTION_TIMEOUT_S`: every budget must be shorter.
    pub function_timeout: Duration,
    /// The report bot (`TELEGRAM_BOT_TOKEN`, with `TELEGRAM_CHAT_ID`): the channel posts
    /// with it.
    pub telegram_bot: Option<Secret>,
    /// `TELEGRAM_API_URL`.
    pub telegram_api_url: String,
    /// `POSTONCE_TELEGRAM_TIMEOUT_MS`: the Bot API's budget.
    pub telegram_budget: Duration,
}

impl Shared {
    /// The time a run has for work: its deadline less the reserve kept for recording and
    /// reporting (as the pipeline's [`crate::budget`] keeps it).
    pub fn work_time(&self) -> Duration {
        self.function_timeout - (self.function_timeout / 4).min(Duration::from_secs(15))
    }

    /// Checks the budget of a network whose calls wait inside it (for an image's processing,
    /// for a container): at least `least` (`holds`: what it must hold), at most the run's
    /// time for work.
    ///
    /// # Errors
    /// `var`, naming both bounds.
    pub fn check_waiting_budget(
        &self,
        var: &'static str,
        budget: Duration,
        least: Duration,
        holds: &str,
    ) -> Result<(), ConfigError> {
        let work = self.work_time();
        if budget < least || budget > work {
            return Err(crate::vars::bad(
                var,
                format!(
                    "{}ms must be from {}ms ({holds}) to {}ms (the run's time for work: POSTONCE_FUNCTION_TIMEOUT_S {}s less its reserve for recording and reporting)",
                    budget.as_millis(),
                    least.as_millis(),
                    work.as_millis(),
                    self.function_timeout.as_secs()
                ),
            ));
        }
        Ok(())
    }
}

/// What an adapter may need when it is built (once per process).
pub struct Context<'a> {
    pub http: &'a reqwest::Client,
    /// Where an adapter that logs in keeps its session between processes; `None` keeps it
    /// for the process only.
    pub sessions: Option<Arc<dyn SessionStore>>,
    /// The budget of a call to the session store.
    pub sessions_budget: Duration,
}

/// One network's configuration, as its folder read it.
#[async_trait]
pub trait NetworkConfig: std::any::Any + Send + Sync + fmt::Debug {
    /// True when its credentials are set: it posts for real. Otherwise it is a dry run.
    fn is_real(&self) -> bool;

    /// Its per-call budget and the variable that sets it.
    fn budget(&self) -> (&'static str, Duration);

    /// Whether its budget bounds the quiet period and must be shorter than the function
    /// timeout even while it is a dry run. The default: only once it posts for real.
    fn budget_counts(&self) -> bool {
        self.is_real()
    }

    /// The variables still to set for it to post for real; empty when it does.
    fn missing(&self) -> Vec<&'static str>;

    /// The variable naming its API's address, for "check … and the network".
    fn api_var(&self) -> &'static str;

    /// Whether its adapter keeps a login session in [`Context::sessions`].
    fn keeps_sessions(&self) -> bool {
        false
    }

    /// What doctor says for a failed check when the network's answer has a known fix.
    fn explain(&self, error: &PostError) -> Option<String> {
        let _ = error;
        None
    }

    /// What doctor says after its adapter's check passed (`detail` is the adapter's line):
    /// the network may add what else it read (an instance's limits, the PDS).
    async fn checked(&self, context: &Context<'_>, detail: String) -> String {
        let _ = context;
        detail
    }

    /// Builds its adapter: the real one when [`Self::is_real`], else its dry run.
    ///
    /// # Errors
    /// A message naming the variable when it cannot be set up.
    async fn adapter(&self, context: &Context<'_>) -> Result<Arc<dyn NetworkAdapter>, String>;
}

/// Every network's configuration, in the registry's order.
pub type Configs = BTreeMap<Network, Arc<dyn NetworkConfig>>;

/// Reads every network's configuration.
///
/// # Errors
/// The first variable that is missing or malformed.
pub fn load(vars: Vars<'_>, shared: &Shared) -> Result<Configs, ConfigError> {
    Network::ALL
        .iter()
        .map(|n| Ok((*n, (n.definition().load)(vars, shared)?)))
        .collect()
}

/// Builds every network's adapter, once per process: the real one where its credentials are
/// configured, else its dry run, which sends nothing and shows the exact requests. Every
/// network gets one, whatever `POSTONCE_TARGETS` says (a draft may name its own targets).
///
/// # Errors
/// A message naming the variable when an adapter cannot be set up.
pub async fn build(
    configs: &Configs,
    context: &Context<'_>,
) -> Result<BTreeMap<Network, Arc<dyn NetworkAdapter>>, String> {
    let mut adapters = BTreeMap::new();
    for (network, config) in configs {
        adapters.insert(*network, config.adapter(context).await?);
    }
    Ok(adapters)
}

/// Every secret the networks read, with its `_PARAM` variable.
pub fn secrets() -> impl Iterator<Item = (&'static str, &'static str)> {
    Network::ALL
        .iter()
        .flat_map(|n| n.definition().secrets.iter().copied())
}

/// `"dry run: set A, B and C to post to X for real"`.
pub fn dry_run_note(network: Network, missing: &[&'static str]) -> String {
    let names = match missing.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    };
    format!(
        "dry run: set {names} to post to {} for real",
        network.label()
    )
}
