//! One suite of behaviour tests run against every record store (files, DynamoDB Local,
//! PostgreSQL) and every claim store (Redis, files, PostgreSQL): racing record writers, intent
//! conditions, the due index under racing sweeps, a recorded post that spreads, pacing, kept secrets and the refused mark of
//! a credential, claim expiry and token fencing.
//!
//! A new store joins by one line in [`RECORD_STORES`] or [`CLAIM_STORES`]: a name and a
//! function that opens two handles on one fresh store (two processes sharing it).

use crate::support;

use std::any::Any;
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use postonce::claim::{Acquire, ClaimStore, ClaimValue};
use postonce::config::{Config, Secret};
use postonce::key::PostKey;
use postonce::record::{
    DraftContent, DraftStatus, DraftUpdate, Intent, PendingPost, PostedRecord, PutPosted,
    RecordStore, Slot,
};
use support::services::{dynamodb_endpoint, unique, PostgresServer, RedisServer};

/// Two handles on one fresh store, and whatever must live as long as they do.
struct Fixture<S: ?Sized> {
    a: Arc<S>,
    b: Arc<S>,
    _keep: Box<dyn Any + Send>,
}

type Open<S> = fn() -> Pin<Box<dyn Future<Output = Fixture<S>> + Send>>;

/// Every record store. A new one joins here.
const RECORD_STORES: &[(&str, Open<dyn RecordStore>)] = &[
    ("files", || Box::pin(files_records())),
    ("dynamodb", || Box::pin(dynamo_records())),
    ("postgres", || Box::pin(postgres_records())),
];

/// Every claim store. A new one joins here.
const CLAIM_STORES: &[(&str, Open<dyn ClaimStore>)] = &[
    ("redis", || Box::pin(redis_claims())),
    ("files", || Box::pin(files_claims())),
    ("postgres", || Box::pin(postgres_claims())),
];

async fn files_records() -> Fixture<dyn RecordStore> {
    use postonce::stores::local::LocalStore;
    let dir = tempfile::tempdir().expect("temp dir");
    Fixture {
        a: Arc::new(LocalStore::open(dir.path(), false).expect("open")),
        b: Arc::new(LocalStore::open(dir.path(), false).expect("open")),
        _keep: Box::new(dir),
    }
}

async fn dynamo_records() -> Fixture<dyn RecordStore> {
    use postonce::stores::dynamodb::DynamoStore;
    let table = unique("conformance-");
    let endpoint = dynamodb_endpoint();
    let vars = [
        ("POSTONCE_TABLE", table.as_str()),
        ("REDIS_URL", "redis://127.0.0.1:1"),
        ("AWS_ENDPOINT_URL_DYNAMODB", endpoint.as_str()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ];
    let config = Config::from_lookup(|k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_owned())
    })
    .expect("config");
    let a = DynamoStore::connect(&config, &table, false).await;
    a.create_table().await.expect("create the table");
    let b = DynamoStore::connect(&config, &table, false).await;
    Fixture {
        a: Arc::new(a),
        b: Arc::new(b),
        _keep: Box::new(()),
    }
}

async fn postgres_database() -> (
    PostgresServer,
    Arc<postonce::stores::postgres::Database>,
    Arc<postonce::stores::postgres::Database>,
) {
    use postonce::stores::postgres::Database;
    let pg = PostgresServer::start();
    support::env::migrate(&pg.url()).await;
    let open =
        || Arc::new(Database::new(&Secret::new(pg.url()), Duration::from_secs(5), 4).expect("url"));
    let (a, b) = (open(), open());
    (pg, a, b)
}

async fn postgres_records() -> Fixture<dyn RecordStore> {
    use postonce::stores::postgres::records::PgStore;
    let (pg, a, b) = postgres_database().await;
    Fixture {
        a: Arc::new(PgStore::new(a, false)),
        b: Arc::new(PgStore::new(b, false)),
        _keep: Box::new(pg),
    }
}

async fn redis_claims() -> Fixture<dyn ClaimStore> {
    use postonce::stores::redis::RedisClaims;
    let r = RedisServer::start();
    let open = || {
        Arc::new(
            RedisClaims::new(&Secret::new(r.url()), Duration::from_secs(2), false).expect("client"),
        )
    };
    let (a, b) = (open(), open());
    Fixture {
        a,
        b,
        _keep: Box::new(r),
    }
}

async fn files_claims() -> Fixture<dyn ClaimStore> {
    use postonce::stores::local::claims::FileClaims;
    let dir = tempfile::tempdir().expect("temp dir");
    Fixture {
        a: Arc::new(FileClaims::open(dir.path().join("claims")).expect("open")),
        b: Arc::new(FileClaims::open(dir.path().join("claims")).expect("open")),
        _keep: Box::new(dir),
    }
}

async fn postgres_claims() -> Fixture<dyn ClaimStore> {
    use postonce::stores::postgres::claims::PgClaims;
    let (pg, a, b) = postgres_database().await;
    Fixture {
        a: Arc::new(PgClaims::new(a, false)),
        b: Arc::new(PgClaims::new(b, false)),
        _keep: Box::new(pg),
    }
}

fn key() -> PostKey {
    PostKey::new("blog", &unique("c-")).expect("key")
}

