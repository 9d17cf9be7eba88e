//! Issue 30, finding 9: what the owner is told, and what is listed.
//! - A report cut at Telegram's limit tells only the targets whose block it carried whole; the
//!   others are left to the sweeper, which tells each once.
//! - Drafts of a network whose credentials were removed are listed (`status --all`,
//!   `schedule list`, the sweep's `waiting`) with the reason, told once, and never run.
//!
//! Real redis-server and DynamoDB Local; the networks and Telegram are wire-format fakes, and
//! every count is taken at the fakes.

use crate::support;

use std::time::Duration;

use postonce::key::PostKey;
use postonce::networks::Network;
use postonce::outcome::OutcomeKind;
use postonce::record::{now_s, DraftStatus};
use support::env::{Env, Stores};

/// The messages to the owner's chat.
fn sent(env: &Env) -> Vec<String> {
    env.telegram
        .requests_for("sendMessage")
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}

/// Five targets, each refused for good with a long reason (its cover is a local file that does
/// not exist, with a path of about 1,000 characters, which each reason names): the report is
/// over Telegram's limit and is cut at 3,990 characters. Only the targets whose whole block the
/// delivered report carries are marked told; the sweeper tells each of the others, once, and
/// none of the told ones again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_cut_at_telegrams_limit_marks_told_only_the_targets_it_carried_whole() {
    let env = Env::with_five_targets(Stores::Real, &[]).await;
    let key = env.key();
    let folders: String = (b'a'..=b'd')
        .map(|c| format!("/{}", char::from(c).to_string().repeat(240)))
        .collect();
    let mut content = env.announcement(&key);
    content.image = format!("{folders}/{}.png", key.slug());
    let o = env
        .app
        .pipeline
        .run(env.request(&key, Some(content)), env.deadline())
        .await;
    assert_eq!(o.parts.len(), 5, "{o:?}");
    let reports: Vec<String> = sent(&env)
        .into_iter()
        .filter(|t| t.contains(&key.to_string()))
        .collect();
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let report = &reports[0];
    assert!(report.ends_with('…'), "the report was cut: {report}");
    let (mut whole, mut cut) = (Vec::new(), Vec::new());
    for p in &o.parts {
        assert_eq!(
            (p.outcome, p.retryable),
            (OutcomeKind::Failed, false),
            "{p:?}"
        );
        let block = format!("{} — ❌ Not posted\n{}", p.network.label(), p.detail);
        let target = key.on(p.network);
        let told = env
            .status(&target)
            .await
            .snapshot
            .draft
            .expect("a draft")
            .reminded;
        println!(
            "{}: whole in the report {}, marked told {told}",
            p.network.as_str(),
            report.contains(&block)
        );
        assert_eq!(told, report.contains(&block), "{}", p.network.as_str());
        if told {
            whole.push(target);
        } else {
            cut.push(target);
        }
    }
    assert!(
        !whole.is_empty() && !cut.is_empty(),
        "whole {whole:?}, cut {cut:?}"
    );

    let first = env.sweep().await;
    let mut reminded = first.reminded.clone();
    reminded.sort();
    let mut want: Vec<String> = cut.iter().map(PostKey::to_string).collect();
    want.sort();
    assert_eq!(reminded, want, "the sweeper tells the cut ones: {first:?}");
    let second = env.sweep().await;
    assert!(second.reminded.is_empty(), "told once: {second:?}");
}

