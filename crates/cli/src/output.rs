//! Lines for the user (stderr) and for the pipe (stdout). A closed pipe (`| head`) is not an
//! error worth a message: the write is dropped.

use std::io::Write as _;

/// A line on stderr: messages, notices, summaries of text output.
pub fn err_line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// A line on stdout: what a script reads.
pub fn out_line(text: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Text as it is on stdout.
pub fn out(text: &str) {
    let _ = write!(std::io::stdout().lock(), "{text}");
}
