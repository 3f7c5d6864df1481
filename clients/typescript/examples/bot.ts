import { Client, type Command, type Schemas } from "ddz-client";

/** An action for a your_turn item: the first choice of a bid, 摊打 or 报到; else the first
 * legal play, or a pass when there is none. */
export async function choose(client: Client, turn: Schemas["YourTurnItem"]): Promise<Command> {
  for (const offered of turn.actions) {
    const value = offered.choices?.[0];
    if (offered.action === "bid") return { action: "bid", value: value as 0 | 1 | 2 | 3 };
    if (offered.action === "show_hand") return { action: "show_hand", value: value as boolean };
    if (offered.action === "report") return { action: "report", value: value as "play" };
  }
  const { plays } = await client.legal(turn.match_id);
  return plays[0] ? { action: "play", cards: plays[0].cards } : { action: "pass" };
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
        await client.leaveTable(item.table_id ?? "");
        return nets;
      }
    }
  }
  throw new Error("the stream never ends");
}
