//! What the tasks need from the machine, and installing it: each task names what it needs
//! ([`needs`]); whatever is missing is installed with `apt-get` — as root, or through `sudo
//! -n` when that works — each step printed; otherwise the one command that would install
//! it all is printed and the task stops. `.ci/run` installs through the same list
//! (`cargo xtask setup ci`), so there is one.
//!
//! Only Debian and Ubuntu packages are named (the machines this project runs on); on
//! another system the message names what is missing.
//!
//! PostgreSQL is never upgraded as a side effect: an upgrade of its packages under clusters
//! that are running breaks them. Its server headers are asked for at the installed server's
//! exact version, and apt's plan is simulated first: when it would change the version of a
//! PostgreSQL package (`postgresql*`) or remove anything, or the exact version is
//! not available, the task stops and says so. Other upgrades the plan needs (`libssl-dev`
//! wants `libssl3` newer) are left to apt.

use std::{process::Command, time::Instant};

use anyhow::bail;

use crate::process::{eprintln_status, on_path};

mod plan;

use plan::{apt_command, changes_in, simulated, tail};

/// Something a task needs from the machine, and the Debian packages that provide it.
pub struct Need {
    pub what: &'static str,
    present: fn() -> bool,
    pub packages: &'static [&'static str],
}

fn program(name: &str) -> bool {
    on_path(name).is_some()
}

/// Whether `python3 -m venv` works (Debian splits it into `python3-venv`).
fn python_venv() -> bool {
    Command::new("python3")
        .args(["-m", "venv", "--help"])
        .output()
        .is_ok_and(|out| out.status.success())
        && Command::new("python3")
            .args(["-c", "import ensurepip"])
            .output()
            .is_ok_and(|out| out.status.success())
}

/// Whether PgBouncer 1.21+ is at hand, or can be built here (`pgbouncer.rs`).
fn pgbouncer() -> bool {
    crate::pgbouncer::at_hand().is_some()
        || (["cc", "make", "pkg-config", "curl", "tar"]
            .iter()
            .all(|p| program(p))
            && Command::new("pkg-config")
                .args(["--exists", "libevent", "openssl", "libcares"])
                .status()
                .is_ok_and(|s| s.success()))
}

pub const POSTGRES: Need = Need {
    what: "PostgreSQL's server and client (initdb, pg_ctl, psql)",
    present: || posture_test_servers::servers::postgres_bin().is_some() && program("psql"),
    packages: &["postgresql"],
};
pub const LOCALES: Need = Need {
    what: "localedef and the locale sources (a test runs PostgreSQL in German)",
    present: || {
        program("localedef") && std::path::Path::new("/usr/share/i18n/locales/de_DE").exists()
    },
    packages: &["locales"],
};
pub const REDIS: Need = Need {
    what: "redis-server and redis-cli",
    present: || program("redis-server") && program("redis-cli"),
    packages: &["redis-server"],
};
pub const PYTHON: Need = Need {
    what: "Python 3 with venv",
    present: python_venv,
    packages: &["python3-venv"],
};
pub const CURL: Need = Need {
    what: "curl",
    present: || program("curl"),
    packages: &["curl"],
};
pub const PGBOUNCER: Need = Need {
    what: "PgBouncer 1.21+, or what building it takes (a C compiler, make, pkg-config, \
           curl, the headers of libevent, OpenSSL and c-ares)",
    present: pgbouncer,
    packages: &[
        "gcc",
        "make",
        "pkg-config",
        "curl",
        "libevent-dev",
        "libssl-dev",
        "libc-ares-dev",
    ],
};
pub const NODE: Need = Need {
    what: "node and npm",
    present: || program("node") && program("npm"),
    packages: &["nodejs", "npm"],
};
pub const CHROMIUM: Need = Need {
    what: "headless Chromium and its driver",
    present: || program("chromium") && program("chromedriver"),
    packages: &["chromium", "chromium-driver"],
};
pub const PROMTOOL: Need = Need {
    what: "promtool (deploy/validate checks the alert rules)",
    present: || program("promtool"),
    packages: &["prometheus"],
};
pub const COMPOSE: Need = Need {
    what: "docker compose or docker-compose (deploy/validate checks the compose file)",
    present: || {
        program("docker-compose")
            || Command::new("docker")
                .args(["compose", "version"])
                .output()
                .is_ok_and(|out| out.status.success())
    },
    packages: &["docker-compose"],
};
pub const PATRONI: Need = Need {
    what: "Patroni and etcd (the failover scenarios of chaos, deploy/validate's Citus nodes)",
    present: || program("patroni") && program("patronictl") && program("etcd"),
    packages: &["patroni", "etcd-server"],
};
/// Whether a C header is installed (in /usr/include, or its multiarch directory).
fn header(name: &str) -> bool {
    let root = std::path::Path::new("/usr/include");
    root.join(name).exists()
        || std::fs::read_dir(root).is_ok_and(|dirs| {
            dirs.filter_map(Result::ok)
                .any(|dir| dir.path().join(name).exists())
        })
}

