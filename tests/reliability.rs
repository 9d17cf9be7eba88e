//! Reliability beyond one run: the content guard, and the sweeper that re-drives failed and
//! stuck drafts, gives up after its cap, reminds the owner of unknowns, and never re-posts a
//! draft that has a record.

use crate::support;

use std::time::Duration;

use postonce::outcome::OutcomeKind;
use postonce::pipeline::Action;
use postonce::record::{now_s, DraftStatus, DraftUpdate};
use support::env::{Env, Stores};
use support::linkedin::{DuplicateCheck, Mode};

#[tokio::test]
async fn a_caption_posted_under_another_key_is_refused_unless_forced() {
    for env in [Env::start().await, Env::local().await] {
        env.linkedin.set_duplicate_check(DuplicateCheck::Off);
        let a = env.key();
        assert_eq!(
            env.post(&a, "Launch day! See https://x.dev/p?id=1")
                .await
                .outcome,
            OutcomeKind::Posted
        );
        let b = env.key();
        // Same caption after normalization: whitespace and a tracking parameter differ.
        let o = env
            .post(&b, "Launch   day!\nSee https://x.dev/p?id=1&utm_source=li")
            .await;
        assert_eq!(
            (o.outcome, o.retryable),
            (OutcomeKind::Failed, false),
            "{o:?}"
        );
        assert!(o.detail.contains(&a.to_string()), "{}", o.detail);
        let buttons: Vec<String> = o.buttons().into_iter().map(|b| b.data).collect();
        assert_eq!(buttons, vec![format!("force:{b}")]);
        assert_eq!(env.linkedin.create_requests(), 1);
        let report = env
            .telegram
            .requests_for("sendMessage")
            .last()
            .cloned()
            .expect("report");
        assert_eq!(
            report["reply_markup"]["inline_keyboard"][0][0]["text"],
            "Post anyway"
        );

        let mut forced = env.request(&b, None);
        forced.action = Action::Force;
        let o = env.app.pipeline.run(forced, env.deadline()).await;
        assert_eq!(o.outcome, OutcomeKind::Posted, "{o:?}");
        assert_eq!(env.linkedin.posts_created(), 2);
    }
}

async fn make_due(env: &Env, key: &postonce::key::PostKey, error: &str) {
    let update = DraftUpdate::Failed {
        error: error.into(),
        retryable: true,
        next_retry_at: Some(now_s() - 1),
    };
    assert!(env
        .app
        .pipeline
        .records
        .update_draft(key, &update, &[], now_s())
        .await
        .expect("update"));
}

