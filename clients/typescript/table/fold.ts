/**
 * The view the table shows between two reads: the last view read, with the match's
 * events that came after it (its stream's) folded in. Only the events whose effect on a
 * seat's view needs nothing the seat cannot see are folded: a bid, a play, a pass, another
 * seat's leaving or return. Any other event (the landlord chosen, 摊打, 报到, the hand's
 * end, the caller's own seat taken over) stops the fold: the page then reads the view
 * again, once for the whole burst of events. So the page reads the view a few times a
 * hand, not after every event, and never draws anything the service did not say.
 */

import type { EventDocument, View } from "../src/index.js";
import { rank } from "./cards.js";

const SEATS = 4;

export interface Folded {
  /** The view with every event it could fold, in order. */
  view: View;
  /** Events it could not fold (from the first such one on): read the view again. */
  behind: number;
}

/** `view` with `events` (those after its version, in order) folded in, as far as it goes. */
export function fold(view: View, events: readonly EventDocument[]): Folded {
  let folded = view;
  const after = events.filter((event) => event.version > view.version);
  for (const [index, event] of after.entries()) {
    const next = event.version === folded.version + 1 ? step(folded, event) : null;
    if (next === null) return { view: folded, behind: after.length - index };
    folded = next;
  }
  return { view: folded, behind: 0 };
}

function without(hand: string[], cards: string[]): string[] {
  const left = [...hand];
  for (const card of cards) {
    const at = left.indexOf(card);
    if (at >= 0) left.splice(at, 1);
  }
  return left;
}

/** The view after one event, or null when the event is not one the page folds. */
function step(view: View, event: EventDocument): View | null {
  // The seat's actions come with its your_turn item or a read; nothing is offered meanwhile.
  const moved = { ...view, version: event.version, deadline: event.deadline, actions: [] };
  const next = (seat: number) => (seat + 1) % SEATS;
  switch (event.type) {
    case "bid": {
      const { seat, value } = event.payload;
      const bids = [...view.bids];
      bids[seat] = value;
      return { ...moved, bids, turn: next(seat) };
    }
    case "play": {
      const { seat, cards, combination } = event.payload;
      const bomb = combination === "bomb" || combination === "joker_bomb";
      const seats = view.seats.map((info) => {
        if (info === null || info.seat !== seat) return info;
        const left = info.bombs_left === null ? null : Math.max(0, info.bombs_left - 1);
        return bomb
          ? {
              ...info,
              cards: info.cards - cards.length,
              bombs_played: info.bombs_played + 1,
              bombs_left: left,
            }
          : { ...info, cards: info.cards - cards.length };
      });
      const mine = seat === view.seat;
      const unseen = { ...view.unseen };
      if (!mine) for (const card of cards) unseen[rank(card)] = (unseen[rank(card)] ?? 1) - 1;
      return {
        ...moved,
        seats,
        unseen,
        hand: mine ? without(view.hand, cards) : view.hand,
        history: [...view.history, { seat, action: "play", cards }],
        lead: { seat, cards, type: combination, rank: event.payload.rank },
        passes: 0,
        bombs: view.bombs + (bomb ? 1 : 0),
        bombs_left:
          mine && bomb && view.bombs_left !== null
            ? Math.max(0, view.bombs_left - 1)
            : view.bombs_left,
        turn: next(seat),
      };
    }
    case "pass": {
      const { seat } = event.payload;
      const history = [...view.history, { seat, action: "pass" as const, cards: [] }];
      const passes = view.passes + 1;
      if (passes < SEATS - 1) return { ...moved, history, passes, turn: next(seat) };
      // Three passes in a row: the seat that played last leads again, with anything.
      return { ...moved, history, passes: 0, lead: null, turn: view.lead?.seat ?? next(seat) };
    }
    case "disconnect":
    case "resume": {
      const { seat } = event.payload;
      // The caller's own seat taken over or given back changes its actions (resume), and
      // its deadline may move while it is to act: read.
      if (seat === view.seat || view.turn === view.seat) return null;
      const disconnected = event.type === "disconnect";
      const seats = view.seats.map((info) =>
        info !== null && info.seat === seat ? { ...info, disconnected } : info,
      );
      return { ...moved, seats };
    }
    default:
      return null;
  }
}
