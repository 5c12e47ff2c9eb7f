//! Every log line of a test process, captured (at DEBUG level) so tests can assert that
//! secrets never reach the logs.

use std::{
    io::Write,
    sync::{Mutex, OnceLock},
};

static LINES: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LINES.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts capturing (once per process).
pub fn capture() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter("debug")
            .with_writer(|| Capture)
            .with_ansi(false)
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// Everything logged so far.
pub fn captured() -> String {
    String::from_utf8_lossy(&LINES.lock().unwrap()).into_owned()
}
