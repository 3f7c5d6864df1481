/**
 * The reference web table (`/play/` of the service): sign up with a name, take a quick
 * match or open a private table with an invite link, and play, on a phone or a desktop,
 * in Chinese or English. Built on the TypeScript client; bundled by esbuild into
 * service/web/static/play/play.js.
 *
 * What the table shows is the service's current state: the caller's view of the match
 * (the snapshot its stream starts with, or a read), with the events that came since
 * folded in (fold.ts): the page reads the view again only when an event says more than it
 * can fold (a few times a hand, once per burst of events), and never draws a view older
 * than the one it has. A command is kept in the browser's storage until its answer comes,
 * with its Idempotency-Key: a page reloaded (or a connection lost) before the answer first
 * draws the match as it is now, then sends the decision again with the same key if the
 * seat may still make it, so a decision is neither lost nor made twice; the stored first
 * answer that comes back is older than what the page shows and changes nothing.
 */

import {
  Client,
  type Command,
  type EventDocument,
  newKey,
  ProblemError,
  type Schemas,
  type StreamItem,
  type TableDocument,
  type TicketDocument,
  TransportError,
  type View,
} from "../src/index.js";
import { CARD, handRows, indicesOf, isRed, legalPlay, rank, roundTurns } from "./cards.js";
import { fold } from "./fold.js";
import { cardName, type Lang, multiplierText, rankLabel, say, type Word } from "./i18n.js";

type Legal = Schemas["Legal"];
type YourTurn = Schemas["YourTurnItem"];
type Level = "easy" | "normal" | "hard";

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

/** A line above the screen: news (neutral) or a refusal, a failure (an error). */
interface Notice {
  text: string;
  kind: "info" | "error";
}

const PLAYER_KEY = "ddz.player";
const PENDING_KEY = "ddz.pending";
const LANG_KEY = "ddz.lang";
const LEVEL_KEY = "ddz.level";
/** How often the table is read again while it waits (for players, or the next deal). */
const TABLE_POLL_MS = 2000;
/** The events of one burst (the bots' moves, an append's several events) come this close
 * together: the view is read once they have stopped coming. */
