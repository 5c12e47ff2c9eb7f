//! The OAuth figures (docs/auth.md, docs/performance.md): `POST /oauth/token`'s throughput
//! with a secret (`client_secret_basic`) and with `private_key_jwt` (each assertion signed
//! beforehand, each used once: the endpoint refuses a replayed `jti`), and a small list read
//! with an access token against the same read with a key (target: at least 0.98 of it; a
//! token's principal is cached as a key's, and its MAC is checked in about a microsecond).

use std::{path::Path, process::Command, time::Duration};

use anyhow::Context as _;
use base64::Engine as _;
use serde_json::Value;

use super::{
    Figure,
    http::{Load, Server, record, wrk, wrk_scripted},
    load::{Loaded, api},
};
use crate::{files::scratch_dir, process::output};

const ASSERTION_TYPE: &str = "urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer";
const CONNECTIONS: u32 = 16;

/// A Lua script for wrk that posts each line of the file its first argument names once,
/// each thread its own lines (a `jti` is accepted once).
const ONE_BODY_EACH: &str = r#"
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end
function init(args)
  bodies = {}
  local i = 0
  for line in io.lines(args[1]) do
    if i % 2 == id then bodies[#bodies + 1] = line end
    i = i + 1
  end
  sent = 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
end
function request()
  sent = sent + 1
  return wrk.format(nil, nil, nil, bodies[sent])
end
"#;

fn issue(bin: &Path, database_url: &str, customer: &str, extra: &[&str]) -> anyhow::Result<Value> {
    let mut args = vec![
        "clients",
        "issue",
        "--customer",
        customer,
        "--name",
        "bench",
        "--scope",
        "read:findings",
        "--scope",
        "read:identities",
    ];
    args.extend(extra);
    api(bin, database_url, &args)
}

fn field(value: &Value, name: &str) -> anyhow::Result<String> {
    Ok(value[name]
        .as_str()
        .context("the issued client")?
        .to_owned())
}

pub(super) fn run(
    bin: &Path,
    server: &Server,
    database_url: &str,
    loaded: &Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let dir = scratch_dir("bench-oauth")?;
    let token_url = format!("{}/oauth/token", server.base);
    let customer = &loaded.small.id;

    let secret_client = issue(bin, database_url, customer, &[])?;
    let (id, secret) = (
        field(&secret_client, "clientId")?,
        field(&secret_client, "clientSecret")?,
    );
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"));
    let script = dir.join("secret.lua");
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.body = \"grant_type=client_credentials\"\n\
             wrk.headers[\"Content-Type\"] = \"application/x-www-form-urlencoded\"\n\
             wrk.headers[\"Authorization\"] = \"Basic {basic}\"\n"
        ),
    )?;
    let with_secret = wrk_scripted(&token_url, &script, &[], CONNECTIONS, duration)?;
    record(
        figures,
        &format!("POST /oauth/token, client_secret_basic, {CONNECTIONS} conn"),
        &with_secret,
        None,
    );

    let (private, public) = crate::binaries::p256_key_pair(&dir)?;
    let public_text = public.display().to_string();
    let key_client = issue(bin, database_url, customer, &["--public-key", &public_text])?;
    let key_id = field(&key_client, "clientId")?;
    // Enough assertions for twice the secret's rate: signing one costs more than checking a
    // secret, so the endpoint takes fewer.
    let needed = (with_secret.requests_per_second * duration.as_secs_f64() * 2.0) as usize + 2000;
    let bodies = dir.join("assertions.txt");
    std::fs::write(
        &bodies,
        assertions(
            &std::fs::read_to_string(&private)?,
            &key_id,
            &token_url,
            needed,
        )?,
    )?;
    let lua = dir.join("assertions.lua");
    std::fs::write(&lua, ONE_BODY_EACH)?;
    let bodies_text = bodies.display().to_string();
    let with_key = wrk_scripted(&token_url, &lua, &[&bodies_text], CONNECTIONS, duration)?;
    record(
        figures,
        &format!("POST /oauth/token, private_key_jwt (ES256), {CONNECTIONS} conn"),
        &with_key,
        None,
    );

    let token = access_token(&token_url, &basic)?;
    token_against_key(server, loaded, &token, duration, figures)?;
    super::record_use::run(bin, server, database_url, loaded, duration, figures)
}

/// `n` form bodies, each with an ES256 assertion of `client_id` for `audience` and its own
/// `jti`, a line each.
fn assertions(pem: &str, client_id: &str, audience: &str, n: usize) -> anyhow::Result<String> {
    let key = jsonwebtoken::EncodingKey::from_ec_pem(pem.as_bytes())?;
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    let now = chrono::Utc::now().timestamp();
    let mut lines = String::new();
    for _ in 0..n {
        let claims = serde_json::json!({
            "iss": client_id, "sub": client_id, "aud": audience,
            "iat": now, "exp": now + 3000, "jti": uuid::Uuid::new_v4().to_string(),
        });
        let signed = jsonwebtoken::encode(&header, &claims, &key)?;
        lines.push_str(&format!(
            "grant_type=client_credentials&client_assertion_type={ASSERTION_TYPE}&client_assertion={signed}\n"
        ));
    }
    Ok(lines)
}

fn access_token(token_url: &str, basic: &str) -> anyhow::Result<String> {
    let answer = output(
        Command::new("curl")
            .args(["-sSf", "-H"])
            .arg(format!("Authorization: Basic {basic}"))
            .args(["-d", "grant_type=client_credentials"])
            .arg(token_url),
    )?;
    let answer: Value = serde_json::from_str(&answer)?;
    Ok(answer["access_token"]
        .as_str()
        .context("access_token")?
        .to_owned())
}

/// A small list read with the key and with the token, alternately (two runs each, their
/// means), so drift of the machine falls on both.
fn token_against_key(
    server: &Server,
    loaded: &Loaded,
    token: &str,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let url = format!("{}/api/v1/findings?limit=10", server.base);
    let warm = Duration::from_secs(2);
    wrk(&url, &loaded.small.key, CONNECTIONS, warm)?;
    wrk(&url, token, CONNECTIONS, warm)?;
    let mut runs: Vec<(Load, Load)> = Vec::new();
    for _ in 0..2 {
        let key = wrk(&url, &loaded.small.key, CONNECTIONS, duration)?;
        let with_token = wrk(&url, token, CONNECTIONS, duration)?;
        runs.push((key, with_token));
    }
    let key = Load::mean(&runs[0].0, &runs[1].0);
    let with_token = Load::mean(&runs[0].1, &runs[1].1);
    let name = format!("GET /findings?limit=10 with an access token, {CONNECTIONS} conn");
    figures.push(
        Figure::measure(
            format!("{name}: throughput"),
            with_token.requests_per_second,
            "req/s",
            false,
        )
        .against(key.requests_per_second, "the same with a key", Some(0.98)),
    );
    record(
        figures,
        &format!("GET /findings?limit=10 with a key, {CONNECTIONS} conn"),
        &key,
        None,
    );
    Ok(())
}
