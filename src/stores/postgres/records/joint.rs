//! The writes of a run joined to its claim, where the claims live in the same database
//! ([`crate::claim::Place`]): the draft's save and the claim, the claim and the attempt's start,
//! the record and the claim's release, each pair in one statement (issue 34: a new draft in 3
//! statements, a due draft in 3). Each part keeps its meaning: the claim is set only if no live
//! claim holds it (timed by the database's clock), and released only where it still holds the
//! run's token; the record is written only if absent, and the claim is released only if it was.
//! A statement is one transaction: a record write that fails leaves the claim as it was.
//!
//! A statement whose answer was lost may have taken the claim: it is released (compare-and-
//! delete, so never another run's) before the error is returned, so that the caller, which
//! answers "nothing was posted", leaves none behind. And a statement the server runs only after
//! the run gave up on it (a paused server runs what it had not read yet once it wakes, after
//! that release) takes no claim: the claim is taken only within the statement's budget
//! ([`in_time`]), so such a draft's save lands as it would alone, and the next run is not held
//! off until the claim's TTL. (The budget's end is the client's clock, compared with the
//! database's: a database clock ahead of the host's by more than the budget only makes the
//! claim go in its own statement again, never changes what it means.)

use tokio_postgres::types::{Json, ToSql};

use super::{err, rows, PgStore};
use crate::claim::{Acquire, ClaimAsk, ClaimValue};
use crate::key::PostKey;
use crate::record::{Draft, DraftContent, DraftStatus, PostedRecord, PutPosted, StoreError};
use crate::stores::postgres::claims;
use crate::stores::postgres::DbError;

/// The draft's save (`$1` … `$8`: namespace, key, caption, image, link, alt, source, now) as
/// the part `up` of a statement: it returns the draft as written, and nothing where the draft
/// is posted with its record's copy that counts (outside the dry-run namespace, a dry run's
/// copy does not).
pub(super) fn save_part(ns: &str) -> String {
    let mut keep = "d.record IS NULL OR d.status <> 'posted'".to_owned();
    if ns.is_empty() {
        keep.push_str(&format!(
            " OR coalesce({}, false)",
            rows::dry_urn("(d.record->>'urn')")
        ));
    }
    format!(
        "up AS (
                INSERT INTO postonce_drafts AS d (ns, key, caption, image, link, alt, status,
                    attempts, retryable, reminded, delay_told, source, created_at, updated_at, due_at,
                    started)
                VALUES ($1, $2, $3, $4, $5, $6, 'new', 0, true, false, false, $7, $8, $8, $8, 1)
                ON CONFLICT (ns, key) DO UPDATE SET caption = EXCLUDED.caption,
                    image = EXCLUDED.image, link = EXCLUDED.link, alt = EXCLUDED.alt,
                    updated_at = EXCLUDED.updated_at, started = 1,
                    source = coalesce(d.source, EXCLUDED.source),
                    due_at = CASE WHEN d.status IN ('posted', 'cancelled') THEN d.due_at
                                  ELSE coalesce(d.due_at, EXCLUDED.due_at) END
                WHERE {keep}
                RETURNING to_jsonb(d))"
    )
}

/// Whether the statement runs before `{deadline}` (a placeholder: the end of its budget, Unix
/// milliseconds by the client's clock).
fn in_time(deadline: &str) -> String {
    format!("(extract(epoch FROM clock_timestamp()) * 1000)::bigint <= {deadline}::bigint")
}

/// The end of a statement's budget from now, Unix milliseconds (see [`in_time`]).
fn deadline(store: &PgStore) -> i64 {
    let budget = i64::try_from(store.db.budget().as_millis()).unwrap_or(i64::MAX);
    crate::record::now_ms().saturating_add(budget)
}

/// The draft as the save left it: written, or (not written) as stored.
const SAVED: &str = "coalesce((SELECT * FROM up),
    (SELECT to_jsonb(d) FROM postonce_drafts d WHERE d.ns = $1 AND d.key = $2))";