#[tokio::test]
async fn the_sweeper_redrives_gives_up_reminds_and_never_reposts() {
    let env = Env::with(
        Stores::Real,
        &[
            ("POSTONCE_MAX_ATTEMPTS", "3"),
            ("POSTONCE_RECONCILE_AFTER_S", "2"),
            ("POSTONCE_RECONCILE_WINDOW_S", "3"),
        ],
    )
    .await;
    // No duplicate check at LinkedIn: anything posted twice would show.
    env.linkedin.set_duplicate_check(DuplicateCheck::Off);
    let dl = || env.deadline();

    // A retryable failure whose time has come is re-run and posted.
    let retried = env.key();
    assert_eq!(
        env.post_under(Mode::Status(429), &retried, "Rate limited at first")
            .await
            .outcome,
        OutcomeKind::Failed
    );
    let report = env.app.pipeline.sweep(&dl()).await.expect("sweep");
    assert!(report.runs.is_empty(), "not due yet: {report:?}");
    make_due(&env, &retried, "429").await;

    // Out of attempts: needs_review, and the owner is told.
    let tired = env.key();
    env.app
        .pipeline
        .records
        .save_draft(&tired, &env.content("Tired draft"), "test", now_s())
        .await
        .expect("draft");
    for _ in 0..3 {
        make_due(&env, &tired, "image host down").await;
    }

    // A draft that has a record, left `failed` by hand: swept, never posted again.
    let recorded = env.key();
    assert_eq!(
        env.post(&recorded, "Already out there").await.outcome,
        OutcomeKind::Posted
    );
    make_due(&env, &recorded, "stale").await;

    let before = env.linkedin.posts_created();
    let report = env.app.pipeline.sweep(&dl()).await.expect("sweep");
    println!("sweep: {report:?}");
    let outcome_of = |k: &postonce::key::PostKey| {
        report
            .runs
            .iter()
            .find(|o| o.key == k.to_string())
            .map(|o| o.outcome)
    };
    assert_eq!(outcome_of(&retried), Some(OutcomeKind::Posted));
    assert_eq!(outcome_of(&recorded), Some(OutcomeKind::AlreadyPosted));
    let draft = env.status(&recorded).await.snapshot.draft.expect("draft");
    assert_eq!(
        draft.status,
        DraftStatus::Posted,
        "a draft with a record is marked done"
    );
    assert_eq!(report.needs_review, vec![tired.to_string()]);
    assert_eq!(
        env.linkedin.posts_created(),
        before + 1,
        "only the retried draft was newly posted"
    );
    let draft = env.status(&tired).await.snapshot.draft.expect("draft");
    assert_eq!(draft.status, DraftStatus::NeedsReview);
    assert!(env
        .telegram
        .requests_for("sendMessage")
        .iter()
        .any(|m| m["text"]
            .as_str()
            .is_some_and(|t| t.contains("needs you") && t.contains(&tired.to_string()))));

    // Unknown past the window: the owner is reminded once, and nothing is sent to LinkedIn.
    let stale = env.key();
    assert_eq!(
        env.post_under(Mode::Status(500), &stale, "Server error, who knows")
            .await
            .outcome,
        OutcomeKind::Unknown
    );
    env.wait_until_attempt_is(&stale, Duration::from_secs(4))
        .await;
    let creates = env.linkedin.create_requests();
    let first = env.app.pipeline.sweep(&dl()).await.expect("sweep");
    let second = env.app.pipeline.sweep(&dl()).await.expect("sweep");
    assert_eq!(first.reminded, vec![stale.to_string()]);
    assert!(second.reminded.is_empty(), "reminded once");
    assert_eq!(env.linkedin.create_requests(), creates);
    assert!(env
        .telegram
        .requests_for("sendMessage")
        .iter()
        .any(|m| m["text"]
            .as_str()
            .is_some_and(|t| t.contains("Reminder") && t.contains(&stale.to_string()))));
}

/// The sweeper re-drives a posted-but-not-recorded draft: it meets the kept claim and repairs
/// the record without posting.
#[tokio::test]
async fn the_sweeper_repairs_a_posted_but_not_recorded_draft() {
    let env = Env::start().await;
    let key = env.key();
    env.app
        .pipeline
        .records
        .save_draft(&key, &env.content("Kept claim"), "test", now_s())
        .await
        .expect("draft");
    // An attempt older than the quiet period (the sweeper leaves younger ones alone).
    let quiet = i64::try_from(env.quiet_period().as_secs()).expect("seconds");
    let pending = postonce::record::PendingPost {
        text: "Kept claim".into(),
        media_id: "urn:li:image:1".into(),
        alt: None,
        at: now_s() - quiet - 1,
        run: "run-gone".into(),
        caption_hash: None,
        last_sent_at: None,
        request: None,
    };
    assert!(env
        .app
        .pipeline
        .records
        .update_draft(&key, &DraftUpdate::Intent(pending), &[], now_s())
        .await
        .expect("intent"));
    // The state a run leaves when LinkedIn accepted and the record write failed.
    env.redis().cli(&[
        "SET",
        &format!("claim:{key}"),
        "posted:urn:li:share:424242",
        "EX",
        "604800",
    ]);
    let report = env.sweep().await;
    let run = report
        .runs
        .iter()
        .find(|o| o.key == key.to_string())
        .expect("swept");
    assert_eq!(run.outcome, OutcomeKind::AlreadyPosted, "{run:?}");
    let st = env.status(&key).await;
    assert_eq!(
        st.snapshot.record.and_then(|r| r.post_id).as_deref(),
        Some("urn:li:share:424242")
    );
    assert_eq!(
        st.snapshot.draft.map(|d| d.status),
        Some(DraftStatus::Posted)
    );
    assert!(st.claim.is_none());
    assert_eq!(env.linkedin.total_requests().await, 0);
}
