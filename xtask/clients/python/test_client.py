"""The generated Python client (openapi-python-client) against a running posture.

Run by `cargo xtask clients` (docs/clients.md), which generates `posture_client` from
docs/openapi.json, serves posture-api with one customer of demo data, and passes the URL and
keys in the environment. Each test asserts the typed fields the client parses, not only
statuses.
"""

import datetime
import json
import os
from uuid import UUID, uuid4

import pytest

from posture_client import AuthenticatedClient
from posture_client.api.events import get_event, list_events
from posture_client.api.findings import (
    export_findings,
    get_finding,
    list_finding_triage,
    list_findings,
    triage_finding,
    triage_findings,
)
from posture_client.api.identities import list_identities
from posture_client.api.keys import get_current_key
from posture_client.api.webhooks import create_webhook, delete_webhook, list_webhooks
from posture_client.models import (
    BulkTriageItem,
    BulkTriageRequest,
    CreateWebhookRequest,
    ErrorResponse,
    EventType,
    FindingResponse,
    FindingStatus,
    PatchFindingRequest,
    Scope,
    Severity,
    SubscriptionStatus,
    TriageReason,
    TriageRequest,
    TriageState,
    WebhookType,
)

URL = os.environ["POSTURE_URL"]


def client(key_variable="PYTHON_KEY"):
    return AuthenticatedClient(base_url=URL, token=os.environ[key_variable])


def test_the_current_key_describes_itself_with_typed_fields():
    response = get_current_key.sync_detailed(client=client())
    assert response.status_code == 200
    key = response.parsed.data
    assert isinstance(key.id, UUID)
    assert key.customer.name == os.environ["CUSTOMER_NAME"]
    assert str(key.customer.id) == os.environ["CUSTOMER_ID"]
    assert Scope.READFINDINGS in key.scopes and Scope.MANAGEWEBHOOKS in key.scopes
    assert os.environ["PYTHON_KEY"].startswith(key.prefix)
    assert isinstance(key.created_at, datetime.datetime)
    assert key.expires_at is None


def test_a_filtered_list_parses_into_typed_findings():
    # openapi-python-client sends a list as repeated parameters (it ignores
    # `explode: false`); posture joins them (docs/clients.md).
    response = list_findings.sync_detailed(
        client=client(),
        severity=[Severity.CRITICAL, Severity.HIGH],
        limit=10,
    )
    assert response.status_code == 200
    page = response.parsed
    assert 0 < len(page.data) <= 10
    assert page.meta.limit == 10
    for finding in page.data:
        assert isinstance(finding, FindingResponse)
        assert finding.severity in (Severity.CRITICAL, Severity.HIGH)
        assert isinstance(finding.status, FindingStatus)
        assert isinstance(finding.detected_at, datetime.datetime)
        assert isinstance(finding.cloud_tenant_id, UUID)


def test_a_cursor_loop_reads_every_finding_once():
    seen = []
    after = None
    total = None
    for _ in range(100):
        kwargs = {"after": after} if after else {}
        response = list_findings.sync_detailed(client=client(), limit=50, **kwargs)
        assert response.status_code == 200, response.content
        page = response.parsed
        total = page.meta.total
        seen.extend(f.id for f in page.data)
        after = page.meta.next_cursor
        if after is None:
            break
    assert total and len(seen) == total
    assert len(set(seen)) == total, "a finding came twice"


def test_the_events_feed_parses_into_typed_events_and_reads_on_by_id():
    response = list_events.sync_detailed(client=client(), limit=5)
    assert response.status_code == 200, response.content
    page = response.parsed
    assert len(page.data) == 5 and page.meta.has_more is True
    first = page.data[0]
    assert isinstance(first.type_, EventType)
    assert isinstance(first.finding, FindingResponse)
    assert isinstance(first.created_at, datetime.datetime)
    assert page.meta.next_cursor == str(page.data[-1].id)
    ids = [e.id for e in page.data]
    more = list_events.sync_detailed(client=client(), limit=5, after=page.meta.next_cursor)
    ids.extend(e.id for e in more.parsed.data)
    assert ids == sorted(ids) and len(set(ids)) == len(ids), "oldest first, each once"
    one = get_event.sync_detailed(first.id, client=client())
    assert one.status_code == 200 and one.parsed.data.finding.id == first.finding.id
    unknown = list_events.sync_detailed(client=client(), after=str(UUID(int=1)))
    assert unknown.status_code == 400
    assert isinstance(unknown.parsed, ErrorResponse)
    assert unknown.parsed.error == "invalid_request"


def test_a_finding_by_id_and_an_unknown_one():
    first = list_findings.sync_detailed(client=client(), limit=1).parsed.data[0]
    response = get_finding.sync_detailed(first.id, client=client())
    assert response.status_code == 200
    assert response.parsed.data.id == first.id
    assert response.parsed.data.title == first.title
    missing = get_finding.sync_detailed("no-such-finding", client=client())
    assert missing.status_code == 404
    assert isinstance(missing.parsed, ErrorResponse)
    assert missing.parsed.error == "not_found"


