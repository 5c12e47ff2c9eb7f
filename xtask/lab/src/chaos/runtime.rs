//! A runtime for the scenarios' async steps (the scenarios themselves are synchronous).

/// Runs a future to completion on a runtime of its own.
pub fn block_on<F: std::future::Future>(future: F) -> anyhow::Result<F::Output> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(future))
}
