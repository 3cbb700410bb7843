//! Where a configuration becomes a client: the one module that knows every wire API.
//! The APIs depend on the configuration, never the other way round.

use std::sync::Arc;

use crate::client::ModelClient;
use crate::config::{Api, ProviderConfig};
use crate::error::ModelError;
use crate::http_client::{HttpClient, WireApi};

/// The wire API behind `api`: one line per API.
fn wire_api(api: Api) -> &'static dyn WireApi {
    match api {
        Api::Chat => &crate::openai::Chat,
        Api::Anthropic => &crate::anthropic::Messages,
        Api::Responses => &crate::responses::Responses,
    }
}

impl HttpClient {
    /// A client for `config`, speaking `config.api`. Fails on a missing model name, a
    /// bad URL or a header that is not valid.
    pub fn new(config: ProviderConfig) -> Result<Self, ModelError> {
        let wire = wire_api(config.api);
        HttpClient::speaking(config, wire)
    }
}

impl ProviderConfig {
    /// A client for this configuration's API. Fails on a missing model name or a bad
    /// URL.
    pub fn client(&self) -> Result<Arc<dyn ModelClient>, ModelError> {
        Ok(Arc::new(HttpClient::new(self.clone())?))
    }
}
