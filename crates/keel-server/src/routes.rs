//! The handlers of `/v1`.

use std::sync::Arc;

use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use keel_session::SessionSummary;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;
use crate::factory::SessionSpec;
use crate::live::Live;
use crate::manager::{Signal, blocking, parse_answer};

/// How long a request body may take to arrive (a request extension the router sets).
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub std::time::Duration);

/// A JSON request body; a bad, oversized or too slow one is a JSON error, not a text
/// page.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req.extensions().get::<BodyTimeout>().map_or(std::time::Duration::from_secs(30), |t| t.0);
        let bytes = tokio::time::timeout(limit, axum::body::Bytes::from_request(req, state))
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "body_timeout",
                    format!("the request body did not arrive within {limit:?}"),
                )
            })?
            .map_err(|r| ApiError::new(r.status(), "bad_body", r.body_text()))?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
    }
}

fn summary_json(summary: &SessionSummary, live: Option<&Live>) -> Value {
    let modified =
        summary.modified.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    json!({
        "id": summary.id,
        "created": summary.created,
        "modified_ms": modified,
        "folder": summary.cwd,
        "first_prompt": summary.first_prompt,
        "turns": summary.turns,
        "usage": summary.usage,
        "parent": summary.parent.as_ref().map(|p| json!({"id": p.id, "seq": p.seq})),
        "events": summary.events,
        "open": live.is_some(),
        "running": live.is_some_and(Live::running) || summary.turn_open,
        "question": live.and_then(Live::question).map(|event| event["data"].clone()),
    })
}

/// `POST /v1/sessions`.
pub async fn create(
    State(app): State<Arc<AppState>>,
    JsonBody(spec): JsonBody<SessionSpec>,
) -> Result<Response, ApiError> {
    let live = app.manager.create(spec).await?;
    Ok((StatusCode::CREATED, axum::Json(json!({"id": live.id, "folder": live.spec.folder}))).into_response())
}

/// `GET /v1/sessions`.
pub async fn list(State(app): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let store = Arc::clone(app.manager.store());
    let summaries = blocking(move || store.list()).await?;
    let items: Vec<Value> = summaries
        .iter()
        .filter(|s| app.manager.under_roots(&s.cwd))
        .map(|s| summary_json(s, app.manager.get(&s.id).as_deref()))
        .collect();
    Ok(axum::Json(json!({"sessions": items})).into_response())
}

/// `GET /v1/sessions/{id}`.
pub async fn show(State(app): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Response, ApiError> {
    // The roots check reads the log unless the session is ready here; read it once.
    let projection = match app.manager.check_in_roots(&id).await? {
        Some(projection) => projection,
        None => app.manager.read(&id).await?,
    };
    let count = projection.last_seq().map_or(0, |seq| seq + 1);
    let summary =
        SessionSummary::from_projection(id.clone(), &projection, std::time::SystemTime::now(), count);
    Ok(axum::Json(summary_json(&summary, app.manager.get(&id).as_deref())).into_response())
}

/// A message, steering text.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextBody {
    text: String,
}

fn text_of(body: TextBody) -> Result<String, ApiError> {
    if body.text.trim().is_empty() {
        return Err(ApiError::bad_request("`text` is empty"));
    }
    Ok(body.text)
}

/// A message: its text, and any images (base64).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    text: String,
    #[serde(default)]
    images: Vec<ImageBody>,
}

/// One image of a message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageBody {
    data: String,
    #[serde(default)]
    media_type: Option<String>,
}

