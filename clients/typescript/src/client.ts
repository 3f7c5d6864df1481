/**
 * The client: one player's token over HTTP, its requests retried where a retry is safe,
 * and the player's own stream followed across dropped connections. The same behaviour as
 * the Python client (clients/python), typed by the contract (src/schema.ts, generated
 * from openapi.yaml by openapi-typescript; requests sent by openapi-fetch).
 */

import createClient from "openapi-fetch";
import { createParser, type EventSourceMessage } from "eventsource-parser";

import { ProblemError, TransportError, problemOf } from "./problems.js";
import type { components, paths } from "./schema.js";

export type Schemas = components["schemas"];
export type View = Schemas["View"];
export type Legal = Schemas["Legal"];
export type CommandResult = Schemas["CommandResult"];
export type EventDocument = Schemas["EventDocument"];
export type TableDocument = Schemas["TableDocument"];
export type TicketDocument = Schemas["TicketDocument"];
export type HandRecord = Schemas["HandRecord"];
export type Me = Schemas["Me"];
/** An item of the player's own stream, told apart by its `type`. */
export type Item = Schemas["Item"];
/** Where the player's stream starts when it is opened without `after`: the present. */
export interface Ready {
  type: "ready";
  id: string;
}
export type StreamItem = Ready | Item;
/** A message of a match's stream: the caller's view, then each event. */
export type MatchMessage = { type: "snapshot"; view: View } | EventDocument;

export interface FollowOptions {
  /** Seconds of silence after which a connection is taken as dropped. */
  idleTimeout?: number;
  /** Ends the stream. */
  signal?: AbortSignal;
}
/** A command's body, told apart by its `action` (`expected_version` is an option). */
export type Command = Schemas["CommandRequest"] extends infer C
  ? C extends unknown
    ? Omit<C, "expected_version">
    : never
  : never;
export type TableOptions = Schemas["TableCreate"];
export type MatchOptions = Schemas["MatchCreate"];
export type TicketOptions = Schemas["TicketCreate"];

export const VERSION = "0.1.0";
/** Answers that say the service did not act and may another time. */
export const TRANSIENT = new Set([429, 502, 503, 504]);
/** A stream closed sooner than this (seconds) after it opened is reopened after a backoff. */
const QUICK_CLOSE_SECONDS = 1;
/** What `fetch` (undici's, in Node) says of a connection that was never made. */
const UNSENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/**
 * When a request may be sent again: `always` when repeating it changes nothing more
 * (reads, a cancel, a command or a creation with its Idempotency-Key); `unsent` only when
 * the service surely did not act (no connection was made, or it answered 429).
 */
export type Retry = "always" | "unsent";

export interface ClientOptions {
  /** Seconds a request may take (a long poll's `wait` added). */
  timeout?: number;
  /** How many times a passing failure is retried. */
  retries?: number;
  /** Seconds before the first retry, doubled each time (at most `maxBackoff`), jittered. */
  backoff?: number;
  maxBackoff?: number;
  /** The most seconds of a `Retry-After` that are honoured. */
  maxRetryAfter?: number;
  /** The `fetch` to send with (a test's bad network, a proxy's); the global one by default. */
  fetch?: typeof globalThis.fetch;
}

/** A page of `GET /v1/me/events`: its items, and `last_id` to send back as `after`. */
export interface Page {
  items: Item[];
  last_id: string | null;
}

/** The seconds a `Retry-After` header asks for (a number or an HTTP date). */
export function retryAfter(response: Response): number | null {
  const value = response.headers.get("Retry-After");
  if (value === null) return null;
  const seconds = Number(value);
  if (value.trim() !== "" && Number.isFinite(seconds)) return Math.max(0, seconds);
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, (when - Date.now()) / 1000);
}

/** A new Idempotency-Key (random; also where `crypto.randomUUID` is not offered). */
export function newKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function sleep(seconds: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, seconds * 1000);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function unsent(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } })?.cause;
  return typeof cause?.code === "string" && UNSENT_CODES.has(cause.code);
}

/**
 * A player's client of the service at `baseUrl`, with its bearer `token`.
 *
 * Requests that fail for a passing reason (the connection, 429, 502, 503, 504) are sent
 * again up to `retries` times, waiting `backoff` seconds doubled each time (at most
 * `maxBackoff`, or what `Retry-After` asks, at most `maxRetryAfter`), but only when
 * sending again is safe (see {@link Retry}). Refusals throw {@link ProblemError}; a
 * connection that still fails throws {@link TransportError}.
 */