/// X's credentials are removed while X has drafts: one scheduled and due, one scheduled for
/// later, one failed (retryable, waiting for its next try). Without the credentials, X is a dry
/// run, which never touches the real stores: the drafts are listed with the reason
/// (`status --all`, `schedule list`, the sweep's `waiting`), the due one is told once, and
/// nothing runs them (no run in the sweep, nothing sent to X, nothing in the dry-run store).
/// With the credentials back, the sweeper posts the due one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drafts_of_a_network_without_credentials_are_listed_with_the_reason_and_never_run() {
    let env = Env::with_targets(Stores::Real, &[]).await;
    let (due, later, failed) = (env.key(), env.key(), env.key());
    let now = now_s();
    for (key, at) in [(&due, now + 2), (&later, now + 3_600)] {
        let mut req = env.request_to(key, Some(env.announcement(key)), &[Network::X]);
        req.publish_at = Some(at);
        let o = env.app.pipeline.run(req, env.deadline()).await;
        assert_eq!(o.outcome, OutcomeKind::Scheduled, "{o:?}");
    }
    env.x().set_upload_mode(support::x::Mode::Status(503));
    let req = env.request_to(&failed, Some(env.announcement(&failed)), &[Network::X]);
    let o = env.app.pipeline.run(req, env.deadline()).await;
    env.x().set_upload_mode(support::x::Mode::Normal);
    assert_eq!(
        (o.outcome, o.retryable),
        (OutcomeKind::Failed, true),
        "{o:?}"
    );

    let no_x = env
        .app_with(&[
            ("X_API_KEY", ""),
            ("X_API_SECRET", ""),
            ("X_ACCESS_TOKEN", ""),
            ("X_ACCESS_TOKEN_SECRET", ""),
        ])
        .await;
    let because = "waits: x has no credentials configured (X_API_KEY, X_API_SECRET, X_ACCESS_TOKEN and X_ACCESS_TOKEN_SECRET unset)";
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let before = sent(&env).len();
    let sweep = no_x.pipeline.sweep(&env.deadline()).await.expect("sweep");
    println!("{sweep:#?}");
    assert!(sweep.runs.is_empty(), "nothing is run: {:?}", sweep.runs);
    assert_eq!(sweep.reminded, vec![due.on(Network::X).to_string()]);
    let told: Vec<String> = sent(&env).split_off(before);
    assert_eq!(told.len(), 1, "{told:#?}");
    assert!(told[0].contains(because), "{}", told[0]);
    let again = no_x.pipeline.sweep(&env.deadline()).await.expect("sweep");
    assert!(
        again.runs.is_empty() && again.reminded.is_empty(),
        "{again:?}"
    );
    for waiting in [sweep.waiting, again.waiting] {
        let listed: Vec<&str> = waiting.iter().map(|w| w.key.as_str()).collect();
        assert!(
            listed.contains(&due.on(Network::X).to_string().as_str()),
            "{waiting:?}"
        );
    }

    let all = no_x
        .pipeline
        .waiting(&env.deadline())
        .await
        .expect("waiting");
    println!("{all:#?}");
    for key in [&due, &failed] {
        let target = key.on(Network::X).to_string();
        let w = all
            .iter()
            .find(|w| w.key == target)
            .unwrap_or_else(|| panic!("{target} is not listed: {all:?}"));
        assert!(w.reason.starts_with(because), "{}", w.reason);
    }
    assert!(!all
        .iter()
        .any(|w| w.key == later.on(Network::X).to_string()));
    let scheduled = no_x
        .pipeline
        .scheduled(&env.deadline())
        .await
        .expect("list");
    let l = scheduled
        .iter()
        .find(|d| d.key == later.on(Network::X).to_string())
        .expect("the later one is listed");
    assert!(
        l.last_error
            .as_deref()
            .is_some_and(|e| e.starts_with(because)),
        "{l:?}"
    );

    // Nothing ran them: X got nothing, the dry-run store has nothing, the real drafts are as
    // they were.
    assert_eq!(env.x().create_requests(), 0);
    for key in [&due, &later, &failed] {
        let target = key.on(Network::X);
        let dry = no_x
            .pipeline
            .status(&target, &env.deadline())
            .await
            .expect("status");
        assert!(
            dry.snapshot.draft.is_none(),
            "{target}: {:?}",
            dry.snapshot.draft
        );
    }
    let st = env
        .status(&due.on(Network::X))
        .await
        .snapshot
        .draft
        .expect("draft");
    assert_eq!(st.status, DraftStatus::Scheduled);

    let back = env.sweep().await;
    assert_eq!(back.runs.len(), 1, "{back:?}");
    assert_eq!(env.posts_on(&due, Network::X).len(), 1, "{back:?}");
}