fn content(caption: &str) -> DraftContent {
    DraftContent {
        caption: caption.to_owned(),
        image: "https://img.example/a.png".to_owned(),
        ..Default::default()
    }
}

fn record(key: &PostKey, run: &str, hash: Option<&str>) -> PostedRecord {
    PostedRecord {
        key: key.to_string(),
        post_id: Some(format!("urn:li:share:{run}")),
        posted_at: 1_000,
        run: run.to_owned(),
        source: "ci".to_owned(),
        caption_hash: hash.map(str::to_owned),
        url: None,
        cid: None,
    }
}

fn intent(run: &str) -> DraftUpdate {
    DraftUpdate::Intent(PendingPost {
        text: "text".into(),
        media_id: "urn:li:image:1".into(),
        alt: None,
        at: 100,
        run: run.to_owned(),
        caption_hash: Some("h".into()),
        last_sent_at: None,
        request: None,
    })
}

const OPEN: [DraftStatus; 2] = [DraftStatus::New, DraftStatus::Failed];

/// Two writers race for the record of each of 8 keys: one is created, the other reads the
/// winner's record; the draft holds the winner's copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_record_writers_one_wins_the_other_reads_it() {
    for (name, open) in RECORD_STORES {
        let f = open().await;
        for _ in 0..8 {
            let k = key();
            f.a.save_draft(&k, &content("x"), "ci", 10)
                .await
                .expect("save");
            let (ra, rb) = (record(&k, "run-a", None), record(&k, "run-b", None));
            let (x, y) = tokio::join!(f.a.put_posted(&ra, 20, 99), f.b.put_posted(&rb, 20, 99));
            let (x, y) = (x.expect("a"), y.expect("b"));
            let winner = match (&x, &y) {
                (PutPosted::Created, PutPosted::Exists(r)) => {
                    assert_eq!(r, &ra, "{name}: the loser reads the winner's record");
                    ra.clone()
                }
                (PutPosted::Exists(r), PutPosted::Created) => {
                    assert_eq!(r, &rb, "{name}: the loser reads the winner's record");
                    rb.clone()
                }
                other => panic!("{name}: exactly one writer wins, got {other:?}"),
            };
            let snap = f.b.load(&k, None).await.expect("load");
            assert_eq!(snap.record.as_ref(), Some(&winner), "{name}");
            let draft = snap.draft.expect("draft");
            assert_eq!(draft.status, DraftStatus::Posted, "{name}");
            assert_eq!(
                draft.record.as_ref(),
                Some(&winner),
                "{name}: the draft keeps the copy"
            );
            assert_eq!(
                draft.due_at, None,
                "{name}: a posted draft leaves the due index"
            );
            // Saving the content again answers the posted draft, unchanged.
            let again =
                f.a.save_draft(&k, &content("y"), "ci", 30)
                    .await
                    .expect("save again");
            assert_eq!(again.status, DraftStatus::Posted, "{name}");
            assert_eq!(again.record.as_ref(), Some(&winner), "{name}");
        }
    }
}

/// Intents and draft changes apply only in the state they expect.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intents_and_changes_are_conditioned_on_the_state_they_expect() {
    for (name, open) in RECORD_STORES {
        let f = open().await;
        let (k, other) = (key(), key());
        f.a.save_draft(&k, &content("x"), "ci", 10)
            .await
            .expect("save");
        // Racing intents: one is taken.
        let (i1, i2) = (intent("r1"), intent("r2"));
        let (x, y) = tokio::join!(
            f.a.take_intent(&k, &i1, &OPEN, None, 11),
            f.b.take_intent(&k, &i2, &OPEN, None, 11)
        );
        let taken: Vec<_> = [x.expect("a"), y.expect("b")]
            .into_iter()
            .filter(|i| *i == Intent::Taken)
            .collect();
        assert_eq!(taken.len(), 1, "{name}: one of two racing intents is taken");
        let d =
            f.a.load(&k, None)
                .await
                .expect("load")
                .draft
                .expect("draft");
        assert_eq!(d.status, DraftStatus::Unknown, "{name}");
        let run = d.pending.as_ref().expect("pending").run.clone();
        let stranger = if run == "r1" { "r2" } else { "r1" };
        // A change bound to another attempt does not land.
        let failed = DraftUpdate::Failed {
            error: "e".into(),
            retryable: true,
            next_retry_at: Some(50),
        };
        let bound = |r: &str| DraftUpdate::IfAttempt {
            run: r.into(),
            update: Box::new(failed.clone()),
        };
        assert!(
            !f.b.update_draft(&k, &bound(stranger), &[], 12)
                .await
                .expect("upd"),
            "{name}"
        );
        assert!(
            f.b.update_draft(&k, &bound(&run), &[], 12)
                .await
                .expect("upd"),
            "{name}"
        );
        let d =
            f.a.load(&k, None)
                .await
                .expect("load")
                .draft
                .expect("draft");
        assert_eq!(
            (d.status, d.attempts, d.due_at, d.pending),
            (DraftStatus::Failed, 1, Some(50), None),
            "{name}"
        );
        // A status condition.
        assert!(
            !f.a.update_draft(&k, &DraftUpdate::Cancel, &[DraftStatus::Scheduled], 13)
                .await
                .expect("upd"),
            "{name}"
        );
        // A delay is told once.
        assert!(
            f.a.update_draft(&k, &DraftUpdate::DelayTold, &[], 13)
                .await
                .expect("upd"),
            "{name}"
        );
        assert!(
            !f.b.update_draft(&k, &DraftUpdate::DelayTold, &[], 13)
                .await
                .expect("upd"),
            "{name}"
        );
        // No draft: nothing applies.
        assert!(
            !f.a.update_draft(&key(), &DraftUpdate::Reminded, &[], 13)
                .await
                .expect("upd"),
            "{name}"
        );
        // The content guard: a caption another key posted refuses the intent, naming it.
        f.a.put_posted(&record(&other, "r9", Some("abcdef0123")), 14, 99)
            .await
            .expect("other");
        assert_eq!(
            f.b.take_intent(&k, &intent("r3"), &OPEN, Some("abcdef0123"), 15)
                .await
                .expect("intent"),
            Intent::CaptionOwner(other.to_string()),
            "{name}"
        );
        // A record refuses it, answering the record.
        let mine = record(&k, "r4", None);
        f.a.put_posted(&mine, 16, 99).await.expect("mine");
        assert_eq!(
            f.b.take_intent(&k, &intent("r5"), &[], None, 17)
                .await
                .expect("intent"),
            Intent::Recorded(mine),
            "{name}"
        );
    }
}

