//! The command line of `posture`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

const EXAMPLES: &str = "\
The service and the key come from the environment, never from flags:
  export POSTURE_URL=https://posture.example.com
  export POSTURE_API_KEY=svc_...        # e.g. read from your secret manager
  # or an OAuth client (docs/auth.md): POSTURE_CLIENT_ID=pci_... with
  # POSTURE_CLIENT_SECRET=pcs_... or POSTURE_CLIENT_KEY_FILE=client.key

Examples:
  posture whoami
  posture sync --into posture.db
  sqlite3 posture.db \"SELECT severity, count(*) FROM findings WHERE status = 'open' GROUP BY 1\"
  posture export --format cef --modified-since 2026-11-24T06:00:00Z > changed.cef
  posture listen --forward-to http://localhost:3000/hook --types finding_critical,finding_high
  posture findings triage f-7c1d9a --dismiss false_positive --comment 'Break-glass account'

Documentation: docs/cli.md";

/// posture for customers: your identity-security findings from a terminal.
#[derive(Debug, Parser)]
#[command(name = "posture", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Print JSON for scripts instead of text: one object per line, where the text would
    /// go (stdout; an export's summary, like its progress, on stderr).
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
    ///
    /// The lines go to stdout exactly as the service serves them; the summary (with --json,
    /// one object) goes to stderr, with the --modified-since value for next time.
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
        /// Comma-separated triage states, as they read at the export's start
        /// (untriaged,acknowledged,dismissed,risk_accepted).
        #[arg(long)]
        triage_state: Option<String>,
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

    /// Act on findings (needs a key with write:findings and read:findings).
    Findings {
        #[command(subcommand)]
        command: FindingsCommand,
    },

    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Example:\n  posture completion bash > ~/.local/share/bash-completion/completions/posture"
    )]
    Completion { shell: clap_complete::Shell },
}

#[derive(Debug, Subcommand)]
pub enum FindingsCommand {
    /// Mark findings as dismissed, risk accepted or acknowledged, or reset them to untriaged.
    ///
    /// Every id gets the same triage; the service keeps it across analyzer passes until it
    /// expires (--until) or another triage replaces it. One line per finding says what
    /// happened; the exit status is 1 when any was not found or not written.
    #[command(
        after_help = "Examples:\n  posture findings triage f-7c1d9a --dismiss false_positive --comment 'Break-glass account'\n  posture findings triage f-7c1d9a f-9e2b40 --accept-risk compensating_control --until 2027-03-31\n  posture findings triage f-7c1d9a --acknowledge\n  posture findings triage f-7c1d9a --reset"
    )]
    Triage(TriageArgs),
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("state").required(true).multiple(false)))]
pub struct TriageArgs {
    /// The findings' ids (any number: sent 500 to a request).
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// Not a problem here, for this reason.
    #[arg(long, group = "state", value_name = "REASON", value_parser = reasons())]
    pub dismiss: Option<String>,
    /// A real problem whose risk is accepted, for this reason (usually with --until).
    #[arg(long, group = "state", value_name = "REASON", value_parser = reasons())]
    pub accept_risk: Option<String>,
    /// Seen, and someone works on it.
    #[arg(long, group = "state")]
    pub acknowledge: bool,
    /// Back to untriaged (no reason, comment or expiry).
    #[arg(long, group = "state", conflicts_with_all = ["comment", "until"])]
    pub reset: bool,
    /// Why, in words (at most 2,000 characters).
    #[arg(long, value_name = "TEXT")]
    pub comment: Option<String>,
    /// When the mark expires (a date, 2027-03-31, or an RFC 3339 time); it then reads as
    /// untriaged again.
    #[arg(long, value_name = "DATE", value_parser = crate::triage::parse_until)]
    pub until: Option<chrono::DateTime<chrono::Utc>>,
}

impl TriageArgs {
    /// The triage these flags ask for.
    pub fn triage(&self) -> crate::triage::Triage {
        use posture_domain::triage::{TriageReason, TriageState};
        let reason = |r: &String| r.parse::<TriageReason>().ok();
        let (state, reason) = match (&self.dismiss, &self.accept_risk) {
            (Some(r), _) => (TriageState::Dismissed, reason(r)),
            (_, Some(r)) => (TriageState::RiskAccepted, reason(r)),
            _ if self.acknowledge => (TriageState::Acknowledged, None),
            _ => (TriageState::Untriaged, None),
        };
        crate::triage::Triage {
            state,
            reason,
            comment: self.comment.clone(),
            expires_at: self.until,
        }
    }
}

/// The reasons a dismissal or an accepted risk may give.
fn reasons() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        posture_domain::triage::TriageReason::ALL
            .iter()
            .map(|r| r.as_str()),
    )
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
    fn a_triage_is_one_state_with_its_reason() {
        use posture_domain::triage::{TriageReason, TriageState};
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["posture", "findings", "triage", "f-1"].iter().chain(args)).map(
                |cli| match cli.command {
                    Command::Findings {
                        command: FindingsCommand::Triage(args),
                    } => args.triage(),
                    other => panic!("{other:?}"),
                },
            )
        };
        let accepted = parse(&[
            "--accept-risk",
            "compensating_control",
            "--until",
            "2027-03-31",
        ])
        .unwrap();
        assert_eq!(
            (accepted.state, accepted.reason),
            (
                TriageState::RiskAccepted,
                Some(TriageReason::CompensatingControl)
            )
        );
        assert!(accepted.expires_at.is_some());
        assert_eq!(parse(&["--reset"]).unwrap().state, TriageState::Untriaged);
        assert_eq!(
            parse(&["--acknowledge", "--comment", "on it"])
                .unwrap()
                .comment
                .as_deref(),
            Some("on it")
        );
        for bad in [
            &[][..],
            &["--acknowledge", "--reset"],
            &["--dismiss", "because"],
            &["--dismiss"],
            &["--reset", "--comment", "x"],
            &["--acknowledge", "--until", "soon"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
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
