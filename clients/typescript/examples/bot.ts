// bot.ts: answers each your_turn of the player's stream, from the lobby to a settled hand
import { Client, type Command, type Schemas } from "ddz-client";

/** An action for a your_turn item: the first value offered for a bid, 摊打 or 报到; else the
 * first legal play, or a pass when there is none. */
export async function choose(client: Client, turn: Schemas["YourTurnItem"]): Promise<Command> {
  for (const offered of turn.actions) {
    // Each kind of action its own choices: a bid's 0-3, 摊打's true or false, 报到's words.
    switch (offered.action) {
      case "bid":
        return { action: "bid", value: first(offered.choices) };
      case "show_hand":
        return { action: "show_hand", value: first(offered.choices) };
      case "report":
        return { action: "report", value: first(offered.choices) };
    }
  }
  const { plays } = await client.legal(turn.match_id);
  return plays[0] ? { action: "play", cards: plays[0].cards } : { action: "pass" };
}

/** The first of the values offered (the service offers at least one). */
function first<T>(values: T[]): T {
  const [value] = values;
  if (value === undefined) throw new Error("no value offered");
  return value;
}

/** Plays `hands` hands from the lobby; the player's net of each. */
export async function play(client: Client, hands = 1, unit = "1.00"): Promise<string[]> {
  const nets: string[] = [];
  for await (const item of client.stream()) {
    if (item.type === "ready") {
      // The stream is open: ask the lobby for a game.
      await client.quickMatch({ unit, allow_bots: true });
    } else if (item.type === "your_turn") {
      const body = await choose(client, item);
      await client.command(item.match_id, body, { expectedVersion: item.version });
    } else if (item.type === "settled") {
      nets.push(item.net);
      if (nets.length === hands) {
        // A hand from the lobby is a table's (a match made alone has no table).
        if (item.table_id !== null) await client.leaveTable(item.table_id);
        return nets;
      }
    }
  }
  throw new Error("the stream never ends");
}
