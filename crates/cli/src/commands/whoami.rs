//! `posture whoami`: the key in use, its customer and scopes.

use std::process::ExitCode;

use super::context::Context;
use crate::{
    output::{out, out_line},
    whoami,
};

pub(super) async fn run(cx: &Context) -> anyhow::Result<ExitCode> {
    let me = whoami::fetch(&cx.api).await?;
    if cx.json {
        out_line(&me.raw.to_string());
    } else {
        out(&whoami::render(&me.key, chrono::Utc::now()));
    }
    Ok(ExitCode::SUCCESS)
}