/// The due index lists what is due, oldest first, and never what is done or not yet due; 4
/// racing sweeps between them see every due draft.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_due_index_under_racing_sweeps() {
    for (name, open) in RECORD_STORES {
        let f = open().await;
        let mut due = Vec::new();
        for i in 0..10 {
            let k = key();
            f.a.save_draft(&k, &content("x"), "ci", 100 + i)
                .await
                .expect("save");
            due.push(k.to_string());
        }
        for i in 0..5 {
            let k = key();
            f.a.save_draft(&k, &content("x"), "ci", 100)
                .await
                .expect("save");
            f.a.update_draft(&k, &DraftUpdate::Schedule { at: 10_000 + i }, &[], 101)
                .await
                .expect("later");
            let done = key();
            f.a.save_draft(&done, &content("x"), "ci", 100)
                .await
                .expect("save");
            f.a.put_posted(&record(&done, "r", None), 101, 99)
                .await
                .expect("posted");
        }
        let statuses = [
            DraftStatus::New,
            DraftStatus::Scheduled,
            DraftStatus::Failed,
        ];
        let alone = f.b.due_drafts(&statuses, 1_000).await.expect("due");
        let keys: Vec<String> = alone.iter().map(|d| d.key.clone()).collect();
        assert_eq!(keys, due, "{name}: exactly the due drafts, oldest first");
        let sweeps: Vec<_> = (0..4)
            .map(|i| {
                let s = if i % 2 == 0 { f.a.clone() } else { f.b.clone() };
                tokio::spawn(async move { s.due_drafts(&statuses, 1_000).await })
            })
            .collect();
        let mut seen = BTreeSet::new();
        for s in sweeps {
            let got = s.await.expect("join").expect("due");
            assert!(
                got.windows(2).all(|w| w[0].due_at <= w[1].due_at),
                "{name}: oldest first"
            );
            for d in got {
                assert!(due.contains(&d.key), "{name}: {} is not due", d.key);
                seen.insert(d.key);
            }
        }
        assert_eq!(
            seen.len(),
            due.len(),
            "{name}: racing sweeps between them see every due draft"
        );
        let later =
            f.a.due_drafts(&[DraftStatus::Scheduled], 20_000)
                .await
                .expect("due");
        assert_eq!(
            later.len(),
            5,
            "{name}: scheduled drafts are due at their time"
        );
    }
}

