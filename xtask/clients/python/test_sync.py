"""Keeping in sync through the generated client, with the loop docs/api.md shows (its
`sync_loop.py` block, imported as it is written there) and with the worked `requests` loop
(its `worked_loop.py` block), while analyzer passes commit during the walk; and the
events feed followed with its `events_loop.py` block, and streamed with its `events_stream.py`
block (httpx-sse).

Run by `cargo xtask clients`, which writes the documentation's blocks next to the
generated client and passes the customer, its key, and the way to commit a pass
(`posture-api ingest`, `DATABASE_URL`) in the environment.
"""

import json
import os
import subprocess
import threading
import uuid

import httpx
import requests

from posture_client import AuthenticatedClient
from posture_client.api.findings import list_findings
from posture_client.models import ListFindingsOrder

import events_loop
import events_stream
import sync_loop
import worked_loop

URL = os.environ["POSTURE_URL"]


class Customer:
    """A customer of its own, whose passes the test commits."""

    def __init__(self, customer_variable, key_variable):
        self.id = os.environ[customer_variable]
        self.key = os.environ[key_variable]
        self.tenant = str(uuid.uuid4())
        self.passes = 0
        self.ingest([{"type": "tenant", "cloudTenantId": self.tenant, "displayName": "Sync"}])

    def finding(self, finding_id, severity="high", status="open"):
        return {"type": "finding", "id": finding_id, "cloudTenantId": self.tenant,
                "findingType": "standing_privileged_access", "severity": severity,
                "status": status, "title": f"Finding {finding_id}"}

    def ingest(self, records):
        lines = "".join(json.dumps(r) + "\n" for r in records)
        subprocess.run(
            [os.environ["POSTURE_API_BIN"], "ingest", "--customer", self.id, "-"],
            input=lines.encode(), check=True, stdout=subprocess.DEVNULL,
        )
        self.passes += 1

    def client(self):
        return AuthenticatedClient(base_url=URL, token=self.key)

    def server_copy(self):
        """Every finding as the server has it now: id -> (severity, status, modifiedAt)."""
        copy, after = {}, None
        while True:
            kwargs = {"after": after} if after else {}
            page = list_findings.sync(client=self.client(), limit=500,
                                      order=ListFindingsOrder.MODIFIED, **kwargs)
            for f in page.data:
                copy[f.id] = (f.severity.value, f.status.value, f.modified_at)
            after = page.meta.next_cursor
            if not after:
                return copy


def test_the_documented_loop_reads_every_change_once_while_passes_commit():
    customer = Customer("PYTHON_SYNC_CUSTOMER", "PYTHON_SYNC_KEY")
    customer.ingest([customer.finding(f"s-{i:02}") for i in range(9)])
    local, read = {}, []
    watermark = None
    mid_walk = []
    for walk in range(6):
        this_walk = []

        def upsert(finding):
            # After the first row of each of the first five walks, a pass commits: a new
            # critical finding and a changed one. It must not appear in this walk (its rows
            # are after the walk's syncedThrough) and must in the next.
            if not this_walk and walk < 5:
                new = customer.finding(f"n-{walk}", severity="critical")
                changed = customer.finding(f"s-{walk:02}", status="resolved")
                customer.ingest([new, changed])
                mid_walk.append(new["id"])
            this_walk.append(finding)
            local[finding.id] = (finding.severity.value, finding.status.value,
                                 finding.modified_at)

        watermark = sync_loop.sync_findings(customer.client(), watermark, upsert, page_size=3)
        ids = [f.id for f in this_walk]
        assert len(ids) == len(set(ids)), f"walk {walk} read a row twice: {ids}"
        assert all(f.modified_at <= watermark for f in this_walk), \
            f"walk {walk} read past its syncedThrough {watermark}"
        read.extend((f.id, f.modified_at) for f in this_walk)
        if walk > 0:
            assert f"n-{walk - 1}" in ids, f"the pass committed during walk {walk - 1} is missing"
    assert len(read) == len(set(read)), "a version of a finding was read twice"
    assert len(mid_walk) == 5 and customer.passes == 7
    assert local == customer.server_copy()


