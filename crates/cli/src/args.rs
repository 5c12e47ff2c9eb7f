//! The command line of `posture`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

const EXAMPLES: &str = "\
The service and the key come from the environment, never from flags:
  export POSTURE_URL=https://posture.example.com
  export POSTURE_API_KEY=svc_...        # e.g. read from your secret manager

Examples:
  posture whoami
  posture sync --into posture.db
  sqlite3 posture.db \"SELECT severity, count(*) FROM findings WHERE status = 'open' GROUP BY 1\"
  posture export --format cef --modified-since 2026-11-24T06:00:00Z > changed.cef
  posture listen --forward-to http://localhost:3000/hook --types finding_critical,finding_high

Documentation: docs/cli.md";

/// posture for customers: your identity-security findings from a terminal.
#[derive(Debug, Parser)]
#[command(name = "posture", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Print JSON for scripts instead of text: one object per line on stdout.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the key's customer, scopes and expiry.
    Whoami,

    /// Mirror findings, identities and role recommendations into a SQLite file.
    ///
    /// The first run reads everything; each later run reads only what changed since. Stop it
    /// at any time (Ctrl-C): the next run goes on from the last page written.
    #[command(
        after_help = "Example:\n  posture sync --into posture.db\n  sqlite3 posture.db \"SELECT id, title FROM findings WHERE severity = 'critical'\""
    )]
    Sync {
        /// The SQLite file (created when missing). One file holds one customer.
        #[arg(long, value_name = "FILE", default_value = "posture.db")]
        into: PathBuf,
    },

    /// Write every finding (or those changed since a time) to stdout, one per line.
    #[command(
        after_help = "Examples:\n  posture export > findings.ndjson\n  posture export --format ocsf --severity critical,high > findings.ocsf.ndjson\n  posture export --modified-since 2026-11-24T06:00:00Z > changed.ndjson"
    )]
    Export {
        #[arg(long, value_enum, default_value_t = Format::Ndjson)]
        format: Format,
        /// Only findings changed after this RFC 3339 time (the "next time" an export printed).
        #[arg(long, value_name = "TIME")]
        modified_since: Option<String>,
        /// Comma-separated severities (critical,high,medium,low).
        #[arg(long)]
        severity: Option<String>,
        /// Comma-separated statuses (open,resolved,suppressed).
        #[arg(long)]
        status: Option<String>,
        /// Comma-separated finding types.
        #[arg(long)]
        finding_type: Option<String>,
        /// One connected tenant, by its cloud tenant id.
        #[arg(long)]
        tenant: Option<String>,
    },

    /// Forward events of the feed to a local URL, signed as posture's webhooks are.
    ///
    /// Each event is POSTed with Standard Webhooks headers (webhook-id, webhook-timestamp,
    /// webhook-signature) signed with the secret printed at start, or --secret. While the
    /// receiver does not answer, the event is retried; events stay in order.
    #[command(
        after_help = "Example:\n  posture listen --forward-to http://localhost:3000/hook --types finding_critical"
    )]
    Listen {
        /// Where to POST each event (http or https).
        #[arg(long, value_name = "URL", value_parser = parse_forward_to)]
        forward_to: url::Url,
        /// Comma-separated event types (all when absent).
        #[arg(long, value_delimiter = ',')]
        types: Vec<String>,
        /// Sign with this whsec_ secret instead of a new one (or POSTURE_LISTEN_SECRET).
        #[arg(long, env = "POSTURE_LISTEN_SECRET", hide_env_values = true)]
        secret: Option<String>,
        /// Start after this event id (a line printed earlier) instead of at new events.
        #[arg(long, value_name = "EVENT_ID")]
        after: Option<String>,
    },

    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Example:\n  posture completion bash > ~/.local/share/bash-completion/completions/posture"
    )]
    Completion { shell: clap_complete::Shell },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Ndjson,
    Cef,
    Ocsf,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Ndjson => "ndjson",
            Format::Cef => "cef",
            Format::Ocsf => "ocsf",
        }
    }
}

/// `--forward-to`: an http or https URL (a receiver speaks HTTP; `file:` or `ftp:` would
/// only fail later, at the first event).
fn parse_forward_to(value: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(value).map_err(|e| e.to_string())?;
    match url.scheme() {
        "http" | "https" if url.has_host() => Ok(url),
        "http" | "https" => Err("the URL names no host".into()),
        other => Err(format!(
            "scheme {other}: the receiver must be an http or https URL"
        )),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_receiver_is_an_http_or_https_url() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["posture", "listen", "--forward-to"].iter().chain(args))
        };
        assert!(parse(&["http://localhost:3000/hook"]).is_ok());
        assert!(parse(&["https://hooks.example.com/in"]).is_ok());
        for bad in [
            "file:///etc/passwd",
            "ftp://localhost/x",
            "gopher://h/",
            "mailto:a@b",
        ] {
            let error = parse(&[bad]).expect_err(bad).to_string();
            assert!(error.contains("http or https"), "{bad}: {error}");
        }
    }
}
