/** How the client retries (which requests, on what), on a fetch that answers to order. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, ProblemError, TransportError, Unauthorized, Unavailable } from "../src/index.js";
import { answering, dropped, json, problem, refused, sse } from "./support.js";

const BASE = "http://ddz.test";

function client(fetch: typeof globalThis.fetch) {
  return new Client(BASE, "t", { backoff: 0, fetch });
}

test("reads are retried on passing failures, as Retry-After asks", async () => {
  const { fetch, requests } = answering(
    refused(),
    problem(503, "database_unavailable", { "Retry-After": "0" }),
    new Response("<html>bad gateway</html>", { status: 502 }),
    json(200, { player_id: "p", name: "n", bot_account: false, balance: "0.00" }),
  );
  assert.equal((await client(fetch).me()).name, "n");
  assert.equal(requests.length, 4);
  assert.ok(requests.every((r) => r.headers.get("Authorization") === "Bearer t"));
});

test("a command is retried with the same Idempotency-Key and body", async () => {
  const { fetch, requests, bodies } = answering(
    dropped(),
    problem(504, "http_504"),
    json(200, { version: 9, events: [], view: {} }),
  );
  const c = client(fetch);
  assert.equal((await c.pass("m", 8)).version, 9);
  const keys = new Set(requests.map((r) => r.headers.get("Idempotency-Key")));
  assert.equal(requests.length, 3);
  assert.equal(keys.size, 1);
  assert.deepEqual(JSON.parse(bodies[0] ?? ""), { action: "pass", expected_version: 8 });
  assert.ok(bodies.every((b) => b === bodies[0]));
  // The next call is another command: another key.
  const more = answering(json(200, { version: 10, events: [], view: {} }));
  await client(more.fetch).pass("m");
  assert.ok(!keys.has(more.requests[0]?.headers.get("Idempotency-Key") ?? null));
});

test("a new table is retried with its Idempotency-Key", async () => {
  const { fetch, requests } = answering(
    dropped(),
    problem(503, "database_unavailable"),
    json(201, { table_id: "t" }),
  );
  assert.equal((await client(fetch).createTable({ unit: "2.00" })).table_id, "t");
  const keys = new Set(requests.map((r) => r.headers.get("Idempotency-Key")));
  assert.equal(requests.length, 3);
  assert.equal(keys.size, 1);
});

test("a seat is asked again only when the service surely did not take it", async () => {
  const first = answering(
    refused(),
    problem(429, "rate_limited", { "Retry-After": "0" }),
    problem(503, "database_unavailable"),
  );
  await assert.rejects(client(first.fetch).takeSeat("m", 0), (error: unknown) => {
    assert.ok(error instanceof Unavailable);
    assert.equal(error.code, "database_unavailable");
    return true;
  });
  assert.equal(first.requests.length, 3);

  const second = answering(dropped());
  await assert.rejects(client(second.fetch).takeSeat("m", 0), TransportError);
  assert.equal(second.requests.length, 1);
});

test("a passing failure that lasts is thrown after the retries", async () => {
  const { fetch, requests } = answering(
    ...Array.from({ length: 5 }, () => problem(503, "draining")),
  );
  await assert.rejects(client(fetch).table("t"), (error: unknown) => {
    assert.ok(error instanceof ProblemError);
    assert.equal(error.code, "draining");
    return true;
  });
  assert.equal(requests.length, 5);
});

test("an answer that is no problem document still has a code", async () => {
  const { fetch } = answering(new Response("teapot", { status: 418, statusText: "I'm a teapot" }));
  await assert.rejects(client(fetch).ticket("t"), (error: unknown) => {
    assert.ok(error instanceof ProblemError);
    assert.deepEqual([error.status, error.code, error.detail], [418, "http_418", "teapot"]);
    return true;
  });
});

test("the stream waits out a busy service, resumes after its last id, throws a refusal", async () => {
  const first = { id: "7-1-0", type: "seated", table_id: "t", seat: 0 };
  const second = { id: "7-2-0", type: "hand_started", match_id: "m" };
  const { fetch, requests } = answering(
    problem(503, "too_many_streams", { "Retry-After": "0" }),
    sse(first),
    sse(second),
    problem(401, "token_revoked"),
  );
  const got: unknown[] = [];
  await assert.rejects(
    (async () => {
      for await (const item of client(fetch).stream("7-0-0")) got.push(item);
    })(),
    (error: unknown) => error instanceof Unauthorized && error.code === "token_revoked",
  );
  assert.deepEqual(got, [first, second]);
  assert.deepEqual(
    requests.map((r) => r.headers.get("Last-Event-ID")),
    ["7-0-0", "7-0-0", "7-1-0", "7-2-0"],
  );
});
