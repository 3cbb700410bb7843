//! How connections to the database are made (plain TCP for now).

use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{Client, Config, Connection, NoTls, Socket};

/// The stream a connection runs over.
pub(crate) type Stream = NoTlsStream;

/// Connection security settings of a store.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tls {}

impl Tls {
    /// Opens a connection and runs it on the current runtime until it ends.
    pub(crate) async fn connect(&self, config: &Config) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.connect_raw(config).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "PostgreSQL connection ended");
            }
        });
        Ok(client)
    }

    /// Opens a connection; the caller drives it (to read notices).
    pub(crate) async fn connect_raw(
        &self,
        config: &Config,
    ) -> Result<(Client, Connection<Socket, Stream>), tokio_postgres::Error> {
        config.connect(NoTls).await
    }
}
