// The browser smoke test: the wasm32 build of crates/wasm (scripts/build-wasm.sh), loaded by
// a page on 127.0.0.1 in headless Chromium, called, and its answers checked against
// independent references (tests/fixtures/smoke/reference.json: the `gguf` package's reading of
// the default model, the `jsonschema` package's verdict on each document).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium, webgpuInfo } from "./chromium.mjs";
import { serve } from "../../scripts/lib/static-server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const cache = process.env.STAMPO_CACHE ?? join(homedir(), ".cache/stampo");
const models = process.env.STAMPO_MODELS ?? join(cache, "models");
const wasmDir = process.env.STAMPO_WASM_DIR ?? join(cache, "wasm/release");
const fixtures = join(root, "tests/fixtures/smoke");
const reference = JSON.parse(readFileSync(join(fixtures, "reference.json"), "utf8"));

let server;
let browser;
let result;

before(async () => {
  for (const [what, path] of [["wasm build (run scripts/build-wasm.sh)", join(wasmDir, "stampo_wasm_bg.wasm")],
                              ["default model (run scripts/fetch-models.sh)", join(models, reference.model)]]) {
    if (!existsSync(path)) throw new Error(`${what} not found at ${path}`);
  }
  server = await serve({
    "/pkg/": wasmDir,
    "/models/": models,
    "/fixtures/": fixtures,
    "/": join(root, "tests/browser/pages"),
  });
  browser = await launchChromium();
  const page = await browser.context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${server.origin}/smoke.html`);
  console.log(`# chromium flags: ${browser.flags.join(" ")}`);
  console.log(`# webgpu: ${JSON.stringify(await webgpuInfo(page))}`);
  await page.waitForFunction(() => window.smokeResult !== undefined, null, { timeout: 120_000 });
  result = await page.evaluate(() => window.smokeResult);
  assert.deepEqual(errors, [], "page errors");
  assert.equal(result.error, undefined, `the page failed: ${result.error}`);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test("wasm reads the default model's header as the gguf package does", () => {
  assert.deepEqual(result.summary, reference.gguf);
  // Only a prefix of the 98 MB file was needed (the header, metadata and tensor table).
  assert.ok(result.bytesRead < 32 << 20, `read ${result.bytesRead} bytes`);
  console.log(`# header parsed from the first ${result.bytesRead} bytes`);
});

test("wasm compiles the person schema and accepts exactly the valid documents", () => {
  assert.match(result.gbnf, /^root ::= /m);
  for (const keyword of ["type", "properties", "required", "minimum", "maximum"]) {
    assert.ok(result.report.some((e) => e.keyword === keyword && e.status === "enforced"),
      `keyword ${keyword} reported as enforced`);
  }
  for (const [i, doc] of reference.documents.entries()) {
    assert.equal(result.documents[i].accepted, doc.valid, `document ${doc.text}`);
  }
});

test("a malformed schema is a typed error", () => {
  assert.equal(result.refusal?.code, "schema_refused");
  assert.match(result.refusal.message, /not JSON/);
});