/// The prompt a message asks for: its images decoded (bounded, their format read from
/// the bytes and checked against a stated one).
fn prompt_of(body: MessageBody) -> Result<keel_agent::Prompt, ApiError> {
    let text = text_of(TextBody { text: body.text })?;
    if body.images.len() > keel_llm::MAX_IMAGES_PER_MESSAGE {
        return Err(ApiError::bad_request(format!(
            "{} images; at most {} fit in one message",
            body.images.len(),
            keel_llm::MAX_IMAGES_PER_MESSAGE
        )));
    }
    let mut images = Vec::with_capacity(body.images.len());
    for (n, image) in body.images.iter().enumerate() {
        let decoded = keel_llm::Image::from_base64(&image.data)
            .map_err(|e| ApiError::bad_request(format!("image {}: {e}", n + 1)))?;
        if let Some(stated) = &image.media_type
            && stated != decoded.media_type.media_type()
        {
            return Err(ApiError::bad_request(format!(
                "image {} is {}, not {stated} as stated",
                n + 1,
                decoded.media_type.media_type()
            )));
        }
        images.push(decoded);
    }
    Ok(keel_agent::Prompt::text(text).with_images(images))
}

/// `POST /v1/sessions/{id}/messages`: starts a turn (202).
pub async fn message(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<MessageBody>,
) -> Result<Response, ApiError> {
    let prompt = prompt_of(body)?;
    let live = app.manager.live(&id).await?;
    prompt.check(&**live.agent.model()).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let place = app.manager.start_turn(&live, prompt).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(json!({"id": live.id, "running": true, "queued": place})))
        .into_response())
}

/// `POST /v1/sessions/{id}/steer`.
pub async fn steer(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<TextBody>,
) -> Result<Response, ApiError> {
    let text = text_of(body)?;
    app.manager.signal(&id, Signal::Steer(text)).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

/// `POST /v1/sessions/{id}/abort`.
pub async fn abort(State(app): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Response, ApiError> {
    app.manager.signal(&id, Signal::Abort).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

/// The answer to a permission question.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionBody {
    /// The question's id (from its `permission/ask` event); any pending one if absent.
    #[serde(default)]
    id: Option<u64>,
    /// `allow`, `always`, `deny` or `stop`.
    answer: String,
    /// With `deny`: what the user said to do instead (the model gets it with the refusal).
    #[serde(default)]
    message: Option<String>,
}

/// `POST /v1/sessions/{id}/permission`.
pub async fn permission(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<PermissionBody>,
) -> Result<Response, ApiError> {
    parse_answer(&body.answer, body.message.clone())?;
    let signal = Signal::Answer { id: body.id, answer: body.answer, message: body.message };
    app.manager.signal(&id, signal).await.map_err(|e| {
        if e.code == "no_turn" {
            ApiError::conflict("no_question", "no permission question is pending")
        } else {
            e
        }
    })?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Where to fork.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkBody {
    /// The last event to keep (default: the last durable one).
    #[serde(default)]
    at: Option<u64>,
}

/// `POST /v1/sessions/{id}/fork` → `{id}` of the new session.
pub async fn fork(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ForkBody>,
) -> Result<Response, ApiError> {
    app.manager.check_in_roots(&id).await?;
    let store = Arc::clone(app.manager.store());
    let new_id = blocking(move || {
        let session = store.fork(&id, body.at)?;
        let new_id = session.id().to_owned();
        session.close()?;
        Ok(new_id)
    })
    .await?;
    Ok((StatusCode::CREATED, axum::Json(json!({"id": new_id}))).into_response())
}

/// `DELETE /v1/sessions/{id}`.
pub async fn delete(State(app): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Response, ApiError> {
    app.manager.check_in_roots(&id).await?;
    app.manager.release(&id).await?;
    let store = Arc::clone(app.manager.store());
    blocking(move || store.delete(&id)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Where to resume the event stream.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Replay after this seq (as `Last-Event-ID`).
    #[serde(default)]
    after: Option<u64>,
}

/// `GET /v1/sessions/{id}/events`.
pub async fn events(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let after = match headers.get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be an event seq"))?,
        ),
        None => query.after,
    };
    // Ready here (prepared if need be, holding nothing): this node's hub, and the store
    // for turns other nodes run.
    let live = app.manager.live(&id).await?;
    let sse = crate::sse::events(&app, live, after).await?;
    Ok(sse.into_response())
}
