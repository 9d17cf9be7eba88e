//! The bare client's PostgreSQL mode (`DATABASE_URL` set): the statements one postonce run makes
//! on the self-hosters' store with the claims in the database (no Redis), in the same order,
//! with the same crate (tokio-postgres, prepared once and reused as postonce's pool does), and
//! nothing else. Their text is postonce's for the dry-run namespace, as the server logs it;
//! `bench/pg_phase.py` checks that the server executes the same statements for both.
//!
//! A new key: the draft's save and the claim (one statement), the image, the intent (one), the
//! record and the claim's release (one). An already-posted key: the save, which finds the
//! record's copy (one).

use std::collections::HashMap;

use serde_json::{json, Value};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Statement};

use crate::{now, Error, Run, NS};

/// The draft's save and the claim (postonce: `save_draft_claiming`).
const SAVE_AND_CLAIM: &str = "WITH up AS (
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
    WHERE d.record IS NULL OR d.status <> 'posted'
    RETURNING to_jsonb(d)),
asked AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint <= $12::bigint AS yes FROM up),
claim AS (INSERT INTO postonce_claims AS c (name, value, expires_at)
    SELECT $9, $10, clock_timestamp() + $11::bigint * interval '1 millisecond'
        FROM asked WHERE asked.yes
    ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
    WHERE c.expires_at <= clock_timestamp()
    RETURNING 1)
SELECT coalesce((SELECT * FROM up),
    (SELECT to_jsonb(d) FROM postonce_drafts d WHERE d.ns = $1 AND d.key = $2)), coalesce((SELECT yes FROM asked), false), (SELECT count(*) FROM claim), (SELECT value FROM postonce_claims WHERE name = $9 AND expires_at > clock_timestamp())";
/// The intent, conditioned on no record and the caption not another key's (`take_intent`).
const INTENT: &str = "WITH u AS (UPDATE postonce_drafts AS d SET updated_at = $5, due_at = $6, status = $7, pending = $8, pending_run = $9, started = 0, reminded = false, retryable = true WHERE d.ns = $1 AND d.key = $2 AND d.status = ANY($3) AND NOT EXISTS (SELECT 1 FROM postonce_records r WHERE r.ns = $1 AND r.key = $2)
        AND NOT EXISTS (SELECT 1 FROM postonce_captions c
            WHERE c.ns = $1 AND c.hash = $4::text AND c.key <> $2) RETURNING 1)
SELECT (SELECT count(*) FROM u),
       (SELECT to_jsonb(r) FROM postonce_records r WHERE r.ns = $1 AND r.key = $2),
       (SELECT c.key FROM postonce_captions c
            WHERE c.ns = $1 AND c.hash = $4::text AND c.key <> $2)";
/// The record, the draft's `posted` mark, the caption index and the claim's release
/// (`put_posted` joined to the release).
const RECORD_AND_RELEASE: &str = "WITH rec AS (
    INSERT INTO postonce_records AS r (ns, key, urn, posted_at, run, source, caption_hash, url, cid)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    ON CONFLICT (ns, key) DO NOTHING
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
    RETURNING 1),
    released AS (
        DELETE FROM postonce_claims WHERE name = $13 AND value = $14
            AND EXISTS (SELECT 1 FROM rec)
        RETURNING 1)
SELECT (SELECT count(*) FROM rec), (SELECT count(*) FROM draft), (SELECT count(*) FROM cap), (SELECT count(*) FROM released)";

pub struct Pg {
    client: Client,
    prepared: HashMap<&'static str, Statement>,
    http: reqwest::Client,
}

