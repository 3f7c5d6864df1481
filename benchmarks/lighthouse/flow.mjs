// Lighthouse user flows of the web table (/play/) on a phone: the page's first load
// (navigation), the lobby after signing up, the table in play (a hand dealt, the player to
// decide) and the settlement, each step's scores printed (performance, accessibility, best
// practices; a snapshot has no performance score of its own, only its audits).
//
//   npm ci && node flow.mjs http://127.0.0.1:8000 [--json FILE] [--report FILE.html]
//
// The service must seat bots at once (DDZ_LOBBY_BOTS_AFTER=0 bin/run serve): the flow
// plays a whole hand through the page's own buttons. Debian's Chromium runs headless with
// no network but the service's (CHROMIUM names another binary).

import { writeFileSync } from "node:fs";
import puppeteer from "puppeteer-core";
import { startFlow } from "lighthouse";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--disable-dev-shm-usage",
];
const CATEGORIES = ["performance", "accessibility", "best-practices"];

function argument(name) {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}

/** A category's score out of 100; a snapshot's performance, which has no metric (every
 * audit of weight 0, so Lighthouse says 0), as the share of its audits passed. */
function score(lhr, category) {
  const found = lhr.categories[category];
  if (!found) return null;
  if (category === "performance" && lhr.gatherMode === "snapshot") {
    const audits = found.auditRefs.map((ref) => lhr.audits[ref.id]).filter((a) => a?.score !== null);
    return Math.round((100 * audits.filter((a) => a.score === 1).length) / audits.length);
  }
  return found.score === null ? null : Math.round(found.score * 100);
}

const base = (process.argv[2] ?? "http://127.0.0.1:8000").replace(/\/+$/, "");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits for `selector` on the page, for at most `seconds` (then says what it shows). */
async function seen(page, selector, seconds = 120) {
  try {
    await page.waitForSelector(selector, { timeout: seconds * 1000 });
  } catch (error) {
    const shown = await page.evaluate(() => document.body.innerText).catch(() => "");
    throw new Error(`no ${selector} after ${seconds} s; the page shows:\n${shown}`, { cause: error });
  }
}

/** One decision as a person makes it, when the page says it is the player's turn: the
 * first bid offered, the hand kept hidden, no 报到, the first hint played, or a pass. */
async function decide(page) {
  const clicked = await page.evaluate(() => {
    const enabled = (selector) =>
      [...document.querySelectorAll(selector)].filter((b) => !b.disabled);
    if (!document.querySelector("#controls.mine")) return null;
    const first = [
      "#resume",
      "[data-bid]",
      '[data-show-hand="false"]',
      '[data-report="decline"]',
      "#hint",
      "#pass",
    ]
      .map((selector) => enabled(selector)[0])
      .find(Boolean);
    first?.click();
    return first?.id ?? (first ? "decision" : null);
  });
  if (clicked === "hint") {
    await page.waitForSelector("#play:not([disabled])", { timeout: 10000 });
    await page.click("#play");
  }
  return clicked;
}

async function playToTheSettlement(page, seconds = 300) {
  const until = Date.now() + seconds * 1000;
  while (!(await page.$("#settlement"))) {
    if (Date.now() > until) throw new Error("no settlement in time");
    const decided = await decide(page).catch(() => null);
    await sleep(decided ? 400 : 150);
  }
}

const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: FLAGS,
});
try {
  const page = await browser.newPage();
  const flow = await startFlow(page, {
    name: "The web table on a phone",
    config: { extends: "lighthouse:default", settings: { onlyCategories: CATEGORIES } },
  });
  await flow.navigate(`${base}/play/?lang=en`, { name: "navigation" });

  await seen(page, "#name");
  await page.type("#name", "lighthouse");
  await page.click("#start");
  await seen(page, "#quick");
  await flow.snapshot({ name: "lobby" });

  await page.click("#quick");
  await seen(page, "#controls.mine button:not([disabled])", 180);
  await flow.snapshot({ name: "table in play" });

  await playToTheSettlement(page);
  await seen(page, "#settlement");
  await sleep(500);
  await flow.snapshot({ name: "settlement" });

  const result = await flow.createFlowResult();
  const scores = result.steps.map((step) => ({
    step: step.name,
    mode: step.lhr.gatherMode,
    ...Object.fromEntries(CATEGORIES.map((c) => [c, score(step.lhr, c)])),
    failing: Object.values(step.lhr.audits)
      .filter((a) => a.score !== null && a.score < 1 && a.scoreDisplayMode === "binary")
      .map((a) => a.id),
  }));
  for (const s of scores) {
    const figures = CATEGORIES.map((c) => `${c} ${s[c] ?? "-"}`).join(", ");
    console.log(`${s.step.padEnd(14)} ${figures}${s.failing.length ? `  (failing: ${s.failing.join(" ")})` : ""}`);
  }
  const json = argument("--json");
  if (json) writeFileSync(json, JSON.stringify(scores, null, 2));
  const report = argument("--report");
  if (report) writeFileSync(report, await flow.generateReport());
} finally {
  await browser.close();
}
