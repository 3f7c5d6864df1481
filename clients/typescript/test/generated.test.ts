/**
 * What is generated is committed, and must be what its sources make now: the contract's
 * types (src/schema.ts, from openapi.yaml) and the web table's script
 * (service/web/static/play/play.js, from table/ and src/), which `ddz serve` serves
 * without Node.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PACKAGE = fileURLToPath(new URL("../../", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "ddz-generated-"));

/** The command of an npm script, with its output sent to `output` instead. */
function run(script: string, output: string): void {
  const scripts = JSON.parse(readFileSync(join(PACKAGE, "package.json"), "utf-8")).scripts;
  const [tool, ...args] = (scripts[script] as string).split(" ");
  const at = args.findIndex((a) => a === "--output" || a.startsWith("--outfile="));
  if (args[at] === "--output") args[at + 1] = output;
  else args[at] = `--outfile=${output}`;
  execFileSync(join(PACKAGE, "node_modules", ".bin", tool ?? ""), args, {
    cwd: PACKAGE,
    stdio: "pipe",
  });
}

function same(generated: string, committed: string, remake: string): void {
  assert.ok(
    readFileSync(generated, "utf-8") === readFileSync(join(PACKAGE, committed), "utf-8"),
    `${committed} is stale: ${remake} (in clients/typescript)`,
  );
}

test("the contract's types are generated from the committed openapi.yaml", () => {
  const output = join(scratch, "schema.ts");
  run("generate", output);
  same(output, "src/schema.ts", "npm run generate");
});

test("the web table's script is built from its sources", () => {
  const output = join(scratch, "play.js");
  run("build:table", output);
  same(output, "../../service/web/static/play/play.js", "npm run build:table");
});
