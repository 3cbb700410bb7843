//! `keel acp`: keel as an Agent Client Protocol agent over stdio, for editors (Zed,
//! JetBrains, Neovim, Emacs). A third front end beside the terminal and `keel serve`:
//! sessions are ordinary keel sessions in the ordinary store, each agent is built by
//! keel's own setup, permission questions go to the client, and the loop's events go out
//! as `session/update`s. Only JSON-RPC is written to stdout.

mod bridge;
mod prompt;
mod sessions;
mod transport;
mod updates;

use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptRequest, PromptResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error};
use anyhow::Context;
use keel_tools::PermissionMode;

use crate::cli::Cli;
use crate::config;
use crate::exit;
use prompt::{failed, invalid};
use sessions::{Front, Live};
use updates::Translator;

/// Runs the agent on stdin and stdout until the client closes stdin.
pub async fn run(cli: &Cli) -> anyhow::Result<u8> {
    let file = config::load_file().map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let spec = crate::store::chosen(cli.store.as_deref());
    let opened = tokio::task::spawn_blocking(move || crate::store::open(spec.as_deref(), false))
        .await
        .context("opening the store")??;
    let front = Front::new(cli.clone(), file, opened.store);
    let reader = tokio::io::BufReader::new(tokio::io::stdin());
    let lines = agent_client_protocol::Lines::new(
        transport::outgoing(tokio::io::stdout()),
        transport::incoming(reader, transport::MAX_MESSAGE_BYTES),
    );
    let served = serve(Arc::clone(&front), lines).await;
    front.close_all().await;
    served.map_err(|e| anyhow::anyhow!("ACP connection: {e}"))?;
    Ok(exit::OK)
}