/// A recorded post that spreads (capability `spreads`) keeps its request on the `posted`
/// draft and is listed under `posted` when due; done spreading, it leaves the due index and
/// drops the request. Only a `posted` draft takes either change, and the record is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_recorded_post_keeps_its_request_while_it_spreads() {
    for (name, open) in RECORD_STORES {
        let f = open().await;
        let (k, open_one) = (key(), key());
        for k in [&k, &open_one] {
            f.a.save_draft(k, &content("x"), "ci", 100)
                .await
                .expect("save");
        }
        let kept = PendingPost {
            request: Some(postonce::networks::PreparedPost {
                body: serde_json::json!({"event": {"id": "e1"}}),
                text: "text".into(),
                key: Some("e1".into()),
            }),
            ..match intent("run-a") {
                DraftUpdate::Intent(p) => p,
                _ => unreachable!(),
            }
        };
        let spread = |next: Option<i64>, pending: Option<&PendingPost>| DraftUpdate::Spread {
            pending: pending.map(|p| Box::new(p.clone())),
            next,
        };
        let posted = [DraftStatus::Posted];
        let first = spread(Some(500), Some(&kept));
        assert!(
            !f.a.update_draft(&open_one, &first, &posted, 110)
                .await
                .expect("update"),
            "{name}: only a posted draft spreads"
        );
        f.a.put_posted(&record(&k, "run-a", None), 101, 4_000_000_000)
            .await
            .expect("posted");
        assert!(
            f.a.update_draft(&k, &first, &posted, 110)
                .await
                .expect("update"),
            "{name}"
        );
        assert!(
            f.b.due_drafts(&posted, 499).await.expect("due").is_empty(),
            "{name}: not due before its time"
        );
        let due = f.b.due_drafts(&posted, 500).await.expect("due");
        assert_eq!(due.len(), 1, "{name}: due under posted");
        assert_eq!(due[0].key, k.to_string(), "{name}");
        let pending = due[0].pending.as_ref().expect("the request is kept");
        assert_eq!(pending.request, kept.request, "{name}");
        // A later send: due again, the request still there.
        f.b.update_draft(&k, &spread(Some(900), None), &posted, 500)
            .await
            .expect("again");
        let due = f.a.due_drafts(&posted, 900).await.expect("due");
        assert_eq!(due.len(), 1, "{name}");
        assert_eq!(due[0].due_at, Some(900), "{name}");
        assert!(due[0].pending.is_some(), "{name}: still kept");
        // Done: out of the index, the request dropped, the record as it was.
        f.a.update_draft(&k, &spread(None, None), &posted, 900)
            .await
            .expect("done");
        assert!(
            f.b.due_drafts(&posted, i64::MAX)
                .await
                .expect("due")
                .is_empty(),
            "{name}: done spreading"
        );
        let snap = f.b.load(&k, None).await.expect("load");
        let draft = snap.draft.expect("draft");
        assert_eq!(draft.status, DraftStatus::Posted, "{name}");
        assert_eq!(draft.pending, None, "{name}: the request dropped");
        assert_eq!(draft.due_at, None, "{name}");
        assert_eq!(snap.record, Some(record(&k, "run-a", None)), "{name}");
    }
}

/// A draft sent with a time (issue 30, finding 2) is stored and scheduled in one write: new,
/// it is `scheduled` at once and due only at its time; a failed or cancelled one is scheduled
/// again with its new content; one with an attempt out or posted is left as it is (`None`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draft_is_stored_scheduled_in_one_write() {
    for (name, open) in RECORD_STORES {
        let f = open().await;
        let k = key();
        let d =
            f.a.save_scheduled(&k, &content("x"), "ci", 5_000, 100)
                .await
                .expect("save")
                .expect("scheduled");
        assert_eq!(
            (d.status, d.publish_at, d.due_at),
            (DraftStatus::Scheduled, Some(5_000), Some(5_000)),
            "{name}"
        );
        assert_eq!(d.content.as_ref().map(|c| c.caption.as_str()), Some("x"));
        let due =
            f.b.due_drafts(&[DraftStatus::New, DraftStatus::Scheduled], 4_999);
        assert!(
            !due.await
                .expect("due")
                .iter()
                .any(|d| d.key == k.to_string()),
            "{name}: never due before its time"
        );
        let failed = DraftUpdate::Failed {
            error: "e".into(),
            retryable: true,
            next_retry_at: Some(200),
        };
        let from = [DraftStatus::Scheduled];
        assert!(f
            .a
            .update_draft(&k, &failed, &from, 150)
            .await
            .expect("fail"));
        let again =
            f.b.save_scheduled(&k, &content("y"), "ci", 6_000, 160)
                .await
                .expect("save")
                .expect("scheduled again");
        assert_eq!(
            (again.status, again.due_at, again.last_error.as_deref()),
            (DraftStatus::Scheduled, Some(6_000), None),
            "{name}"
        );
        assert_eq!(again.content.map(|c| c.caption), Some("y".into()));
        let from = [DraftStatus::Scheduled];
        assert!(f
            .a
            .update_draft(&k, &intent("run-a"), &from, 170)
            .await
            .expect("intent"));
        let out =
            f.b.save_scheduled(&k, &content("z"), "ci", 7_000, 180)
                .await;
        assert_eq!(out.expect("save"), None, "{name}: an attempt is out");
        let d =
            f.a.load(&k, None)
                .await
                .expect("load")
                .draft
                .expect("draft");
        assert_eq!(d.status, DraftStatus::Unknown, "{name}");

        // A draft saved (its run marked started) and then sent again with a time: the mark of
        // a run that ended without writing is no death; it waits for its time, unmarked.
        let k = key();
        let saved =
            f.a.save_draft(&k, &content("m"), "ci", 300)
                .await
                .expect("save");
        assert!(
            saved.started,
            "{name}: a trigger's save marks its run started"
        );
        let d =
            f.b.save_scheduled(&k, &content("m"), "ci", 9_000, 310)
                .await
                .expect("save")
                .expect("scheduled");
        assert!(!d.started, "{name}: scheduled again, the mark is cleared");
    }
}

