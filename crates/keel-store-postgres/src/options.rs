//! How a store leases sessions and how many connections it uses.

use std::path::PathBuf;
use std::time::Duration;

use keel_session::{SessionError, SessionErrorKind};

/// Settings of a [`crate::PgStore`]: the lease length and the pool size.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PgOptions {
    /// How long a lease lasts without renewal (renewed every third of it): how long a
    /// session of a node that died stays locked. Default 30 s.
    pub lease_ttl: Duration,
    /// How often the leases are renewed; `None` (the default): every third of
    /// `lease_ttl`.
    pub renew_every: Option<Duration>,
    /// Connections in the pool (every statement but LISTEN uses them). Default 8.
    pub pool_size: usize,
    /// A PEM file of CA certificates trusted for TLS to the database, besides the
    /// system's (`sslrootcert=` in the URL wins). Default none.
    pub ca_file: Option<PathBuf>,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions { lease_ttl: Duration::from_secs(30), renew_every: None, pool_size: 8, ca_file: None }
    }
}

impl PgOptions {
    /// The defaults with `KEEL_STORE_LEASE_SECS` (seconds, may be fractional),
    /// `KEEL_STORE_POOL` (connections) and `KEEL_STORE_CA` (a PEM file) applied when set.
    pub fn from_env() -> Result<Self, SessionError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The defaults with the variables `var` gives applied.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, SessionError> {
        let mut options = PgOptions::default();
        if let Some(secs) = var("KEEL_STORE_LEASE_SECS") {
            let secs: f64 = secs.trim().parse().map_err(|_| bad("KEEL_STORE_LEASE_SECS", &secs))?;
            if !(0.1..=86_400.0).contains(&secs) {
                return Err(bad("KEEL_STORE_LEASE_SECS", &secs.to_string()));
            }
            options.lease_ttl = Duration::from_secs_f64(secs);
        }
        if let Some(size) = var("KEEL_STORE_POOL") {
            let n: usize = size.trim().parse().map_err(|_| bad("KEEL_STORE_POOL", &size))?;
            if !(1..=256).contains(&n) {
                return Err(bad("KEEL_STORE_POOL", &size));
            }
            options.pool_size = n;
        }
        if let Some(path) = var("KEEL_STORE_CA").filter(|p| !p.trim().is_empty()) {
            options.ca_file = Some(PathBuf::from(path));
        }
        Ok(options)
    }

    /// These options with lease length `ttl`.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// These options renewing the leases every `period` (at most a third of the lease
    /// length is sensible).
    pub fn with_renew_every(mut self, period: Duration) -> Self {
        self.renew_every = Some(period);
        self
    }

    /// These options trusting the CA certificates in PEM file `path` too.
    pub fn with_ca_file(mut self, path: PathBuf) -> Self {
        self.ca_file = Some(path);
        self
    }

    /// These options with `size` pooled connections.
    pub fn with_pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }
}

fn bad(name: &str, value: &str) -> SessionError {
    SessionError::new(
        SessionErrorKind::Invalid,
        format!(
            "{name}={value:?} is not valid (KEEL_STORE_LEASE_SECS: 0.1 to 86400 seconds; KEEL_STORE_POOL: 1 to 256)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn defaults_and_variables() {
        assert_eq!(PgOptions::from_vars(vars(&[])).unwrap(), PgOptions::default());
        assert_eq!(
            PgOptions::from_vars(vars(&[
                ("KEEL_STORE_LEASE_SECS", "1.5"),
                ("KEEL_STORE_POOL", "3"),
                ("KEEL_STORE_CA", "/etc/keel/db-ca.pem"),
            ]))
            .unwrap(),
            PgOptions {
                lease_ttl: Duration::from_millis(1500),
                renew_every: None,
                pool_size: 3,
                ca_file: Some(PathBuf::from("/etc/keel/db-ca.pem")),
            }
        );
    }

    #[test]
    fn bad_values_are_refused() {
        for pairs in [
            &[("KEEL_STORE_LEASE_SECS", "soon")][..],
            &[("KEEL_STORE_LEASE_SECS", "0")][..],
            &[("KEEL_STORE_POOL", "0")][..],
            &[("KEEL_STORE_POOL", "-1")][..],
        ] {
            let owned: Vec<(String, String)> =
                pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
            let err =
                PgOptions::from_vars(|name| owned.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()))
                    .unwrap_err();
            assert_eq!(err.kind, SessionErrorKind::Invalid, "{err}");
        }
    }
}
