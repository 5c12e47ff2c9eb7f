//! apt's plan for an install, read before anything is installed: what it would change.

use std::process::Command;

/// `apt-get`, run as the installer allows: itself (as root), or through `prefix` (`sudo -n`).
pub(super) fn apt_command(prefix: &[&str]) -> Command {
    let Some((program, rest)) = prefix.split_first() else {
        return Command::new("apt-get");
    };
    let mut command = Command::new(program);
    command.args(rest).arg("apt-get");
    command
}

/// The end of a failed command's output, indented for a message.
pub(super) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n    ")
}

/// `apt-get install -s`: its plan (`Inst` and `Conf` lines), or the end of its output when
/// it cannot plan.
pub(super) fn simulated(prefix: &[&str], args: &[&str]) -> anyhow::Result<Result<String, String>> {
    let out = apt_command(prefix).args(args).output()?;
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        return Ok(Ok(text.into_owned()));
    }
    Ok(Err(tail(&text)))
}

/// What of a simulated plan posture refuses to do unasked: a new version of one of
/// PostgreSQL's own packages (`Inst postgresql-15 [installed] (new ...)`: an upgrade or a
/// downgrade of the server under its running clusters, which breaks them; `libpq5`, a
/// client library the server does not run on, is left to apt) and any removal (`Remv`, which
/// `apt-get install -y` does unasked). Other upgrades a new package needs (a library whose
/// `-dev` package must match it) are how apt installs and are left to it.
pub(super) fn changes_in(plan: &str) -> Vec<String> {
    plan.lines()
        .filter_map(|line| {
            if let Some(rest) = line.strip_prefix("Remv ") {
                let name = rest.split_whitespace().next()?;
                return Some(format!("{name} removed"));
            }
            let rest = line.strip_prefix("Inst ")?;
            let (name, rest) = rest.split_once(' ')?;
            if !name.starts_with("postgresql") {
                return None;
            }
            let installed = rest.strip_prefix('[')?.split(']').next()?;
            let new = rest.split_once('(')?.1.split_whitespace().next()?;
            Some(format!("{name} {installed} to {new}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_that_changes_the_server_or_removes_anything_is_seen() {
        let plan = "NOTE: This is only a simulation!\n\
            Inst postgresql-15 [15.18-0+deb12u1] (15.20-0+deb12u1 Debian:12.12/stable [amd64])\n\
            Inst libssl3 [3.0.19-1~deb12u2] (3.0.22-1~deb12u2 Debian:12.12/stable [amd64])\n\
            Inst libpq5 [15.18-0+deb12u1] (15.20-0+deb12u1 Debian:12.12/stable [amd64])\n\
            Inst libkrb5-dev (1.20.1-2+deb12u4 Debian:12.12/stable [amd64])\n\
            Conf postgresql-15 (15.20-0+deb12u1 Debian:12.12/stable [amd64])\n";
        assert_eq!(
            changes_in(plan),
            ["postgresql-15 15.18-0+deb12u1 to 15.20-0+deb12u1"]
        );
        assert!(changes_in("Inst gcc (4:12.2.0-3 Debian:12.12/stable [amd64])\n").is_empty());
        assert_eq!(
            changes_in(
                "Remv postgresql-16 [16.4-1]\nInst wrk (4.1.0-3 Debian:12.12/stable [amd64])\n"
            ),
            ["postgresql-16 removed"]
        );
    }
}
