#![allow(clippy::unwrap_used, clippy::expect_used)]
//! TLS to a real PostgreSQL with TLS on (`KEEL_TEST_DATABASE_URL` and
//! `KEEL_TEST_DATABASE_CA`, which `scripts/pg-test-cluster` exports when `openssl` is
//! installed; skipped with a note otherwise).

use keel_session::{SessionErrorKind, SessionStore};
use keel_store_postgres::{PgOptions, PgStore};
use keel_testkit::store::record_turn;

fn cluster() -> Option<(String, String)> {
    keel_testkit::prereq::database_with_tls()
}

/// `url` with `query` appended.
fn with(url: &str, query: &str) -> String {
    format!("{url}{}{query}", if url.contains('?') { '&' } else { '?' })
}

/// The store's connections as the server sees them: (with TLS, without).
fn connections(url: &str, app: &str) -> (i64, i64) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl)
                 FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
                &[&app],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    })
}

/// Writes and reads a session through `store`.
fn round_trip(store: &PgStore) {
    let mut session = store.create("/work/tls").unwrap();
    record_turn(&mut session, "over TLS");
    let id = session.id().to_owned();
    session.close().unwrap();
    assert_eq!(store.read(&id).unwrap().len(), 12);
    store.delete(&id).unwrap();
}

#[test]
fn verify_full_with_the_ca_file_connects_over_tls() {
    let Some((url, ca)) = cluster() else { return };
    for (host_url, how) in [
        (with(&url, &format!("sslmode=verify-full&sslrootcert={ca}")), "sslrootcert"),
        (
            url.replace("127.0.0.1", "localhost") + "?sslmode=verify-full",
            "KEEL_STORE_CA / PgOptions::ca_file",
        ),
    ] {
        let app = format!("keel-tls-{}-{}", std::process::id(), how.len());
        let options = PgOptions::default().with_pool_size(2);
        let options = if how == "sslrootcert" { options } else { options.with_ca_file(ca.clone().into()) };
        let store =
            PgStore::connect_with(&with(&host_url, &format!("application_name={app}")), options).unwrap();
        round_trip(&store);
        assert_eq!(connections(&url, &app), (2, 0), "every connection of the store is TLS ({how})");
    }
}

#[test]
fn plain_tcp_when_sslmode_is_disable_or_absent() {
    let Some((url, _)) = cluster() else { return };
    for query in ["sslmode=disable", ""] {
        let app = format!("keel-plain-{}-{}", std::process::id(), query.len());
        let store = PgStore::connect_with(
            &with(&url, &format!("application_name={app}&{query}")),
            PgOptions::default(),
        )
        .unwrap();
        round_trip(&store);
        let (tls, plain) = connections(&url, &app);
        assert_eq!((tls, plain > 0), (0, true), "{query:?}");
    }
}

#[test]
fn a_certificate_that_cannot_be_verified_is_refused() {
    let Some((url, ca)) = cluster() else { return };
    // No CA given: the throwaway CA is not among the system's roots.
    let err = PgStore::connect_with(&with(&url, "sslmode=verify-full"), PgOptions::default()).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Io, "{err}");
    assert!(err.message.contains("UnknownIssuer"), "{err}");
    // `require` verifies the chain too: keel never takes an unverified certificate.
    let err = PgStore::connect_with(&with(&url, "sslmode=require"), PgOptions::default()).unwrap_err();
    assert!(err.message.contains("UnknownIssuer"), "{err}");

    // A name the certificate does not have: verify-full refuses, verify-ca accepts.
    let port = url.rsplit_once(':').unwrap().1.split('/').next().unwrap().to_owned();
    let elsewhere =
        format!("postgres://keel@db.invalid:{port}/keel_test?hostaddr=127.0.0.1&sslrootcert={ca}");
    let err =
        PgStore::connect_with(&with(&elsewhere, "sslmode=verify-full"), PgOptions::default()).unwrap_err();
    assert!(err.message.contains(r#"certificate not valid for name "db.invalid""#), "{err}");
    let store = PgStore::connect_with(&with(&elsewhere, "sslmode=verify-ca"), PgOptions::default()).unwrap();
    round_trip(&store);
}
