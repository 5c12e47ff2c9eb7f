//! Verifying deliveries with the official Standard Webhooks library for Python
//! (`standardwebhooks` on PyPI), as a receiver would: the interpreter comes from
//! `TEST_PYTHON`, which `cargo xtask test` points at a virtual environment holding the
//! pinned package.

use std::{io::Write as _, process::Command};

use serde_json::{Value, json};

/// One delivery as a receiver got it.
pub struct Received<'a> {
    pub body: &'a [u8],
    /// The request's headers (names in any case).
    pub headers: Vec<(String, String)>,
}

const VERIFIER: &str = r#"
import base64, json, sys
from datetime import datetime, timedelta, timezone
import standardwebhooks.webhooks as sw

class Shifted(datetime):
    shift = timedelta(0)
    @classmethod
    def now(cls, tz=None):
        return datetime.now(tz) + cls.shift

sw.datetime = Shifted
results = []
for case in json.load(sys.stdin):
    Shifted.shift = timedelta(seconds=case["shift"])
    try:
        sw.Webhook(case["secret"]).verify(base64.b64decode(case["body"]), case["headers"])
        results.append("ok")
    except Exception as e:
        results.append(f"{type(e).__name__}: {e}")
print(json.dumps(results))
"#;

/// What `standardwebhooks.Webhook(secret).verify(body, headers)` says of each delivery when
/// run `shift_seconds` after now (a replay): `Ok(())` or the library's error.
pub fn verify(cases: &[(&str, &Received<'_>, i64)]) -> Vec<Result<(), String>> {
    let python = std::env::var("TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "TEST_PYTHON is not set: run the tests with `cargo xtask test`, which installs the \
             standardwebhooks package into target/test-venv and points TEST_PYTHON at it"
        )
    });
    let input: Vec<Value> = cases
        .iter()
        .map(|(secret, received, shift)| {
            let headers: serde_json::Map<String, Value> = received
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            json!({
                "secret": secret,
                "body": data_encoding::BASE64.encode(received.body),
                "headers": headers,
                "shift": shift,
            })
        })
        .collect();
    let mut child = Command::new(&python)
        .args(["-c", VERIFIER])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&input).unwrap().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the standardwebhooks verifier failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Vec<String> = serde_json::from_slice(&output.stdout).unwrap();
    results
        .into_iter()
        .map(|r| if r == "ok" { Ok(()) } else { Err(r) })
        .collect()
}
