"""OAuth 2.0 client credentials with a library we did not write (Authlib), and the
generated client authenticating with the access tokens it gets (docs/auth.md).

`oauth_secret` and `oauth_key` are docs/auth.md's examples, imported as they are written
there (`cargo xtask clients` writes them next to the generated client); importing one gets a
token.
"""

import base64
import hashlib
import hmac
import json
import os
import time
import uuid

import httpx
import pytest
from authlib.integrations.httpx_client import OAuth2Client
from joserfc import jwt
from joserfc.jwk import ECKey

from posture_client import AuthenticatedClient
from posture_client.api.findings import list_findings
from posture_client.api.keys import get_current_key

URL = os.environ["POSTURE_URL"]
TOKEN_URL = f"{URL}/oauth/token"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def test_the_documented_secret_example_gets_a_token_the_generated_client_uses():
    import oauth_secret

    token = oauth_secret.posture.token
    assert token["token_type"] == "Bearer"
    assert token["access_token"].startswith("pat_")
    assert 0 < token["expires_in"] <= 3600
    assert oauth_secret.findings["data"], "the documented example read findings"
    client = AuthenticatedClient(base_url=URL, token=token["access_token"])
    page = list_findings.sync(client=client, limit=5)
    assert 0 < len(page.data) <= 5
    current = get_current_key.sync(client=client).data
    assert current.prefix == os.environ["CLIENT_ID"][:10]


def test_the_documented_private_key_jwt_example_gets_a_token():
    import oauth_key

    token = oauth_key.posture.token
    assert token["access_token"].startswith("pat_")
    assert oauth_key.findings["data"]
    client = AuthenticatedClient(base_url=URL, token=token["access_token"])
    current = get_current_key.sync(client=client).data
    assert current.prefix == os.environ["KEY_CLIENT_ID"][:10]


def test_client_secret_post_and_a_narrowed_scope():
    session = OAuth2Client(
        os.environ["CLIENT_ID"],
        os.environ["CLIENT_SECRET"],
        token_endpoint_auth_method="client_secret_post",
        scope="read:findings",
    )
    token = session.fetch_token(TOKEN_URL, grant_type="client_credentials")
    assert token["scope"] == "read:findings"
    identities = session.get(f"{URL}/api/v1/identities")
    assert identities.status_code == 403
    assert session.get(f"{URL}/api/v1/findings").status_code == 200


def test_the_metadata_leads_a_library_to_the_token_endpoint():
    metadata = httpx.get(f"{URL}/.well-known/oauth-authorization-server").json()
    assert metadata["issuer"] == URL
    assert "client_credentials" in metadata["grant_types_supported"]
    assert "private_key_jwt" in metadata["token_endpoint_auth_methods_supported"]
    session = OAuth2Client(
        os.environ["CLIENT_ID"], os.environ["CLIENT_SECRET"]
    )
    token = session.fetch_token(metadata["token_endpoint"], grant_type="client_credentials")
    assert token["access_token"].startswith("pat_")


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _assertion(key, claims, header=None):
    """ES256 with the client's key (joserfc, which Authlib uses)."""
    return jwt.encode({"alg": "ES256", **(header or {})}, claims, ECKey.import_key(key))


def _hs256_with(secret, claims):
    """HS256 keyed with `secret`: made by hand, as no library will key HMAC with a PEM."""
    signing_input = f"{_b64(json.dumps({'alg': 'HS256'}).encode())}.{_b64(json.dumps(claims).encode())}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


def _claims(client_id, **overrides):
    now = int(time.time())
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": TOKEN_URL,
        "iat": now,
        "exp": now + 300,
        "jti": str(uuid.uuid4()),
    }
    claims.update(overrides)
    return claims


def _exchange(assertion):
    return httpx.post(
        TOKEN_URL,
        data={
            "grant_type": "client_credentials",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": assertion,
        },
    )


def test_hostile_assertions_are_refused_and_none_is_a_5xx():
    client_id = os.environ["KEY_CLIENT_ID"]
    with open(os.environ["CLIENT_KEY_FILE"]) as key_file:
        private_key = key_file.read()
    with open(os.environ["CLIENT_PUBLIC_KEY_FILE"]) as key_file:
        public_key = key_file.read()
    good = _assertion(private_key, _claims(client_id))
    assert _exchange(good).status_code == 200
    replayed = _exchange(good)
    assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_client"
    unsigned = f"{_b64(json.dumps({'alg': 'none'}).encode())}.{_b64(json.dumps(_claims(client_id)).encode())}."
    hostile = [
        # alg none, unsigned.
        unsigned,
        # HS256 keyed with the public key (algorithm confusion).
        _hs256_with(public_key.encode(), _claims(client_id)),
        # Another audience, an expiry too far ahead, another client's id.
        _assertion(private_key, _claims(client_id, aud="https://elsewhere.example")),
        _assertion(private_key, _claims(client_id, exp=int(time.time()) + 7200)),
        _assertion(private_key, _claims(os.environ["CLIENT_ID"])),
        # A key named by URL: never fetched.
        _assertion(
            private_key,
            _claims(client_id, jti=str(uuid.uuid4())),
            {"jku": "https://attacker.example/jwks.json", "kid": "x"},
        ),
    ]
    for index, assertion in enumerate(hostile):
        response = _exchange(assertion)
        if index == len(hostile) - 1:
            # Signed with the client's own key: the URL is ignored, not followed.
            assert response.status_code == 200, response.text
            continue
        assert response.status_code == 400, (index, response.text)
        assert response.json()["error"] == "invalid_client", (index, response.text)


def test_a_wrong_secret_is_invalid_client_with_a_basic_challenge():
    session = OAuth2Client(os.environ["CLIENT_ID"], "pcs_" + "a" * 39)
    with pytest.raises(Exception) as refused:
        session.fetch_token(TOKEN_URL, grant_type="client_credentials")
    assert "invalid_client" in str(refused.value)
    answer = httpx.post(
        TOKEN_URL,
        data={"grant_type": "client_credentials"},
        auth=(os.environ["CLIENT_ID"], "pcs_" + "a" * 39),
    )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Basic")
    assert answer.headers["cache-control"] == "no-store"
