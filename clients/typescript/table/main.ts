/**
 * The reference web table (`/play/` of the service): sign up with a name, take a quick
 * match or open a private table with an invite link, and play, on a phone or a desktop,
 * in Chinese or English. Built on the TypeScript client; bundled by esbuild into
 * service/web/static/play/play.js.
 *
 * What the table shows is the service's: the caller's view of the match (re-read when the
 * match's stream says something happened), the table's document, the player's own stream.
 * A command is kept in the browser's storage until its answer comes, with its
 * Idempotency-Key: a page reloaded (or a connection lost) before the answer sends it
 * again with the same key, so a decision is neither lost nor made twice.
 */

import {
  Client,
  type Command,
  newKey,
  ProblemError,
  type Schemas,
  type StreamItem,
  type TableDocument,
  type TicketDocument,
  TransportError,
  type View,
} from "../src/index.js";
import { indicesOf, isRed, legalPlay, rank, roundTurns } from "./cards.js";
import { cardName, type Lang, rankLabel, say, type Word } from "./i18n.js";

type Legal = Schemas["Legal"];

interface Saved {
  token: string;
  playerId: string;
  name: string;
}

interface Pending {
  matchId: string;
  body: Command;
  expectedVersion: number;
  key: string;
}

const PLAYER_KEY = "ddz.player";
const PENDING_KEY = "ddz.pending";
const LANG_KEY = "ddz.lang";
/** How often the table is read again while it waits (for players, or the next deal). */
const TABLE_POLL_MS = 2000;

function load<T>(key: string): T | null {
  try {
    const text = localStorage.getItem(key);
    return text === null ? null : (JSON.parse(text) as T);
  } catch {
    return null;
  }
}

function store(key: string, value: unknown): void {
  if (value === null) localStorage.removeItem(key);
  else localStorage.setItem(key, JSON.stringify(value));
}

type Child = Node | string | null | undefined | false;

/** An element with attributes (`on…` are listeners) and children. */
function h(
  tag: string,
  attributes: Record<string, unknown> = {},
  ...children: Child[]
): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value as EventListener);
    } else if (name === "class") {
      element.className = String(value);
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) element.append(child);
  }
  return element;
}

class Table {
  lang: Lang;
  client: Client | null = null;
  saved: Saved | null = load<Saved>(PLAYER_KEY);
  screen: "signup" | "lobby" | "waiting" | "table" = "signup";
  ticket: TicketDocument | null = null;
  table: TableDocument | null = null;
  view: View | null = null;
  legal: Legal | null = null;
  selected = new Set<number>();
  hint = -1;
  /** The last ended hand's view, shown until dismissed or the next decision comes. */
  ended: View | null = null;
  dismissed: string | null = null;
  message = "";
  lost = false;
  busy = false;
  watching: { matchId: string; stop: AbortController } | null = null;
  refreshing: Promise<void> | null = null;
  again = false;
  poller: number | null = null;
  readonly root: HTMLElement;

  constructor(root: HTMLElement) {
    this.root = root;
    const asked = new URLSearchParams(location.search).get("lang");
    const kept = load<Lang>(LANG_KEY);
    this.lang =
      asked === "zh" || asked === "en"
        ? asked
        : (kept ?? (navigator.language.toLowerCase().startsWith("zh") ? "zh" : "en"));
    setInterval(() => this.tick(), 500);
  }

  t(word: Word, values?: Record<string, string | number>): string {
    return say(this.lang, word, values);
  }

  // --- starting ------------------------------------------------------------------------

  async start(): Promise<void> {
    if (this.saved === null) {
      this.screen = "signup";
      this.render();
      return;
    }
    this.client = new Client(location.origin, this.saved.token);
    this.client.playerId = this.saved.playerId;
    this.follow(this.client);
  }

  async signUp(name: string): Promise<void> {
    try {
      const client = await Client.register(location.origin, name);
      this.saved = { token: client.token ?? "", playerId: client.playerId ?? "", name };
      store(PLAYER_KEY, this.saved);
      this.client = client;
      this.follow(client);
    } catch (error) {
      this.fail(error);
    }
  }