/// Serves one ACP connection over `transport` until it closes.
pub async fn serve(
    front: Arc<Front>,
    transport: impl agent_client_protocol::ConnectTo<Agent> + 'static,
) -> Result<(), Error> {
    let (new, load, prompt, mode, cancel) =
        (Arc::clone(&front), Arc::clone(&front), Arc::clone(&front), Arc::clone(&front), front);
    Agent
        .v1()
        .name("keel")
        .on_receive_request(
            async move |request: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                responder.respond(initialize(&request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder: Responder<NewSessionResponse>, cx| {
                let front = Arc::clone(&new);
                let connection = cx.clone();
                cx.spawn(async move {
                    responder.respond_with_result(new_session(&front, connection, request).await)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder: Responder<LoadSessionResponse>, cx| {
                let front = Arc::clone(&load);
                let connection = cx.clone();
                cx.spawn(async move {
                    responder.respond_with_result(load_session(&front, connection, request).await)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder: Responder<PromptResponse>, cx| {
                start_prompt(&prompt, &cx, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder: Responder<SetSessionModeResponse>, _cx| {
                let result = match PermissionMode::parse(&request.mode_id.0) {
                    Some(chosen) => {
                        mode.set_mode(&request.session_id.0, chosen).map(|()| SetSessionModeResponse::new())
                    }
                    None => Err(invalid(format!(
                        "no mode `{}`; keel's modes: ask, auto, read-only",
                        request.mode_id.0
                    ))),
                };
                responder.respond_with_result(result)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                cancel.cancel(&notification.session_id.0);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}

/// What keel supports: loading sessions, text prompts (with resource links and embedded
/// text), MCP servers over stdio and HTTP.
fn initialize(request: &InitializeRequest) -> InitializeResponse {
    let version = request.protocol_version.min(ProtocolVersion::V1);
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true).image(true))
        .mcp_capabilities(McpCapabilities::new().http(true));
    InitializeResponse::new(version)
        .agent_capabilities(capabilities)
        .agent_info(Implementation::new("keel", env!("CARGO_PKG_VERSION")).title("keel".to_owned()))
}

async fn new_session(
    front: &Front,
    connection: ConnectionTo<Client>,
    request: NewSessionRequest,
) -> Result<NewSessionResponse, Error> {
    let live = front.open(connection, &request.cwd, &request.mcp_servers, None).await?;
    let response = NewSessionResponse::new(live.session.id().to_owned())
        .modes(sessions::modes(live.settings.permission));
    front.keep(live);
    Ok(response)
}

/// Opens a session of the store and replays its whole history as `session/update`s
/// before answering.
async fn load_session(
    front: &Front,
    connection: ConnectionTo<Client>,
    request: LoadSessionRequest,
) -> Result<LoadSessionResponse, Error> {
    if front.has(&request.session_id.0) {
        return Err(prompt::refused(format!(
            "session {} is already open in this connection",
            request.session_id.0
        )));
    }
    let id = request.session_id.0.to_string();
    let live = front.open(connection, &request.cwd, &request.mcp_servers, Some(&id)).await?;
    let store = front.store();
    let session_id = live.session.id().to_owned();
    let events = tokio::task::spawn_blocking(move || store.read(&session_id))
        .await
        .map_err(|e| failed(format!("reading the session: {e}")))?
        .map_err(|e| failed(e.to_string()))?;
    replay(&live, &events);
    let response = LoadSessionResponse::new().modes(sessions::modes(live.settings.permission));
    front.keep(live);
    Ok(response)
}

/// The session's logged history as updates, through the same translation as a live turn.
fn replay(live: &Live, events: &[keel_session::Event]) {
    let window = live.settings.compaction.window.or_else(|| live.model.context_window());
    let mut translator = Translator::new(&live.workspace, window, true);
    translator.set_tools(live.agent.tools_for(&live.ctx).clone());
    for event in events {
        translator.logged(event).into_iter().for_each(|update| live.bridge.send(update));
    }
}

/// Starts a prompt's turn in a task of its own; its answer is sent when the turn ends.
fn start_prompt(
    front: &Arc<Front>,
    cx: &ConnectionTo<Client>,
    request: PromptRequest,
    responder: Responder<PromptResponse>,
) -> Result<(), Error> {
    let text = match prompt::prompt(&request.prompt) {
        Ok(prompt) => prompt,
        Err(error) => return responder.respond_with_error(error),
    };
    let (live, cancel) = match front.start_turn(&request.session_id.0) {
        Ok(taken) => taken,
        Err(error) => return responder.respond_with_error(error),
    };
    let front = Arc::clone(front);
    cx.spawn(async move {
        let (live, answer) = turn(live, text, cancel).await;
        front.end_turn(live);
        responder.respond_with_result(answer)
    })
}

/// Runs one turn: the MCP servers' tools first, then the loop; the answer for the client.
async fn turn(
    mut live: Box<Live>,
    text: keel_agent::Prompt,
    cancel: keel_llm::CancellationToken,
) -> (Box<Live>, Result<PromptResponse, Error>) {
    if let Some(mcp) = &mut live.mcp {
        match mcp.before_turn(live.agent.tools(), &mut live.ctx).await {
            Ok(notes) => notes.iter().for_each(|note| tracing::info!("acp: {note}")),
            Err(error) => return (live, Err(failed(error.to_string()))),
        }
    }
    live.bridge.set_tools(live.agent.tools_for(&live.ctx).clone());
    live.bridge.set_turn(Some(cancel.clone()));
    let Live { session, agent, ctx, bridge, .. } = &mut *live;
    let outcome = agent.run_turn(session, ctx, text, &**bridge, &cancel).await;
    live.bridge.set_turn(None);
    let answer = match outcome {
        Err(keel_agent::AgentError::Prompt(refused)) => Err(prompt::invalid(refused.to_string())),
        Err(error) => Err(failed(format!("the session log could not be written: {error}"))),
        Ok(outcome) => {
            let finish = live.bridge.last_finish();
            let last = finish.as_ref().map(|(reason, raw)| (*reason, raw.as_deref()));
            match prompt::stop_reason(outcome.reason, cancel.is_cancelled(), last) {
                Some(reason) => Ok(PromptResponse::new(reason)),
                None => Err(failed(outcome.message.unwrap_or_else(|| "the turn failed".to_owned()))),
            }
        }
    };
    (live, answer)
}
