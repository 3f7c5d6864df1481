/**
 * The web table's pure parts: the hand's rows (every card a finger's width, no sideways
 * scroll, at a phone's widths), the fold of a match's events into the last view read, and
 * the multiplier as players read it.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import type { EventDocument, View } from "../src/index.js";
import { CARD, handRows } from "../table/cards.js";
import { fold } from "../table/fold.js";
import { multiplierText } from "../table/i18n.js";

test("a hand of 25 or 33 cards fits a phone's width, each card showing 44 px", () => {
  // The hand's width at 360 and 390 px screens (the page's margins taken off), a desktop's.
  for (const width of [336, 366, 1000]) {
    for (const count of [1, 8, 25, 33]) {
      const { rows, step } = handRows(count, width);
      assert.equal(
        rows.reduce((a, b) => a + b, 0),
        count,
      );
      assert.ok(step >= CARD.shown || rows.every((n) => n === 1), `${count} at ${width}`);
      const widest = Math.max(...rows);
      assert.ok((widest - 1) * step + CARD.width <= width, `${count} cards overflow ${width} px`);
      // Filled evenly: no row of one card under rows of seven.
      assert.ok(widest - Math.min(...rows) <= widest / 2 + 1, `${rows}`);
    }
  }
  assert.deepEqual(handRows(33, 336).rows, [7, 7, 7, 7, 5]);
});

const SEAT = {
  player: null,
  bot: true,
  bot_account: false,
  disconnected: false,
  bombs_played: 0,
  bombs_left: null,
  role: "farmer" as const,
};

function view(changes: Partial<View> = {}): View {
  return {
    match_id: "m",
    phase: "playing",
    version: 10,
    seat: 0,
    commitment: null,
    marked_card: "H5",
    marked_seat: 1,
    hand: ["S3", "H3", "D9"],
    bids: [0, 3, 0, 0],
    landlord: 1,
    bid: 3,
    bottom: null,
    first_bid_three: false,
    show_hand: false,
    landlord_hand: null,
    report: null,
    reported_cards: [],
    turn: 1,
    passes: 0,
    bombs: 0,
    bombs_left: null,
    seed: null,
    role: "farmer",
    ruleset: "shanghai-platform",
    options: {
      unit: "1.00",
      cap: null,
      rake: "0.00",
      bombs_double: true,
      turn_seconds: 30,
      bot_level: "normal",
    },
    seats: [0, 1, 2, 3].map((seat) => ({ ...SEAT, seat, cards: seat === 1 ? 33 : 25 })),
    deadline: "2030-01-01T00:00:00Z",
    lead: null,
    history: [],
    unseen: { "4": 8 },
    actions: [],
    result: null,
    ...changes,
  } as View;
}

function event(version: number, type: string, payload: object): EventDocument {
  return {
    type,
    version,
    schema_version: 1,
    recorded_at: "2030-01-01T00:00:00Z",
    deadline: null,
    payload: { by: "bot", ...payload },
  } as EventDocument;
}

test("the stream's plays and passes fold into the view; the turn moves on", () => {
  const played = event(11, "play", {
    seat: 1,
    cards: ["S4", "H4"],
    combination: "pair",
    rank: "4",
  });
  const { view: after, behind } = fold(view(), [
    played,
    event(12, "pass", { seat: 2 }),
    event(13, "pass", { seat: 3 }),
  ]);
  assert.equal(behind, 0);
  assert.equal(after.version, 13);
  assert.equal(after.turn, 0);
  assert.equal(after.seats[1]?.cards, 31);
  assert.equal(after.unseen["4"], 6);
  assert.deepEqual(after.lead?.cards, ["S4", "H4"]);
  assert.deepEqual(
    after.history.map((t) => t.action),
    ["play", "pass", "pass"],
  );
  // The seat's own actions come with its your_turn item, never from the fold.
  assert.deepEqual(after.actions, []);
  // Three passes: the seat that played leads again.
  const led = fold(after, [event(14, "pass", { seat: 0 })]).view;
  assert.equal(led.turn, 1);
  assert.equal(led.lead, null);
});

test("an event the page cannot fold, or a gap, asks for a read", () => {
  const chosen = event(11, "landlord_chosen", { seat: 1, bid: 3, bottom: null });
  assert.equal(fold(view(), [chosen]).behind, 1);
  assert.equal(fold(view(), [event(12, "pass", { seat: 1 })]).behind, 1);
  // The caller's own seat taken over: its actions change.
  assert.equal(fold(view(), [event(11, "disconnect", { seat: 0, reason: "deadline" })]).behind, 1);
  // Events the view has already are left out.
  assert.equal(fold(view(), [event(9, "pass", { seat: 1 })]).view.version, 10);
});

test("the multiplier reads as an integer or a decimal, the fraction kept", () => {
  assert.deepEqual(multiplierText("8"), { decimal: "8", fraction: null });
  assert.deepEqual(multiplierText("128/3"), { decimal: "42.67", fraction: "128/3" });
  assert.deepEqual(multiplierText("32/3"), { decimal: "10.67", fraction: "32/3" });
});
