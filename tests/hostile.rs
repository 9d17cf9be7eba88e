//! Property tests of every parser that faces the outside: whatever arrives, they answer with a
//! value or a clear error, never a panic, and what they accept is valid.

use postonce::image::OriginPolicy;
use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::triggers::telegram::{parse_data, parse_update, Update};
use postonce::triggers::{ci::signature_valid, parse_draft, parse_targets};
use proptest::prelude::*;
use serde_json::{json, Value};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::String),
        prop_oneof![
            Just("blog"),
            Just("hello-world"),
            Just("retry:blog-x"),
            Just("https://cdn.example.com/a.png"),
            Just("http://169.254.169.254/"),
            Just("file:///etc/passwd"),
            Just("Blog"),
            Just("a--b"),
            Just("x"),
            Just("telegram"),
            Just("linkedin"),
            Just("myspace")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::hash_map(
                prop_oneof![
                    Just("kind".to_owned()),
                    Just("slug".to_owned()),
                    Just("caption".to_owned()),
                    Just("image_url".to_owned()),
                    Just("link".to_owned()),
                    Just("alt".to_owned()),
                    Just("targets".to_owned()),
                    Just("captions".to_owned()),
                    Just("x".to_owned()),
                    Just("telegram".to_owned()),
                    Just("linkedin".to_owned()),
                    Just("update_id".to_owned()),
                    Just("callback_query".to_owned()),
                    Just("data".to_owned()),
                    Just("from".to_owned()),
                    Just("id".to_owned()),
                    Just("rawPath".to_owned()),
                    Just("requestContext".to_owned()),
                    Just("body".to_owned()),
                    Just("isBase64Encoded".to_owned()),
                    "[a-z_]{1,10}"
                ],
                inner,
                0..8
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ci_bodies_never_panic_and_accepted_drafts_are_valid(v in json_value(), required in any::<bool>()) {
        let policy = OriginPolicy::any_public_https();
        if let Ok((key, content)) = parse_draft(&v, required, &policy) {
            prop_assert!(PostKey::parse(&key.to_string()).is_ok());
            if let Some(c) = content {
                prop_assert!(!c.caption.trim().is_empty() && c.caption.chars().count() <= 3000);
                prop_assert!(policy.check(&c.image).is_ok());
            } else {
                prop_assert!(!required);
            }
        }
    }

    #[test]
    fn targets_and_captions_accept_only_known_networks(v in json_value(), targets in prop::collection::vec(prop_oneof![Just("linkedin"), Just("x"), Just("telegram"), Just("myspace"), Just(""), Just("X")], 0..5)) {
        let mut body = json!({"kind": "blog", "slug": "t", "caption": "hi", "image_url": "https://cdn.example.com/a.png"});
        body["targets"] = json!(targets);
        body["captions"] = v;
        match parse_targets(&body) {
            Ok(parsed) => {
                prop_assert!(!parsed.is_empty());
                for t in &targets {
                    prop_assert!(Network::parse(t).is_some(), "accepted {t:?}");
                }
            }
            Err(e) => prop_assert_eq!(e.field.as_str(), "targets"),
        }
        if let Ok((_, Some(c))) = parse_draft(&body, true, &OriginPolicy::any_public_https()) {
            for text in c.captions.values() {
                prop_assert!(!text.trim().is_empty() && text.chars().count() <= 3000);
            }
            prop_assert!(body["captions"].is_null() || body["captions"].is_object());
        }
    }

    #[test]
    fn raw_bytes_never_panic_any_parser(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_update(&bytes);
        let _ = signature_valid(b"k", &bytes, std::str::from_utf8(&bytes).ok());
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            let _ = parse_draft(&v, true, &OriginPolicy::any_public_https());
            let _ = postonce::lambda::http_request(&v);
        }
        if let Ok(s) = std::str::from_utf8(&bytes) {
            let _ = parse_data(s);
            let _ = PostKey::parse(s);
            let _ = OriginPolicy::any_public_https().check(s);
            let _ = OriginPolicy::parse(s);
        }
    }

    #[test]
    fn telegram_updates_never_panic(v in json_value()) {
        let bytes = serde_json::to_vec(&v).unwrap_or_default();
        if let Ok(Update::Callback(cb)) = parse_update(&bytes) {
            if let Some(Ok(press)) = cb.data.as_deref().map(parse_data) {
                prop_assert!(press.key.to_string().len() <= 48);
            }
        }
    }

    #[test]
    fn callback_data_accepts_only_valid_actions_and_keys(s in "(retry|done|force|post|)(:)?[a-z0-9-]{0,60}(@(x|telegram|linkedin|myspace|))?") {
        if let Ok(press) = parse_data(&s) {
            prop_assert!(s.len() <= 64);
            prop_assert!(s.starts_with("retry:") || s.starts_with("done:") || s.starts_with("force:"));
            let key = s.split_once(':').map(|(_, k)| k.split('@').next().unwrap_or_default().to_owned());
            prop_assert_eq!(key, Some(press.key.to_string()));
            prop_assert!(press.targets.len() <= 1);
        }
    }

    #[test]
    fn lambda_events_never_panic(v in json_value()) {
        let _ = postonce::lambda::http_request(&v);
        let _ = postonce::triggers::sweep::is_sweep_event(&v);
    }

    #[test]
    fn little_text_escapes_every_reserved_character(s in ".{0,200}") {
        let out = postonce::networks::linkedin::little_text::escape(&s);
        // Removing the escapes gives the caption back: nothing is lost or added.
        let mut back = String::new();
        let mut chars = out.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                back.push(chars.next().unwrap_or('\\'));
            } else {
                back.push(c);
            }
        }
        prop_assert_eq!(back, s);
    }
}
