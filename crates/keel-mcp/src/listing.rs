//! Listing a server's tools one by one: a tool whose definition does not parse (a schema
//! that is not an object, a missing name) is skipped with the reason, and the server's
//! other tools stay usable. rmcp's own listing fails whole on one bad tool (the reply
//! then no longer reads as a tool list), which left the server unusable and reported as
//! "unexpected response".

use rmcp::model::{ClientRequest, ListToolsRequest, PaginatedRequestParams, ServerResult, Tool};
use rmcp::service::RoleClient;
use rmcp::{Peer, ServiceError};
use serde_json::Value;

use crate::error::{McpError, McpErrorKind};

/// Pages of a tool list read at most (a server that paginates forever is cut off).
const MAX_PAGES: usize = 32;

/// The tools a server offers, and the ones skipped (`name: why`).
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub tools: Vec<Tool>,
    pub skipped: Vec<String>,
}

/// Lists every page of `peer`'s tools (of server `server`).
pub(crate) async fn list_tools(server: &str, peer: &Peer<RoleClient>) -> Result<Listing, McpError> {
    let mut listing = Listing::default();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.take().map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let request = ClientRequest::ListToolsRequest(ListToolsRequest {
            method: Default::default(),
            params,
            extensions: Default::default(),
        });
        let next = match peer.send_request(request).await.map_err(|e| failed(server, e))? {
            ServerResult::ListToolsResult(page) => {
                listing.tools.extend(page.tools);
                page.next_cursor
            }
            ServerResult::CustomResult(custom) => read_page(server, custom.0, &mut listing)?,
            _ => return Err(unreadable(server, "it answered tools/list with something else")),
        };
        match next {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(listing),
        }
    }
    listing.skipped.push(format!("the rest of its tools: the list goes on past {MAX_PAGES} pages"));
    Ok(listing)
}

/// A page that did not read as a whole tool list: its tools, one at a time.
fn read_page(server: &str, page: Value, listing: &mut Listing) -> Result<Option<String>, McpError> {
    let Value::Object(mut page) = page else {
        return Err(unreadable(server, "its tools/list reply is not an object"));
    };
    let Some(Value::Array(tools)) = page.remove("tools") else {
        return Err(unreadable(server, "its tools/list reply has no `tools` list"));
    };
    for (index, tool) in tools.into_iter().enumerate() {
        let name = tool.get("name").and_then(Value::as_str).map(str::to_owned);
        match serde_json::from_value::<Tool>(tool) {
            Ok(tool) => listing.tools.push(tool),
            Err(e) => {
                let name = name.unwrap_or_else(|| format!("tool #{}", index + 1));
                listing.skipped.push(format!("{name}: its definition does not parse ({e})"));
            }
        }
    }
    Ok(page.get("nextCursor").and_then(Value::as_str).map(str::to_owned))
}

/// A `tools/list` request that failed.
fn failed(server: &str, error: ServiceError) -> McpError {
    McpError::new(McpErrorKind::Listing, server, format!("cannot list its tools: {error}")).caused_by(error)
}

/// A `tools/list` reply that is not a tool list.
fn unreadable(server: &str, why: &str) -> McpError {
    McpError::new(McpErrorKind::Listing, server, format!("cannot list its tools: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bad_tool_is_skipped_and_the_others_kept() {
        let page = json!({
            "tools": [
                {"name": "good", "inputSchema": {"type": "object"}},
                {"name": "bad", "inputSchema": "not a schema"},
                {"inputSchema": {"type": "object"}}
            ],
            "nextCursor": "2"
        });
        let mut listing = Listing::default();
        assert_eq!(read_page("s", page, &mut listing), Ok(Some("2".to_owned())));
        assert_eq!(listing.tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), ["good"]);
        assert_eq!(listing.skipped.len(), 2);
        assert!(
            listing.skipped[0].starts_with("bad: its definition does not parse"),
            "{:?}",
            listing.skipped
        );
        assert!(listing.skipped[1].starts_with("tool #3: "), "{:?}", listing.skipped);
        let mut listing = Listing::default();
        for bad in [json!([1]), json!({"tools": 3})] {
            let error = read_page("s", bad, &mut listing).unwrap_err();
            assert_eq!(error.kind, McpErrorKind::Listing);
            assert!(error.message.starts_with("cannot list its tools: its tools/list reply"), "{error}");
        }
    }
}
