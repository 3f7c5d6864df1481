/**
 * The client against the service as `ddz serve` runs it (DDZ_URL; tests/test_typescript_client.py
 * starts one, whose streams close every 2 s and whose lobby seats bots at once, and gives
 * the operator's token as DDZ_OPERATOR_TOKEN).
 *
 * The README's bot plays a hand from the lobby over a bad network: every stream connection
 * drops after a few chunks and the answer of its first command is lost after the service
 * acted. What its stream gave is then exactly the player's stream (nothing missed or
 * repeated), and each decision applied once.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Client, Conflict, NotFound, Unauthorized, type Item, type StreamItem } from "ddz-client";
import { play } from "../examples/bot.js";
import { badNetwork } from "./support.js";

const BASE = process.env.DDZ_URL ?? "";
const OPERATOR = process.env.DDZ_OPERATOR_TOKEN ?? "";
assert.ok(BASE, "set DDZ_URL to a running ddz serve (tests/test_typescript_client.py does)");
const DECISIONS = new Set(["bid", "show_hand", "report", "play", "pass"]);

/** The player's whole stream by long polls, from its first item through one of type `last`. */
async function allItems(client: Client, last: string): Promise<Item[]> {
  const items: Item[] = [];
  let after: string | null = null;
  while (items.at(-1)?.type !== last) {
    const page = await client.events(after, { wait: 10 });
    assert.ok(page.items.length, `no ${last} after ${items.map((i) => i.type)}`);
    items.push(...page.items);
    after = page.last_id;
  }
  return items;
}

test("the README's bot plays a hand from the lobby over a bad network", async () => {
  const network = badNetwork();
  const owner = await Client.register(BASE, "ts-readme-author");
  const client = await Client.register(BASE, "ts-readme-bot", {
    botAccount: true,
    ownerToken: owner.token!,
    fetch: network.fetch,
  });
  const seen: StreamItem[] = [];
  const follow = client.stream.bind(client);
  client.stream = async function* (after, options) {
    for await (const item of follow(after, options)) {
      seen.push(item);
      yield item;
    }
  };
  const [net] = await play(client, 1, "3.00");

  // After `ready`, every item once, in order (then `left`, which came after the bot stopped).
  assert.ok(network.state.streamConnections > 3, `${network.state.streamConnections}`);
  assert.equal(seen[0]?.type, "ready");
  const items = await allItems(client, "left");
  assert.deepEqual(items.slice(0, seen.length - 1), seen.slice(1));
  assert.deepEqual(
    items.slice(seen.length - 1).map((i) => i.type),
    ["left"],
  );
  assert.deepEqual(
    items.slice(0, 2).map((i) => i.type),
    ["seated", "hand_started"],
  );

  // Each your_turn answered by one command; the first, whose answer was lost, sent again
  // with its key and applied once: the seat's decisions are one per your_turn.
  const turns = seen.filter((i) => i.type === "your_turn");
  assert.ok(turns.length);
  const keys = network.state.commandKeys;
  assert.equal(keys[0], keys[1]);
  assert.equal(keys.length, turns.length + 1);
  assert.equal(new Set(keys).size, turns.length);
  const matchId = turns[0]!.match_id;
  const seat = turns[0]!.seat;
  const answer = await fetch(`${BASE}/v1/admin/matches/${matchId}/events`, {
    headers: { Authorization: `Bearer ${OPERATOR}` },
  });
  const { events } = (await answer.json()) as {
    events: Array<{ type: string; version: number; payload: { seat?: number } }>;
  };
  const decided = events
    .filter((e) => DECISIONS.has(e.type) && e.payload.seat === seat)
    .map((e) => e.version - 1);
  assert.deepEqual(
    decided,
    turns.map((t) => t.version),
  );

  // The hand's net is the player's balance; the hand ended with a result the stream typed.
  const me = await client.me();
  assert.equal(Number(me.balance), Number(net));
  const ended = seen.find((i) => i.type === "hand_ended");
  assert.ok(ended && ended.type === "hand_ended");
  assert.ok(["landlord", "farmers"].includes(ended.result.winner));
  // The match's own stream: a settled match gives its caller's view, then ends; from the
  // start, every event to `settled`, each payload typed by its event's type.
  const watched = [];
  for await (const message of client.watch(matchId)) watched.push(message);
  assert.deepEqual(
    watched.map((m) => m.type),
    ["snapshot"],
  );
  const all = [];
  for await (const message of client.watch(matchId, 0)) all.push(message);
  assert.equal(all.at(-1)?.type, "settled");
  const dealt = all.find((m) => m.type === "hand_dealt");
  assert.ok(dealt?.type === "hand_dealt" && dealt.payload.hand?.length === 25);
  const record = await client.record(matchId);
  assert.deepEqual(
    record.seats.map((s) => s?.bot_account),
    [0, 1, 2, 3].map((i) => i === seat),
  );
});

test("a stream resumes after the id an earlier run stopped at", async () => {
  const client = await Client.register(BASE, "ts-resumer");
  const first = client.stream();
  const ready = (await first.next()).value as StreamItem;
  await client.quickMatch({ unit: "4.00", allow_bots: true });
  const seated = (await first.next()).value as StreamItem;
  await first.return(undefined);
  assert.deepEqual([ready.type, seated.type], ["ready", "seated"]);
  // A later run picks up after the last item it handled: the hand that follows.
  const resumed = client.stream(seated.id);
  assert.equal(((await resumed.next()).value as StreamItem).type, "hand_started");
  await resumed.return(undefined);
  // The long-poll fallback gives the same.
  const polled = client.poll(seated.id, { wait: 5 });
  assert.equal(((await polled.next()).value as Item).type, "hand_started");
  await polled.return(undefined);
  assert.ok(seated.type === "seated");
  await client.leaveTable(seated.table_id);
});

test("refusals throw problem errors carrying their code", async () => {
  const stranger = new Client(BASE, "no-such-token");
  await assert.rejects(stranger.me(), (error: unknown) => {
    assert.ok(error instanceof Unauthorized);
    assert.deepEqual([error.status, error.code], [401, "invalid_token"]);
    assert.ok(error.detail && error.body.code === "invalid_token");
    return true;
  });

  const client = await Client.register(BASE, "ts-refused");
  await assert.rejects(
    client.match(crypto.randomUUID()),
    (error: unknown) => error instanceof NotFound && error.code === "match_not_found",
  );
  // One waiting ticket per player: asking again answers the waiting one.
  const ticket = await client.quickMatch({ unit: "7.00", allow_bots: false });
  assert.deepEqual(await client.quickMatch({ unit: "7.00", allow_bots: false }), ticket);
  assert.equal((await client.cancelTicket(ticket.ticket_id)).status, "cancelled");

  // A stale decision is refused and changes nothing.
  const match = await client.createMatch();
  const view = await client.takeSeat(match.match_id);
  await client.takeSeat(match.match_id, 1, { bot: true });
  await assert.rejects(
    client.resume(match.match_id, view.version),
    (error: unknown) => error instanceof Conflict && error.code === "version_conflict",
  );
  assert.equal((await client.match(match.match_id)).version, view.version + 1);
});

test("the README shows the bot the tests run", () => {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf-8");
  const bot = readFileSync(new URL("../../examples/bot.ts", import.meta.url), "utf-8");
  assert.ok(readme.includes(bot.trim()), "README.md's bot is not examples/bot.ts");
});