def test_the_worked_requests_loop_syncs_then_finds_nothing_then_is_answered_304(tmp_path,
                                                                                 monkeypatch):
    customer = Customer("PYTHON_WORKED_CUSTOMER", "PYTHON_WORKED_KEY")
    customer.ingest([customer.finding(f"w-{i:02}") for i in range(7)])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(worked_loop, "STATE", tmp_path / "posture-findings.json")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {customer.key}"
    statuses = []
    session.hooks["response"].append(lambda r, *args, **kwargs: statuses.append(r.status_code))
    rounds = []
    for _ in range(3):
        forwarded, statuses[:] = [], []
        worked_loop.sync(session, forward=forwarded.append)
        rounds.append((sorted(f["id"] for f in forwarded), list(statuses)))
    assert rounds[0] == ([f"w-{i:02}" for i in range(7)], [200])
    assert rounds[1] == ([], [200]), "the new watermark's first poll: no rows, a new tag"
    assert rounds[2] == ([], [304]), "from then on, 304 while nothing changes"
    state = json.loads((tmp_path / "posture-findings.json").read_text())
    # The third poll was answered 304: the tag kept is the one of the watermark asked with.
    assert state["etag_for"] == state["watermark"]
    customer.ingest([customer.finding("w-00", status="resolved")])
    forwarded = []
    worked_loop.sync(session, forward=forwarded.append)
    assert [f["id"] for f in forwarded] == ["w-00"]


def test_the_documented_events_loop_follows_the_feed_and_resumes_without_repeating(tmp_path,
                                                                                monkeypatch):
    customer = Customer("PYTHON_EVENTS_CUSTOMER", "PYTHON_EVENTS_KEY")
    monkeypatch.setattr(events_loop, "CURSOR", tmp_path / "posture-events.cursor")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {customer.key}"
    handled = []

    def handle(event):
        handled.append((event["type"], event["finding"]["id"], event["id"]))

    customer.ingest([customer.finding(f"e-{i}") for i in range(3)])
    events_loop.follow(session, handle, rounds=1, wait=0)
    assert [(t, f) for t, f, _ in handled] == [("finding_high", f"e-{i}") for i in range(3)]

    # Waiting: a pass commits while the request waits, and answers it.
    resolve = threading.Timer(0.5, customer.ingest, args=([
        customer.finding("e-0", status="resolved"), customer.finding("e-1"),
        customer.finding("e-2")],))
    resolve.start()
    events_loop.follow(session, handle, rounds=1, wait=30)
    resolve.join()
    assert [(t, f) for t, f, _ in handled[3:]] == [("finding_resolved", "e-0")]

    # A restart resumes from the file: nothing is handled twice, nothing is new.
    events_loop.follow(session, handle, rounds=1, wait=1)
    assert len(handled) == 4
    ids = [i for _, _, i in handled]
    assert len(set(ids)) == 4 and ids == sorted(ids), "ids sort in the feed's order"
    assert (tmp_path / "posture-events.cursor").read_text() == ids[-1]


def test_the_documented_stream_reconnects_across_stream_periods_without_repeating(tmp_path,
                                                                                 monkeypatch):
    customer = Customer("PYTHON_STREAM_CUSTOMER", "PYTHON_STREAM_KEY")
    monkeypatch.setattr(events_stream, "CURSOR", tmp_path / "posture-events.cursor")
    handled = []

    def handle(event):
        handled.append((event["type"], event["finding"]["id"], event["id"]))

    customer.ingest([customer.finding(f"s-{i}") for i in range(3)])
    # Streams last 2 s on the suite's instance: a pass commits during the first, which
    # sends its event as it commits; the second resumes with Last-Event-ID.
    resolve = threading.Timer(0.5, customer.ingest, args=([
        customer.finding("s-0", status="resolved"), customer.finding("s-1"),
        customer.finding("s-2")],))
    resolve.start()
    with httpx.Client(headers={"Authorization": f"Bearer {customer.key}"}) as client:
        events_stream.stream(client, handle, streams=1)
        resolve.join()
        events_stream.stream(client, handle, streams=2)
    assert [(t, f) for t, f, _ in handled] == [
        ("finding_high", "s-0"), ("finding_high", "s-1"), ("finding_high", "s-2"),
        ("finding_resolved", "s-0")]
    ids = [i for _, _, i in handled]
    assert ids == sorted(set(ids)), "each event once, in the feed's order"
    assert (tmp_path / "posture-events.cursor").read_text() == ids[-1]
