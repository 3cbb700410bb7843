//! Prerequisites of tests that need a real service: a test without one says it was
//! skipped, and fails instead where the run promises it (CI sets
//! `KEEL_TEST_REQUIRE_DATABASE=1`), so a lost variable never turns a suite green.

/// The test database's URL (`KEEL_TEST_DATABASE_URL`, started by
/// `scripts/pg-test-cluster`), or `None` after saying the test is skipped.
///
/// # Panics
/// When the variable is unset and `KEEL_TEST_REQUIRE_DATABASE` is set.
pub fn database_url() -> Option<String> {
    let url = std::env::var("KEEL_TEST_DATABASE_URL").ok().filter(|url| !url.is_empty());
    if url.is_none() {
        assert!(
            std::env::var_os("KEEL_TEST_REQUIRE_DATABASE").is_none(),
            "KEEL_TEST_REQUIRE_DATABASE is set but KEEL_TEST_DATABASE_URL is not: did scripts/pg-test-cluster fail?"
        );
        eprintln!("skipped: KEEL_TEST_DATABASE_URL is not set (scripts/pg-test-cluster starts a database)");
    }
    url
}

/// The test database's URL and the CA certificate of its TLS (`KEEL_TEST_DATABASE_CA`),
/// as [`database_url`].
///
/// # Panics
/// When either is unset and `KEEL_TEST_REQUIRE_DATABASE` is set.
pub fn database_with_tls() -> Option<(String, String)> {
    let url = database_url()?;
    let ca = std::env::var("KEEL_TEST_DATABASE_CA").ok().filter(|ca| !ca.is_empty());
    if ca.is_none() {
        assert!(
            std::env::var_os("KEEL_TEST_REQUIRE_DATABASE").is_none(),
            "KEEL_TEST_REQUIRE_DATABASE is set but KEEL_TEST_DATABASE_CA is not"
        );
        eprintln!("skipped: KEEL_TEST_DATABASE_CA is not set (scripts/pg-test-cluster makes one)");
    }
    Some((url, ca?))
}