/// The record's write (`$1` … `$12`) as the parts `rec`, `draft` and `cap`, and with `release`
/// the part `released`: the claim `$13` deleted where it holds `$14`, only if the record was
/// written. Its answer: the rows each part wrote.
pub(super) fn record_statement(ns: &str, release: bool) -> String {
    let on_conflict = if ns.is_empty() {
        // A dry run's record in the real namespace (only an older version could write
        // one) proves nothing was posted: a real record may replace it.
        format!(
            "DO UPDATE SET urn = EXCLUDED.urn, posted_at = EXCLUDED.posted_at,
                run = EXCLUDED.run, source = EXCLUDED.source,
                caption_hash = EXCLUDED.caption_hash, url = EXCLUDED.url, cid = EXCLUDED.cid
             WHERE coalesce({}, false)",
            rows::dry_urn("r.urn")
        )
    } else {
        "DO NOTHING".to_owned()
    };
    let (released, count) = if release {
        (
            ",
            released AS (
                DELETE FROM postonce_claims WHERE name = $13 AND value = $14
                    AND EXISTS (SELECT 1 FROM rec)
                RETURNING 1)",
            ", (SELECT count(*) FROM released)",
        )
    } else {
        ("", "")
    };
    format!(
        "WITH rec AS (
            INSERT INTO postonce_records AS r (ns, key, urn, posted_at, run, source, caption_hash, url, cid)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (ns, key) {on_conflict}
            RETURNING r.key),
        draft AS (
            INSERT INTO postonce_drafts AS d (ns, key, status, attempts, retryable, reminded,
                delay_told, created_at, updated_at, expires_at, record)
            SELECT $1, $2, 'posted', 0, true, false, false, $10, $10, $11, $12 FROM rec
            ON CONFLICT (ns, key) DO UPDATE SET status = 'posted', due_at = NULL,
                updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at,
                next_retry_at = NULL, record = EXCLUDED.record, pending = NULL,
                pending_run = NULL
            RETURNING 1),
        cap AS (
            INSERT INTO postonce_captions (ns, hash, key, urn)
            SELECT $1, $7, $2, $3 FROM rec WHERE $7::text IS NOT NULL
            ON CONFLICT (ns, hash) DO UPDATE SET key = EXCLUDED.key, urn = EXCLUDED.urn
            RETURNING 1){released}
        SELECT (SELECT count(*) FROM rec), (SELECT count(*) FROM draft), (SELECT count(*) FROM cap){count}"
    )
}

/// The claim's answer when it was not set here: who holds it, as this statement saw it, or (a
/// claim committed after the statement began) as it is now.
async fn held(key: &PostKey, ask: ClaimAsk<'_>, seen: Option<String>) -> Acquire {
    match seen {
        Some(v) => Acquire::Held(Some(ClaimValue::parse(&v))),
        None => match ask.claims.inspect(key).await {
            Ok(v) => Acquire::Held(v.map(|(v, _)| v)),
            Err(_) => Acquire::Held(None),
        },
    }
}

/// A joined statement failed: where its answer was lost it may have taken the claim, which is
/// released (only if it still holds this run's token).
async fn failed(key: &PostKey, ask: ClaimAsk<'_>, e: DbError) -> StoreError {
    if e.unknown {
        if let Err(r) = ask.claims.release(key, ask.token).await {
            tracing::warn!(error = %r, "a claim this statement may have taken is left to its TTL");
        }
    }
    err(e)
}

pub(super) async fn save_draft_claiming(
    store: &PgStore,
    key: &PostKey,
    content: &DraftContent,
    source: &str,
    now: i64,
    ask: ClaimAsk<'_>,
) -> Result<(Draft, Option<Acquire>), StoreError> {
    let name = claims::name_in(store.ns, key);
    let sql = store.texts.save_claiming.get_or_init(|| {
        format!(
            "WITH {},
            asked AS (SELECT {} AS yes FROM up),
            claim AS ({})
            SELECT {SAVED}, coalesce((SELECT yes FROM asked), false), (SELECT count(*) FROM claim), {}",
            save_part(store.ns),
            in_time("$12"),
            claims::set_nx_from(
                "SELECT $9, $10, clock_timestamp() + $11::bigint * interval '1 millisecond'
                    FROM asked WHERE asked.yes"
            ),
            claims::live_value("$9"),
        )
    });
    let until = deadline(store);
    let (ns, k) = (store.ns, key.to_string());
    let ttl = claims::ms(ask.ttl);
    let answer = store
        .db
        .with("save draft and claim", |c| async move {
            let st = c.prepare_cached(sql).await?;
            let params: [&(dyn ToSql + Sync); 12] = [
                &ns,
                &k,
                &content.caption,
                &content.image,
                &content.link,
                &content.alt,
                &source,
                &now,
                &name,
                &ask.token,
                &ttl,
                &until,
            ];
            let row = c.query_one(&st, &params).await?;
            Ok((
                row.try_get::<_, Option<rows::Jsonb>>(0)?,
                row.try_get::<_, bool>(1)?,
                row.try_get::<_, i64>(2)?,
                row.try_get::<_, Option<String>>(3)?,
            ))
        })
        .await;
    let (draft, asked, set, holder) = match answer {
        Ok(a) => a,
        Err(e) => return Err(failed(key, ask, e).await),
    };
    let acquired = match (asked, set > 0) {
        (false, _) => None,
        (true, true) => Some(Acquire::Acquired),
        (true, false) => Some(held(key, ask, holder).await),
    };
    match draft {
        Some(v) => Ok((rows::draft(v)?, acquired)),
        // A racing writer inserted it after this statement's snapshot (so nothing was written
        // here, and no claim asked): read it now.
        None => {
            let d = crate::record::RecordStore::load(store, key, None)
                .await?
                .draft
                .ok_or_else(|| StoreError(format!("the draft {key} vanished")))?;
            Ok((d, acquired))
        }
    }
}

