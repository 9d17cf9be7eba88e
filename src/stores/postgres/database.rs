//! The connection pool shared by the record store ([`super::records`]) and the claim store
//! ([`super::claims`]), and its per-statement budget.
//!
//! `DATABASE_URL` may hold a password: it is kept in a [`Secret`] and no message here repeats
//! it. Every statement runs under `POSTONCE_DATABASE_TIMEOUT_MS` twice over: the server's
//! `statement_timeout` (set at connect) and a client-side `tokio::time::timeout`; a connection
//! whose statement got no answer is closed, never reused ([`pool`]). Statements check the
//! schema's version before they rely on it ([`schema`]).

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;

use super::schema::SchemaCheck;
use super::{pool, schema, tls, SchemaError};
use crate::vars::Secret;
use tls::Verify;

/// A failed database call. `unknown`: the statement may or may not have taken effect (the
/// connection was lost or the budget ran out while it was in flight); otherwise the server
/// answered with an error and nothing changed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("PostgreSQL {what}: {message}")]
pub struct DbError {
    pub what: String,
    pub message: String,
    pub unknown: bool,
    /// The SQLSTATE, when the server answered one.
    pub code: Option<String>,
}

impl DbError {
    pub(super) fn from_pg(what: &str, e: &tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => Self {
                what: what.to_owned(),
                message: format!("{} ({})", db.message(), db.code().code()),
                unknown: false,
                code: Some(db.code().code().to_owned()),
            },
            None => Self {
                what: what.to_owned(),
                message: e.to_string(),
                unknown: true,
                code: None,
            },
        }
    }

    pub(super) fn new(what: &str, message: impl Into<String>, unknown: bool) -> Self {
        Self {
            what: what.to_owned(),
            message: message.into(),
            unknown,
            code: None,
        }
    }
}

/// What `DATABASE_URL` says, parsed once; `Debug` shows no password.
#[derive(Clone)]
pub struct ConnectOptions {
    pg: tokio_postgres::Config,
    verify: Verify,
    root_cert: Option<String>,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("hosts", &self.pg.get_hosts().len())
            .field("dbname", &self.pg.get_dbname())
            .field("ssl_mode", &self.pg.get_ssl_mode())
            .field("verify", &self.verify)
            .finish_non_exhaustive()
    }
}

impl ConnectOptions {
    /// Parses a `postgres://` / `postgresql://` URL the way libpq and tokio-postgres read it,
    /// several hosts included (`postgres://u:p@h1:5432,h2:5433/db`, tried in turn).
    /// `sslmode` defaults to `prefer` (as in libpq); `verify-ca` and `verify-full` are
    /// understood here, with `sslrootcert`.
    ///
    /// # Errors
    /// What is wrong, without repeating the URL.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let Some(rest) = ["postgres://", "postgresql://"]
            .iter()
            .find_map(|p| raw.strip_prefix(p))
        else {
            return Err("must start with postgres:// or postgresql://".into());
        };
        // Where the query starts, as tokio-postgres finds it: the credentials run to the first
        // `@` (a password may hold `?` or `/`), the hosts and the database to the next `?`.
        let after_credentials = rest.find('@').map_or(0, |at| at + 1);
        let (base, query) = match rest[after_credentials..].find('?') {
            Some(q) => rest.split_at(after_credentials + q),
            None => (rest, ""),
        };
        let mut sslmode = "prefer".to_owned();
        let mut root_cert = None;
        let mut kept = Vec::new();
        let mut given = Vec::new();
        for pair in query.trim_start_matches('?').split('&') {
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8()
                    .map(std::borrow::Cow::into_owned)
                    .map_err(|_| "has a query parameter that is not UTF-8".to_owned())
            };
            match decode(k)?.as_str() {
                "sslmode" => sslmode = decode(v)?,
                "sslrootcert" => root_cert = Some(decode(v)?),
                other => {
                    given.push(other.to_owned());
                    kept.push(pair);
                }
            }
        }
        let (mode, verify) = match sslmode.as_str() {
            "disable" => (SslMode::Disable, Verify::None),
            "allow" | "prefer" => (SslMode::Prefer, Verify::None),
            "require" => (SslMode::Require, Verify::None),
            "verify-ca" => (SslMode::Require, Verify::Chain),
            "verify-full" => (SslMode::Require, Verify::Full),
            other => {
                return Err(format!(
                    "sslmode={other:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                ))
            }
        };
        let mut url = format!("postgres://{base}");
        if !kept.is_empty() {
            url.push('?');
            url.push_str(&kept.join("&"));
        }
        // tokio-postgres's messages name the option at fault, never a value.
        let mut pg = tokio_postgres::Config::from_str(&url)
            .map_err(|e| format!("is not a valid PostgreSQL URL ({e})"))?;
        pg.ssl_mode(mode);
        // TCP keepalives on idle pooled connections, unless the URL sets its own: tokio-postgres
        // would wait 2 hours, long past the 350 s after which a NAT gateway forgets the flow.
        let given = |k: &str| given.iter().any(|g| g == k);
        if !given("keepalives_idle") {
            pg.keepalives_idle(pool::KEEPALIVE_IDLE);
        }
        if !given("keepalives_interval") {
            pg.keepalives_interval(pool::KEEPALIVE_INTERVAL);
        }
        if !given("keepalives_retries") {
            pg.keepalives_retries(pool::KEEPALIVE_RETRIES);
        }
        if pg.get_hosts().is_empty() {
            return Err("names no host (postgres://user:password@host:5432/database)".into());
        }
        if pg.get_user().is_none() {
            return Err("names no user (postgres://user:password@host:5432/database)".into());
        }
        Ok(Self {
            pg,
            verify,
            root_cert,
        })
    }
}