/// An attempt starts in one write that returns the draft (issue 30, finding 3): the draft's
/// save marks it started, a start adds a mark still set (a run that died) to `attempts`, a
/// failure counts its own run and clears the mark, and a scheduled draft starts only once due.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_attempt_is_marked_started_and_a_dead_run_counted() {
    for (name, open) in RECORD_STORES {
        let f = open().await;
        let from = [
            DraftStatus::New,
            DraftStatus::Failed,
            DraftStatus::Scheduled,
        ];
        let k = key();
        assert_eq!(
            f.a.start_attempt(&k, &from, 10).await.expect("start"),
            None,
            "{name}"
        );
        let d =
            f.a.save_draft(&k, &content("x"), "ci", 10)
                .await
                .expect("save");
        assert_eq!(
            (d.started, d.attempts),
            (true, 0),
            "{name}: the save starts one"
        );
        let d =
            f.b.start_attempt(&k, &from, 20)
                .await
                .expect("start")
                .expect("started");
        assert_eq!(
            (d.started, d.attempts, d.updated_at),
            (true, 1, 20),
            "{name}: one died"
        );
        let failed = DraftUpdate::Failed {
            error: "e".into(),
            retryable: true,
            next_retry_at: Some(30),
        };
        assert!(f.a.update_draft(&k, &failed, &[], 25).await.expect("fail"));
        let d =
            f.a.load(&k, None)
                .await
                .expect("load")
                .draft
                .expect("draft");
        assert_eq!(
            (d.started, d.attempts),
            (false, 2),
            "{name}: the failure counts itself"
        );
        let d =
            f.a.start_attempt(&k, &from, 40)
                .await
                .expect("start")
                .expect("started");
        assert_eq!((d.started, d.attempts), (true, 2), "{name}");
        let review = DraftUpdate::NeedsReview {
            error: "died".into(),
        };
        assert!(f
            .b
            .update_draft(&k, &review, &[], 50)
            .await
            .expect("review"));
        let d =
            f.a.load(&k, None)
                .await
                .expect("load")
                .draft
                .expect("draft");
        assert_eq!(
            (d.status, d.started, d.attempts),
            (DraftStatus::NeedsReview, false, 3),
            "{name}"
        );
        let later = key();
        f.a.save_scheduled(&later, &content("y"), "ci", 5_000, 100)
            .await
            .expect("save");
        assert_eq!(
            f.a.start_attempt(&later, &from, 4_999)
                .await
                .expect("start"),
            None,
            "{name}"
        );
        let d =
            f.a.start_attempt(&later, &from, 5_000)
                .await
                .expect("start")
                .expect("due");
        assert_eq!(
            (d.status, d.started),
            (DraftStatus::Scheduled, true),
            "{name}"
        );
    }
}

/// PostgreSQL, the one store here with row locks: a listing (`status --all`, `schedule list`,
/// the MCP tools, and a sweep's) shows a draft whose row another connection holds locked (a run
/// updating it, its transaction still open), and answers at once: it neither skips the row
/// (what `SKIP LOCKED` did) nor waits for the writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_listings_show_a_draft_whose_row_another_connection_holds() {
    use postonce::stores::postgres::records::PgStore;
    let (pg, a, _b) = postgres_database().await;
    let store = PgStore::new(a, false);
    let (held, free) = (key(), key());
    for k in [&held, &free] {
        store
            .save_draft(k, &content(&format!("c {k}")), "ci", 100)
            .await
            .expect("save");
    }
    let (client, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .expect("a second connection");
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "BEGIN; UPDATE postonce_drafts SET updated_at = updated_at + 1 WHERE ns = '' AND key = '{held}'"
        ))
        .await
        .expect("hold the row");
    let waiting = [DraftStatus::New, DraftStatus::Failed];
    for (what, before) in [("a listing", i64::MAX), ("a sweep's listing", 1_000)] {
        let listed =
            tokio::time::timeout(Duration::from_secs(2), store.due_drafts(&waiting, before))
                .await
                .unwrap_or_else(|_| panic!("{what} waited for the row's lock"))
                .expect("due");
        let keys: BTreeSet<String> = listed.into_iter().map(|d| d.key).collect();
        assert!(
            keys.contains(&held.to_string()) && keys.contains(&free.to_string()),
            "{what} while another connection holds the row of {held} ({free} is free): {keys:?}"
        );
    }
    client.batch_execute("ROLLBACK").await.expect("rollback");
}

/// A network's slot is taken by one of racing runs, and refused until the gap has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pacing_slots_are_conditional() {
    for (name, open) in RECORD_STORES {
        let f = open().await;
        let net = unique("net-");
        assert_eq!(f.a.last_slot(&net).await.expect("last"), None, "{name}");
        let races: Vec<_> = (0..8)
            .map(|i| {
                let (s, n) = (
                    if i % 2 == 0 { f.a.clone() } else { f.b.clone() },
                    net.clone(),
                );
                tokio::spawn(async move { s.take_slot(&n, 60_000, 1_000_000).await })
            })
            .collect();
        let mut taken = 0;
        for r in races {
            match r.await.expect("join").expect("slot") {
                Slot::Taken => taken += 1,
                Slot::Busy { last_ms } => assert_eq!(last_ms, 1_000_000, "{name}"),
            }
        }
        assert_eq!(taken, 1, "{name}: one of 8 racing runs takes the slot");
        assert_eq!(
            f.b.take_slot(&net, 60_000, 1_030_000).await.expect("slot"),
            Slot::Busy { last_ms: 1_000_000 },
            "{name}"
        );
        assert_eq!(
            f.b.take_slot(&net, 60_000, 1_060_000).await.expect("slot"),
            Slot::Taken,
            "{name}"
        );
        assert_eq!(
            f.a.last_slot(&net).await.expect("last"),
            Some(1_060_000),
            "{name}"
        );
    }
}