export class Client {
  readonly baseUrl: string;
  token: string | null;
  playerId: string | null = null;
  private readonly timeout: number;
  private readonly retries: number;
  private readonly backoff: number;
  private readonly maxBackoff: number;
  private readonly maxRetryAfter: number;
  private readonly fetcher: typeof globalThis.fetch;
  private readonly api;

  constructor(baseUrl: string, token: string | null = null, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.timeout = options.timeout ?? 10;
    this.retries = options.retries ?? 4;
    this.backoff = options.backoff ?? 0.2;
    this.maxBackoff = options.maxBackoff ?? 5;
    this.maxRetryAfter = options.maxRetryAfter ?? 30;
    // Called as a function, not as this object's method (a browser's fetch insists).
    const given = options.fetch ?? globalThis.fetch;
    this.fetcher = (input, init) => given(input, init);
    this.api = createClient<paths>({ baseUrl: this.baseUrl });
  }

  /**
   * A new player named `name` (`botAccount`: an author's program, shown as such to the
   * other seats, which belongs to the person whose `ownerToken` registers it); the client
   * carries its `token` and `playerId`.
   */
  static async register(
    baseUrl: string,
    name: string,
    options: ClientOptions & { botAccount?: boolean; ownerToken?: string } = {},
  ): Promise<Client> {
    const owner = options.botAccount ? (options.ownerToken ?? null) : null;
    const client = new Client(baseUrl, owner, options);
    const body = options.botAccount ? { name, bot_account: true } : { name };
    const created = await client.ask(
      client.api.POST("/v1/players", { body, fetch: client.sending("unsent") }),
    );
    client.token = created.token;
    client.playerId = created.player_id;
    return client;
  }

  // --- sending, retrying ---------------------------------------------------------------

  private delay(attempt: number, asked: number | null): number {
    if (asked !== null) return Math.min(asked, this.maxRetryAfter);
    // Jittered, so that clients dropped together do not come back together.
    const backoff = Math.min(this.maxBackoff, this.backoff * 2 ** attempt);
    return backoff * (0.5 + Math.random() / 2);
  }

  private headers(extra: Record<string, string> = {}): Headers {
    const headers = new Headers({ Accept: "application/json", ...extra });
    if (this.token !== null) headers.set("Authorization", `Bearer ${this.token}`);
    return headers;
  }

  /**
   * The `fetch` of one call: the token added, each attempt given `timeout` (plus
   * `extra`) seconds, and passing failures retried as `retry` allows. The request is
   * cloned per attempt, so the retries send the same headers (the Idempotency-Key) and body.
   */
  private sending(retry: Retry, extra = 0): (request: Request) => Promise<Response> {
    return async (request) => {
      const headers = this.headers();
      request.headers.forEach((value, name) => headers.set(name, value));
      for (let attempt = 0; ; attempt++) {
        const signal = AbortSignal.timeout((this.timeout + extra) * 1000);
        let response: Response;
        try {
          response = await this.fetcher(new Request(request.clone(), { headers, signal }));
        } catch (error) {
          if (attempt >= this.retries || (retry === "unsent" && !unsent(error))) {
            throw new TransportError(`${request.method} ${request.url} failed`, {
              cause: error,
            });
          }
          await sleep(this.delay(attempt, null));
          continue;
        }
        const status = response.status;
        if (
          response.ok ||
          attempt >= this.retries ||
          !TRANSIENT.has(status) ||
          (retry === "unsent" && status !== 429)
        ) {
          return response;
        }
        await response.body?.cancel();
        await sleep(this.delay(attempt, retryAfter(response)));
      }
    };
  }

  /** The answer's body, or its problem thrown. */
  private async ask<T>(
    call: Promise<{ data?: T; error?: unknown; response: Response }>,
  ): Promise<T> {
    const { data, error, response } = await call;
    if (!response.ok || data === undefined) {
      const text = typeof error === "string" ? error : JSON.stringify(error ?? "");
      throw problemOf(response.status, response.statusText, text);
    }
    return data;
  }

  /** A POST that makes something, with an Idempotency-Key kept over its retries. */
  private created() {
    return { headers: { "Idempotency-Key": newKey() }, fetch: this.sending("always") };
  }

  private get always() {
    return { fetch: this.sending("always") };
  }

  // --- the player ------------------------------------------------------------------------

