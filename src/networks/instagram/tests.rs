//! Instagram's answers through the shared Graph classifier and parsers, in Instagram's words
//! and field names.

use reqwest::header::HeaderMap;
use serde_json::json;

use super::{capabilities, prepared, DIALECT};
use crate::networks::graph::wire::{classify, ContainerStatus, ListPage, Op};
use crate::networks::{MediaRef, PostError};

fn graph(code: i64, sub: Option<i64>) -> String {
    json!({"error": {"message": "msg", "type": "OAuthException", "code": code,
        "error_subcode": sub, "fbtrace_id": "AbC"}})
    .to_string()
}

#[test]
fn a_dead_token_is_a_refused_credential_naming_auth_instagram() {
    let h = HeaderMap::new();
    for (status, body) in [(400, graph(190, Some(463))), (401, graph(190, None)), (401, String::new())] {
        for op in [Op::Container, Op::Publish, Op::Status, Op::List, Op::Check] {
            let e = classify(&DIALECT, op, status, &h, &body);
            assert!(
                matches!(&e, PostError::CredentialRefused { network: "Instagram", message }
                    if message.contains("postonce auth instagram") && message.contains("INSTAGRAM_ACCESS_TOKEN")),
                "{status} {op:?} {e:?}"
            );
        }
    }
    // Code 9 (observed for a used-up publishing quota) is a rate limit, as 4 is; a publish's
    // names Instagram's 50.
    let e = classify(&DIALECT, Op::Publish, 400, &h, &graph(9, None));
    assert!(matches!(&e, PostError::RateLimited { message, .. } if message.contains("50 posts")), "{e:?}");
    let e = classify(&DIALECT, Op::Container, 400, &h, &graph(100, Some(2_207_052)));
    assert!(
        matches!(&e, PostError::Rejected { message, .. } if message.contains("JPEG") && message.contains("4:5")),
        "{e:?}"
    );
    let e = classify(&DIALECT, Op::Check, 400, &h, &graph(100, Some(33)));
    assert!(matches!(&e, PostError::Rejected { message, .. } if message.contains("INSTAGRAM_USER_ID")), "{e:?}");
}

#[test]
fn status_code_and_captions_are_read_in_instagrams_names() {
    assert_eq!(
        ContainerStatus::parse(&DIALECT, &json!({"status_code": "FINISHED", "id": "1"})),
        Some(ContainerStatus::Finished)
    );
    assert_eq!(
        ContainerStatus::parse(&DIALECT, &json!({"status_code": "ERROR", "status": "Error: 2207026"})),
        Some(ContainerStatus::Error(Some("Error: 2207026".into())))
    );
    assert_eq!(ContainerStatus::parse(&DIALECT, &json!({"status": "FINISHED"})), None);
    let page = ListPage::parse(
        &DIALECT,
        &json!({"data": [{"id": "17", "caption": "hello", "timestamp": "2026-12-04T10:15:00+0000",
            "permalink": "https://www.instagram.com/p/Cx/"}]}),
    );
    assert_eq!(page.posts[0].text.as_deref(), Some("hello"));
    let p = prepared("hi", &MediaRef(json!({"alt_text": "a cat"})));
    assert_eq!(p.body, json!({"container": {"caption": "hi", "alt_text": "a cat"}}));
}

#[test]
fn its_limits_are_in_its_capabilities() {
    let c = capabilities();
    assert!(c.fetches_image && c.reads_back);
    assert_eq!(c.text.max, 2200);
    let many = (0..31).map(|i| format!("#t{i}")).collect::<Vec<_>>().join(" ");
    let why = c.tags.refusal(&many, "Instagram").expect("31 hashtags are refused");
    assert!(why.contains("31 hashtags") && why.contains("at most 30"), "{why}");
    assert!(c.tags.refusal(&many.replacen("#t0 ", "", 1), "Instagram").is_none());
}
