/** Cards as the table shows and compares them. */

import type { Schemas } from "../src/index.js";

/** A card's rank, as plays are compared: suits never matter (`BJ` is B, `RJ` is R). */
export function rank(code: string): string {
  return code.length === 2 && code[1] === "J" && (code[0] === "B" || code[0] === "R")
    ? (code[0] ?? "")
    : (code[1] ?? "");
}

/** The ranks of some cards, as a key two plays of the same ranks share. */
export function ranksKey(codes: Iterable<string>): string {
  return [...codes].map(rank).sort().join("");
}

export function isRed(code: string): boolean {
  return code[0] === "H" || code[0] === "D" || code === "RJ";
}

/** The hand's indices of these cards (each index once: two decks hold equal codes). */
export function indicesOf(hand: string[], cards: string[]): number[] {
  const taken = new Set<number>();
  for (const card of cards) {
    const at = hand.findIndex((code, i) => code === card && !taken.has(i));
    if (at >= 0) taken.add(at);
  }
  return [...taken].sort((a, b) => a - b);
}

/** The legal play whose ranks are these cards' (none: the cards are no legal play). */
export function legalPlay(
  plays: Schemas["LegalPlay"][],
  codes: string[],
): Schemas["LegalPlay"] | undefined {
  const key = ranksKey(codes);
  return codes.length ? plays.find((play) => ranksKey(play.cards) === key) : undefined;
}

/** Each seat's turn of the round under way (the plays and passes since its lead). */
export function roundTurns(history: Schemas["Turn"][]): Map<number, Schemas["Turn"]> {
  let start = 0;
  let passes = 0;
  history.forEach((turn, i) => {
    if (turn.action === "pass") {
      passes += 1;
    } else {
      if (passes >= 3) start = i;
      passes = 0;
    }
  });
  const turns = new Map<number, Schemas["Turn"]>();
  for (const turn of history.slice(start)) turns.set(turn.seat, turn);
  return turns;
}

/** The hand's cards: their width, and the least of it that shows when they overlap
 * (a finger's 44 px, and room for the corner's rank and suit); the rows overlap
 * by 22 px of the cards' 74 (play.css), so 52 px of each row shows. */
export const CARD = { width: 54, shown: 44 };

/** How many cards go in each row of a hand of `count` cards `width` px wide, and how far
 * apart they stand: each card shows at least CARD.shown px, rows are filled evenly. */
export function handRows(count: number, width: number): { rows: number[]; step: number } {
  const fit = Math.max(1, Math.floor((width - CARD.width) / CARD.shown) + 1);
  const lines = Math.max(1, Math.ceil(count / fit));
  const per = Math.ceil(count / lines);
  const rows: number[] = [];
  for (let left = count; left > 0; left -= per) rows.push(Math.min(per, left));
  const step = per > 1 ? Math.min(CARD.width + 4, (width - CARD.width) / (per - 1)) : CARD.width;
  return { rows, step: Math.floor(step) };
}