  /** The caller: `player_id`, `name`, `bot_account`, `balance`. */
  async me(): Promise<Me> {
    const me = await this.ask(this.api.GET("/v1/me", this.always));
    this.playerId = me.player_id;
    return me;
  }

  async myMatches(options: { limit?: number; cursor?: string } = {}) {
    return this.ask(this.api.GET("/v1/me/matches", { params: { query: options }, ...this.always }));
  }

  async myTables() {
    return (await this.ask(this.api.GET("/v1/me/tables", this.always))).tables;
  }

  // --- the lobby -------------------------------------------------------------------------

  /**
   * A lobby ticket for a table of four with these settings (the server's defaults where
   * none is given). A player has one waiting ticket at a time: when it has one already
   * (or a retry finds the first attempt's), that ticket is the answer.
   */
  async quickMatch(options: TicketOptions = {}): Promise<TicketDocument> {
    try {
      return await this.ask(
        this.api.POST("/v1/lobby/tickets", { body: options, ...this.created() }),
      );
    } catch (error) {
      const waiting = error instanceof ProblemError ? error.body.ticket_id : undefined;
      if (!(error instanceof ProblemError) || error.code !== "ticket_waiting" || !waiting) {
        throw error;
      }
      return this.ticket(String(waiting));
    }
  }

  /** The caller's ticket: `status` waiting, seated (with `table_id`) or cancelled. */
  async ticket(ticketId: string): Promise<TicketDocument> {
    return this.ask(
      this.api.GET("/v1/lobby/tickets/{ticket_id}", {
        params: { path: { ticket_id: ticketId } },
        ...this.always,
      }),
    );
  }

  /** Cancel a waiting ticket (cancelling again changes nothing: retried safely). */
  async cancelTicket(ticketId: string): Promise<TicketDocument> {
    return this.ask(
      this.api.DELETE("/v1/lobby/tickets/{ticket_id}", {
        params: { path: { ticket_id: ticketId } },
        ...this.always,
      }),
    );
  }

  // --- tables ----------------------------------------------------------------------------

  /** A new table (the options of `POST /v1/tables`), the caller in seat 0. */
  async createTable(options: TableOptions = {}): Promise<TableDocument> {
    return this.ask(this.api.POST("/v1/tables", { body: options, ...this.created() }));
  }

  async table(tableId: string): Promise<TableDocument> {
    return this.ask(
      this.api.GET("/v1/tables/{table_id}", {
        params: { path: { table_id: tableId } },
        ...this.always,
      }),
    );
  }

  /**
   * Take a free seat at the table (`invite`: a private table's code), or find the caller
   * seated there already: either way the table is the answer, so a retry that meets
   * `already_seated` (its first attempt took the seat) is no failure.
   */
  async joinTable(tableId: string, invite?: string): Promise<TableDocument> {
    try {
      return await this.ask(
        this.api.POST("/v1/tables/{table_id}/seats", {
          params: { path: { table_id: tableId } },
          body: invite === undefined ? {} : { invite },
          ...this.created(),
        }),
      );
    } catch (error) {
      if (error instanceof ProblemError && error.code === "already_seated") {
        const table = await this.table(tableId);
        if (this.playerId === null) await this.me();
        if (table.seats.some((seat) => seat?.player === this.playerId)) return table;
      }
      throw error;
    }
  }

  /** Leave the table (during a hand the system plays the seat to the end). */
  async leaveTable(tableId: string): Promise<TableDocument> {
    return this.ask(
      this.api.POST("/v1/tables/{table_id}/leave", {
        params: { path: { table_id: tableId } },
        fetch: this.sending("unsent"),
      }),
    );
  }

  // --- matches ---------------------------------------------------------------------------

  /** A new match of one hand (the options of `POST /v1/matches`); nobody seated. */
  async createMatch(options: MatchOptions = {}) {
    return this.ask(this.api.POST("/v1/matches", { body: options, ...this.created() }));
  }

  /** Take a seat at a match (`bot`: fill it with a system bot); the caller's view. */
  async takeSeat(matchId: string, seat?: number, options: { bot?: boolean } = {}): Promise<View> {
    return this.ask(
      this.api.POST("/v1/matches/{match_id}/seats", {
        params: { path: { match_id: matchId } },
        body: { bot: options.bot ?? false, ...(seat === undefined ? {} : { seat }) },
        fetch: this.sending("unsent"),
      }),
    );
  }

