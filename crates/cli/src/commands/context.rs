//! What every command runs with, and the exit status they share.

use std::sync::Arc;

use crate::{client::Api, progress::Progress};

/// Exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub(super) const INTERRUPTED: u8 = 130;

/// What every command runs with.
pub(super) struct Context {
    pub(super) api: Api,
    /// A bar on a terminal; with `--json`, nothing but the messages.
    pub(super) progress: Arc<dyn Progress>,
    /// `--json`: one JSON document per result, for scripts.
    pub(super) json: bool,
}