def test_a_finding_is_triaged_conditionally_and_read_back_with_its_history():
    first = list_findings.sync_detailed(client=client(), limit=1).parsed.data[0]
    read = get_finding.sync_detailed(first.id, client=client())
    tag = read.headers["etag"]
    mark = PatchFindingRequest(
        triage=TriageRequest(
            state=TriageState.DISMISSED,
            reason=TriageReason.FALSE_POSITIVE,
            comment="python client",
        )
    )
    written = triage_finding.sync_detailed(first.id, client=client(), body=mark, if_match=tag)
    assert written.status_code == 200, written.content
    assert written.parsed.data.triage.state == TriageState.DISMISSED
    assert written.parsed.data.triage.reason == TriageReason.FALSE_POSITIVE
    assert written.headers["etag"] != tag
    # The tag read before the write no longer holds.
    stale = triage_finding.sync_detailed(first.id, client=client(), body=mark, if_match=tag)
    assert stale.status_code == 412
    assert stale.parsed.error == "precondition_failed"
    again = get_finding.sync_detailed(first.id, client=client()).parsed.data
    assert again.triage.comment == "python client"
    assert again.triage.updated_by.name
    history = list_finding_triage.sync_detailed(first.id, client=client()).parsed
    assert history.data[0].to == TriageState.DISMISSED
    assert history.data[0].to_reason == TriageReason.FALSE_POSITIVE
    # In bulk, retried with its Idempotency-Key: the first answer again.
    bulk = BulkTriageRequest(
        findings=[BulkTriageItem(id=first.id), BulkTriageItem(id="no-such-finding")],
        triage=TriageRequest(state=TriageState.UNTRIAGED),
    )
    key = str(uuid4())
    answers = [
        triage_findings.sync_detailed(client=client(), body=bulk, idempotency_key=key)
        for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[1].headers["idempotent-replayed"] == "true"
    outcomes = [r.outcome for r in answers[1].parsed.data]
    assert outcomes == ["triaged", "not_found"]
    assert answers[1].parsed.data[0].finding.triage.state == TriageState.UNTRIAGED


def test_the_export_streams_one_json_line_per_finding():
    total = list_findings.sync_detailed(client=client(), limit=1).parsed.meta.total
    response = export_findings.sync_detailed(client=client())
    assert response.status_code == 200
    lines = response.parsed.splitlines()
    assert len(lines) == total == int(response.headers["x-total-count"])
    record = json.loads(lines[0])
    assert record["id"] and record["severity"] in [s.value for s in Severity]


def test_a_webhook_is_created_listed_and_deleted():
    request = CreateWebhookRequest(
        name="python client",
        webhook_url="http://127.0.0.1:9/hook",
        webhook_type=WebhookType.GENERIC,
        event_types=[EventType.FINDING_CRITICAL, EventType.FINDING_RESOLVED],
    )
    created = create_webhook.sync_detailed(client=client(), body=request)
    assert created.status_code == 201, created.content
    webhook = created.parsed.data
    assert webhook.signing_secret.startswith("whsec_")
    assert webhook.status == SubscriptionStatus.ACTIVE
    assert webhook.disabled_reason is None
    assert webhook.event_types == [EventType.FINDING_CRITICAL, EventType.FINDING_RESOLVED]
    listed = list_webhooks.sync_detailed(client=client()).parsed
    assert webhook.id in [w.id for w in listed.data]
    deleted = delete_webhook.sync_detailed(webhook.id, client=client())
    assert deleted.status_code == 204
    listed = list_webhooks.sync_detailed(client=client()).parsed
    assert webhook.id not in [w.id for w in listed.data]


def test_an_invalid_webhook_is_refused_naming_the_field():
    request = CreateWebhookRequest(
        name="bad",
        webhook_url="not a url",
        webhook_type=WebhookType.GENERIC,
        event_types=[EventType.FINDING_HIGH],
    )
    response = create_webhook.sync_detailed(client=client(), body=request)
    assert response.status_code in (400, 422)
    assert isinstance(response.parsed, ErrorResponse)
    assert "webhookUrl" in response.parsed.reason


def test_an_unknown_key_is_401():
    bogus = AuthenticatedClient(base_url=URL, token="svc_" + "a" * 40)
    response = list_findings.sync_detailed(client=bogus)
    assert response.status_code == 401
    assert response.parsed.error == "unauthorized"


def test_a_key_without_the_scope_is_403_naming_it():
    response = list_identities.sync_detailed(client=client("PYTHON_FINDINGS_KEY"))
    assert response.status_code == 403
    assert response.parsed.error == "insufficient_scope"
    assert "read:identities" in response.parsed.reason


def test_past_the_rate_limit_a_429_says_when_to_retry():
    limited = client("PYTHON_RATE_KEY")
    limit = int(os.environ["RATE_LIMIT"])
    for _ in range(limit + 5):
        response = list_identities.sync_detailed(client=limited, limit=1)
        if response.status_code == 429:
            break
        assert response.status_code == 200
    else:
        pytest.fail(f"no 429 after {limit + 5} requests")
    assert response.parsed.error == "rate_limited"
    assert int(response.headers["retry-after"]) >= 1
    assert response.headers["x-ratelimit-remaining"] == "0"