/// The pool and its budget. One per process, shared by every store that uses it.
pub struct Database {
    pub(super) pool: Pool,
    pub(super) budget: Duration,
    /// The connections carrying a statement; one left marked is closed, not reused.
    pub(super) in_flight: Arc<pool::InFlight>,
    pub(super) schema: SchemaCheck,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// The advisory lock `db migrate` holds (any fixed number; "postonce" in ASCII).
pub(super) const MIGRATE_LOCK: i64 = 0x706f_7374_6f6e_6365;

impl Database {
    /// Prepares a pool of at most `pool_size` connections for `url`; nothing is connected yet.
    ///
    /// # Errors
    /// When the URL is malformed or TLS cannot be set up (never repeating the URL).
    pub fn new(url: &Secret, budget: Duration, pool_size: usize) -> Result<Self, String> {
        let options =
            ConnectOptions::parse(url.expose()).map_err(|e| format!("DATABASE_URL {e}"))?;
        let mut pg = options.pg.clone();
        let ms = budget.as_millis();
        let mut startup = pg.get_options().map(str::to_owned).unwrap_or_default();
        if !startup.is_empty() {
            startup.push(' ');
        }
        startup.push_str(&format!(
            "-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms}"
        ));
        pg.options(startup);
        pg.connect_timeout(budget);
        pg.application_name("postonce");
        let tls = tls::connector(options.verify, options.root_cert.as_deref())
            .map_err(|e| format!("DATABASE_URL: {e}"))?;
        let manager = Manager::from_config(
            pg,
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let in_flight = Arc::new(pool::InFlight::default());
        let pool = Pool::builder(manager)
            .pre_recycle(in_flight.hook())
            .max_size(pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(budget))
            .create_timeout(Some(budget))
            .recycle_timeout(Some(budget))
            .build()
            .map_err(|e| format!("DATABASE_URL: cannot build the connection pool ({e})"))?;
        Ok(Self {
            pool,
            budget,
            in_flight,
            schema: SchemaCheck::default(),
        })
    }

    /// The per-statement budget.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Runs `f` with a pooled connection, the whole under the budget. `what` names the
    /// operation in errors. The schema's version is checked first when due ([`schema`]): a
    /// schema behind or ahead of this binary is refused, before `f` sends anything.
    ///
    /// # Errors
    /// A [`DbError`]: `unknown` when the outcome of a write cannot be known.
    pub async fn with<T, F, Fut>(&self, what: &str, f: F) -> Result<T, DbError>
    where
        F: FnOnce(Object) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        self.run(what, true, f).await
    }

