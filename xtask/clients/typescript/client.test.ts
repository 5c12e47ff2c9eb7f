// The TypeScript client (openapi-typescript types + openapi-fetch) against a running posture.
//
// Run by `cargo xtask clients` (docs/clients.md): generated `posture.d.ts` from
// docs/openapi.json, type-checked with `tsc --strict` (so every field used below must exist
// with the type used), then run with node's test runner against posture-api serving one
// customer of demo data.

import { randomUUID } from "node:crypto";
import { test } from "node:test";
import assert from "node:assert/strict";

import createClient from "openapi-fetch";

import type { components, paths } from "./posture.js";

type Severity = components["schemas"]["Severity"];
type Finding = components["schemas"]["FindingResponse"];
type FeedEvent = components["schemas"]["EventResponse"];

const baseUrl = process.env.POSTURE_URL ?? "";

function env(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} is not set`);
  return value;
}

function client(keyVariable = "TS_KEY") {
  return createClient<paths, "application/json">({
    baseUrl,
    headers: { Authorization: `Bearer ${env(keyVariable)}` },
  });
}

/** An access token for the suite's OAuth client (client_secret_basic, docs/auth.md). */
async function accessToken(): Promise<string> {
  const basic = Buffer.from(
    `${env("CLIENT_ID")}:${env("CLIENT_SECRET")}`,
  ).toString("base64");
  const response = await fetch(`${baseUrl}/oauth/token`, {
    method: "POST",
    headers: {
      Authorization: `Basic ${basic}`,
      "Content-Type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ grant_type: "client_credentials" }),
  });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("cache-control"), "no-store");
  const token = (await response.json()) as { access_token: string; token_type: string };
  assert.equal(token.token_type, "Bearer");
  return token.access_token;
}

test("an OAuth access token reads through the generated client as a key does", async () => {
  const token = await accessToken();
  const oauth = createClient<paths, "application/json">({
    baseUrl,
    headers: { Authorization: `Bearer ${token}` },
  });
  const { data, response } = await oauth.GET("/api/v1/findings", {
    params: { query: { limit: 3 } },
  });
  assert.equal(response.status, 200);
  assert.ok(data);
  assert.ok(data.data.length > 0 && data.data.length <= 3);
  const current = await oauth.GET("/api/v1/keys/current");
  assert.ok(current.data);
  assert.ok(env("CLIENT_ID").startsWith(current.data.data.prefix));
});

test("the current key describes itself", async () => {
  const { data, response } = await client().GET("/api/v1/keys/current");
  assert.equal(response.status, 200);
  assert.ok(data);
  assert.equal(data.data.customer.name, env("CUSTOMER_NAME"));
  assert.equal(data.data.customer.id, env("CUSTOMER_ID"));
  assert.ok(env("TS_KEY").startsWith(data.data.prefix));
  assert.ok(data.data.scopes.includes("read:findings"));
  assert.equal(data.data.expiresAt, null);
});

test("a filtered list returns typed findings of those severities", async () => {
  const wanted: Severity[] = ["critical", "high"];
  const { data, response } = await client().GET("/api/v1/findings", {
    params: { query: { severity: wanted, limit: 10 } },
    querySerializer: { array: { style: "form", explode: false } },
  });
  assert.equal(response.status, 200);
  assert.ok(data);
  assert.ok(data.data.length > 0 && data.data.length <= 10);
  assert.equal(data.meta.limit, 10);
  for (const finding of data.data) {
    assert.ok(wanted.includes(finding.severity), finding.severity);
    assert.ok(!Number.isNaN(Date.parse(finding.detectedAt)));
  }
});

test("a cursor loop reads every finding once", async () => {
  const seen: string[] = [];
  let after: string | null = null;
  let total = 0;
  for (let page = 0; page < 100; page++) {
    const query: { limit: number; after?: string } = { limit: 50 };
    if (after !== null) query.after = after;
    const { data, response } = await client().GET("/api/v1/findings", {
      params: { query },
    });
    assert.equal(response.status, 200);
    assert.ok(data);
    total = data.meta.total;
    seen.push(...data.data.map((f: Finding) => f.id));
    after = data.meta.nextCursor;
    if (after === null) break;
  }
  assert.ok(total > 0);
  assert.equal(seen.length, total);
  assert.equal(new Set(seen).size, total);
});

test("the events feed reads on by event id, oldest first, with typed events", async () => {
  const first = await client().GET("/api/v1/events", { params: { query: { limit: 5 } } });
  assert.equal(first.response.status, 200);
  assert.ok(first.data);
  assert.equal(first.data.data.length, 5);
  assert.equal(first.data.meta.hasMore, true);
  const cursor = first.data.meta.nextCursor;
  assert.ok(cursor);
  assert.equal(cursor, first.data.data.at(-1)?.id);
  const next = await client().GET("/api/v1/events", {
    params: { query: { limit: 5, after: cursor } },
  });
  assert.ok(next.data);
  const ids = [...first.data.data, ...next.data.data].map((e: FeedEvent) => e.id);
  assert.deepEqual(ids, [...ids].sort(), "oldest first: ids sort in the feed's order");
  assert.equal(new Set(ids).size, ids.length);
  const event = first.data.data[0];
  assert.ok(event);
  assert.ok(event.type.startsWith("finding_"));
  const one = await client().GET("/api/v1/events/{id}", { params: { path: { id: event.id } } });
  assert.equal(one.data?.data.finding.id, event.finding.id);
});

test("a finding by id, and 404 with the error body for an unknown one", async () => {
  const list = await client().GET("/api/v1/findings", { params: { query: { limit: 1 } } });
  const first = list.data?.data[0];
  assert.ok(first);
  const { data } = await client().GET("/api/v1/findings/{id}", {
    params: { path: { id: first.id } },
  });
  assert.equal(data?.data.title, first.title);
  const missing = await client().GET("/api/v1/findings/{id}", {
    params: { path: { id: "no-such-finding" } },
  });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error?.error, "not_found");
});

test("a finding is triaged conditionally, read back, and triaged in bulk once", async () => {
  // The second finding: the Python suite triages the first.
  const list = await client().GET("/api/v1/findings", { params: { query: { limit: 2 } } });
  const finding = list.data?.data[1];
  assert.ok(finding);
  const path = { id: finding.id };
  const read = await client().GET("/api/v1/findings/{id}", { params: { path } });
  const tag = read.response.headers.get("etag");
  assert.ok(tag);
  const accepted = {
    triage: {
      state: "risk_accepted" as const,
      reason: "compensating_control" as const,
      expiresAt: new Date(Date.now() + 30 * 86_400_000).toISOString(),
    },
  };
  const written = await client().PATCH("/api/v1/findings/{id}", {
    params: { path, header: { "If-Match": tag } },
    body: accepted,
  });
  assert.equal(written.response.status, 200);
  assert.equal(written.data?.data.triage.state, "risk_accepted");
  assert.equal(written.data?.data.triage.reason, "compensating_control");
  const stale = await client().PATCH("/api/v1/findings/{id}", {
    params: { path, header: { "If-Match": tag } },
    body: accepted,
  });
  assert.equal(stale.response.status, 412);
  assert.equal(stale.error?.error, "precondition_failed");
  const history = await client().GET("/api/v1/findings/{id}/triage", { params: { path } });
  assert.equal(history.data?.data[0]?.to, "risk_accepted");
  const bulk = () =>
    client().POST("/api/v1/findings/triage", {
      params: { header: { "Idempotency-Key": key } },
      body: { findings: [{ id: finding.id }], triage: { state: "untriaged" } },
    });
  const key = randomUUID();
  const first = await bulk();
  const retried = await bulk();
  assert.equal(first.response.status, 200);
  assert.equal(retried.response.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(retried.data, first.data);
  assert.equal(retried.data?.data[0]?.outcome, "triaged");
  assert.equal(retried.data?.data[0]?.finding?.triage.state, "untriaged");
});

test("the export streams one JSON line per finding", async () => {
  const list = await client().GET("/api/v1/findings", { params: { query: { limit: 1 } } });
  const total = list.data?.meta.total;
  const { data, response } = await client().GET("/api/v1/findings/export", {
    params: { query: { format: "ndjson" } },
    parseAs: "text",
  });
  assert.equal(response.status, 200);
  assert.ok(typeof data === "string");
  const lines = data.trimEnd().split("\n");
  assert.equal(lines.length, total);
  assert.equal(Number(response.headers.get("x-total-count")), total);
  const record = JSON.parse(lines[0] ?? "{}") as Finding;
  assert.ok(record.id);
});

test("a webhook is created, listed and deleted", async () => {
  const created = await client().POST("/api/v1/webhooks", {
    body: {
      name: "typescript client",
      webhookUrl: "http://127.0.0.1:9/hook",
      webhookType: "slack",
      eventTypes: ["finding_high"],
    },
  });
  assert.equal(created.response.status, 201);
  const webhook = created.data?.data;
  assert.ok(webhook);
  assert.ok(webhook.signingSecret.startsWith("whsec_"));
  assert.equal(webhook.status, "active");
  assert.equal(webhook.webhookType, "slack");
  const listed = await client().GET("/api/v1/webhooks");
  assert.ok(listed.data?.data.some((w) => w.id === webhook.id));
  const deleted = await client().DELETE("/api/v1/webhooks/{id}", {
    params: { path: { id: webhook.id } },
  });
  assert.equal(deleted.response.status, 204);
  const after = await client().GET("/api/v1/webhooks");
  assert.ok(!after.data?.data.some((w) => w.id === webhook.id));
});

test("an unknown key is 401", async () => {
  const bogus = createClient<paths, "application/json">({
    baseUrl,
    headers: { Authorization: `Bearer svc_${"a".repeat(40)}` },
  });
  const { error, response } = await bogus.GET("/api/v1/findings");
  assert.equal(response.status, 401);
  assert.equal(error?.error, "unauthorized");
});

test("a key without the scope is 403 naming it", async () => {
  const { error, response } = await client("TS_FINDINGS_KEY").GET("/api/v1/identities");
  assert.equal(response.status, 403);
  assert.equal(error?.error, "insufficient_scope");
  assert.ok(error?.reason?.includes("read:identities"));
});

test("past the rate limit a 429 says when to retry", async () => {
  const limited = client("TS_RATE_KEY");
  const limit = Number(env("RATE_LIMIT"));
  for (let i = 0; i < limit + 5; i++) {
    const { error, response } = await limited.GET("/api/v1/identities", {
      params: { query: { limit: 1 } },
    });
    if (response.status === 429) {
      assert.equal(error?.error, "rate_limited");
      assert.ok(Number(response.headers.get("retry-after")) >= 1);
      assert.equal(response.headers.get("x-ratelimit-remaining"), "0");
      return;
    }
    assert.equal(response.status, 200);
  }
  assert.fail(`no 429 after ${limit + 5} requests`);
});