/// What building Citus from its source takes (`citus.rs`), unless Citus is installed.
pub const CITUS_BUILD: Need = Need {
    what: "the Citus extension, or what building it takes (PostgreSQL's server headers, a C \
           compiler, make, the headers of curl, lz4, zstd and Kerberos)",
    present: || {
        posture_test_servers::citus::installed()
            || (program("cc")
                && program("make")
                && posture_test_servers::servers::postgres_bin()
                    .is_some_and(|bin| bin.join("pg_config").is_file())
                && ["curl/curl.h", "lz4.h", "zstd.h", "krb5.h"]
                    .iter()
                    .all(|h| header(h)))
    },
    packages: &[
        "postgresql-server-dev-all",
        "gcc",
        "make",
        "libcurl4-openssl-dev",
        "liblz4-dev",
        "libzstd-dev",
        "libkrb5-dev",
    ],
};
/// wrk; pgbench comes with PostgreSQL's server ([`POSTGRES`]), which the bench needs too:
/// naming `postgresql` here would ask apt to upgrade an installed server.
pub const WRK: Need = Need {
    what: "wrk, and pgbench (which PostgreSQL's server package brings)",
    present: || program("wrk") && program("pgbench"),
    packages: &["wrk"],
};

/// The tasks [`needs`] knows, for `cargo xtask setup <task>`.
pub const TASKS: &[&str] = &[
    "ci",
    "demo",
    "test",
    "citus",
    "fuzz",
    "clients",
    "scim",
    "console-e2e",
    "chaos",
    "soak",
    "bench",
    "bench-citus",
    "schema",
    "validate",
    "vendor-docs",
];

/// What a task needs.
pub fn needs(task: &str) -> Vec<&'static Need> {
    match task {
        "demo" | "schema" => vec![&POSTGRES],
        "test" => vec![&POSTGRES, &REDIS, &PYTHON, &PGBOUNCER, &LOCALES],
        // `test --citus`, `chaos --citus`, `bench --citus`: Citus is then built (citus.rs).
        "citus" => vec![&POSTGRES, &REDIS, &PYTHON, &CITUS_BUILD],
        "fuzz" | "scim" => vec![&POSTGRES, &PYTHON],
        "clients" => vec![&POSTGRES, &PYTHON, &NODE, &CHROMIUM, &CURL],
        "console-e2e" => vec![&POSTGRES, &PYTHON, &NODE, &CHROMIUM],
        "chaos" => vec![&POSTGRES, &REDIS, &PATRONI, &CITUS_BUILD],
        "soak" => vec![&POSTGRES, &REDIS],
        "bench" => vec![&POSTGRES, &REDIS, &WRK, &CURL],
        "bench-citus" => vec![&POSTGRES, &REDIS, &WRK, &CURL, &CITUS_BUILD],
        // deploy/validate loads the Citus nodes' configuration with Patroni's own loader.
        "validate" => vec![&PYTHON, &PROMTOOL, &COMPOSE, &PATRONI],
        "vendor-docs" => vec![&NODE],
        // Everything `.ci/run` runs.
        "ci" => vec![
            &POSTGRES,
            &REDIS,
            &PYTHON,
            &PGBOUNCER,
            &LOCALES,
            &NODE,
            &CHROMIUM,
            &CURL,
            &PROMTOOL,
            &COMPOSE,
            &CITUS_BUILD,
            &WRK,
            &PATRONI,
        ],
        _ => Vec::new(),
    }
}

/// How this process may run `apt-get install`: as root, through `sudo -n`, or not at all.
pub fn installer() -> Option<Vec<&'static str>> {
    if !program("apt-get") {
        return None;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0");
    if root {
        return Some(Vec::new());
    }
    let sudo = Command::new("sudo")
        .args(["-n", "true"])
        .output()
        .is_ok_and(|out| out.status.success());
    sudo.then(|| vec!["sudo", "-n"])
}

/// Runs `apt-get` with `args`: `Err` holds the end of its output when it fails.
fn apt_get(prefix: &[&str], args: &[&str]) -> anyhow::Result<Result<(), String>> {
    let out = apt_command(prefix)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()?;
    if out.status.success() {
        return Ok(Ok(()));
    }
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    Ok(Err(tail(&text)))
}

