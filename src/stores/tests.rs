//! The stores' variables, read through the whole configuration as the process reads it.

use crate::config::tests::{assert_refused_naming, load};

#[test]
fn the_database_budget_counts_only_with_a_database() {
    // Without DATABASE_URL, its default budget must not refuse a short function timeout.
    let short = [
        ("POSTONCE_FUNCTION_TIMEOUT_S", "3"),
        ("POSTONCE_LINKEDIN_TIMEOUT_MS", "1000"),
        ("POSTONCE_IMAGE_TIMEOUT_MS", "1000"),
        ("POSTONCE_REDIS_TIMEOUT_MS", "1000"),
        ("POSTONCE_DYNAMODB_TIMEOUT_MS", "1000"),
        ("POSTONCE_TELEGRAM_TIMEOUT_MS", "1000"),
        ("POSTONCE_X_TIMEOUT_MS", "1000"),
        ("POSTONCE_RECONCILE_AFTER_S", "2"),
        ("POSTONCE_CLAIM_TTL_S", "10"),
    ];
    load(&short).expect("no database, no database budget to check");
    let mut with_db = short.to_vec();
    with_db.push(("DATABASE_URL", "postgres://u@127.0.0.1:5432/postonce"));
    if let Err(err) = load(&with_db) {
        // A build without the `postgres` feature refuses DATABASE_URL itself.
        assert!(
            err.var == "POSTONCE_DATABASE_TIMEOUT_MS" || err.var == "DATABASE_URL",
            "{err}"
        );
    } else {
        panic!("an 8 s database budget inside a 3 s function was accepted");
    }
}

#[test]
fn store_variables_are_checked_by_name() {
    assert_refused_naming(&[
        (
            vec![("POSTONCE_REDIS_TIMEOUT_MS", "0")],
            "POSTONCE_REDIS_TIMEOUT_MS",
        ),
        (vec![("REDIS_URL", "localhost:6379")], "REDIS_URL"),
        (vec![("POSTONCE_TABLE", "a b")], "POSTONCE_TABLE"),
        (vec![("POSTONCE_TABLE", "postonce")], "REDIS_URL"),
    ]);
}