    /// [`Self::with`], checking the schema first when `check` (and the check is due).
    async fn run<T, F, Fut>(&self, what: &str, check: bool, f: F) -> Result<T, DbError>
    where
        F: FnOnce(Object) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let work = async {
            let client = self.connection(what).await?;
            if check && self.schema.due() {
                self.check_on(what, &client).await?;
            }
            // Marked until the server answers: abandoned at the budget (this future dropped)
            // or failed without an answer, the connection is closed when it comes back.
            let flight = self.in_flight.take_off(&client);
            let result = f(client).await.map_err(|e| DbError::from_pg(what, &e));
            match &result {
                Err(e) if e.unknown => {}
                _ => flight.landed(),
            }
            match result {
                Err(e) if check && schema::undefined(e.code.as_deref()) => {
                    // Not the schema this statement was written for: ask again, so that the
                    // answer names the version (migrated past this binary, or never).
                    self.schema.forget();
                    let client = self.connection(what).await?;
                    self.check_on(what, &client).await?;
                    Err(e)
                }
                other => other,
            }
        };
        match tokio::time::timeout(self.budget, work).await {
            Ok(r) => r,
            Err(_) => Err(DbError::new(
                what,
                format!(
                    "no answer within {} ms (POSTONCE_DATABASE_TIMEOUT_MS)",
                    self.budget.as_millis()
                ),
                true,
            )),
        }
    }

    async fn connection(&self, what: &str) -> Result<Object, DbError> {
        self.pool.get().await.map_err(|e| {
            // Not connected: nothing was sent.
            DbError::new(what, format!("no connection ({e})"), false)
        })
    }

    /// Asks for the schema's version on `client`; refuses one behind or ahead.
    async fn check_on(&self, what: &str, client: &Object) -> Result<(), DbError> {
        let flight = self.in_flight.take_off(client);
        let have = match schema::version_on(client).await {
            Ok(have) => have,
            Err(e) => {
                let e = DbError::from_pg(what, &e);
                if !e.unknown {
                    flight.landed();
                }
                return Err(e);
            }
        };
        flight.landed();
        match schema::verdict(have) {
            Ok(_) => {
                self.schema.passed();
                Ok(())
            }
            Err(e) => {
                self.schema.forget();
                Err(DbError::new(what, e.to_string(), false))
            }
        }
    }

    /// The schema version the database is at (0: never migrated).
    ///
    /// # Errors
    /// When the database cannot be asked.
    pub async fn schema_version(&self) -> Result<i32, DbError> {
        self.run("schema version", false, |c| async move {
            schema::version_on(&c).await
        })
        .await
    }

    /// Checks that the schema is the one this binary expects.
    ///
    /// # Errors
    /// A [`SchemaError`]: behind (run `postonce db migrate`), ahead, or unreachable.
    pub async fn check_schema(&self) -> Result<i32, SchemaError> {
        let have = self
            .schema_version()
            .await
            .map_err(SchemaError::Unreachable)?;
        match schema::verdict(have) {
            Ok(v) => {
                self.schema.passed();
                Ok(v)
            }
            Err(e) => {
                self.schema.forget();
                Err(e)
            }
        }
    }

