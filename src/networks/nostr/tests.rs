//! The signing, checked against NIP-01's rules and a known vector; the relays' answers; the
//! configuration's refusals.

use super::relay::{parse_relay, parse_relays};
use super::event::{event_id, hashtag_tags, serialized, Event, Keys, KIND_NOTE};
use super::relay::{read_ok, Published};
use super::*;

/// A real kind-1 event from the network (NIP-01's `id` and `sig` as relays keep them), checked
/// by recomputing its id here and verifying its signature with libsecp256k1.
#[test]
fn known_event_vector() {
    let e: Event = serde_json::from_str(r#"{"id":"b9fead6eef87d8400cbc1a5621600b360438affb9760a6a043cc0bddea21dab6","pubkey":"82341f882b6eabcd2ba7f1ef90aad961cf074af15b9ef44a09f9d2a8fbfbe6a2","created_at":1676161639,"kind":1,"tags":[],"content":"this is going to work","sig":"76d19889a803236165a290fa8f3cf5365af8977ee1e002afcfd37063d1355fc755d0293d27ba0ec1c2468acfaf95b7e950e57df275bb32d7a4a3136f8862d2b7"}"#).unwrap();
    assert_eq!(
        hex::encode(event_id(&e.pubkey, e.created_at, e.kind, &e.tags, &e.content)),
        e.id
    );
    assert!(e.is_valid());
    let mut forged = e.clone();
    forged.content.push('!');
    assert!(!forged.is_valid(), "a changed content no longer matches its id");
}

/// BIP-340's test vector 0 key (secret 3): its x-only public key.
#[test]
fn bip340_public_key() {
    let k = Keys::parse("0000000000000000000000000000000000000000000000000000000000000003").unwrap();
    assert_eq!(
        k.public_hex(),
        "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9"
    );
    // NIP-19's own example pair.
    let k = Keys::parse("nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5").unwrap();
    assert_eq!(
        k.public_hex(),
        "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"
    );
    assert_eq!(
        k.npub(),
        "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
    );
    assert!(!format!("{k:?}").contains("nsec"), "Debug shows the npub only");
}

/// NIP-01: in content only `\n \" \\ \r \t \b \f` are escaped; everything else (non-ASCII,
/// `/`, `<`) verbatim, no whitespace in the array.
#[test]
fn escaping_rules() {
    let content = "a\nb\"c\\d\re\tf\u{8}g\u{c}h é 日本 😀 </x> \u{2028}";
    let s = serialized("ab", 7, 1, &[vec!["t".into(), "x".into()]], content);
    assert_eq!(
        s,
        "[0,\"ab\",7,1,[[\"t\",\"x\"]],\"a\\nb\\\"c\\\\d\\re\\tf\\bg\\fh é 日本 😀 </x> \u{2028}\"]"
    );
}

#[test]
fn signed_notes_verify_and_are_fixed_by_their_parts() {
    let k = Keys::generate();
    let e = k.sign(1_700_000_000, KIND_NOTE, hashtag_tags("Hi #Rust #rust #Nostr_1"), "Hi".into());
    assert!(e.is_valid());
    assert_eq!(e.tags, vec![vec!["t".to_owned(), "rust".to_owned()], vec!["t".to_owned(), "nostr_1".to_owned()]]);
    let again = k.sign(1_700_000_000, KIND_NOTE, e.tags.clone(), "Hi".into());
    assert_eq!(again.id, e.id, "same parts, same id (the signature may differ)");
    let later = k.sign(1_700_000_001, KIND_NOTE, e.tags.clone(), "Hi".into());
    assert_ne!(later.id, e.id);
    assert!(Keys::parse(k.nsec().expose()).is_ok());
}

#[test]
fn keys_refused_without_showing_them() {
    for bad in ["", "nsec1abc", "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg", "zz", &"0".repeat(64)] {
        let e = Keys::parse(bad).expect_err(bad);
        assert!(bad.len() < 10 || !e.contains(bad), "{e}");
    }
}

#[test]
fn ok_answers() {
    assert_eq!(read_ok(true, ""), Published::Accepted);
    assert!(read_ok(false, "duplicate: exists").holds(), "the Python relay's duplicate");
    assert!(read_ok(true, "duplicate: already have this event").holds());
    assert!(matches!(read_ok(false, "invalid: Bad signature"), Published::Refused { transient: false, .. }));
    assert!(matches!(read_ok(false, "rate-limited: slow down"), Published::Refused { transient: true, .. }));
}

#[test]
fn relay_urls() {
    assert!(parse_relay("wss://relay.damus.io").is_ok());
    assert!(parse_relay("ws://127.0.0.1:6969").is_ok());
    for bad in ["https://relay.example", "wss://", "wss://u:p@relay.example", "wss://r.example/?x=1", "wss://r.example/#f", "wss://r.exa mple", "wss://r.exa\tmple", "javascript:alert(1)", "wss://ré.example"] {
        assert!(parse_relay(bad).is_err(), "{bad:?}");
    }
    let e = parse_relays("wss://a.example,wss://a.example").unwrap_err();
    assert_eq!(e.var, "NOSTR_RELAYS");
    assert_eq!(parse_relays("wss://a.example, wss://b.example").unwrap().len(), 2);
}

#[test]
fn judged_by_the_number_of_relays_holding_it() {
    let k = Keys::generate();
    let e = k.sign(1, KIND_NOTE, vec![], "x".into());
    let a = NostrAdapter::new(reqwest::Client::new(), k, vec!["ws://a".into(), "ws://b".into()], 2, None, Duration::from_secs(1));
    let r = |p: Published| ("ws://x".to_owned(), p);
    assert!(a.judge(&e, &[r(Published::Accepted), r(Published::Duplicate("duplicate: exists".into()))]).is_ok());
    let one = a.judge(&e, &[r(Published::Accepted), r(Published::NotSent("refused".into()))]).unwrap_err();
    assert!(one.may_exist(), "on a relay, below the minimum: in doubt, never a new event");
    let lost = a.judge(&e, &[r(Published::NoAnswer("closed".into())), r(Published::NotSent("x".into()))]).unwrap_err();
    assert!(lost.may_exist());
    let down = a.judge(&e, &[r(Published::NotSent("a".into())), r(Published::NotSent("b".into()))]).unwrap_err();
    assert!(!down.may_exist() && down.is_transient());
    let refused = |m: &str| a.judge(&e, &vec![r(Published::Refused { message: m.into(), transient: false }); 2]).unwrap_err();
    assert!(matches!(refused("invalid: 1 is too old"), PostError::Rejected { .. }));
    let key = refused("blocked: not on the list");
    assert!(matches!(key, PostError::CredentialRefused { .. }) && key.to_string().contains("postonce auth nostr"), "{key}");
    assert!(matches!(refused("rate-limited: slow"), PostError::RateLimited { .. }));
}
