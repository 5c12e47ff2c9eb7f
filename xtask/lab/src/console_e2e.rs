//! `cargo xtask console-e2e`: the customer console in a real browser against a real OpenID
//! Connect provider (docs/console.md, "Tests").
//!
//! Starts a throwaway PostgreSQL, migrates, loads one customer of demo data, starts
//! node-oidc-provider (`xtask/console-e2e/idp.mjs`, installed with `npm ci` into
//! `target/console-e2e/`) with an admin and a non-admin user, points the customer's console
//! at it with the real `posture-api customers sso set`, and a second customer's at a second
//! provider of another make (PyPI `oidc-provider-mock`), a third customer's at the first
//! provider (the suite provisions it over SCIM and then requires provisioning), serves
//! posture-api, and runs the
//! pytest + Selenium suite (`xtask/console-e2e/test_console.py`, installed into
//! `target/console-e2e-venv/`) in headless Chromium (Debian `chromium`, `chromium-driver`).
//! Screenshots of every page land in `target/console-e2e/screenshots/`. Fails when a test
//! fails, when posture-api logs an ERROR, or when any key or OAuth client secret the console
//! showed appears in its log.

use std::{
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};
use base64::Engine as _;

use crate::{
    binaries::{
        Guard, api_json, api_serve, build_binaries, create_customer, ingest_demo_data, rand_bytes,
        wait_until_listening,
    },
    demo_data::CustomerSpec,
    files::{project_root, scratch_dir},
    process::{eprintln_status, npm_ci, on_path, python_venv},
    servers::free_port,
};

/// What the suite runs with, pinned.
/// `oidc-provider-mock` is the second identity provider: another implementation than
/// node-oidc-provider, with its own pages, as a customer's provider would be.
const PYTHON_PACKAGES: &[&str] = &[
    "selenium==4.50.0",
    "pytest==8.4.2",
    "oidc-provider-mock==0.3.4",
];

/// What the console's sign-in buttons call the two providers (`sso set --display-name`).
const PROVIDER_NAME: &str = "Contoso ID";
const SECOND_PROVIDER_NAME: &str = "Fabrikam ID (oidc-provider-mock)";
/// The customer whose console comes to require SCIM provisioning.
const THIRD_NAME: &str = "Northwind Traders";

/// Sets a customer's identity provider with the real `posture-api customers sso set`, which
/// asks the provider for its discovery document first (through the same rules as a
/// sign-in: the providers run on loopback, so their network is allowed).
fn set_sso(
    bin: &Path,
    env: &[(&str, &str)],
    client_secret: &str,
    (customer, issuer, display_name): (&str, &str, &str),
) -> anyhow::Result<()> {
    let mut sso_env = env.to_vec();
    sso_env.push(("POSTURE_SSO_CLIENT_SECRET", client_secret));
    sso_env.push(("POSTURE_SSO_ALLOWED_NETWORKS", "127.0.0.0/8"));
    api_json(
        bin,
        &sso_env,
        &[
            "customers",
            "sso",
            "set",
            "--customer",
            customer,
            "--issuer",
            issuer,
            "--client-id",
            "posture",
            "--display-name",
            display_name,
            "--admin-claim",
            "groups",
            "--admin-value",
            "posture-admins",
        ],
    )?;
    Ok(())
}

/// oidc-provider-mock on `port`, with an admin (Dana) and a non-admin (Erin) of Fabrikam a
/// click away on its form.
fn second_provider(venv: &Path, port: u16, log: &Path) -> anyhow::Result<Command> {
    let mut mock = Command::new(venv.join("bin").join("oidc-provider-mock"));
    mock.args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--user-claims",
            r#"{"sub": "dana@fabrikam.example", "name": "Dana Fabrikam", "groups": ["posture-admins"]}"#,
            "--user-claims",
            r#"{"sub": "erin@fabrikam.example", "name": "Erin Fabrikam", "groups": ["staff"]}"#,
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log)?)
        .stderr(std::fs::File::create(log.with_extension("err.log"))?);
    Ok(mock)
}

/// The suite's Python environment, created when missing or when the pins change.
fn venv(root: &Path) -> anyhow::Result<std::path::PathBuf> {
    let venv = root.join("target").join("console-e2e-venv");
    python_venv(&venv, PYTHON_PACKAGES)?;
    Ok(venv)
}