/// A kept secret is replaced only from what is there (the stored credentials rest on it): one
/// of racing first writes wins, a swap from a stale value is refused, and racing changes made
/// through `credentials::update` all land (each re-applied after losing a race).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kept_secrets_swap_only_from_what_is_there() {
    for (name, open) in RECORD_STORES {
        let f = open().await;
        let sec = unique("sec-");
        let races: Vec<_> = (0..8)
            .map(|i| {
                let (s, n) = (
                    if i % 2 == 0 { f.a.clone() } else { f.b.clone() },
                    sec.clone(),
                );
                tokio::spawn(
                    async move { s.swap_secret(&n, None, &Secret::new(format!("v{i}"))).await },
                )
            })
            .collect();
        let mut won = 0;
        for r in races {
            if r.await.expect("join").expect("swap") {
                won += 1;
            }
        }
        assert_eq!(won, 1, "{name}: one of 8 first writes wins");
        let now = f.b.load_secret(&sec).await.expect("load").expect("kept");
        let stale = Secret::new("v-stale");
        assert!(
            !f.a.swap_secret(&sec, Some(&stale), &Secret::new("x"))
                .await
                .expect("swap"),
            "{name}"
        );
        assert!(
            !f.a.swap_secret(&sec, None, &Secret::new("x"))
                .await
                .expect("swap"),
            "{name}"
        );
        assert!(
            f.a.swap_secret(&sec, Some(&now), &Secret::new("next"))
                .await
                .expect("swap"),
            "{name}"
        );
        assert_eq!(
            f.b.load_secret(&sec)
                .await
                .expect("load")
                .map(|s| s.expose().to_owned())
                .as_deref(),
            Some("next"),
            "{name}"
        );

        let changes: Vec<_> = (0..8)
            .map(|i| {
                let s = if i % 2 == 0 { f.a.clone() } else { f.b.clone() };
                tokio::spawn(async move {
                    postonce::credentials::update(&*s, |c| {
                        c.state.insert(format!("n{i}"), Default::default());
                        Some(())
                    })
                    .await
                })
            })
            .collect();
        for c in changes {
            c.await.expect("join").expect("update");
        }
        let stored = postonce::credentials::load(&*f.a).await.expect("load");
        assert_eq!(
            stored.state.len(),
            8,
            "{name}: no change lost: {:?}",
            stored.state.keys()
        );
    }
}

/// The refused mark of a credential (issue 32, step 5) on every store: of racing processes
/// that meet one refused credential, one marks it (and so tells its owner); a credential with
/// another fingerprint is marked again, once; a new `auth` racing the marks is never lost, nor
/// is the mark it did not replace.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_credential_is_marked_once_across_processes() {
    use postonce::credentials::{self, mark_refused};
    use postonce::networks::Network;
    for (name, open) in RECORD_STORES {
        let f = open().await;
        for fingerprint in ["0123456789abcdef", "fedcba9876543210"] {
            let races: Vec<_> = (0..8)
                .map(|i| {
                    let s = if i % 2 == 0 { f.a.clone() } else { f.b.clone() };
                    tokio::spawn(
                        async move { mark_refused(&*s, Network::Linkedin, fingerprint).await },
                    )
                })
                .collect();
            let mut won = 0;
            for r in races {
                if r.await.expect("join").expect("mark") {
                    won += 1;
                }
            }
            assert_eq!(won, 1, "{name}: one of 8 marks {fingerprint}");
            let stored = credentials::load(&*f.b).await.expect("load");
            assert_eq!(
                stored.state["linkedin"].refused.as_deref(),
                Some(fingerprint),
                "{name}"
            );
        }
        // Another network's mark and a racing change of the credentials (`auth x` storing
        // its state afresh) both land.
        let (marked, replaced) = tokio::join!(
            mark_refused(&*f.a, Network::Mastodon, "1111222233334444"),
            credentials::update(&*f.b, |c| {
                c.state.insert("x".to_owned(), Default::default());
                Some(())
            })
        );
        assert!(marked.expect("mark"), "{name}");
        replaced.expect("update");
        let stored = credentials::load(&*f.a).await.expect("load");
        assert_eq!(
            stored.state["mastodon"].refused.as_deref(),
            Some("1111222233334444"),
            "{name}"
        );
        assert!(stored.state.contains_key("x"), "{name}");
        assert!(
            !mark_refused(&*f.b, Network::Mastodon, "1111222233334444")
                .await
                .expect("mark"),
            "{name}: marked already"
        );
    }
}

