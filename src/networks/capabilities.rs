//! What a network can do, described once per network and read by the pipeline before any call
//! (OpenDAL's `Capability` is the model): how its text is limited and
//! counted, what images it takes, how links fare, and which native primitive (if any) makes a
//! repeated create safe. Every flag defaults to "can't", so a network claims only what it was
//! shown to do.

use std::time::Duration;

/// How a network counts the length of a post's text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Counting {
    /// Unicode scalar values (LinkedIn).
    #[default]
    Chars,
    /// Grapheme clusters (Bluesky).
    Graphemes,
    /// UTF-16 code units (Telegram).
    Utf16,
    /// X's weighted count: most scripts 2, Latin 1, every URL 23.
    XWeighted,
    /// Characters, every URL as a fixed number of them (Mastodon: 23).
    CharsUrlsFixed,
    /// Characters, an emoji as its UTF-8 bytes (Threads, in Meta's words; the larger of the
    /// two readings is taken).
    CharsEmojiBytes,
}

impl Counting {
    /// How it counts, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Chars => "characters",
            Self::Graphemes => "graphemes",
            Self::Utf16 => "UTF-16 units",
            Self::XWeighted => "weighted characters, a URL as 23",
            Self::CharsUrlsFixed => "characters, a URL at the instance's fixed length",
            Self::CharsEmojiBytes => "characters, an emoji as its UTF-8 bytes",
        }
    }
}

/// A network's text rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextLimit {
    /// The most a post's text may have, counted as [`Self::counting`] says. Zero: unknown.
    pub max: usize,
    pub counting: Counting,
}

/// The images a network takes: formats, bytes, pixels, sides, shape (defined with the image
/// code that checks and renders against them).
pub use crate::image::ImageLimits;

/// How many hashtags and @-mentions a post's text may carry (Instagram: 30 and 20). Every
/// occurrence counts, a repeated tag too: the reading that refuses more, since a network that
/// counts each distinct tag once takes what it lets through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TagLimits {
    pub max_hashtags: Option<usize>,
    pub max_mentions: Option<usize>,
}

impl TagLimits {
    /// Why `text` carries too many tags for `network` (its label), or `None`.
    pub fn refusal(&self, text: &str, network: &str) -> Option<String> {
        let over = |sigil: char, max: Option<usize>, what: &str| {
            let max = max?;
            let n = count_tags(text, sigil);
            (n > max).then(|| format!("the text has {n} {what}; {network} takes at most {max}"))
        };
        over('#', self.max_hashtags, "hashtags")
            .or_else(|| over('@', self.max_mentions, "@-mentions"))
    }
}

/// The `#tag`s (or `@name`s) of a text: the sigil at the start or after a character that is
/// not part of a word, followed by at least one letter, digit or `_` (a mention may hold `.`).
pub fn count_tags(text: &str, sigil: char) -> usize {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut count = 0;
    let mut prev: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == sigil
            && !prev.is_some_and(|p| word(p) || p == sigil)
            && chars.peek().is_some_and(|&n| word(n))
        {
            count += 1;
        }
        prev = Some(c);
    }
    count
}

/// How a network treats a link in the text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Links {
    /// Kept as text, counted like any other.
    #[default]
    AsText,
    /// Kept, and counted as a fixed number of characters whatever its length.
    CountedAs(usize),
    /// Made clickable by a facet the client adds (Bluesky).
    Facets,
}

/// The network's own primitive for a repeated create, from which the pipeline picks how an
/// ambiguous create is settled (README "Targets", the table of ambiguous answers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Idempotency {
    /// None at all, and no way to read back what was sent (the Telegram channel):
    /// at most once, the owner decides.
    #[default]
    None,
    /// A repeated create is refused, naming the existing post (LinkedIn).
    DuplicateNamesPost,
    /// A repeated create is refused without naming it; the account's posts can be read
    /// back (X).
    DuplicateWithoutId,
    /// The server remembers an idempotency key for this long (Mastodon: 1 h).
    Key(Duration),
    /// The client chooses the post's id; an identical write there is a no-op (Bluesky).
    ClientChosenId,
    /// A container yields at most one post, and its status says whether it did (Threads).
    Container,
}

/// What a network offers, read by the pipeline before any call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The native primitive behind its reconcile strategy.
    pub idempotency: Idempotency,
    /// The account's recent posts can be read back to look for the text (X, Mastodon,
    /// Bluesky's record, Threads).
    pub reads_back: bool,
    pub text: TextLimit,
    pub images: ImageLimits,
    pub links: Links,
    /// The network fetches the image itself from its public URL (Threads): a local file
    /// cannot go to it, and no rendition can reach it.
    pub fetches_image: bool,
    /// The post refers to the image by its URL for good (a network without a media server of
    /// its own): the draft's own URL goes in it, never a hosted copy, which expires
    /// ([`crate::covers`]: a day at most).
    pub links_image: bool,
    /// A recorded post may still lack some of the places it goes to, and the kept request,
    /// sent again as it is, reaches them without making a second post
    /// ([`NetworkAdapter::spread`](super::NetworkAdapter::spread)): later sweeps send it.
    pub spreads: bool,
    /// The create carries the image's bytes and is replayed (Discord's attachment): a
    /// replay of the kept request needs the same image again, fetched anew.
    pub create_carries_image: bool,
    /// The most hashtags and @-mentions a text may carry (Instagram); none stated by default.
    pub tags: TagLimits,
}

impl Capabilities {
    /// The server remembers an idempotency key for this long (Mastodon: 1 h).
    pub fn idempotency_key(&self) -> Option<Duration> {
        match self.idempotency {
            Idempotency::Key(memory) => Some(memory),
            _ => None,
        }
    }

    /// The client chooses the post's id, and an identical write there is a no-op (Bluesky).
    pub fn client_chosen_id(&self) -> bool {
        self.idempotency == Idempotency::ClientChosenId
    }

    /// A repeated create is refused, naming the existing post (LinkedIn).
    pub fn duplicate_names_post(&self) -> bool {
        self.idempotency == Idempotency::DuplicateNamesPost
    }

    /// A repeated create is refused without naming the post (X).
    pub fn duplicate_without_id(&self) -> bool {
        self.idempotency == Idempotency::DuplicateWithoutId
    }
}
