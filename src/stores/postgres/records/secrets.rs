//! The kept secrets (the record store's secret role) in `postonce_secrets`: read, written,
//! and swapped only if unchanged ([`crate::record::RecordStore::swap_secret`]).

use super::{err, PgStore};
use crate::record::{secret_name, StoreError};
use crate::vars::Secret;

pub(super) async fn load(store: &PgStore, name: &str) -> Result<Option<Secret>, StoreError> {
    let (ns, name) = (store.ns.to_owned(), secret_name(name)?);
    let value: Option<Vec<u8>> = store
        .db
        .with("load secret", |c| async move {
            let st = c
                .prepare_cached("SELECT value FROM postonce_secrets WHERE ns = $1 AND name = $2")
                .await?;
            let row = c.query_opt(&st, &[&ns, &name]).await?;
            row.map(|r| r.try_get(0)).transpose()
        })
        .await
        .map_err(err)?;
    value
        .map(|v| {
            String::from_utf8(v)
                .map(Secret::new)
                .map_err(|_| StoreError("a kept secret is not UTF-8".to_owned()))
        })
        .transpose()
}

pub(super) async fn save(store: &PgStore, name: &str, value: &Secret) -> Result<(), StoreError> {
    let (ns, name) = (store.ns.to_owned(), secret_name(name)?);
    let bytes = value.expose().as_bytes().to_vec();
    let now = crate::record::now_s();
    store.db
        .with("save secret", |c| async move {
            let st = c
                .prepare_cached(
                    "INSERT INTO postonce_secrets (ns, name, value, updated_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (ns, name) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
                )
                .await?;
            c.execute(&st, &[&ns, &name, &bytes, &now]).await.map(|_| ())
        })
        .await
        .map_err(err)
}

pub(super) async fn swap(
    store: &PgStore,
    name: &str,
    expected: Option<&Secret>,
    value: &Secret,
) -> Result<bool, StoreError> {
    let (ns, name) = (store.ns.to_owned(), secret_name(name)?);
    let bytes = value.expose().as_bytes().to_vec();
    let old: Option<Vec<u8>> = expected.map(|e| e.expose().as_bytes().to_vec());
    let now = crate::record::now_s();
    store.db
        .with("swap secret", |c| async move {
            let changed = match old {
                None => {
                    let st = c
                        .prepare_cached(
                            "INSERT INTO postonce_secrets (ns, name, value, updated_at) VALUES ($1, $2, $3, $4) \
                             ON CONFLICT (ns, name) DO NOTHING",
                        )
                        .await?;
                    c.execute(&st, &[&ns, &name, &bytes, &now]).await?
                }
                Some(old) => {
                    let st = c
                        .prepare_cached(
                            "UPDATE postonce_secrets SET value = $3, updated_at = $4 \
                             WHERE ns = $1 AND name = $2 AND value = $5",
                        )
                        .await?;
                    c.execute(&st, &[&ns, &name, &bytes, &now, &old]).await?
                }
            };
            Ok(changed == 1)
        })
        .await
        .map_err(err)
}