/// node-oidc-provider, installed from the committed lock file when it changed.
fn identity_provider(root: &Path) -> anyhow::Result<std::path::PathBuf> {
    let source = root.join("xtask").join("console-e2e");
    let dir = root.join("target").join("console-e2e");
    npm_ci(&source, &dir, "node-oidc-provider")?;
    std::fs::copy(source.join("idp.mjs"), dir.join("idp.mjs"))?;
    Ok(dir)
}

/// The suite's database: migrated, a customer with a pass of demo data, and a third
/// customer (signing in with the same provider, it will require provisioning). Returns
/// both customers' ids.
fn seed(bin: &Path, env: &[(&str, &str)]) -> anyhow::Result<(String, String)> {
    api_json(bin, env, &["migrate"])?;
    let name = "Contoso Group";
    let customer = create_customer(bin, env, name)?;
    let spec = CustomerSpec {
        name: name.into(),
        tenants: 1,
        identities: 50,
        findings: 200,
        upr_days: 7,
        seed: 3,
    };
    let data = scratch_dir("console-e2e-data")?.join("contoso.jsonl");
    ingest_demo_data(bin, env, &customer, &spec, &data)?;

    // A third customer signs in with the same provider, and will require provisioning.
    let third_customer = create_customer(bin, env, THIRD_NAME)?;
    Ok((customer, third_customer))
}

/// node-oidc-provider on `port`, with posture as its client (`redirect_uris`), logging
/// under `target`.
fn first_provider(
    idp_dir: &Path,
    port: u16,
    client_secret: &str,
    redirect_uris: &str,
    target: &Path,
) -> anyhow::Result<Command> {
    let mut idp = Command::new("node");
    idp.arg("idp.mjs")
        .current_dir(idp_dir)
        .env("IDP_PORT", port.to_string())
        .env("IDP_CLIENT_ID", "posture")
        .env("IDP_CLIENT_SECRET", client_secret)
        .env("IDP_REDIRECT_URIS", redirect_uris)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(target.join("idp.log"))?)
        .stderr(std::fs::File::create(target.join("idp.err.log"))?);
    Ok(idp)
}

/// The run's verdict: the browser suite passed, posture-api logged no `ERROR` line, and
/// none of the keys the suite issued (listed in `issued`) reached its log.
fn verdict(passed: bool, api_log: &Path, issued: &Path, screenshots: &Path) -> anyhow::Result<()> {
    let logged = std::fs::read_to_string(api_log).unwrap_or_default();
    let errors: Vec<&str> = logged.lines().filter(|l| l.contains("ERROR")).collect();
    let keys = std::fs::read_to_string(issued)?;
    let leaked: Vec<&str> = keys
        .lines()
        .filter(|key| !key.is_empty() && logged.contains(key))
        .collect();
    if !passed {
        bail!(
            "the console's browser tests failed; screenshots in {}",
            screenshots.display()
        );
    }
    if !errors.is_empty() {
        bail!(
            "posture-api logged ERROR lines during the console tests:\n{}",
            errors.join("\n")
        );
    }
    if keys.lines().count() == 0 {
        bail!("the suite issued no key: the leak check checked nothing");
    }
    if !leaked.is_empty() {
        bail!("an issued key appears in posture-api's log");
    }
    Ok(())
}

/// `posture-api serve` for the suite: on `bind`, known as `public_url`, logging to `log`.
fn api_server(
    bin: &Path,
    env: &[(&str, &str)],
    bind: &str,
    public_url: &str,
    log: &Path,
) -> anyhow::Result<Command> {
    let mut serve = api_serve(bin, env, bind, log)?;
    serve
        .env("POSTURE_PUBLIC_URL", public_url)
        // The provider runs on loopback: an operator allows its network explicitly, as
        // docs/operations.md says for a provider inside the network.
        .env("POSTURE_SSO_ALLOWED_NETWORKS", "127.0.0.0/8")
        .env("POSTURE_LOG", "info")
        // Every sign-in of the suite comes from one address: more than the default 30 per
        // 10 minutes (the limit itself is tested in the Rust suite).
        .env("POSTURE_CONSOLE_SIGN_IN_LIMIT", "120");
    Ok(serve)
}

