// A web app that depends on the stampo package as any app would — the tarball that
// scripts/build-pkg.sh packs (pkg/stampo.tgz, what a registry would serve), installed by npm,
// bundled by Vite (worker and wasm included) — runs the person extraction in headless Chromium.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";
import { launchChromium } from "./chromium.mjs";
import { serve } from "../../scripts/lib/static-server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const app = join(root, "tests/browser/sample-app");
const cache = process.env.STAMPO_CACHE ?? join(homedir(), ".cache/stampo");
const models = process.env.STAMPO_MODELS ?? join(cache, "models");

let server;
let browser;

before(async () => {
  const built = join(root, "pkg/stampo.tgz");
  if (!existsSync(built)) throw new Error(`the package is not built (run scripts/build-pkg.sh): ${built} missing`);
  // The packed tarball, installed as from a registry (only the files it ships; no registry
  // needed). The old copy goes first: npm keeps an installed tarball whose name is unchanged.
  rmSync(join(app, "node_modules/stampo"), { recursive: true, force: true });
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error"], { cwd: app, stdio: "inherit" });
  // What was installed is a copy with the package's files, not a link to the source tree.
  assert.ok(!lstatSync(join(app, "node_modules/stampo")).isSymbolicLink(), "installed from the tarball");
  assert.ok(existsSync(join(app, "node_modules/stampo/dist/wasm/stampo_wasm_bg.wasm")));
  assert.ok(!existsSync(join(app, "node_modules/stampo/src")), "the tarball ships dist/, not src/");
  await build({ root: app, configFile: join(app, "vite.config.js"), logLevel: "warn" });
  server = await serve({ "/models/": models, "/": join(app, "dist") });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test("a Vite-bundled app runs the person extraction through the package", { timeout: 300_000 }, async () => {
  const page = await browser.context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${server.origin}/`);
  await page.waitForFunction(() => window.result !== undefined, null, { timeout: 240_000 });
  const result = await page.evaluate(() => window.result);
  assert.equal(result.error, undefined, result.error);
  const person = JSON.parse(result.content);
  assert.deepEqual(Object.keys(person).sort(), ["citta", "eta", "nome"]);
  assert.ok(Number.isInteger(person.eta) && person.eta >= 0 && person.eta <= 120);
  assert.equal(result.device, "cpu");
  // Served cross-origin isolated: the bundle's threaded runtime runs, its threads started from
  // the worker script Vite emitted for them.
  assert.equal(result.threadsFallback, null);
  assert.equal(result.threads, Math.min(result.cores, 4));
  // The bundle carries the workers and the wasm as files of its own.
  const asked = server.requests.join(" ");
  assert.match(asked, /\.wasm/);
  assert.match(asked, /worker/);
  if (result.threads > 1) assert.match(asked, /thread/);
  console.log(`# the bundled app extracted ${result.content}`);
  assert.deepEqual(errors, []);
});