pub(super) async fn claim_and_start(
    store: &PgStore,
    key: &PostKey,
    ask: ClaimAsk<'_>,
    from: &[DraftStatus],
    now: i64,
) -> Result<(Acquire, Option<Draft>), StoreError> {
    let name = claims::name_in(store.ns, key);
    let sql = store.texts.claim_and_start.get_or_init(|| {
        format!(
            "WITH asked AS (SELECT {} AS yes),
            claim AS ({}),
            started AS (
                UPDATE postonce_drafts AS d
                SET attempts = d.attempts + d.started, started = 1, updated_at = $4
                WHERE d.ns = $1 AND d.key = $2
                    AND (d.status = ANY($3) OR ($5 AND d.status = 'scheduled' AND d.due_at <= $4))
                    AND EXISTS (SELECT 1 FROM claim)
                RETURNING to_jsonb(d))
            SELECT (SELECT count(*) FROM claim), (SELECT * FROM started), {},
                (SELECT yes FROM asked)",
            in_time("$9"),
            claims::set_nx_from(
                "SELECT $6, $7, clock_timestamp() + $8::bigint * interval '1 millisecond'
                    FROM asked WHERE asked.yes"
            ),
            claims::live_value("$6"),
        )
    });
    let until = deadline(store);
    let (ns, k) = (store.ns, key.to_string());
    let open: Vec<String> = from
        .iter()
        .filter(|s| **s != DraftStatus::Scheduled)
        .map(|s| s.as_str().to_owned())
        .collect();
    let scheduled = from.contains(&DraftStatus::Scheduled);
    let ttl = claims::ms(ask.ttl);
    let answer = store
        .db
        .with("claim and start attempt", |c| async move {
            let st = c.prepare_cached(sql).await?;
            let params: [&(dyn ToSql + Sync); 9] = [
                &ns, &k, &open, &now, &scheduled, &name, &ask.token, &ttl, &until,
            ];
            let row = c.query_one(&st, &params).await?;
            Ok((
                row.try_get::<_, i64>(0)?,
                row.try_get::<_, Option<rows::Jsonb>>(1)?,
                row.try_get::<_, Option<String>>(2)?,
                row.try_get::<_, bool>(3)?,
            ))
        })
        .await;
    let (set, started, holder, asked) = match answer {
        Ok(a) => a,
        Err(e) => return Err(failed(key, ask, e).await),
    };
    if !asked {
        // Past its budget by the database's clock (see [`in_time`]): nothing was done; the two
        // calls, then.
        let acquired = ask
            .claims
            .acquire(key, ask.token, ask.ttl)
            .await
            .map_err(|e| StoreError(e.to_string()))?;
        if acquired != Acquire::Acquired {
            return Ok((acquired, None));
        }
        let started = crate::record::RecordStore::start_attempt(store, key, from, now).await?;
        return Ok((acquired, started));
    }
    if set == 0 {
        return Ok((held(key, ask, holder).await, None));
    }
    Ok((Acquire::Acquired, started.map(rows::draft).transpose()?))
}

/// The record's write, and with `ask` the claim's release joined to it: (the answer, whether
/// the claim was released here). A write whose answer was lost is answered by what is stored.
pub(super) async fn put_posted(
    store: &PgStore,
    record: &PostedRecord,
    now: i64,
    draft_expires_at: i64,
    ask: Option<(&PostKey, ClaimAsk<'_>)>,
) -> Result<(PutPosted, bool), StoreError> {
    let sql = store.texts.record[usize::from(ask.is_some())]
        .get_or_init(|| record_statement(store.ns, ask.is_some()));
    let (ns, r) = (store.ns, record);
    // Serialized straight into the parameter, without a `serde_json::Value` in between.
    let copy = Json(record);
    let claim = ask.map(|(key, a)| (claims::name_in(store.ns, key), a.token));
    let written = store
        .db
        .with("put record", |c| async move {
            let st = c.prepare_cached(sql).await?;
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![
                &ns,
                &r.key,
                &r.post_id,
                &r.posted_at,
                &r.run,
                &r.source,
                &r.caption_hash,
                &r.url,
                &r.cid,
                &now,
                &draft_expires_at,
                &copy,
            ];
            if let Some((name, token)) = &claim {
                params.push(name);
                params.push(token);
            }
            let row = c.query_one(&st, &params).await?;
            let released = claim.is_some() && row.try_get::<_, i64>(3)? > 0;
            Ok((row.try_get::<_, i64>(0)?, released))
        })
        .await;
    match written {
        Ok((n, released)) if n > 0 => Ok((PutPosted::Created, released)),
        Ok(_) => match store.record_of(&record.key).await? {
            Some(r) => Ok((PutPosted::Exists(r), false)),
            None => Err(StoreError(
                "record condition failed but no record is there".into(),
            )),
        },
        // The answer was lost: what is stored answers (our own run's record means ours
        // committed); nothing stored leaves the error, never a guess.
        Err(e) if e.unknown => match store.record_of(&record.key).await {
            Ok(Some(r)) => Ok((PutPosted::Exists(r), false)),
            _ => Err(err(e)),
        },
        Err(e) => Err(err(e)),
    }
}
