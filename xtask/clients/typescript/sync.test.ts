// Keeping in sync through openapi-fetch with the loop docs/api.md shows (its `sync_loop.ts`
// block, compiled as it is written there), while analyzer passes commit during the walk.
// Run by `cargo xtask clients` (docs/clients.md).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";

import createClient from "openapi-fetch";

import type { components, paths } from "./posture.js";
import { syncFindings } from "./sync_loop.js";

type Finding = components["schemas"]["FindingResponse"];

function env(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} is not set`);
  return value;
}

const tenant = randomUUID();
const customer = env("TS_SYNC_CUSTOMER");
let passes = 0;

function finding(id: string, severity = "high", status = "open") {
  return {
    type: "finding", id, cloudTenantId: tenant, findingType: "standing_privileged_access",
    severity, status, title: `Finding ${id}`,
  };
}

function ingest(records: object[]): void {
  const input = records.map((r) => JSON.stringify(r) + "\n").join("");
  const run = spawnSync(env("POSTURE_API_BIN"), ["ingest", "--customer", customer, "-"], {
    input,
    stdio: ["pipe", "ignore", "inherit"],
  });
  assert.equal(run.status, 0, "posture-api ingest failed");
  passes += 1;
}

const client = createClient<paths, "application/json">({
  baseUrl: env("POSTURE_URL"),
  headers: { Authorization: `Bearer ${env("TS_SYNC_KEY")}` },
});

type Copy = Map<string, [string, string, string]>;

async function serverCopy(): Promise<Copy> {
  const copy: Copy = new Map();
  let after: string | undefined;
  for (;;) {
    const { data } = await client.GET("/api/v1/findings", {
      params: { query: { limit: 500, order: "modified", ...(after ? { after } : {}) } },
    });
    assert.ok(data);
    for (const f of data.data) copy.set(f.id, [f.severity, f.status, f.modifiedAt]);
    after = data.meta.nextCursor ?? undefined;
    if (!after) return copy;
  }
}

test("the documented loop reads every change once while passes commit", async () => {
  ingest([{ type: "tenant", cloudTenantId: tenant, displayName: "Sync" }]);
  ingest(Array.from({ length: 9 }, (_, i) => finding(`s-${i}`)));
  const local: Copy = new Map();
  const read = new Set<string>();
  let watermark: string | undefined;
  for (let walk = 0; walk < 6; walk++) {
    const thisWalk: Finding[] = [];
    watermark = await syncFindings(
      client,
      watermark,
      (f) => {
        if (thisWalk.length === 0 && walk < 5) {
          ingest([finding(`n-${walk}`, "critical"), finding(`s-${walk}`, "high", "resolved")]);
        }
        thisWalk.push(f);
        local.set(f.id, [f.severity, f.status, f.modifiedAt]);
      },
      3,
    );
    assert.ok(watermark);
    const ids = thisWalk.map((f) => f.id);
    assert.equal(new Set(ids).size, ids.length, `walk ${walk} read a row twice: ${ids}`);
    for (const f of thisWalk) {
      assert.ok(Date.parse(f.modifiedAt) <= Date.parse(watermark), `walk ${walk}: past its syncedThrough`);
      const version = `${f.id}@${f.modifiedAt}`;
      assert.ok(!read.has(version), `${version} was read twice`);
      read.add(version);
    }
    if (walk > 0) assert.ok(ids.includes(`n-${walk - 1}`), `the pass of walk ${walk - 1} is missing`);
  }
  assert.equal(passes, 7);
  assert.deepEqual(local, await serverCopy());
});