/// One of racing runs takes a claim; only its token releases or keeps it; the posted keep
/// holds the id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_fence_by_token() {
    let ttl = Duration::from_secs(30);
    for (name, open) in CLAIM_STORES {
        let f = open().await;
        let k = key();
        let races: Vec<_> = (0..8)
            .map(|i| {
                let (s, k) = (
                    if i % 2 == 0 { f.a.clone() } else { f.b.clone() },
                    k.clone(),
                );
                tokio::spawn(async move { s.acquire(&k, &format!("t{i}"), ttl).await })
            })
            .collect();
        let mut winners = Vec::new();
        for (i, r) in races.into_iter().enumerate() {
            if r.await.expect("join").expect("acquire") == Acquire::Acquired {
                winners.push(format!("t{i}"));
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "{name}: one of 8 racing runs takes the claim"
        );
        let holder = winners[0].clone();
        assert_eq!(
            f.b.acquire(&k, "late", ttl).await.expect("acquire"),
            Acquire::Held(Some(ClaimValue::Run(holder.clone()))),
            "{name}"
        );
        assert!(
            !f.b.release(&k, "late").await.expect("release"),
            "{name}: another token frees nothing"
        );
        assert!(
            !f.b.keep_posted(&k, "late", "urn:x", ttl)
                .await
                .expect("keep"),
            "{name}"
        );
        assert!(
            f.a.keep_posted(&k, &holder, "urn:li:share:1", ttl)
                .await
                .expect("keep"),
            "{name}"
        );
        let (v, left) = f.b.inspect(&k).await.expect("inspect").expect("held");
        assert_eq!(v, ClaimValue::Posted("urn:li:share:1".into()), "{name}");
        assert!(
            left.is_some_and(|l| l <= ttl && l > Duration::from_secs(20)),
            "{name}: {left:?}"
        );
        assert!(
            !f.a.release(&k, &holder).await.expect("release"),
            "{name}: the token was rewritten"
        );
        assert!(
            f.a.release(&k, "posted:urn:li:share:1")
                .await
                .expect("release"),
            "{name}"
        );
        assert_eq!(f.a.inspect(&k).await.expect("inspect"), None, "{name}");
        assert!(
            f.a.first_sighting(&unique("update-"), ttl)
                .await
                .expect("first"),
            "{name}"
        );
        let seen = unique("update-");
        assert!(
            f.a.first_sighting(&seen, ttl).await.expect("first"),
            "{name}"
        );
        assert!(
            !f.b.first_sighting(&seen, ttl).await.expect("again"),
            "{name}"
        );
        f.a.ping().await.expect("ping");
    }
}

/// An expired claim is absent: another run takes it, and the old token frees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_expire() {
    for (name, open) in CLAIM_STORES {
        let f = open().await;
        let (k, k2) = (key(), key());
        assert_eq!(
            f.a.acquire(&k, "old", Duration::from_secs(1))
                .await
                .expect("acquire"),
            Acquire::Acquired,
            "{name}"
        );
        assert_eq!(
            f.a.acquire(&k2, "old2", Duration::from_secs(1))
                .await
                .expect("acquire"),
            Acquire::Acquired,
            "{name}"
        );
        tokio::time::sleep(Duration::from_millis(2_300)).await;
        assert_eq!(
            f.a.inspect(&k).await.expect("inspect"),
            None,
            "{name}: expired"
        );
        assert_eq!(
            f.b.acquire(&k, "new", Duration::from_secs(30))
                .await
                .expect("acquire"),
            Acquire::Acquired,
            "{name}"
        );
        assert!(
            !f.a.release(&k, "old").await.expect("release"),
            "{name}: an expired token frees nothing"
        );
        assert_eq!(
            f.a.inspect(&k).await.expect("inspect").map(|(v, _)| v),
            Some(ClaimValue::Run("new".into())),
            "{name}"
        );
        // Keeping a posted id after the run's claim expired sets it anew.
        assert!(
            f.a.keep_posted(&k2, "old2", "urn:li:share:2", Duration::from_secs(30))
                .await
                .expect("keep"),
            "{name}"
        );
        assert_eq!(
            f.b.inspect(&k2).await.expect("inspect").map(|(v, _)| v),
            Some(ClaimValue::Posted("urn:li:share:2".into())),
            "{name}"
        );
    }
}

/// A record store and a claim store as the registry puts them together, and whatever must live
/// as long as they do.
type Pair = (
    Arc<dyn RecordStore>,
    Arc<dyn ClaimStore>,
    Box<dyn Any + Send>,
);

async fn postgres_pair(joined: bool) -> Pair {
    use postonce::stores::postgres::claims::PgClaims;
    use postonce::stores::postgres::records::PgStore;
    let (pg, a, b) = postgres_database().await;
    let claims = if joined { a.clone() } else { b };
    (
        Arc::new(PgStore::new(a, false)),
        Arc::new(PgClaims::new(claims, false)),
        Box::new(pg),
    )
}

async fn files_pair() -> Pair {
    let (r, c) = (files_records().await, files_claims().await);
    (r.a, c.a, Box::new((r._keep, c._keep)))
}

type OpenPair = fn() -> Pin<Box<dyn Future<Output = Pair> + Send>>;

/// The pairs whose writes may be joined to a claim, and whether they are (one request each).
const PAIRS: &[(&str, bool, OpenPair)] = &[
    ("postgres, claims in its database", true, || {
        Box::pin(postgres_pair(true))
    }),
    (
        "postgres, claims through another pool (the two calls)",
        false,
        || Box::pin(postgres_pair(false)),
    ),
    ("files", false, || Box::pin(files_pair())),
];

const STARTS: [DraftStatus; 4] = [
    DraftStatus::New,
    DraftStatus::Failed,
    DraftStatus::NeedsReview,
    DraftStatus::Scheduled,
];

