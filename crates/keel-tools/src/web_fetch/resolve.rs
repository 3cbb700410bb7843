//! Name resolution that is also the address check: reqwest asks this resolver for a
//! host's addresses and connects to exactly the ones it returns, so the addresses checked
//! are the addresses connected to — a name cannot resolve to a public address for the
//! check and to a private one for the connection (DNS rebinding). Hosts written as an
//! address never reach a resolver; [`Guard::check_literal`] judges those before the request.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::address::{Blocked, blocked};

/// Resolves a host name to its addresses (the system's resolver by default).
pub type Lookup =
    Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> + Send + Sync>;

/// The system's resolver (`getaddrinfo`, on tokio's blocking pool).
pub fn system_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|addr| addr.ip()).collect())
        })
    })
}

/// A host whose address is not reached, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The host as the URL names it.
    pub host: String,
    /// The URL writes the host as this address (no name was resolved).
    pub literal: bool,
    /// The address refused.
    pub ip: IpAddr,
    /// What kind of address it is.
    pub why: Blocked,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.literal {
            write!(f, "`{}` is {}", self.host, self.why.describe())
        } else {
            write!(f, "`{}` resolves to {}, {}", self.host, self.ip, self.why.describe())
        }
    }
}

impl std::error::Error for Refused {}

/// Which hosts may be reached at addresses that are not public.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrivateAccess {
    /// Every host may.
    pub all: bool,
    /// These hosts may (lower case, no brackets, no port; `*.lan` names every host under
    /// `lan`).
    pub hosts: Vec<String>,
}

impl PrivateAccess {
    /// From the configured list: host names or addresses, `*.suffix`, `*` for every host;
    /// a `:port` or IPv6 brackets are dropped (the check is of addresses, not ports).
    pub fn new(all: bool, hosts: &[String]) -> PrivateAccess {
        let hosts: Vec<String> =
            hosts.iter().map(|host| normal_host(host)).filter(|h| !h.is_empty()).collect();
        PrivateAccess { all: all || hosts.iter().any(|h| h == "*"), hosts }
    }

    /// Whether `host` (as a URL names it) may be reached at a non-public address.
    pub fn allows(&self, host: &str) -> bool {
        if self.all {
            return true;
        }
        let host = normal_host(host);
        self.hosts.iter().any(|entry| match entry.strip_prefix("*.") {
            Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
            None => *entry == host,
        })
    }
}

/// A host as configured or as a URL names it: trimmed, lower case, without IPv6 brackets,
/// a port or a final dot.
fn normal_host(text: &str) -> String {
    let text = text.trim().to_ascii_lowercase();
    let host = if let Some(rest) = text.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default().to_owned()
    } else if text.matches(':').count() == 1 {
        text.split(':').next().unwrap_or_default().to_owned()
    } else {
        text
    };
    host.trim_end_matches('.').to_owned()
}

/// The resolver reqwest uses, and the check of hosts written as addresses.
#[derive(Clone)]
pub struct Guard {
    lookup: Lookup,
    private: Arc<PrivateAccess>,
}

impl Guard {
    /// A guard resolving with `lookup` and letting `private`'s hosts reach non-public
    /// addresses.
    pub fn new(lookup: Lookup, private: PrivateAccess) -> Guard {
        Guard { lookup, private: Arc::new(private) }
    }

    /// Whether `ip`, the address of `host`, may be reached.
    fn judge(&self, host: &str, ip: IpAddr, literal: bool) -> Result<(), Refused> {
        match blocked(ip) {
            Some(why) if !self.private.allows(host) => {
                Err(Refused { host: host.to_owned(), literal, ip, why })
            }
            _ => Ok(()),
        }
    }

    /// Checks a host the URL writes as an address (which no resolver sees).
    pub fn check_literal(&self, host: &str, ip: IpAddr) -> Result<(), Refused> {
        self.judge(host, ip, true)
    }

    /// The addresses of `host`, every one of them checked: one refused address refuses
    /// the host (a name that resolves to a public and a private address is not a public
    /// server).
    pub async fn addresses(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let ips = (self.lookup)(host.to_owned()).await.map_err(ResolveError::Lookup)?;
        if ips.is_empty() {
            return Err(ResolveError::Lookup(io::Error::new(io::ErrorKind::NotFound, "no address")));
        }
        for ip in &ips {
            self.judge(host, *ip, false).map_err(ResolveError::Refused)?;
        }
        Ok(ips)
    }
}

/// Why a name gave no address to connect to.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The name did not resolve.
    #[error("cannot resolve the name: {0}")]
    Lookup(io::Error),
    /// It resolved to an address that is not reached.
    #[error(transparent)]
    Refused(Refused),
}

impl Resolve for Guard {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let ips = guard.addresses(&host).await?;
            // Port 0: reqwest puts the URL's port (or the scheme's) in its place.
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(ips: &'static [&'static str]) -> Lookup {
        Arc::new(move |_host: String| {
            Box::pin(async move { Ok(ips.iter().map(|ip| ip.parse().unwrap()).collect()) })
        })
    }

    #[test]
    fn the_private_list_names_hosts_and_suffixes() {
        let access = PrivateAccess::new(
            false,
            &["Docs.Internal".into(), "localhost:8000".into(), "*.lan".into(), "[::1]".into(), " ".into()],
        );
        for host in ["docs.internal", "DOCS.internal.", "localhost", "a.lan", "b.c.lan", "::1", "[::1]"] {
            assert!(access.allows(host), "{host}");
        }
        for host in ["lan", "xlan", "docs.internal.evil.com", "127.0.0.1", "evil.com"] {
            assert!(!access.allows(host), "{host}");
        }
        assert!(PrivateAccess::new(false, &["*".into()]).allows("anything"));
        assert!(PrivateAccess::new(true, &[]).allows("anything"));
        assert!(!PrivateAccess::default().allows("localhost"));
    }

    #[tokio::test]
    async fn a_name_is_judged_by_every_address_it_resolves_to() {
        let guard = Guard::new(fixed(&["93.184.215.14", "127.0.0.1"]), PrivateAccess::default());
        let Err(ResolveError::Refused(refused)) = guard.addresses("rebind.example").await else {
            panic!("a name with a loopback address was resolved");
        };
        assert_eq!(
            refused.to_string(),
            "`rebind.example` resolves to 127.0.0.1, a loopback address (this machine)"
        );
        let public = Guard::new(
            fixed(&["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]),
            PrivateAccess::default(),
        );
        assert_eq!(public.addresses("example.com").await.unwrap().len(), 2);
        let allowed = Guard::new(fixed(&["10.0.0.5"]), PrivateAccess::new(false, &["docs.lan".into()]));
        assert!(allowed.addresses("docs.lan").await.is_ok());
        assert!(matches!(allowed.addresses("other.lan").await, Err(ResolveError::Refused(_))));
        let nothing = Guard::new(fixed(&[]), PrivateAccess::default());
        assert!(matches!(nothing.addresses("x").await, Err(ResolveError::Lookup(_))));
    }

    #[test]
    fn an_address_in_the_url_is_judged_as_written() {
        let guard = Guard::new(fixed(&[]), PrivateAccess::new(false, &["localhost".into()]));
        let refused = guard.check_literal("127.0.0.1", "127.0.0.1".parse().unwrap()).unwrap_err();
        assert_eq!(refused.to_string(), "`127.0.0.1` is a loopback address (this machine)");
        assert!(guard.check_literal("8.8.8.8", "8.8.8.8".parse().unwrap()).is_ok());
    }
}