impl Pg {
    pub async fn build(url: &str, http: reqwest::Client) -> Result<Self, Error> {
        let (client, conn) = tokio_postgres::connect(url, NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("bare: PostgreSQL connection: {e}");
            }
        });
        Ok(Self {
            client,
            prepared: HashMap::new(),
            http,
        })
    }

    async fn statement(&mut self, sql: &'static str) -> Result<Statement, Error> {
        if let Some(st) = self.prepared.get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(sql).await?;
        self.prepared.insert(sql, st.clone());
        Ok(st)
    }

    /// The save and the claim: whether the draft is posted (its record's copy found), and
    /// whether the claim was taken.
    async fn save_and_claim(&mut self, r: &Run<'_>, token: &str) -> Result<(bool, bool), Error> {
        let st = self.statement(SAVE_AND_CLAIM).await?;
        let t = now();
        let until = crate::now_ms() + 8_000;
        let name = format!("{NS}claim:{}", r.key);
        let params: [&(dyn ToSql + Sync); 12] = [
            &NS,
            &r.key,
            &r.caption,
            &Some(r.image),
            &Some(r.link),
            &None::<&str>,
            &"ci",
            &t,
            &name,
            &token,
            &120_000i64,
            &until,
        ];
        let row = self.client.query_one(&st, &params).await?;
        let draft: Option<Value> = row.try_get(0)?;
        let asked: bool = row.try_get(1)?;
        let set: i64 = row.try_get(2)?;
        let _holder: Option<String> = row.try_get(3)?;
        let posted = draft
            .as_ref()
            .and_then(|d| d.get("status"))
            .and_then(Value::as_str)
            == Some("posted");
        Ok((posted && !asked, asked && set > 0))
    }

    async fn intent(&mut self, r: &Run<'_>, token: &str, n: u64) -> Result<(), Error> {
        let st = self.statement(INTENT).await?;
        let t = now();
        let text = format!("{}\n\n{}", r.caption, r.link);
        let image = format!("urn:li:image:dryrun-{n:016x}");
        let pending = json!({
            "at": t,
            "alt": null,
            "run": token,
            "request": {"key": null, "body": {"alt": null, "image": image, "commentary": text}, "text": text},
            "image_urn": image,
            "commentary": text,
            "caption_hash": r.hash,
            "last_sent_at": null,
        });
        let from = vec![
            "new".to_owned(),
            "failed".to_owned(),
            "needs_review".to_owned(),
        ];
        let params: [&(dyn ToSql + Sync); 9] = [
            &NS,
            &r.key,
            &from,
            &Some(r.hash),
            &t,
            &t,
            &"unknown",
            &pending,
            &token,
        ];
        let row = self.client.query_one(&st, &params).await?;
        let taken: i64 = row.try_get(0)?;
        let _record: Option<Value> = row.try_get(1)?;
        let _owner: Option<String> = row.try_get(2)?;
        if taken == 0 {
            return Err(format!("the intent for {} was not taken", r.key).into());
        }
        Ok(())
    }

    async fn record_and_release(
        &mut self,
        r: &Run<'_>,
        token: &str,
        run: u64,
    ) -> Result<(), Error> {
        let st = self.statement(RECORD_AND_RELEASE).await?;
        let t = now();
        let urn = format!("urn:li:share:dryrun-{run:016x}");
        let url = format!("https://www.linkedin.com/feed/update/{urn}/");
        let copy = json!({
            "key": r.key, "run": token, "url": url, "urn": urn, "source": "ci", "posted_at": t,
            "caption_hash": r.hash,
        });
        let name = format!("{NS}claim:{}", r.key);
        let params: [&(dyn ToSql + Sync); 14] = [
            &NS,
            &r.key,
            &urn,
            &t,
            &token,
            &Some("ci"),
            &Some(r.hash),
            &Some(url.as_str()),
            &None::<&str>,
            &t,
            &(t + 30 * 24 * 3600),
            &copy,
            &name,
            &token,
        ];
        let row = self.client.query_one(&st, &params).await?;
        let written: i64 = row.try_get(0)?;
        let released: i64 = row.try_get(3)?;
        if written == 0 || released == 0 {
            return Err(format!("the record of {} was not written", r.key).into());
        }
        Ok(())
    }

    /// One run: its outcome, as postonce names it.
    pub async fn run(&mut self, r: &Run<'_>, token: &str, n: u64) -> Result<&'static str, Error> {
        let (posted, claimed) = self.save_and_claim(r, token).await?;
        if posted {
            return Ok("already_posted");
        }
        if !claimed {
            return Ok("being_posted");
        }
        crate::fetch_image(&self.http, r).await?;
        self.intent(r, token, n).await?;
        self.record_and_release(r, token, n).await?;
        Ok("posted")
    }
}