    /// The database's clock, Unix milliseconds (doctor compares it with the host's).
    ///
    /// # Errors
    /// When the database cannot be asked.
    pub async fn clock_ms(&self) -> Result<i64, DbError> {
        self.run("clock", false, |c| async move {
            let row = c
                .query_one(
                    "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, current_setting('server_version')",
                    &[],
                )
                .await?;
            row.try_get::<_, i64>(0)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_libpq_defaults_and_never_show_the_password() {
        let o = ConnectOptions::parse("postgres://u:hunter2@db.example:5433/app").expect("parses");
        assert_eq!(o.pg.get_ssl_mode(), SslMode::Prefer);
        assert_eq!(o.verify, Verify::None);
        assert!(!format!("{o:?}").contains("hunter2"));
        let o = ConnectOptions::parse(
            "postgresql://u:p@h/app?sslmode=verify-full&sslrootcert=/tmp/ca.pem&application_name=x",
        )
        .expect("parses");
        assert_eq!(o.pg.get_ssl_mode(), SslMode::Require);
        assert_eq!(o.verify, Verify::Full);
        assert_eq!(o.root_cert.as_deref(), Some("/tmp/ca.pem"));
        for bad in [
            "postgres://u:hunter2@h/app?sslmode=sometimes",
            "postgres://u:hunter2@h:notaport/app",
            "mysql://u:hunter2@h/app",
        ] {
            let e = ConnectOptions::parse(bad).expect_err(bad);
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn idle_connections_send_keepalives_before_a_nat_forgets_them_unless_the_url_says_otherwise() {
        let o = ConnectOptions::parse("postgres://u:p@h/app").expect("parses");
        assert!(o.pg.get_keepalives(), "keepalives are on");
        assert!(
            o.pg.get_keepalives_idle() < Duration::from_secs(350),
            "{:?}",
            o.pg.get_keepalives_idle()
        );
        assert_eq!(
            o.pg.get_keepalives_interval(),
            Some(pool::KEEPALIVE_INTERVAL)
        );
        assert_eq!(o.pg.get_keepalives_retries(), Some(pool::KEEPALIVE_RETRIES));
        let o = ConnectOptions::parse(
            "postgres://u:p@h/app?keepalives_idle=30&keepalives_interval=5&keepalives_retries=9",
        )
        .expect("parses");
        assert_eq!(o.pg.get_keepalives_idle(), Duration::from_secs(30));
        assert_eq!(o.pg.get_keepalives_interval(), Some(Duration::from_secs(5)));
        assert_eq!(o.pg.get_keepalives_retries(), Some(9));
    }

    fn hosts(o: &ConnectOptions) -> Vec<(String, u16)> {
        use tokio_postgres::config::Host;
        let ports = o.pg.get_ports();
        o.pg.get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let name = match h {
                    Host::Tcp(name) => name.clone(),
                    Host::Unix(path) => path.display().to_string(),
                };
                (name, ports.get(i).copied().unwrap_or(0))
            })
            .collect()
    }

    #[test]
    fn urls_with_several_hosts_parse_as_libpq_reads_them() {
        let o = ConnectOptions::parse("postgres://u:hunter2@h1:5432,h2:5433/db").expect("parses");
        assert_eq!(
            hosts(&o),
            [("h1".to_owned(), 5432), ("h2".to_owned(), 5433)]
        );
        assert_eq!(o.pg.get_dbname(), Some("db"));
        assert_eq!(o.pg.get_user(), Some("u"));
        assert_eq!(o.pg.get_password(), Some(&b"hunter2"[..]));
        assert_eq!(o.pg.get_ssl_mode(), SslMode::Prefer);
        assert!(!format!("{o:?}").contains("hunter2"));
        // A host without a port takes 5432; an IPv6 host is in brackets; the query keeps
        // libpq's other parameters besides sslmode and sslrootcert.
        let o = ConnectOptions::parse(
            "postgresql://u:hunter2@[::1]:6432,db.example,10.0.0.2:5433/app?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&target_session_attrs=read-write",
        )
        .expect("parses");
        assert_eq!(
            hosts(&o),
            [
                ("::1".to_owned(), 6432),
                ("db.example".to_owned(), 5432),
                ("10.0.0.2".to_owned(), 5433)
            ]
        );
        assert_eq!(o.pg.get_ssl_mode(), SslMode::Require);
        assert_eq!(o.verify, Verify::Full);
        assert_eq!(o.root_cert.as_deref(), Some("/tmp/ca.pem"));
        assert_eq!(
            o.pg.get_target_session_attrs(),
            tokio_postgres::config::TargetSessionAttrs::ReadWrite
        );
        // The credentials run to the first `@`: a password may hold `?` and `/` (libpq reads
        // it so), and its percent-escapes are decoded.
        let o = ConnectOptions::parse("postgres://u:hu?n/ter%402@h1,h2/db?sslmode=disable")
            .expect("parses");
        assert_eq!(o.pg.get_password(), Some(&b"hu?n/ter@2"[..]));
        assert_eq!(o.pg.get_ssl_mode(), SslMode::Disable);
        assert_eq!(hosts(&o).len(), 2);
        for bad in [
            "postgres://u:hunter2@h1:5432,h2:notaport/db",
            "postgres://u:hunter2@h1,[::1/db",
            "postgres://u:hunter2@h1,h2/db?sslmode=sometimes",
            "postgres://u:hunter2@h1,h2/db?nosuchoption=1",
            "postgres://u:hunter2@h1,h2/db?connect_timeout",
            "postgres://hunter2@/db",
        ] {
            let e = ConnectOptions::parse(bad).expect_err(bad);
            assert!(!e.contains("hunter2"), "{bad}: {e}");
        }
    }
}
