//! The schema's versions: every migration this binary carries, and the version it needs.
//! Applied by [`super::migrate`], checked by [`super::schema`].

/// Every migration, in order: (version, what it does, SQL). Add one by appending a line.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "records, drafts and the due index, captions, pacing, claims, secrets",
        include_str!("migrations/0001_init.sql"),
    ),
    (
        2,
        "a draft's started mark (a run that died counts as an attempt)",
        include_str!("migrations/0002_started.sql"),
    ),
];

/// The version this binary needs.
pub const LATEST: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;