const BURST_MS = 150;
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
  level: Level = load<Level>(LEVEL_KEY) ?? "normal";
  screen: "signup" | "connecting" | "lobby" | "waiting" | "table" = "signup";
  ticket: TicketDocument | null = null;
  table: TableDocument | null = null;
  /** The last view read (or answered, or the stream's snapshot). */
  view: View | null = null;
  /** The match's events that came after it, folded into what the page shows. */
  news: EventDocument[] = [];
  /** The player's last your_turn item: the actions offered, at its version. */
  offered: YourTurn | null = null;
  legal: Legal | null = null;
  legalAsked = "";
  selected = new Set<number>();
  hint = -1;
  /** The last ended hand's view, shown until dismissed or the next decision comes. */
  ended: View | null = null;
  dismissed: string | null = null;
  /** The match whose `settled` event came: its nets are the ledger's. */
  settled: string | null = null;
  fraction = false;
  notice: Notice | null = null;
  lost = false;
  busy = false;
  /** The version whose turn was announced (a tab in the background is told once). */
  announced = "";
  watching: { matchId: string; stop: AbortController } | null = null;
  refreshing: Promise<void> | null = null;
  again = false;
  reading: number | null = null;
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
    let framed = false;
    addEventListener("resize", () => {
      if (framed) return;
      framed = true;
      requestAnimationFrame(() => {
        framed = false;
        this.render();
      });
    });
    document.addEventListener("visibilitychange", () => {
      this.render();
      this.announce();
    });
    // The browser knows before any request fails that there is no network.
    this.lost = !navigator.onLine;
    addEventListener("offline", () => {
      this.lost = true;
      this.render();
    });
    addEventListener("online", () => {
      this.lost = false;
      this.render();
    });
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
    // Drawn at once (a page opened without a network says so), then where the player is.
    this.screen = "connecting";
    this.render();
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
        this.offered = item;
        return this.changed();
      case "taken_over":
      case "hand_ended":
        // The match's stream brings the events; a read follows if it does not.
        return this.wantView();
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
      const ticket = await this.client!.quickMatch({
        unit,
        allow_bots: true,
        bot_level: this.level,
      });
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
      const table = await this.client!.createTable({
        unit,
        private: true,
        bots_after: botsAfter,
        bot_level: this.level,
      });
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

  /** The match as it happens: its stream's snapshot (the view now), then its events. */
  async watch(matchId: string): Promise<void> {
    this.watching?.stop.abort();
    const stop = new AbortController();
    this.watching = { matchId, stop };
    this.selected.clear();
    try {
      for await (const message of this.client!.watch(matchId, null, { signal: stop.signal })) {
        this.lost = false;
        if (message.type === "snapshot") {
          this.show(message.view);
          await this.sendPending();
        } else if (message.type === "settled") {
          // The ledger holds the hand's settlement: the nets shown are its own.
          this.settled = matchId;
          this.render();
        } else if (this.view?.match_id === matchId && message.version > this.view.version) {
          this.news.push(message);
          this.changed();
        }
      }
      // The stream ends, unless stopped, once the match is settled (opened on a settled
      // match, after its snapshot).
      if (!stop.signal.aborted) {
        this.settled = matchId;
        this.render();
      }
    } catch (error) {
      this.fail(error);
    }
  }

  /** What the page shows of the match: the view with the events since folded in, and
   * the actions of the player's your_turn item when it is of that version. */
  current(): View | null {
    if (this.view === null) return null;
    const { view } = fold(this.view, this.news);
    const item = this.offered;
    if (item?.match_id === view.match_id && item.version === view.version) {
      return { ...view, actions: item.actions, deadline: item.deadline };
    }
    return view;
  }

  /** Whether the page knows less than the service said: an event it cannot fold, or a
   * turn of a version it has not reached. */
  behind(): boolean {
    if (this.view === null) return false;
    const { view, behind } = fold(this.view, this.news);
    const item = this.offered;
    return behind > 0 || (item?.match_id === view.match_id && item.version > view.version);
  }

  /** Something changed: drawn, the view read once the burst is over if the page is
   * behind, the legal plays read on the player's turn to play, the turn announced. */
  changed(): void {
    if (this.behind()) this.wantView();
    this.render();
    void this.readLegal();
    this.announce();
  }

  /** A read of the view once the events of this burst have come (none if the page has
   * caught up by then). */
  wantView(): void {
    if (this.reading !== null) return;
    this.reading = window.setTimeout(() => {
      this.reading = null;
      if (this.behind() || this.view === null) void this.refresh();
    }, BURST_MS);
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
          this.show(await this.client!.match(matchId));
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

  /** A view of the match: kept unless it is older than the one the page has (a replayed
   * answer, a read overtaken by an answer) or of another match than the one followed.
   * Whether it was kept (and the page drawn). */
  show(view: View): boolean {
    const had = this.view;
    if (this.watching !== null && view.match_id !== this.watching.matchId) return false;
    if (had?.match_id === view.match_id && view.version < had.version) return false;
    if (had?.match_id !== view.match_id) {
      this.selected.clear();
      this.news = [];
      this.fraction = false;
    }
    if (had?.match_id !== view.match_id || had.version !== view.version) this.hint = -1;
    this.view = view;
    this.news = this.news.filter((event) => event.version > view.version);
    if (view.phase === "ended" && view.result !== null && this.dismissed !== view.match_id) {
      this.ended = view;
    }
    this.changed();
    return true;
  }

  /** The legal plays, read once per turn to play. */
  async readLegal(): Promise<void> {
    const view = this.current();
    const plays = view?.actions.some((a) => a.action === "play") ?? false;
    if (view === null || !plays) {
      this.legal = null;
      return;
    }
    const asked = `${view.match_id}:${view.version}`;
    if (this.legal?.version === view.version || this.legalAsked === asked) return;
    this.legalAsked = asked;
    try {
      const legal = await this.client!.legal(view.match_id);
      if (legal.version === this.current()?.version) {
        this.legal = legal;
        this.render();
      }
    } catch (error) {
      this.fail(error);
    }
  }

  /** The player's turn, told once when the tab is in the background: its title (see
   * render), a vibration where allowed, a notification when the player allowed them. */
  announce(): void {
    const view = this.current();
    if (view === null || view.turn !== view.seat || !view.actions.length) return;
    const turn = `${view.match_id}:${view.version}`;
    if (this.announced === turn || !document.hidden) return;
    this.announced = turn;
    navigator.vibrate?.([150, 80, 150]);
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    const title = this.t("yourTurn");
    const options = { body: this.t("title"), tag: "ddz-turn", lang: this.lang };
    // A phone's browser shows a page's notifications through its service worker only.
    void navigator.serviceWorker
      ?.getRegistration()
      .then((registration) => {
        if (registration) return registration.showNotification(title, options);
        new Notification(title, options);
      })
      .catch(() => undefined);
  }

  async askNotifications(): Promise<void> {
    await Notification.requestPermission();
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
      else this.tell("leaveDuringHand");
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
    this.news = [];
    this.legal = null;
    this.ended = null;
    this.screen = "lobby";
    this.tell(why);
  }

  /** News for the player, in neutral colours. */
  tell(word: Word): void {
    this.notice = { text: this.t(word), kind: "info" };
    this.render();
  }

  // --- deciding ------------------------------------------------------------------------

  /** Sends a decision, kept in storage with its key until its answer comes. */
  async act(body: Command): Promise<void> {
    const view = this.current();
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

  /** A decision sent before the page was reloaded (or the connection lost), once the
   * page has drawn the match as it is: sent again with its key while the seat may still
   * make it (applied once whether or not the first attempt reached the service; the
   * first answer, if it did, is older than the view and changes nothing); dropped when
   * the match has moved past it (it was made, or the system made it). */
  async sendPending(): Promise<void> {
    const pending = load<Pending>(PENDING_KEY);
    const view = this.current();
    if (pending === null || this.busy || view === null) return;
    const open =
      pending.matchId === view.match_id &&
      (view.version === pending.expectedVersion ||
        view.actions.some((offered) => offered.action === pending.body.action));
    if (open) await this.send(pending);
    else store(PENDING_KEY, null);
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
      this.notice = null;
      // A replayed first answer is older than the view drawn: the controls, drawn busy
      // while it was awaited, are drawn again all the same.
      if (!this.show(answer.view)) this.render();
    } catch (error) {
      this.busy = false;
      if (error instanceof ProblemError) {
        // Refused (the match moved on, say): nothing to send again.
        store(PENDING_KEY, null);
        void this.refresh();
      }
      this.fail(error);
    }
  }

  playSelected(): void {
    const view = this.current();
    if (view === null || this.legal === null) return;
    const cards = [...this.selected].sort((a, b) => a - b).map((i) => view.hand[i] ?? "");
    const play = legalPlay(this.legal.plays, cards);
    if (play === undefined) {
      this.notice = { text: this.t("notLegal"), kind: "error" };
      this.render();
      return;
    }
    void this.act({ action: "play", cards });
  }

  nextHint(): void {
    const plays = this.legal?.plays ?? [];
    const view = this.current();
    if (!plays.length || view === null) return;
    this.hint = (this.hint + 1) % plays.length;
    this.selected = new Set(indicesOf(view.hand, plays[this.hint]?.cards ?? []));
    this.render();
  }

  toggle(index: number): void {
    if (this.selected.has(index)) this.selected.delete(index);
    else this.selected.add(index);
    this.notice = null;
    this.render();
    (this.root.querySelector(`[data-card="${index}"]`) as HTMLElement | null)?.focus();
  }

  fail(error: unknown): void {
    if (error instanceof ProblemError) {
      this.notice = { text: `${this.t("refused")} ${error.detail} (${error.code})`, kind: "error" };
    } else if (error instanceof TransportError || error instanceof TypeError) {
      this.lost = true;
    } else {
      this.notice = { text: String(error), kind: "error" };
    }
    this.render();
  }

  setLang(lang: Lang): void {
    this.lang = lang;
    store(LANG_KEY, lang);
    this.render();
  }

  setLevel(level: Level): void {
    this.level = level;
    store(LEVEL_KEY, level);
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

  myTurn(view: View | null): boolean {
    return view !== null && view.turn === view.seat && view.actions.length > 0;
  }

  render(): void {
    document.documentElement.lang = this.lang === "zh" ? "zh-CN" : "en";
    // A tab in the background says whose turn it is in its title.
    const waiting = this.screen === "table" && document.hidden && this.myTurn(this.current());
    document.title = waiting ? `● ${this.t("yourTurn")} · ${this.t("title")}` : this.t("title");
    const focused = document.activeElement?.getAttribute("data-focus") ?? null;
    const body =
      this.screen === "signup"
        ? this.signupScreen()
        : this.screen === "lobby"
          ? this.lobbyScreen()
          : this.screen === "waiting"
            ? this.waitingScreen()
            : this.screen === "connecting"
              ? h("main", { class: "panel" }, h("p", { id: "connecting" }, this.t("connecting")))
              : this.tableScreen();
    const page = [this.header(), this.notices(), body];
    const sheet = this.screen === "table" && this.ended ? this.settlement(this.ended) : null;
    // The settlement is a modal sheet: what is under it is out of reach until it is closed.
    for (const part of page) part.inert = sheet !== null;
    this.root.replaceChildren(...page, ...(sheet ? [sheet] : []));
    const opened = sheet !== null && this.root.dataset.sheet !== this.ended?.match_id;
    this.root.dataset.sheet = sheet ? (this.ended?.match_id ?? "") : "";
    const focus = opened ? "next-hand" : focused;
    if (focus !== null) {
      (this.root.querySelector(`[data-focus="${focus}"]`) as HTMLElement | null)?.focus();
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
    const notice = this.notice;
    return h(
      "div",
      { class: "notices", role: "status", "aria-live": "polite", id: "notice" },
      this.lost && h("p", { class: "lost", id: "lost" }, this.t("connectionLost")),
      notice && h("p", { class: `message ${notice.kind}`, id: "message" }, notice.text),
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

  levelPicker(): HTMLSelectElement {
    const levels: [Level, Word][] = [
      ["easy", "levelEasy"],
      ["normal", "levelNormal"],
      ["hard", "levelHard"],
    ];
    return h(
      "select",
      {
        id: "level",
        "data-focus": "level",
        onchange: (event: Event) =>
          this.setLevel((event.target as HTMLSelectElement).value as Level),
      },
      ...levels.map(([level, word]) =>
        h("option", { value: level, selected: level === this.level }, this.t(word)),
      ),
    ) as HTMLSelectElement;
  }

  /** The offer to be told of one's turn when the tab is in the background. */
  notifyOffer(): HTMLElement | null {
    if (!("Notification" in window) || Notification.permission !== "default") return null;
    return h(
      "button",
      { id: "notify", class: "quiet", onclick: () => void this.askNotifications() },
      this.t("notifyMe"),
    );
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
      h(
        "p",
        { class: "settings" },
        h("label", { for: "unit" }, this.t("unit")),
        " ",
        unit,
        " ",
        h("label", { for: "level" }, this.t("botLevel")),
        " ",
        this.levelPicker(),
      ),
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
      this.notifyOffer(),
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

  mySeat(view: View | null): number {
    const seat =
      view?.seat ?? this.table?.seats.findIndex((s) => s?.player === this.saved?.playerId);
    return seat === undefined || seat === null || seat < 0 ? 0 : seat;
  }

  tableScreen(): HTMLElement {
    const table = this.table;
    const current = this.current();
    // The felt shows the hand under way, or the last one until the next is dealt.
    const view =
      current !== null && (current.match_id === table?.match_id || !table?.match_id)
        ? current
        : null;
    const playing = view !== null && view.phase !== "ended";
    const me = this.mySeat(view);
    const places = ["bottom", "right", "top", "left"];
    const seats = [0, 1, 2, 3].map((offset) =>
      this.seatBox((me + offset) % 4, places[offset] ?? "", view),
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
        this.notifyOffer(),
        h(
          "button",
          { id: "leave", class: "quiet", onclick: () => void this.leaveTable() },
          this.t("leaveTable"),
        ),
      ),
      h("div", { class: "felt" }, ...seats, this.centre(view), view && this.shownCards(view)),
      playing ? this.controls(view) : this.between(),
      playing && this.handBox(view),
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

  seatBox(seat: number, place: string, view: View | null): HTMLElement {
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
        // A bomb limit is shown where there is one (a farmer's, under some rulesets).
        info &&
          info.bombs_left !== null &&
          h("span", { class: "bombs" }, this.t("bombsLeft", { n: info.bombs_left })),
        view?.marked_seat === seat &&
          view.marked_card &&
          h(
            "span",
            { class: "badge marked", title: this.t("markedCard") },
            `${this.t("markedCard")} `,
            this.card(view.marked_card),
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
            : h("span", { class: "cards" }, ...turn.cards.map((c) => this.card(c))),
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
          h("span", { class: "cards" }, ...cards.map((c) => this.card(c))),
        ),
      ),
    );
  }

  centre(view: View | null): HTMLElement {
    return h(
      "section",
      { class: "centre", "aria-label": this.t("title") },
      view?.bottom &&
        h(
          "div",
          { class: "bottom", id: "bottom" },
          h("span", { class: "what" }, this.t("bottom")),
          h("span", { class: "cards" }, ...view.bottom.map((c) => this.card(c))),
        ),
      view && view.bid !== null && h("div", { class: "stake" }, `${this.t("bid")} ${view.bid}`),
    );
  }

  /** Between hands, or before the hand's first view: what the table waits for (never
   * "waiting for players" with every seat taken). */
  between(): HTMLElement {
    const table = this.table;
    const empty = table?.seats.some((seat) => seat === null) ?? false;
    const word: Word | null =
      table === null || table.closed
        ? null
        : empty
          ? "waitingPlayers"
          : table.waiting?.what === "deal"
            ? "nextHandAt"
            : table.match_id
              ? "dealing"
              : null;
    return h("div", { class: "controls" }, word && h("p", { id: "between" }, this.t(word)));
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
    // The plays are read at the turn's start: until they come, nothing to hint or check.
    const reading = offered.has("play") && this.legal?.version !== view.version;
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
        h(
          "button",
          { id: "hint", disabled: busy || reading, onclick: () => this.nextHint() },
          this.t("hint"),
        ),
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
    const mine = this.myTurn(view);
    return h(
      "div",
      {
        class: `controls${mine ? " mine" : ""}`,
        id: "controls",
        "data-version": view.version,
        "aria-busy": reading ? "true" : "false",
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

  /** The player's hand: rows of cards filled evenly, each showing at least its corner
   * (rank and suit) and a finger's width, the rows overlapping by less than a card. */
  handBox(view: View): HTMLElement {
    const playable = new Set((this.legal?.plays ?? []).flatMap((p) => p.cards.map(rank)));
    const width = Math.min(this.root.clientWidth || innerWidth, 1024) - 24;
    const { rows, step } = handRows(view.hand.length, width);
    const card = (code: string, i: number) => {
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
        this.face(code),
      );
    };
    let first = 0;
    const lines = rows.map((count) => {
      const line = h(
        "div",
        { class: "row" },
        ...view.hand.slice(first, first + count).map((code, i) => card(code, first + i)),
      );
      first += count;
      return line;
    });
    const box = h(
      "div",
      {
        class: "hand",
        id: "hand",
        role: "toolbar",
        "aria-label": `${this.t("yourHand")}: ${view.hand.length} ${this.t("cards")}, ${this.selected.size} ${this.t("selected")}`,
      },
      ...lines,
    );
    // Set through the CSSOM: the page's policy allows no style attribute.
    box.style.setProperty("--overlap", `${step - CARD.width}px`);
    return box;
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

  /** A card's corner, as it shows when covered: its rank over its suit; a joker's size
   * in words over 王 or JOKER (told apart by more than its colour). */
  face(code: string): HTMLElement {
    if (code === "BJ" || code === "RJ") {
      const big = code === "RJ";
      return h(
        "span",
        { class: "index joker", "aria-hidden": "true" },
        h("span", { class: "rank" }, this.t(big ? "bigJoker" : "smallJoker")),
        // Its words read as the card's name does ("small joker", 小王).
        this.lang === "en" ? " " : "",
        h("span", { class: "suit" }, this.t("joker")),
      );
    }
    const suit = { S: "♠", H: "♥", C: "♣", D: "♦" }[code[0] ?? "S"] ?? "";
    return h(
      "span",
      { class: "index", "aria-hidden": "true" },
      h("span", { class: "rank" }, rankLabel(code[1] ?? "")),
      h("span", { class: "suit" }, suit),
    );
  }

  card(code: string): HTMLElement {
    return h(
      "span",
      {
        class: `card small${isRed(code) ? " red" : ""}${code === "BJ" || code === "RJ" ? " joker" : ""}`,
        role: "img",
        "aria-label": cardName(this.lang, code),
        "data-code": code,
      },
      this.face(code),
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
    const signed = (amount: string) =>
      amount.startsWith("-") || Number(amount) === 0 ? amount : `+${amount}`;
    const seats = [0, 1, 2, 3];
    const role = (seat: number) =>
      seat === result.landlord ? this.t("landlord") : this.t("farmer");
    const mine = view.seat !== null ? money.net[view.seat] : undefined;
    const { decimal, fraction } = multiplierText(result.multiplier);
    const multiplier = fraction
      ? h(
          "button",
          {
            id: "multiplier-value",
            class: "quiet",
            "aria-pressed": this.fraction ? "true" : "false",
            "aria-label": `${this.t("multiplier")} ${decimal} = ${fraction}`,
            onclick: () => {
              this.fraction = !this.fraction;
              this.render();
            },
          },
          `×${this.fraction ? fraction : decimal}`,
        )
      : h("strong", { id: "multiplier-value" }, `×${decimal}`);
    return h(
      "section",
      {
        class: "settlement",
        id: "settlement",
        role: "dialog",
        "aria-modal": "true",
        "aria-labelledby": "settlement-title",
        "data-settled": this.settled === view.match_id ? "true" : "false",
      },
      h("h2", { id: "settlement-title" }, this.t("handEnded")),
      h(
        "p",
        { class: "winner", id: "winner" },
        result.winner === "landlord" ? this.t("landlordWins") : this.t("farmersWin"),
      ),
      mine !== undefined &&
        h(
          "p",
          { class: `mine ${Number(mine) < 0 ? "down" : "up"}`, id: "my-net" },
          `${this.t("you")}: ${signed(mine)}`,
        ),
      h(
        "p",
        { id: "multiplier" },
        `${this.t("bid")} ${result.bid} · ${this.t("multiplier")} `,
        multiplier,
      ),
      h(
        "ul",
        { id: "factors", class: "factors" },
        ...(said.length ? said : [this.t("noFactors")]).map((words) => h("li", {}, words)),
      ),
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
            h("th", { scope: "col" }, this.t("net")),
          ),
        ),
        h(
          "tbody",
          {},
          ...seats.map((seat) =>
            h(
              "tr",
              { class: seat === view.seat ? "me" : "" },
              h("th", { scope: "row" }, this.seatName(seat), " ", h("small", {}, role(seat))),
              h("td", { class: "net" }, signed(money.net[seat] ?? "")),
            ),
          ),
        ),
      ),
      h(
        "details",
        { id: "counted" },
        h("summary", {}, this.t("howCounted")),
        h(
          "dl",
          {},
          ...seats.flatMap((seat) => [
            h("dt", {}, this.seatName(seat)),
            h(
              "dd",
              {},
              (
                [
                  ["gross", money.gross],
                  ["afterCap", money.after_cap],
                  ["cut", money.rake],
                  ["penalty", money.penalty],
                ] as [Word, string[]][]
              )
                .map(([word, amounts]) => `${this.t(word)} ${amounts[seat] ?? ""}`)
                .join(" · "),
            ),
          ]),
        ),
        h("p", { id: "house" }, `${this.t("house")}: ${money.house}`),
      ),
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
          { id: "leave-after", "data-focus": "leave-after", onclick: () => void this.leaveTable() },
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
  // The page's shell, kept for a return without a network (never the API's answers).
  if ("serviceWorker" in navigator) {
    addEventListener("load", () => {
      navigator.serviceWorker.register("/play/sw.js", { scope: "/play/" }).catch(() => undefined);
    });
  }
}
