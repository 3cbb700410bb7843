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

/// Whether `name`, a program a test needs, is here (`present`). When it is not, says the
/// test is skipped (`what` describes the program), or fails the test when
/// `KEEL_TEST_REQUIRE` names it (a comma-separated list: `.ci/run` names what it installs,
/// e.g. `pty,python3`), so a machine that lost a program never turns a suite green.
///
/// # Panics
/// When the program is missing and `KEEL_TEST_REQUIRE` names it.
pub fn available(name: &str, present: bool, what: &str) -> bool {
    if !present {
        let required = std::env::var("KEEL_TEST_REQUIRE").unwrap_or_default();
        assert!(
            !required.split(',').any(|r| r.trim() == name),
            "KEEL_TEST_REQUIRE names `{name}` but {what} is not installed"
        );
        eprintln!("skipped: {what} is not installed");
    }
    present
}
