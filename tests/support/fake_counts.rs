//! What each network's fake saw, by network: the posts of one draft, the images they carry, and
//! the totals, for tests that count over several networks (the conformance suite, the chaos and
//! fault tests, the images issue's end-to-end tests).

use postonce::key::PostKey;
use postonce::networks::Network;

use super::env::Env;
use super::received::Received;

impl Env {
    /// The ids of the posts for `key` on `network` at its fake: LinkedIn's commentary, X's
    /// text and the channel's caption all carry the key's slug.
    pub fn posts_on(&self, key: &PostKey, network: Network) -> Vec<String> {
        let slug = key.slug();
        match network {
            Network::Linkedin => self
                .linkedin
                .posts_containing(slug)
                .into_iter()
                .map(|p| p.urn)
                .collect(),
            Network::X => self
                .x()
                .posts()
                .into_iter()
                .filter(|p| p.text.contains(slug))
                .map(|p| p.id)
                .collect(),
            Network::Telegram => self
                .channel()
                .messages()
                .into_iter()
                .filter(|m| m.caption.contains(slug))
                .map(|m| m.message_id.to_string())
                .collect(),
            Network::Mastodon => self
                .mastodon()
                .statuses()
                .into_iter()
                .filter(|s| s.text.contains(slug))
                .map(|s| s.id)
                .collect(),
            Network::Bluesky => self
                .bluesky()
                .records()
                .into_iter()
                .filter(|r| {
                    r.value
                        .get("text")
                        .and_then(|t| t.as_str())
                        .is_some_and(|t| t.contains(slug))
                })
                .map(|r| r.uri)
                .collect(),
            Network::Threads => self.threads().posts_with(slug),
            Network::Instagram => self.instagram().posts_with(slug),
            Network::Facebook => self.facebook().posts_with(slug),
            Network::Discord => self
                .discord()
                .messages()
                .into_iter()
                .filter(|m| m.content.contains(slug))
                .map(|m| m.id)
                .collect(),
            Network::Nostr => self
                .relay()
                .notes_with(slug)
                .into_iter()
                .map(|e| e.id)
                .collect(),
        }
    }

    /// (create requests, posts) at `network`'s fake, over the whole test.
    pub fn fake_totals(&self, network: Network) -> (u64, usize) {
        match network {
            Network::Linkedin => (
                self.linkedin.create_requests(),
                self.linkedin.posts_created(),
            ),
            Network::X => (self.x().create_requests(), self.x().posts_created()),
            Network::Telegram => (
                self.channel().send_photo_requests(),
                self.channel().messages_posted(),
            ),
            Network::Mastodon => (
                self.mastodon().create_requests(),
                self.mastodon().statuses_created(),
            ),
            Network::Bluesky => (
                self.bluesky().put_requests(),
                usize::try_from(self.bluesky().posts_created()).unwrap_or(usize::MAX),
            ),
            Network::Threads => self.threads().totals(),
            Network::Instagram => self.instagram().totals(),
            Network::Facebook => self.facebook().totals(),
            Network::Discord => (
                self.discord().create_requests(),
                self.discord().messages_posted(),
            ),
            Network::Nostr => (
                self.relay().event_frames(),
                self.relay().notes_with("").len(),
            ),
        }
    }
}

impl Env {
    /// The images `key`'s posts on `network` carry, as that network's fake received them (for
    /// Threads and Instagram, the image each fetched from the container's URL).
    pub fn images_on(&self, key: &PostKey, network: Network) -> Vec<Received> {
        let slug = key.slug();
        match network {
            Network::Linkedin => self
                .linkedin
                .posts_containing(slug)
                .iter()
                .filter_map(|p| self.linkedin.image_of(p))
                .collect(),
            Network::X => self
                .x()
                .posts()
                .iter()
                .filter(|p| p.text.contains(slug))
                .flat_map(|p| self.x().images_of(p))
                .collect(),
            Network::Telegram => self
                .channel()
                .messages()
                .into_iter()
                .filter(|m| m.caption.contains(slug))
                .map(|m| m.image)
                .collect(),
            Network::Mastodon => self
                .mastodon()
                .statuses()
                .iter()
                .filter(|s| s.text.contains(slug))
                .flat_map(|s| self.mastodon().images_of(s))
                .collect(),
            Network::Bluesky => self
                .bluesky()
                .records()
                .into_iter()
                .filter(|r| r.text().contains(slug))
                .flat_map(|r| r.images.into_iter().map(|i| i.image))
                .collect(),
            Network::Threads => self.threads().images_with(slug),
            Network::Instagram => self.instagram().images_with(slug),
            Network::Facebook => self.facebook().images_with(slug),
            Network::Discord => self
                .discord()
                .messages()
                .into_iter()
                .filter(|m| m.content.contains(slug))
                .filter_map(|m| m.image)
                .collect(),
            Network::Nostr => self
                .relay()
                .notes_with(slug)
                .iter()
                .flat_map(super::nostr::imeta_hashes)
                .filter_map(|x| self.blossom().blob(&x))
                .collect(),
        }
    }
}