  /** The caller's view: its hand, counts, the play to beat, whose turn, `actions`, `version`. */
  async match(matchId: string): Promise<View> {
    return this.ask(
      this.api.GET("/v1/matches/{match_id}", {
        params: { path: { match_id: matchId } },
        ...this.always,
      }),
    );
  }

  /** The caller's legal plays now, each with concrete `cards`, and `can_pass`. */
  async legal(matchId: string): Promise<Legal> {
    return this.ask(
      this.api.GET("/v1/matches/{match_id}/legal", {
        params: { path: { match_id: matchId } },
        ...this.always,
      }),
    );
  }

  /** The hand record (docs/hand-record.md), once the hand has ended. */
  async record(matchId: string): Promise<HandRecord> {
    return this.ask(
      this.api.GET("/v1/matches/{match_id}/record", {
        params: { path: { match_id: matchId } },
        ...this.always,
      }),
    );
  }

  /** Leave the hand: the system plays the seat to the end (the penalty stands). */
  async leaveMatch(matchId: string): Promise<CommandResult> {
    return this.ask(
      this.api.POST("/v1/matches/{match_id}/leave", {
        params: { path: { match_id: matchId } },
        fetch: this.sending("unsent"),
      }),
    );
  }

  /**
   * Act for the caller's seat (`body`: `action` and its `value` or `cards`); the answer has
   * the new `version`, the `events` and the caller's `view`.
   *
   * `expectedVersion`: refused (409 `version_conflict`) unless the match is at that
   * version. The request carries an Idempotency-Key (new for each call, or the one given:
   * a program that restarts may derive it from the match and the version it answers),
   * the same on every retry, so the command applies at most once.
   */
  async command(
    matchId: string,
    body: Command,
    options: { expectedVersion?: number; idempotencyKey?: string } = {},
  ): Promise<CommandResult> {
    const sent = (
      options.expectedVersion === undefined
        ? body
        : { ...body, expected_version: options.expectedVersion }
    ) as Schemas["CommandRequest"];
    return this.ask(
      this.api.POST("/v1/matches/{match_id}/commands", {
        params: { path: { match_id: matchId } },
        body: sent,
        headers: { "Idempotency-Key": options.idempotencyKey ?? newKey() },
        fetch: this.sending("always"),
      }),
    );
  }

  /** Bid 1, 2 or 3, or 0 to pass the bid. */
  bid(matchId: string, value: 0 | 1 | 2 | 3, expectedVersion?: number): Promise<CommandResult> {
    return this.command(matchId, { action: "bid", value }, { expectedVersion });
  }

  /** The landlord shows its hand (摊打) or not. */
  showHand(matchId: string, value: boolean, expectedVersion?: number): Promise<CommandResult> {
    return this.command(matchId, { action: "show_hand", value }, { expectedVersion });
  }

  /** 报到: `play`, `no_play` or `decline`. */
  report(
    matchId: string,
    value: "play" | "no_play" | "decline",
    expectedVersion?: number,
  ): Promise<CommandResult> {
    return this.command(matchId, { action: "report", value }, { expectedVersion });
  }

  /** Play these cards (codes such as `S3`, `BJ`). */
  play(matchId: string, cards: string[], expectedVersion?: number): Promise<CommandResult> {
    return this.command(matchId, { action: "play", cards }, { expectedVersion });
  }

  pass(matchId: string, expectedVersion?: number): Promise<CommandResult> {
    return this.command(matchId, { action: "pass" }, { expectedVersion });
  }

  /** Take the seat back from the system (after a `taken_over` item). */
  resume(matchId: string, expectedVersion?: number): Promise<CommandResult> {
    return this.command(matchId, { action: "resume" }, { expectedVersion });
  }

  // --- the player's own stream -----------------------------------------------------------

  /**
   * The items after `after` (none: from the first), waiting up to `wait` seconds (at most
   * 30) for the next when there is none yet: a long poll.
   */
  async events(after?: string | null, options: { wait?: number } = {}): Promise<Page> {
    const wait = options.wait ?? 0;
    const query = after ? { after, wait } : { wait };
    return this.ask(
      this.api.GET("/v1/me/events", { params: { query }, fetch: this.sending("always", wait) }),
    );
  }

