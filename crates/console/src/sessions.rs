//! The customer's live console sessions: who is signed in, from when, last active when; an
//! admin can end another admin's session, or every session but their own ("sign out
//! everywhere else": a lost laptop, an admin who left). Both are written to the audit log.

use actix_web::{HttpResponse, web};
use posture_domain::console::SessionsToEnd;
use serde::Deserialize;

use crate::{
    ConsoleError, ConsoleState, PREFIX, pages,
    session::{self, Signed},
};

#[derive(Deserialize)]
pub struct SessionsQuery {
    ended: Option<u64>,
}

/// `GET sessions`: the customer's live sessions.
pub async fn list(
    signed: Signed,
    state: web::Data<ConsoleState>,
    query: web::Query<SessionsQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let sessions = state
        .ports
        .console
        .live_sessions(signed.session.scope(), state.sessions, signed.token_hash)
        .await?;
    let notice = query.ended.map(|n| match n {
        0 => "No session was ended: it had ended already.".to_owned(),
        1 => "1 session was ended. Its browser is signed out.".to_owned(),
        n => format!("{n} sessions were ended. Their browsers are signed out."),
    });
    Ok(pages::html_page(pages::sessions(
        &signed.viewer(),
        &sessions,
        notice.as_deref(),
    )))
}

async fn end(
    state: &ConsoleState,
    signed: &Signed,
    which: SessionsToEnd,
) -> Result<HttpResponse, ConsoleError> {
    let ended = state
        .ports
        .console
        .end_sessions(
            signed.session.scope(),
            signed.token_hash,
            which,
            state.sessions,
            &signed.actor(),
        )
        .await?;
    tracing::info!(customer = %signed.customer, subject = %signed.session.subject, ended, "console: sessions ended by an admin");
    Ok(session::redirect(format!(
        "{PREFIX}/{}/sessions?ended={ended}",
        signed.customer
    )))
}

/// `POST sessions/{session}/end`: ends another admin's session.
pub async fn end_one(
    signed: Signed,
    state: web::Data<ConsoleState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let (_, id) = path.into_inner();
    session::checked_form(&body, &signed)?;
    let id: uuid::Uuid = id.parse().map_err(|_| ConsoleError::NotFound)?;
    end(&state, &signed, SessionsToEnd::One(id)).await
}

/// `POST sessions/end-others`: ends every session but the admin's own.
pub async fn end_others(
    signed: Signed,
    state: web::Data<ConsoleState>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    session::checked_form(&body, &signed)?;
    end(&state, &signed, SessionsToEnd::AllOthers).await
}
