//! Threads' answers through the shared Graph classifier and parsers, in Threads' words.

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::json;
use std::time::Duration;

use super::DIALECT;
use crate::networks::graph::wire::{
    classify, ContainerStatus, ListPage, Op, RATE_LIMIT_CODES,
};
use crate::networks::PostError;

fn graph(code: i64, sub: Option<i64>) -> String {
    json!({"error": {"message": "msg", "type": "OAuthException", "code": code,
        "error_subcode": sub, "fbtrace_id": "AbC"}})
    .to_string()
}

#[test]
fn classifies_the_documented_answers() {
    let h = HeaderMap::new();
    for op in [Op::Container, Op::Publish, Op::Status, Op::List] {
        let e = classify(&DIALECT, op, 400, &h, &graph(190, Some(460)));
        assert!(
            matches!(&e, PostError::CredentialRefused { message, .. } if message.contains("THREADS_ACCESS_TOKEN") && message.contains("code 190") && message.contains("postonce auth threads")),
            "{op:?} {e:?}"
        );
        assert!(!e.is_transient());
        for code in RATE_LIMIT_CODES {
            let e = classify(&DIALECT, op, 400, &h, &graph(code, None));
            assert!(matches!(e, PostError::RateLimited { .. }), "{op:?} {code}");
        }
        assert!(matches!(
            classify(&DIALECT, op, 429, &h, "{}"),
            PostError::RateLimited { .. }
        ));
        let e = classify(&DIALECT, op, 503, &h, "<html>busy</html>");
        assert!(e.may_exist() && e.is_transient(), "{e:?}");
        let e = classify(&DIALECT, op, 500, &h, &graph(2, None));
        assert!(matches!(e, PostError::InDoubt { .. }), "{e:?}");
    }
    let e = classify(&DIALECT, Op::Container, 400, &h, &graph(100, Some(2207052)));
    assert!(
        matches!(&e, PostError::Rejected { message, .. } if message.contains("public")),
        "{e:?}"
    );
    let e = classify(&DIALECT, Op::Publish, 400, &h, &graph(100, None));
    assert!(matches!(e, PostError::Rejected { status: 400, .. }));
    let e = classify(&DIALECT, Op::List, 403, &h, &graph(10, None));
    assert!(matches!(e, PostError::ReadRefused { .. }), "{e:?}");
    let e = classify(&DIALECT, Op::Check, 400, &h, &graph(100, Some(33)));
    assert!(
        matches!(&e, PostError::Rejected { message, .. } if message.contains("THREADS_USER_ID")),
        "{e:?}"
    );
    let e = classify(&DIALECT, Op::Publish, 401, &h, "");
    assert!(matches!(e, PostError::CredentialRefused { .. }));
    let mut h = HeaderMap::new();
    h.insert("retry-after", HeaderValue::from_static("30"));
    assert!(matches!(
        classify(&DIALECT, Op::Publish, 429, &h, "{}"),
        PostError::RateLimited { retry_after: Some(d), message, .. }
            if d == Duration::from_secs(30) && message.contains("250")
    ));
}

#[test]
fn statuses_and_pages() {
    assert_eq!(
        ContainerStatus::parse(&DIALECT, &json!({"status": "ERROR", "error_message": "UNKNOWN"})),
        Some(ContainerStatus::Error(Some("UNKNOWN".into())))
    );
    assert_eq!(
        ContainerStatus::parse(&DIALECT, &json!({"status": "FINISHED", "id": "1"})),
        Some(ContainerStatus::Finished)
    );
    assert_eq!(ContainerStatus::parse(&DIALECT, &json!({"id": "1"})), None);
    let page = ListPage::parse(&DIALECT, &json!({
        "data": [{"id": "1", "text": "a", "timestamp": "2026-12-04T10:15:00+0000"}, {"x": 1}],
        "paging": {"cursors": {"before": "b", "after": "c"}, "next": "https://x/next"}
    }));
    assert_eq!(page.posts.len(), 1);
    assert_eq!(page.after.as_deref(), Some("c"));
    let last = ListPage::parse(&DIALECT, &json!({"data": [], "paging": {"cursors": {"after": "c"}}}));
    assert_eq!(last.after, None);
}
