//! The network in the protocol model: how each network answers a create (its duplicate
//! semantics) and how its ambiguous creates are settled (`Lane::settle`). The pipeline's side is
//! in `model.rs`.

use crate::state::*;

impl Net {
    /// `Lane::settle`, from what the network's adapter says it can do.
    pub fn settle(self, bound: &Bound) -> Settle {
        match self {
            Net::Linkedin => Settle::Resend,
            Net::X => Settle::ReadBack,
            Net::TelegramChannel => Settle::AskOwner,
            Net::Mastodon => Settle::Replay {
                window: Some(bound.key_memory),
            },
            Net::Bluesky => Settle::Replay { window: None },
            // The kept container's status is read back (`Idempotency::Container`).
            Net::Threads => Settle::ReadBack,
        }
    }
}

impl ProtocolModel {
    /// The network processes `from`'s request, and answers if its sender still waits.
    /// `refused`: Threads publishes, then refuses the publish.
    pub fn deliver(&self, s: &mut State, from: Who, refused: bool) {
        let i = s.in_flight.iter().position(|r| r.from == from).unwrap();
        let text = s.in_flight[i].text;
        let same_text = s.posts.iter().position(|p| p.text == text);
        if self.net == Net::Linkedin && !s.in_flight[i].processing && same_text.is_none() {
            // Its duplicate check sees only finished posts: this one is being processed, and
            // a request that arrives meanwhile passes the check too.
            s.in_flight[i].processing = true;
            return;
        }
        let req = s.in_flight.remove(i);
        let fresh = |s: &mut State| {
            s.posts.push(Post {
                at: s.clock,
                rkey: req.rkey,
                text: req.text,
            });
            let n = u8::try_from(s.posts.len() - 1).unwrap();
            (Some(PostId { dry: false, n }), false)
        };
        let existing = |n: usize| {
            Some(PostId {
                dry: false,
                n: u8::try_from(n).unwrap(),
            })
        };
        let (post, duplicate) = match self.net {
            // 422 DUPLICATE_POST naming the post of this text: it sees only finished posts.
            Net::Linkedin if !req.processing => (existing(same_text.unwrap()), true),
            // The key is made from the draft's key and the body, so only the same text hits it.
            Net::Mastodon => match s
                .posts
                .iter()
                .position(|p| p.text == req.text && s.clock - p.at < self.bound.key_memory)
            {
                // The key's post, answered as if created now.
                Some(n) => (existing(n), false),
                None => fresh(s),
            },
            Net::Bluesky => match s.posts.iter().position(|p| p.rkey == req.rkey) {
                Some(n) => (existing(n), false),
                None => fresh(s),
            },
            // The container publishes at most once: a publish of a published one is refused,
            // and so, at times, is one that published it (`refused`). The adapter reads the
            // container then: `PUBLISHED`, the post of the request that names it, that is of
            // this draft's kept attempt (`PostError::StagedPublished`), recorded, never "someone
            // else's" (issue 30).
            Net::Threads => {
                let own = self.off(Mutation::StagedPublishedAsOthers);
                match s.posts.iter().position(|p| p.rkey == req.rkey) {
                    Some(n) => (existing(n), own),
                    None if refused => (fresh(s).0, own),
                    None => fresh(s),
                }
            }
            // X's duplicate check is not relied on (the model's X has none); a channel has none.
            _ => fresh(s),
        };
        if s.runs[from.i()].pc == Pc::Await {
            s.runs[from.i()].pc = Pc::Record(post, duplicate);
        }
    }
}