/// Makes sure `task` has what it needs, installing what is missing when it can.
pub fn ensure(task: &str) -> anyhow::Result<()> {
    let missing: Vec<&Need> = needs(task).into_iter().filter(|n| !(n.present)()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut packages: Vec<&str> = missing
        .iter()
        .flat_map(|n| n.packages.iter().copied())
        .collect();
    packages.sort_unstable();
    packages.dedup();
    let pinned = pinned_to_the_server(&packages, installed_server().as_ref());
    let packages: Vec<&str> = pinned.iter().map(String::as_str).collect();
    let what: Vec<&str> = missing.iter().map(|n| n.what).collect();
    eprintln_status(&format!(
        "{task} needs what this machine lacks: {}",
        what.join("; ")
    ));
    let command = format!(
        "sudo apt-get update && sudo apt-get install -y --no-install-recommends {}",
        packages.join(" ")
    );
    let Some(prefix) = installer() else {
        bail!(
            "install it, then run the task again:\n    {command}\n(on another system than \
             Debian or Ubuntu, install the same with its package manager)"
        );
    };
    let started = Instant::now();
    let how = if prefix.is_empty() {
        "as root"
    } else {
        "through sudo -n"
    };
    eprintln_status(&format!(
        "installing {} with apt-get ({how})",
        packages.join(" ")
    ));
    let install: Vec<&str> = ["install", "-y", "-q", "--no-install-recommends"]
        .into_iter()
        .chain(packages.iter().copied())
        .collect();
    let simulate: Vec<&str> = ["install", "-s", "--no-install-recommends"]
        .into_iter()
        .chain(packages.iter().copied())
        .collect();
    let plan = match simulated(&prefix, &simulate)? {
        Ok(plan) => plan,
        Err(_) => {
            eprintln_status("apt-get cannot plan it yet: updating its package lists first");
            if let Err(output) = apt_get(&prefix, &["update", "-q"])? {
                bail!("apt-get update failed:\n    {output}");
            }
            match simulated(&prefix, &simulate)? {
                Ok(plan) => plan,
                Err(output) => bail!(
                    "apt-get cannot install {} from its sources:\n    {output}\n(when that is \
                     PostgreSQL's headers at the installed server's version, install them \
                     yourself: posture never upgrades a server under its clusters)",
                    packages.join(" ")
                ),
            }
        }
    };
    let changes = changes_in(&plan);
    if !changes.is_empty() {
        bail!(
            "installing {} would change what is installed ({}): posture's tasks never change \
             PostgreSQL's version or remove a package as a side effect (an upgrade of \
             PostgreSQL under running clusters breaks them). Install it yourself when nothing runs on it:\n    \
             {command}",
            packages.join(" "),
            changes.join(", ")
        );
    }
    if let Err(output) = apt_get(&prefix, &install)? {
        bail!("apt-get failed:\n    {output}\nthe command was:\n    {command}");
    }
    let still: Vec<&str> = missing
        .iter()
        .filter(|n| !(n.present)())
        .map(|n| n.what)
        .collect();
    if !still.is_empty() {
        bail!("still missing after installing: {}", still.join("; "));
    }
    eprintln_status(&format!(
        "installed {} in {:.0} s",
        packages.join(" "),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The installed PostgreSQL server: its major version and its package's exact version.
struct InstalledServer {
    major: String,
    version: String,
}

/// The server the tasks run (`postgres_bin`), when a Debian package installed it.
fn installed_server() -> Option<InstalledServer> {
    let bin = posture_test_servers::servers::postgres_bin()?;
    let major = bin
        .parent()?
        .file_name()?
        .to_str()
        .filter(|m| m.chars().all(|c| c.is_ascii_digit()))?
        .to_owned();
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", &format!("postgresql-{major}")])
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    let version = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!version.is_empty()).then_some(InstalledServer { major, version })
}

/// `packages` with PostgreSQL's server headers (`postgresql-server-dev-all`) asked for at
/// the installed server's exact version, when one is installed.
fn pinned_to_the_server(packages: &[&str], server: Option<&InstalledServer>) -> Vec<String> {
    packages
        .iter()
        .map(|&package| match server {
            Some(server) if package == "postgresql-server-dev-all" => {
                format!("postgresql-server-dev-{}={}", server.major, server.version)
            }
            _ => package.to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_headers_are_pinned_to_the_installed_server() {
        let server = InstalledServer {
            major: "15".into(),
            version: "15.18-0+deb12u1".into(),
        };
        assert_eq!(
            pinned_to_the_server(&["gcc", "postgresql-server-dev-all"], Some(&server)),
            ["gcc", "postgresql-server-dev-15=15.18-0+deb12u1"]
        );
        // No server installed yet: it is installed with its headers, nothing to match.
        assert_eq!(
            pinned_to_the_server(&["postgresql", "postgresql-server-dev-all"], None),
            ["postgresql", "postgresql-server-dev-all"]
        );
    }

    #[test]
    fn every_task_of_ci_is_covered_by_the_ci_list() {
        let ci: Vec<&str> = needs("ci").iter().map(|n| n.what).collect();
        // Those CI does not run: chaos (its failover scenarios need Patroni; soak, which CI
        // runs, needs the rest) and refreshing the vendored page. The benchmark runs at a
        // small size (`bench --smoke`).
        let not_in_ci = ["ci", "vendor-docs", "chaos"];
        for task in TASKS.iter().filter(|t| !not_in_ci.contains(t)) {
            for need in needs(task) {
                assert!(
                    ci.contains(&need.what),
                    "{task} needs {}, which ci does not",
                    need.what
                );
            }
        }
    }
}