  /** The player's own stream: once it is open, what the player is at; then each item. */
  async follow(client: Client): Promise<void> {
    try {
      for await (const item of client.stream()) {
        this.lost = false;
        await this.on(item);
      }
    } catch (error) {
      if (error instanceof ProblemError && error.status === 401) {
        // The token is no more (another browser's data, a server reset): start over.
        store(PLAYER_KEY, null);
        this.saved = null;
        this.screen = "signup";
        this.render();
        return;
      }
      this.fail(error);
    }
  }

  async on(item: StreamItem): Promise<void> {
    switch (item.type) {
      case "ready":
        return this.resumeWhereWeWere();
      case "seated":
        this.ticket = null;
        return this.openTable(item.table_id);
      case "hand_started":
      case "settled":
      case "leaving":
        return this.readTable();
      case "your_turn":
        if (this.ended !== null && this.ended.match_id !== item.match_id) this.dismiss();
        return this.refresh();
      case "taken_over":
      case "hand_ended":
        return this.refresh();
      case "left":
      case "table_closed":
        this.leaveScreen(item.type === "left" ? "left" : "closed");
        return;
    }
  }

  /** After a reload: the table the player sits at (and its hand), or a waiting ticket. */
  async resumeWhereWeWere(): Promise<void> {
    const client = this.client;
    if (client === null) return;
    try {
      const tables = await client.myTables();
      const params = new URLSearchParams(location.search);
      const invited = params.get("table");
      if (tables[0] !== undefined) {
        await this.openTable(tables[0].table_id);
      } else if (invited !== null) {
        const table = await client.joinTable(invited, params.get("invite") ?? undefined);
        history.replaceState(null, "", location.pathname);
        await this.openTable(table.table_id);
      } else {
        this.screen = this.ticket === null ? "lobby" : "waiting";
        this.render();
      }
    } catch (error) {
      this.fail(error);
    }
  }

  // --- the lobby -----------------------------------------------------------------------

  async quickMatch(unit: string): Promise<void> {
    try {
      const ticket = await this.client!.quickMatch({ unit, allow_bots: true });
      // The stream may have seated the player before this answer came.
      if (this.screen === "table" || ticket.status !== "waiting") return;
      this.ticket = ticket;
      this.screen = "waiting";
      this.render();
    } catch (error) {
      this.fail(error);
    }
  }

  async cancelTicket(): Promise<void> {
    if (this.ticket === null) return;
    try {
      await this.client!.cancelTicket(this.ticket.ticket_id);
      this.ticket = null;
      this.screen = "lobby";
      this.render();
    } catch (error) {
      this.fail(error);
    }
  }

  async createPrivate(unit: string, botsAfter: number | null): Promise<void> {
    try {
      const table = await this.client!.createTable({ unit, private: true, bots_after: botsAfter });
      await this.openTable(table.table_id);
    } catch (error) {
      this.fail(error);
    }
  }

  // --- the table -----------------------------------------------------------------------

  async openTable(tableId: string): Promise<void> {
    this.table = await this.client!.table(tableId);
    this.screen = "table";
    await this.afterTable();
  }

  async readTable(): Promise<void> {
    if (this.table === null) return this.resumeWhereWeWere();
    try {
      this.table = await this.client!.table(this.table.table_id);
      await this.afterTable();
    } catch (error) {
      this.fail(error);
    }
  }

  /** The table read: its hand followed; read again every while it waits. */
  async afterTable(): Promise<void> {
    const table = this.table;
    if (table === null) return;
    if (table.match_id && this.watching?.matchId !== table.match_id) {
      this.watch(table.match_id);
    }
    const waits = !table.match_id && !table.closed;
    if (waits && this.poller === null) {
      this.poller = window.setInterval(() => void this.readTable(), TABLE_POLL_MS);
    } else if (!waits && this.poller !== null) {
      clearInterval(this.poller);
      this.poller = null;
    }
    this.render();
  }

  /** The match as it happens: its view read again after each of its events. */
  async watch(matchId: string): Promise<void> {
    this.watching?.stop.abort();
    const stop = new AbortController();
    this.watching = { matchId, stop };
    this.selected.clear();
    try {
      for await (const message of this.client!.watch(matchId, null, { signal: stop.signal })) {
        this.lost = false;
        if (message.type === "snapshot") {
          await this.show(message.view);
          await this.sendPending();
        } else {
          await this.refresh();
        }
      }
    } catch (error) {
      this.fail(error);
    }
  }