pub fn run_console_e2e() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let root = project_root();
    for program in ["chromium", "chromedriver", "node", "npm"] {
        if on_path(program).is_none() {
            bail!("{program} is missing: apt-get install -y chromium chromium-driver nodejs npm");
        }
    }
    let venv = venv(&root)?;
    let idp_dir = identity_provider(&root)?;
    let bin = build_binaries()?;
    let postgres = crate::servers::postgres("console-e2e-postgres", "")?;
    let secret_key = base64::engine::general_purpose::STANDARD.encode(rand_bytes()?);
    let env = [
        ("DATABASE_URL", postgres.url.as_str()),
        ("POSTURE_SECRET_KEY", secret_key.as_str()),
    ];
    let (customer, third_customer) = seed(&bin, &env)?;

    let api_bind = format!("127.0.0.1:{}", free_port()?);
    let idp_port = free_port()?;
    let public_url = format!("http://{api_bind}");
    let client_secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand_bytes()?);
    let target = root.join("target").join("console-e2e");
    let redirect_uris = format!(
        "{public_url}/console/{customer}/callback {public_url}/console/{third_customer}/callback"
    );
    let mut idp = first_provider(&idp_dir, idp_port, &client_secret, &redirect_uris, &target)?;
    let mut children = vec![
        idp.spawn()
            .context("starting the identity provider (node)")?,
    ];
    wait_until_listening(&format!("127.0.0.1:{idp_port}"))?;

    let issuer = format!("http://127.0.0.1:{idp_port}");
    for signing_in in [&customer, &third_customer] {
        set_sso(
            &bin,
            &env,
            &client_secret,
            (signing_in, &issuer, PROVIDER_NAME),
        )?;
    }

    let second_port = free_port()?;
    children.push(
        second_provider(&venv, second_port, &target.join("oidc-provider-mock.log"))?
            .spawn()
            .context("starting oidc-provider-mock")?,
    );
    wait_until_listening(&format!("127.0.0.1:{second_port}"))?;
    let second_customer = create_customer(&bin, &env, "Fabrikam")?;
    let second_issuer = format!("http://127.0.0.1:{second_port}");
    set_sso(
        &bin,
        &env,
        &client_secret,
        (&second_customer, &second_issuer, SECOND_PROVIDER_NAME),
    )?;

    let api_log = target.join("posture-api.log");
    let mut serve = api_server(&bin, &env, &api_bind, &public_url, &api_log)?;
    children.push(serve.spawn().context("starting posture-api serve")?);
    let _running = Guard(children);
    wait_until_listening(&api_bind)?;

    let screenshots = target.join("screenshots");
    let _ = std::fs::remove_dir_all(&screenshots);
    std::fs::create_dir_all(&screenshots)?;
    let issued = target.join("issued-keys.txt");
    std::fs::write(&issued, "")?;
    eprintln_status("the console in headless Chromium (pytest + Selenium)");
    let status = Command::new(venv.join("bin").join("python"))
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("xtask/console-e2e/test_console.py"))
        .envs([
            ("POSTURE_URL", public_url.as_str()),
            ("CUSTOMER_ID", &customer),
            ("PROVIDER_NAME", PROVIDER_NAME),
            ("SECOND_CUSTOMER_ID", &second_customer),
            ("SECOND_PROVIDER_NAME", SECOND_PROVIDER_NAME),
            ("THIRD_CUSTOMER_ID", &third_customer),
            ("THIRD_CUSTOMER_NAME", THIRD_NAME),
        ])
        // The suite requires provisioning for the third customer with the real operator
        // command, as an operator would once its identity provider has provisioned.
        .env("POSTURE_API", bin.join("posture-api"))
        .envs(env)
        .env("SCREENSHOTS", &screenshots)
        .env("ISSUED_KEYS_FILE", &issued)
        // A public key the suite uploads for an OAuth client (a fixture of the domain's
        // tests: no private key of it is used here).
        .env(
            "CLIENT_PUBLIC_KEY_FILE",
            root.join("crates/domain/src/oauth/fixtures/ec-public.pem"),
        )
        .status()
        .context("running pytest")?;
    verdict(status.success(), &api_log, &issued, &screenshots)?;
    eprintln_status(&format!(
        "console browser tests passed in {:.0} s; screenshots in {}",
        started.elapsed().as_secs_f64(),
        screenshots.display()
    ));
    Ok(())
}
