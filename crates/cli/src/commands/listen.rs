//! `posture listen`: the customer's events, signed and forwarded to a local receiver.

use std::process::ExitCode;

use super::context::{Context, INTERRUPTED};
use crate::{
    client::Retries,
    listen::{self, Forwarded, ListenOptions},
    output::{err_line, out_line},
    whoami,
};

pub(super) async fn run(
    cx: &Context,
    forward_to: url::Url,
    types: Vec<String>,
    secret: Option<String>,
    after: Option<String>,
) -> anyhow::Result<ExitCode> {
    let me = whoami::fetch(&cx.api).await?;
    let (secret, given) = match secret {
        Some(secret) => (secret, true),
        None => (listen::new_secret()?, false),
    };
    let options = ListenOptions {
        forward_to,
        types,
        secret,
        since: if after.is_none() {
            me.server_time
        } else {
            None
        },
        after,
        receiver_retries: Retries::default(),
    };
    if !given {
        err_line(&format!(
            "signing with {} (give it to your receiver; --secret keeps one across runs)",
            options.secret
        ));
    }
    err_line(&format!(
        "forwarding {}'s events to {} (Ctrl-C to stop)",
        me.key.customer.name, options.forward_to
    ));
    let mut shown = |f: &Forwarded| {
        if cx.json {
            if let Ok(line) = serde_json::to_string(f) {
                out_line(&line);
            }
        } else {
            out_line(&listen::render(f, chrono::Utc::now()));
        }
    };
    tokio::select! {
        ended = listen::listen(&cx.api, &options, &mut shown) => ended?,
        _ = tokio::signal::ctrl_c() => return Ok(ExitCode::from(INTERRUPTED)),
    }
    Ok(ExitCode::SUCCESS)
}