  /** Reads the view again (one read at a time; a read asked meanwhile follows it). */
  async refresh(): Promise<void> {
    const matchId = this.watching?.matchId;
    if (matchId === undefined) return;
    if (this.refreshing !== null) {
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.again = false;
        try {
          await this.show(await this.client!.match(matchId));
        } catch (error) {
          this.fail(error);
        }
      } while (this.again);
    })();
    try {
      await this.refreshing;
    } finally {
      this.refreshing = null;
    }
  }

  async show(view: View): Promise<void> {
    if (this.view?.match_id !== view.match_id || this.view.version !== view.version) {
      this.hint = -1;
    }
    if (this.view?.match_id !== view.match_id) this.selected.clear();
    this.view = view;
    if (view.phase === "ended" && view.result !== null && this.dismissed !== view.match_id) {
      this.ended = view;
    }
    const plays = view.actions.some((a) => a.action === "play");
    if (plays && this.legal?.version !== view.version) {
      try {
        this.legal = await this.client!.legal(view.match_id);
      } catch (error) {
        this.fail(error);
      }
    } else if (!plays) {
      this.legal = null;
    }
    this.render();
  }

  dismiss(): void {
    this.dismissed = this.ended?.match_id ?? null;
    this.ended = null;
    this.render();
  }

  async leaveTable(): Promise<void> {
    if (this.table === null) return;
    try {
      const table = await this.client!.leaveTable(this.table.table_id);
      this.table = table;
      const mine = table.seats.find((s) => s?.player === this.saved?.playerId);
      if (mine === undefined) this.leaveScreen("left");
      else {
        this.message = this.t("leaveDuringHand");
        this.render();
      }
    } catch (error) {
      this.fail(error);
    }
  }

  leaveScreen(why: "left" | "closed"): void {
    this.watching?.stop.abort();
    this.watching = null;
    if (this.poller !== null) clearInterval(this.poller);
    this.poller = null;
    this.table = null;
    this.view = null;
    this.legal = null;
    this.screen = "lobby";
    this.message = this.t(why);
    this.render();
  }

  // --- deciding ------------------------------------------------------------------------

  /** Sends a decision, kept in storage with its key until its answer comes. */
  async act(body: Command): Promise<void> {
    const view = this.view;
    if (view === null || this.busy) return;
    const pending: Pending = {
      matchId: view.match_id,
      body,
      expectedVersion: view.version,
      key: newKey(),
    };
    store(PENDING_KEY, pending);
    await this.send(pending);
  }

  /** A decision sent before the page was reloaded (or the connection lost), sent again
   * with its key: applied once whether or not the first attempt reached the service. */
  async sendPending(): Promise<void> {
    const pending = load<Pending>(PENDING_KEY);
    if (pending === null || this.busy) return;
    if (pending.matchId === this.view?.match_id) await this.send(pending);
    else store(PENDING_KEY, null); // a hand that is over: nothing to decide in it
  }

  async send(pending: Pending): Promise<void> {
    this.busy = true;
    this.render();
    try {
      const answer = await this.client!.command(pending.matchId, pending.body, {
        expectedVersion: pending.expectedVersion,
        idempotencyKey: pending.key,
      });
      store(PENDING_KEY, null);
      this.selected.clear();
      this.busy = false;
      this.message = "";
      await this.show(answer.view);
    } catch (error) {
      this.busy = false;
      if (error instanceof ProblemError) {
        // Refused (the match moved on, say): nothing to send again.
        store(PENDING_KEY, null);
        await this.refresh();
      }
      this.fail(error);
    }
  }

  playSelected(): void {
    const view = this.view;
    if (view === null || this.legal === null) return;
    const cards = [...this.selected].sort((a, b) => a - b).map((i) => view.hand[i] ?? "");
    const play = legalPlay(this.legal.plays, cards);
    if (play === undefined) {
      this.message = this.t("notLegal");
      this.render();
      return;
    }
    void this.act({ action: "play", cards });
  }

  nextHint(): void {
    const plays = this.legal?.plays ?? [];
    const view = this.view;
    if (!plays.length || view === null) return;
    this.hint = (this.hint + 1) % plays.length;
    this.selected = new Set(indicesOf(view.hand, plays[this.hint]?.cards ?? []));
    this.render();
  }

  toggle(index: number): void {
    if (this.selected.has(index)) this.selected.delete(index);
    else this.selected.add(index);
    this.message = "";
    this.render();
    (this.root.querySelector(`[data-card="${index}"]`) as HTMLElement | null)?.focus();
  }

  fail(error: unknown): void {
    if (error instanceof ProblemError) {
      this.message = `${this.t("refused")} ${error.detail} (${error.code})`;
    } else if (error instanceof TransportError || error instanceof TypeError) {
      this.lost = true;
    } else {
      this.message = String(error);
    }
    this.render();
  }

  setLang(lang: Lang): void {
    this.lang = lang;
    store(LANG_KEY, lang);
    this.render();
  }

  /** The countdowns, each second. */
  tick(): void {
    for (const element of this.root.querySelectorAll<HTMLElement>("[data-deadline]")) {
      const left = Math.max(
        0,
        Math.ceil((Date.parse(element.dataset.deadline ?? "") - Date.now()) / 1000),
      );
      element.textContent = `${left}${this.t("secondsLeft")}`;
    }
  }

  // --- drawing -------------------------------------------------------------------------

  render(): void {
    document.documentElement.lang = this.lang === "zh" ? "zh-CN" : "en";
    document.title = this.t("title");
    const focused = document.activeElement?.getAttribute("data-focus") ?? null;
    const body =
      this.screen === "signup"
        ? this.signupScreen()
        : this.screen === "lobby"
          ? this.lobbyScreen()
          : this.screen === "waiting"
            ? this.waitingScreen()
            : this.tableScreen();
    this.root.replaceChildren(this.header(), this.notices(), body);
    if (focused !== null) {
      (this.root.querySelector(`[data-focus="${focused}"]`) as HTMLElement | null)?.focus();
    }
    this.tick();
  }

  header(): HTMLElement {
    const other: Lang = this.lang === "zh" ? "en" : "zh";
    return h(
      "header",
      { class: "top" },
      h("h1", {}, this.t("title")),
      this.saved &&
        h("span", { class: "who", id: "who" }, `${this.t("signedInAs")} ${this.saved.name}`),
      h(
        "button",
        {
          id: "lang",
          "data-focus": "lang",
          lang: other === "zh" ? "zh-CN" : "en",
          "aria-label": this.t("languageLabel"),
          onclick: () => this.setLang(other),
        },
        this.t("language"),
      ),
    );
  }

  notices(): HTMLElement {
    return h(
      "div",
      { class: "notices", role: "status", "aria-live": "polite", id: "notice" },
      this.lost && h("p", { class: "lost", id: "lost" }, this.t("connectionLost")),
      this.message && h("p", { class: "message", id: "message" }, this.message),
    );
  }

  signupScreen(): HTMLElement {
    const input = h("input", {
      id: "name",
      name: "name",
      required: true,
      maxlength: 64,
      autocomplete: "nickname",
      "data-focus": "name",
    }) as HTMLInputElement;
    return h(
      "main",
      { class: "panel" },
      h(
        "form",
        {
          id: "signup",
          onsubmit: (event: Event) => {
            event.preventDefault();
            const name = input.value.trim();
            if (name) void this.signUp(name);
          },
        },
        h("label", { for: "name" }, this.t("yourName")),
        input,
        h("button", { type: "submit", id: "start", class: "primary" }, this.t("signUp")),
      ),
    );
  }

  unitPicker(): HTMLSelectElement {
    const select = h(
      "select",
      { id: "unit", "data-focus": "unit" },
      ...["1.00", "2.00", "5.00"].map((unit) => h("option", { value: unit }, unit)),
    ) as HTMLSelectElement;
    return select;
  }

  lobbyScreen(): HTMLElement {
    const unit = this.unitPicker();
    const bots = h(
      "select",
      { id: "bots", "data-focus": "bots" },
      ...[10, 30, 120].map((s) =>
        h("option", { value: s, selected: s === 30 }, this.t("afterSeconds", { n: s })),
      ),
      h("option", { value: "" }, this.t("never")),
    ) as HTMLSelectElement;
    return h(
      "main",
      { class: "panel lobby" },
      h("p", {}, h("label", { for: "unit" }, this.t("unit")), " ", unit),
      h(
        "section",
        {},
        h(
          "button",
          { id: "quick", class: "primary", onclick: () => void this.quickMatch(unit.value) },
          this.t("quickMatch"),
        ),
        h("p", {}, this.t("quickMatchSaid")),
      ),
      h(
        "section",
        {},
        h(
          "button",
          {
            id: "private",
            onclick: () =>
              void this.createPrivate(unit.value, bots.value ? Number(bots.value) : null),
          },
          this.t("privateTable"),
        ),
        h("p", {}, this.t("privateTableSaid")),
        h("p", {}, h("label", { for: "bots" }, this.t("botsFill")), " ", bots),
      ),
      h(
        "button",
        {
          id: "forget",
          class: "quiet",
          onclick: () => {
            store(PLAYER_KEY, null);
            location.reload();
          },
        },
        this.t("newPlayer"),
      ),
    );
  }

  waitingScreen(): HTMLElement {
    return h(
      "main",
      { class: "panel" },
      h("p", { id: "finding", class: "finding" }, this.t("waitingForTable")),
      h("button", { id: "cancel", onclick: () => void this.cancelTicket() }, this.t("cancel")),
    );
  }

  seatName(seat: number): string {
    const info = this.table?.seats[seat];
    if (info === null || info === undefined) return this.t("empty");
    if (info.player === this.saved?.playerId) return `${this.t("you")} (${info.name ?? ""})`;
    if (info.bot) return `${this.t("bot")} ${seat + 1}`;
    return info.name ?? "?";
  }

  mySeat(): number {
    const seat =
      this.view?.seat ?? this.table?.seats.findIndex((s) => s?.player === this.saved?.playerId);
    return seat === undefined || seat === null || seat < 0 ? 0 : seat;
  }

  tableScreen(): HTMLElement {
    const table = this.table;
    const view = this.view;
    const me = this.mySeat();
    // The felt shows the hand under way, or the last one until the next is dealt.
    const shown = view !== null && (view.match_id === table?.match_id || !table?.match_id);
    const playing = shown && view.phase !== "ended";
    const places = ["bottom", "right", "top", "left"];
    const seats = [0, 1, 2, 3].map((offset) =>
      this.seatBox((me + offset) % 4, places[offset] ?? "", shown),
    );
    return h(
      "main",
      { class: "table", id: "table" },
      h(
        "div",
        { class: "tablebar" },
        table &&
          h(
            "span",
            { id: "hand-number" },
            this.t("hand", { n: (table.hands ?? 0) + (table.match_id ? 1 : 0) }),
          ),
        table?.invite && this.inviteBox(table),
        h(
          "button",
          { id: "leave", class: "quiet", onclick: () => void this.leaveTable() },
          this.t("leaveTable"),
        ),
      ),
      h("div", { class: "felt" }, ...seats, this.centre(shown), shown && this.shownCards(view)),
      playing ? this.controls(view) : this.between(),
      playing && this.handBox(view),
      this.ended && this.settlement(this.ended),
      this.scoreboard(),
    );
  }

  inviteBox(table: TableDocument): HTMLElement {
    const link = `${location.origin}/play/?table=${table.table_id}&invite=${encodeURIComponent(table.invite ?? "")}`;
    return h(
      "p",
      { class: "invite" },
      h("label", { for: "invite-link" }, this.t("inviteSaid")),
      h("input", { id: "invite-link", readonly: true, value: link, "data-focus": "invite-link" }),
    );
  }

  seatBox(seat: number, place: string, shown: boolean): HTMLElement {
    const view = shown ? this.view : null;
    const info = view?.seats[seat] ?? null;
    const acting = view !== null && view.turn === seat && view.deadline !== null;
    const turn = view !== null ? roundTurns(view.history).get(seat) : undefined;
    const landlord = view?.landlord === seat;
    const bid = view?.bids[seat];
    const name = this.seatName(seat);
    const label = [
      name,
      landlord ? this.t("landlord") : "",
      info ? `${info.cards} ${this.t("cards")}` : "",
    ]
      .filter(Boolean)
      .join(", ");
    return h(
      "section",
      {
        class: `seat ${place}${acting ? " acting" : ""}${landlord ? " landlord" : ""}`,
        id: `seat-${seat}`,
        "aria-label": label,
        "data-seat": seat,
      },
      h("div", { class: "name" }, name),
      h(
        "div",
        { class: "facts" },
        landlord && h("span", { class: "badge role" }, this.t("landlord")),
        info && h("span", { class: "count" }, `${info.cards} ${this.t("cards")}`),
        info &&
          view?.landlord !== null &&
          h(
            "span",
            { class: "bombs" },
            `${this.t("bombsLeft")} ${info.bombs_left === null ? this.t("noLimit") : info.bombs_left}`,
          ),
        view?.marked_seat === seat &&
          view.marked_card &&
          h(
            "span",
            { class: "badge marked", title: this.t("markedCard") },
            `${this.t("markedCard")} `,
            this.card(view.marked_card, "mini"),
          ),
        view !== null && (bid ?? null) !== null
          ? h(
              "span",
              { class: "bid" },
              bid === 0 ? this.t("bidPass") : this.t("bidValue", { n: bid ?? 0 }),
            )
          : view?.phase === "bidding" && h("span", { class: "bid" }, this.t("noBidYet")),
        acting &&
          h("span", {
            class: "clock",
            "data-deadline": view?.deadline ?? "",
            "aria-label": this.t("toAct"),
          }),
      ),
      info?.disconnected && h("div", { class: "badge system" }, this.t("systemPlays")),
      turn &&
        h(
          "div",
          { class: "played", "data-played": seat },
          turn.action === "pass"
            ? h("span", { class: "pass" }, this.t("passed"))
            : h("span", { class: "cards" }, ...turn.cards.map((c) => this.card(c, "small"))),
        ),
    );
  }

  /** What the landlord showed every seat: its hand after 摊打, its units after 报到. */
  shownCards(view: View): HTMLElement | null {
    const landlord = view.landlord;
    if (landlord === null || landlord === view.seat) return null;
    const rows: [Word, string[]][] = [
      ["shownHand", view.landlord_hand ?? []],
      ["reported", view.reported_cards],
    ];
    const shown = rows.filter(([, cards]) => cards.length > 0);
    if (!shown.length) return null;
    return h(
      "section",
      { class: "shown", id: "shown" },
      ...shown.map(([word, cards]) =>
        h(
          "div",
          { class: "row", "aria-label": `${this.seatName(landlord)}: ${this.t(word)}` },
          h("span", { class: "what" }, `${this.seatName(landlord)} · ${this.t(word)}`),
          h("span", { class: "cards" }, ...cards.map((c) => this.card(c, "mini"))),
        ),
      ),
    );
  }

  centre(shown: boolean): HTMLElement {
    const view = shown ? this.view : null;
    return h(
      "section",
      { class: "centre", "aria-label": this.t("title") },
      view?.bottom &&
        h(
          "div",
          { class: "bottom" },
          `${this.t("bottom")}: `,
          ...view.bottom.map((c) => this.card(c, "mini")),
        ),
      view && view.bid !== null && h("div", { class: "stake" }, `${this.t("bid")} ${view.bid}`),
    );
  }

  between(): HTMLElement {
    const table = this.table;
    return h(
      "div",
      { class: "controls" },
      h(
        "p",
        { id: "between" },
        table?.waiting?.what === "deal" ? this.t("nextHandAt") : this.t("waitingPlayers"),
      ),
    );
  }

  controls(view: View): HTMLElement {
    const offered = new Map(view.actions.map((a) => [a.action, a]));
    const busy = this.busy;
    const buttons: HTMLElement[] = [];
    const bid = view.actions.find((a) => a.action === "bid");
    if (bid) {
      for (const n of bid.choices) {
        buttons.push(
          h(
            "button",
            {
              class: n === 0 ? "" : "primary",
              "data-bid": n,
              disabled: busy,
              onclick: () => void this.act({ action: "bid", value: n }),
            },
            n === 0 ? this.t("bidPass") : this.t("bidValue", { n }),
          ),
        );
      }
    }
    const show = view.actions.find((a) => a.action === "show_hand");
    if (show) {
      buttons.push(h("p", { class: "question" }, this.t("showHandQuestion")));
      for (const value of show.choices) {
        buttons.push(
          h(
            "button",
            {
              "data-show-hand": String(value),
              class: value ? "primary" : "",
              disabled: busy,
              onclick: () => void this.act({ action: "show_hand", value }),
            },
            value ? this.t("showHandYes") : this.t("showHandNo"),
          ),
        );
      }
    }
    const report = view.actions.find((a) => a.action === "report");
    if (report) {
      buttons.push(h("p", { class: "question" }, this.t("reportQuestion")));
      const said: Record<string, Word> = {
        play: "reportPlay",
        no_play: "reportNoPlay",
        decline: "reportDecline",
      };
      for (const choice of report.choices) {
        buttons.push(
          h(
            "button",
            {
              "data-report": choice,
              disabled: busy,
              onclick: () => void this.act({ action: "report", value: choice }),
            },
            this.t(said[choice] ?? "reportDecline"),
          ),
        );
      }
    }
    if (offered.has("play")) {
      const cards = [...this.selected].map((i) => view.hand[i] ?? "");
      const legal = this.legal !== null && legalPlay(this.legal.plays, cards) !== undefined;
      buttons.push(
        h(
          "button",
          {
            id: "play",
            class: "primary",
            disabled: busy || !legal,
            "aria-keyshortcuts": "Enter",
            onclick: () => this.playSelected(),
          },
          this.t("play"),
        ),
      );
      buttons.push(
        h("button", { id: "hint", disabled: busy, onclick: () => this.nextHint() }, this.t("hint")),
      );
    } else if (offered.has("pass")) {
      buttons.push(h("p", { class: "question" }, this.t("canOnlyPass")));
    }
    if (offered.has("pass")) {
      buttons.push(
        h(
          "button",
          { id: "pass", disabled: busy, onclick: () => void this.act({ action: "pass" }) },
          this.t("pass"),
        ),
      );
    }
    if (offered.has("resume")) {
      buttons.push(
        h(
          "button",
          {
            id: "resume",
            class: "primary",
            disabled: busy,
            onclick: () => void this.act({ action: "resume" }),
          },
          this.t("takeBack"),
        ),
      );
    }
    const mine = view.turn === view.seat && view.actions.length > 0;
    return h(
      "div",
      {
        class: `controls${mine ? " mine" : ""}`,
        id: "controls",
        "data-version": view.version,
        role: "group",
        "aria-label": mine ? this.t("yourTurn") : this.t("waitingForOthers"),
      },
      h(
        "p",
        { class: "whose" },
        mine
          ? this.t("yourTurn")
          : view.phase === "bidding"
            ? this.t("bidding")
            : this.t("waitingForOthers"),
      ),
      ...buttons,
    );
  }

  handBox(view: View): HTMLElement {
    const playable = new Set((this.legal?.plays ?? []).flatMap((p) => p.cards.map(rank)));
    const cards = view.hand.map((code, i) => {
      const selected = this.selected.has(i);
      return h(
        "button",
        {
          class: `card${isRed(code) ? " red" : ""}${selected ? " selected" : ""}${this.legal && !playable.has(rank(code)) ? " dim" : ""}`,
          "data-card": i,
          "data-code": code,
          "data-focus": `card-${i}`,
          "aria-pressed": selected ? "true" : "false",
          "aria-label": cardName(this.lang, code),
          tabindex: i === 0 ? 0 : -1,
          onclick: () => this.toggle(i),
          onkeydown: (event: KeyboardEvent) => this.cardKey(event, i, view.hand.length),
        },
        ...this.face(code),
      );
    });
    return h(
      "section",
      {
        class: "hand",
        id: "hand",
        role: "toolbar",
        "aria-label": `${this.t("yourHand")}: ${view.hand.length} ${this.t("cards")}, ${this.selected.size} ${this.t("selected")}`,
      },
      ...cards,
    );
  }

  cardKey(event: KeyboardEvent, index: number, count: number): void {
    const moves: Record<string, number> = {
      ArrowRight: 1,
      ArrowLeft: -1,
      Home: -index,
      End: count - 1 - index,
    };
    if (event.key in moves) {
      event.preventDefault();
      const next = Math.min(count - 1, Math.max(0, index + (moves[event.key] ?? 0)));
      const target = this.root.querySelector<HTMLElement>(`[data-card="${next}"]`);
      if (target) {
        for (const card of this.root.querySelectorAll<HTMLElement>("[data-card]"))
          card.tabIndex = -1;
        target.tabIndex = 0;
        target.focus();
      }
    } else if (event.key === "Enter") {
      event.preventDefault();
      this.playSelected();
    }
  }

  face(code: string): Node[] {
    if (code === "BJ" || code === "RJ") {
      return [
        h(
          "span",
          { class: "rank joker", "aria-hidden": "true" },
          this.lang === "zh" ? (code === "RJ" ? "大王" : "小王") : "JOKER",
        ),
      ];
    }
    const suit = { S: "♠", H: "♥", C: "♣", D: "♦" }[code[0] ?? "S"] ?? "";
    return [
      h("span", { class: "rank", "aria-hidden": "true" }, rankLabel(code[1] ?? "")),
      h("span", { class: "suit", "aria-hidden": "true" }, suit),
    ];
  }

  card(code: string, size: "mini" | "small"): HTMLElement {
    return h(
      "span",
      {
        class: `card ${size}${isRed(code) ? " red" : ""}`,
        role: "img",
        "aria-label": cardName(this.lang, code),
        "data-code": code,
      },
      ...this.face(code),
    );
  }

  settlement(view: View): HTMLElement {
    const result = view.result!;
    const factors = result.factors;
    const said: string[] = [];
    if (factors.marked_joker) said.push(this.t("factorMarkedJoker"));
    if (factors.first_bid_three) said.push(this.t("factorFirstBidThree"));
    if (factors.show_hand) said.push(this.t("factorShowHand"));
    if (factors.report === "play") said.push(this.t("factorReportPlay"));
    if (factors.report === "no_play")
      said.push(this.t("factorReportNoPlay", { n: factors.report_units }));
    if (factors.bombs)
      said.push(this.t("factorBombs", { n: factors.bombs, m: 2 ** factors.bombs }));
    const money = result.settlement;
    const cell = (values: string[], seat: number) => h("td", {}, values[seat] ?? "");
    const rows = [0, 1, 2, 3].map((seat) =>
      h(
        "tr",
        { class: seat === view.seat ? "me" : "" },
        h(
          "th",
          { scope: "row" },
          this.seatName(seat),
          " ",
          h("small", {}, seat === result.landlord ? this.t("landlord") : this.t("farmer")),
        ),
        h("td", { class: "net" }, money.net[seat] ?? ""),
        cell(money.gross, seat),
        cell(money.after_cap, seat),
        cell(money.rake, seat),
        cell(money.penalty, seat),
      ),
    );
    return h(
      "section",
      {
        class: "settlement",
        id: "settlement",
        role: "dialog",
        "aria-modal": "false",
        "aria-labelledby": "settlement-title",
      },
      h("h2", { id: "settlement-title" }, this.t("handEnded")),
      h(
        "p",
        { class: "winner", id: "winner" },
        result.winner === "landlord" ? this.t("landlordWins") : this.t("farmersWin"),
      ),
      h(
        "p",
        { id: "multiplier" },
        `${this.t("bid")} ${result.bid} · ${this.t("multiplier")} ×${result.multiplier}`,
        h("br"),
        said.length ? said.join(" · ") : this.t("noFactors"),
      ),
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          { id: "nets" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, this.t("player")),
              ...(["net", "gross", "afterCap", "cut", "penalty"] as Word[]).map((w) =>
                h("th", { scope: "col" }, this.t(w)),
              ),
            ),
          ),
          h("tbody", {}, ...rows),
        ),
      ),
      h("p", { id: "house" }, `${this.t("house")}: ${money.house}`),
      h(
        "div",
        { class: "buttons" },
        h(
          "button",
          {
            id: "next-hand",
            class: "primary",
            "data-focus": "next-hand",
            onclick: () => this.dismiss(),
          },
          this.t("nextHand"),
        ),
        h(
          "button",
          { id: "leave-after", onclick: () => void this.leaveTable() },
          this.t("leaveTable"),
        ),
      ),
    );
  }

  scoreboard(): HTMLElement | null {
    const board = this.table?.scoreboard ?? [];
    if (!board.length) return null;
    return h(
      "section",
      { class: "scoreboard", id: "scoreboard" },
      h("h2", {}, this.t("scoreboard")),
      h(
        "ul",
        {},
        ...board.map((score) => h("li", {}, `${score.name ?? this.t("bot")}: ${score.net}`)),
      ),
    );
  }
}

const root = document.getElementById("app");
if (root !== null) {
  const table = new Table(root);
  void table.start();
}
