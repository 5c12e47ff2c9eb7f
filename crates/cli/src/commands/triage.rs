//! `posture findings triage`: marks findings, one line per finding written or not.

use std::process::ExitCode;

use super::context::Context;
use crate::{
    args::TriageArgs,
    output::{err_line, out_line},
    triage::{self, Outcome},
};

pub(super) async fn run(cx: &Context, args: &TriageArgs) -> anyhow::Result<ExitCode> {
    let wanted = args.triage();
    let mut said = 0;
    let mut shown = |outcome: &Outcome| {
        said += 1;
        if cx.json {
            out_line(&outcome.raw.to_string());
        } else {
            out_line(&triage::render(outcome, &wanted));
        }
    };
    let missed = triage::triage(&cx.api, &args.ids, &wanted, &mut shown).await?;
    if missed > 0 {
        err_line(&format!(
            "{missed} of {said} findings not written (see above)"
        ));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