  /**
   * The player's stream by long polls, for environments where a response cannot be read
   * as it comes: the items after `after`, in order, for as long as it is iterated (or
   * until `signal` aborts). The same items as {@link stream}, without `ready`.
   */
  async *poll(
    after?: string | null,
    options: { wait?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<Item> {
    let last = after ?? null;
    while (!options.signal?.aborted) {
      const page = await this.events(last, { wait: options.wait ?? 25 });
      last = page.last_id ?? last;
      yield* page.items;
    }
  }

  /**
   * The player's own stream (Server-Sent Events of `/v1/me/stream`), for as long as it is
   * iterated (or until `signal` aborts).
   *
   * Without `after` the first item is `ready`, whose id marks the present: what the
   * player does from then on (a ticket, a seat) comes after it. Then the items after
   * `after` or `ready`, in order. The service closes a stream now and then and
   * connections drop: the stream reconnects, resuming after the last id it gave
   * (`Last-Event-ID`), so nothing is missed or repeated; failures are retried with backoff
   * for as long as it is iterated. A connection silent for `idleTimeout` seconds (the
   * service sends keep-alives) is taken as dropped. Refusals (401, 403, 400) throw.
   */
  async *stream(after?: string | null, options: FollowOptions = {}): AsyncGenerator<StreamItem> {
    for await (const message of this.follow("/v1/me/stream", after ?? null, options)) {
      yield message.event === "ready"
        ? { type: "ready", id: message.id ?? "" }
        : (JSON.parse(message.data) as Item);
    }
  }

  /**
   * A match as the caller may see it, as it happens (Server-Sent Events of
   * `/v1/matches/{id}/stream`): first a `snapshot` of the caller's view (unless resumed
   * `after` a version), then each event. It ends after the match's last event,
   * `settled`; it reconnects as {@link stream} does.
   */
  async *watch(
    matchId: string,
    after?: number | null,
    options: FollowOptions = {},
  ): AsyncGenerator<MatchMessage> {
    const path = `/v1/matches/${encodeURIComponent(matchId)}/stream`;
    const from = after === undefined || after === null ? null : String(after);
    for await (const message of this.follow(path, from, options)) {
      yield message.event === "snapshot"
        ? { type: "snapshot", view: JSON.parse(message.data) as View }
        : (JSON.parse(message.data) as EventDocument);
    }
  }

  /** The messages of an event stream at `path` after the id `after`, reconnecting. */
  private async *follow(
    path: string,
    after: string | null,
    options: FollowOptions,
  ): AsyncGenerator<EventSourceMessage> {
    let last = after;
    let failures = 0;
    const { signal } = options;
    while (!signal?.aborted) {
      let asked: number | null = null;
      const headers = this.headers({ Accept: "text/event-stream" });
      if (last !== null) headers.set("Last-Event-ID", last);
      const connection = new AbortController();
      const abort = () => connection.abort();
      signal?.addEventListener("abort", abort);
      try {
        const response = await this.fetcher(this.baseUrl + path, {
          headers,
          signal: connection.signal,
        });
        if (response.status === 204) return; // nothing more will come
        if (response.status !== 200 || response.body === null) {
          const text = await response.text();
          if (!TRANSIENT.has(response.status)) {
            throw problemOf(response.status, response.statusText, text);
          }
          asked = retryAfter(response);
        } else {
          const opened = Date.now();
          const idle = options.idleTimeout ?? 45;
          for await (const message of messages(response.body, idle, connection)) {
            if (!message.id || !message.data) continue; // the server's reconnection advice
            last = message.id;
            failures = 0;
            yield message;
          }
          // Closed by the service: after a while (its stream_seconds), resume at once;
          // closed as soon as opened (a process that is stopping), back off.
          if ((Date.now() - opened) / 1000 >= QUICK_CLOSE_SECONDS) {
            failures = 0;
            continue;
          }
        }
      } catch (error) {
        if (error instanceof ProblemError) throw error;
        // A dropped or silent connection: reconnect.
      } finally {
        signal?.removeEventListener("abort", abort);
        connection.abort();
      }
      await sleep(this.delay(failures, asked), signal);
      failures += 1;
    }
  }
}

/**
 * The messages of an event stream's body, as they come; the connection is aborted when
 * nothing comes for `idle` seconds.
 */
async function* messages(
  body: ReadableStream<Uint8Array>,
  idle: number,
  connection: AbortController,
): AsyncGenerator<EventSourceMessage> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => queue.push(message) });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let timer = setTimeout(() => connection.abort(), idle * 1000);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      clearTimeout(timer);
      if (done) return;
      timer = setTimeout(() => connection.abort(), idle * 1000);
      parser.feed(decoder.decode(value, { stream: true }));
      yield* queue.splice(0);
    }
  } finally {
    clearTimeout(timer);
    reader.releaseLock();
  }
}