/// The record store's writes joined to a claim (issue 34: where the claims live beside the
/// records, each pair is one statement) mean what the two calls mean: the draft's save takes
/// the claim unless the draft is posted (and never another run's), the claim's request starts
/// the attempt only if it took the claim, and the record's write releases the claim only if it
/// wrote the record (compare-and-delete). Where they are not joined, the caller makes the
/// second call, and the answers are the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn joined_claims_mean_the_two_calls() {
    use postonce::claim::ClaimAsk;
    let ttl = Duration::from_secs(30);
    for (name, joined, open) in PAIRS {
        let (r, c, _keep) = open().await;
        let ask = |token: &'static str| ClaimAsk {
            claims: c.as_ref(),
            token,
            ttl,
        };
        let claim_of = async |k: &PostKey, token: &str, asked: Option<Acquire>| match asked {
            Some(a) => a,
            None => c.acquire(k, token, ttl).await.expect("acquire"),
        };
        let run = |t: &str| Acquire::Held(Some(ClaimValue::Run(t.to_owned())));
        // A new draft: saved, and claimed by A.
        let k = key();
        let (d, asked) = r
            .save_draft_claiming(&k, &content("x"), "ci", 10, ask("run-a"))
            .await
            .expect("save");
        assert_eq!(d.status, DraftStatus::New, "{name}");
        assert_eq!(asked.is_some(), *joined, "{name}: joined");
        assert_eq!(
            claim_of(&k, "run-a", asked).await,
            Acquire::Acquired,
            "{name}"
        );
        // Sent again by B: saved, the claim still A's.
        let (d, asked) = r
            .save_draft_claiming(&k, &content("y"), "ci", 11, ask("run-b"))
            .await
            .expect("save");
        assert_eq!(d.content.map(|c| c.caption).as_deref(), Some("y"), "{name}");
        assert_eq!(claim_of(&k, "run-b", asked).await, run("run-a"), "{name}");
        // B's claim and start while A holds it: nothing started.
        let (acquired, started) = match r.claim_and_start(&k, ask("run-b"), &STARTS, 12).await {
            Some(joint) => joint.expect("claim and start"),
            None => (c.acquire(&k, "run-b", ttl).await.expect("acquire"), None),
        };
        assert_eq!((acquired, started), (run("run-a"), None), "{name}");
        let d = r.load(&k, None).await.expect("load").draft.expect("draft");
        assert_eq!(d.updated_at, 11, "{name}: not started");
        // A records: written, and the claim released with it.
        let (written, released) = r
            .put_posted_releasing(&k, &record(&k, "run-a", None), 20, 99, ask("run-a"))
            .await
            .expect("record");
        assert_eq!(written, PutPosted::Created, "{name}");
        assert_eq!(released, *joined, "{name}: released with the record");
        if !released {
            assert!(c.release(&k, "run-a").await.expect("release"), "{name}");
        }
        assert_eq!(c.inspect(&k).await.expect("inspect"), None, "{name}");
        // Sent again once posted: the record's copy answers; no claim asked, none taken.
        let (d, asked) = r
            .save_draft_claiming(&k, &content("y"), "ci", 21, ask("run-c"))
            .await
            .expect("save");
        assert_eq!(d.status, DraftStatus::Posted, "{name}");
        assert_eq!(asked, None, "{name}");
        assert_eq!(c.inspect(&k).await.expect("inspect"), None, "{name}");
        // A record that is there already: not written, and C's claim kept.
        assert_eq!(
            c.acquire(&k, "run-c", ttl).await.expect("acquire"),
            Acquire::Acquired
        );
        let (written, released) = r
            .put_posted_releasing(&k, &record(&k, "run-c", None), 30, 99, ask("run-c"))
            .await
            .expect("record");
        assert!(
            matches!(&written, PutPosted::Exists(rec) if rec.run == "run-a"),
            "{name}: {written:?}"
        );
        assert!(!released, "{name}");
        let held = c.inspect(&k).await.expect("inspect").map(|(v, _)| v);
        assert_eq!(held, Some(ClaimValue::Run("run-c".into())), "{name}");
        // A due draft: claimed by D and its attempt started, in one request where joined.
        let k2 = key();
        r.save_draft(&k2, &content("z"), "ci", 10)
            .await
            .expect("save");
        let failed = DraftUpdate::Failed {
            error: "earlier".into(),
            retryable: true,
            next_retry_at: Some(11),
        };
        assert!(r.update_draft(&k2, &failed, &[], 11).await.expect("fail"));
        let joint = r.claim_and_start(&k2, ask("run-d"), &STARTS, 40).await;
        assert_eq!(joint.is_some(), *joined, "{name}: joined");
        let (acquired, started) = match joint {
            Some(joint) => joint.expect("claim and start"),
            None => {
                let a = c.acquire(&k2, "run-d", ttl).await.expect("acquire");
                let s = r.start_attempt(&k2, &STARTS, 40).await.expect("start");
                (a, s)
            }
        };
        assert_eq!(acquired, Acquire::Acquired, "{name}");
        let s = started.expect("started");
        assert!(s.started && s.updated_at == 40, "{name}: {s:?}");
        assert_eq!(s.status, DraftStatus::Failed, "{name}");
    }
}
