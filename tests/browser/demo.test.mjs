// The demo page (web/, built by `scripts/demo.sh --build-only`) in headless Chromium, served
// as scripts/demo.sh serves it: load the default model, extract the person under the
// schema and without it, and check what the page shows. A screenshot of each state goes to
// test-results/demo/ for a person to look at.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium } from "./chromium.mjs";
import { serve } from "../../scripts/lib/static-server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const cache = process.env.STAMPO_CACHE ?? join(homedir(), ".cache/stampo");
const models = process.env.STAMPO_MODELS ?? join(cache, "models");
const dist = join(root, "web/dist");
const shots = join(root, "test-results/demo");

/** The constrained output, once its run is over (within `timeout` ms). */
async function constrainedOutput(timeout) {
  await page.waitForFunction(() => {
    const pre = document.querySelector("#output-constrained");
    return pre && pre.getAttribute("aria-busy") === "false" && pre.textContent.length > 0;
  }, null, { timeout });
  return page.locator("#output-constrained").textContent();
}

/** Saves the whole page as test-results/demo/NAME.png. */
async function shot(name) {
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

let server;
let browser;
let page;
const problems = [];
// Every request the page, its worker and its service worker make that leaves its origin.
const outside = [];
let origin;

before(async () => {
  for (const [what, path] of [["the demo build (run scripts/demo.sh --build-only)", join(dist, "stampo/wasm/stampo_wasm_bg.wasm")],
                              ["the default model (run scripts/fetch-models.sh)", join(models, "SmolLM2-135M-Instruct.Q4_1.gguf")]]) {
    if (!existsSync(path)) throw new Error(`${what} not found at ${path}`);
  }
  rmSync(shots, { recursive: true, force: true }); // this run's screenshots only
  server = await serve({ "/models/": models, "/": dist });
  origin = server.origin;
  browser = await launchChromium();
  browser.context.on("request", (r) => {
    const url = r.url();
    if (!url.startsWith("data:") && new URL(url).origin !== origin) outside.push(url);
  });
  page = await browser.context.newPage();
  page.on("pageerror", (e) => problems.push(`pageerror: ${e}`));
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  await page.setViewportSize({ width: 1100, height: 1400 });
  await page.goto(`${server.origin}/`);
});

after(async () => {
  await browser?.close();
  await server?.close();
});

test("the page loads the default model, extracts under the schema and without it", { timeout: 300_000 }, async () => {
  // Readable on a phone: nothing wider than a 375 px screen; the first control reachable by Tab.
  await page.setViewportSize({ width: 375, height: 800 });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 375), "no horizontal scroll at 375 px");
  await page.setViewportSize({ width: 1100, height: 1400 });
  // Sequential focus starts from where the user clicked: the heading, then Tab.
  await page.locator("h1").click();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "model-url");
  await page.locator("#load-model").click();
  await page.locator("#model-ready").waitFor({ timeout: 120_000 });
  const ready = await page.locator("#model-ready").textContent();
  assert.match(ready, /ready on the cpu/);
  // SwiftShader, Chromium's software WebGPU adapter here, is passed over, and the page says so;
  // the page is cross-origin isolated, so the CPU path runs on a thread per core (at most four).
  const threads = Math.min(4, await page.evaluate(() => navigator.hardwareConcurrency));
  const plural = threads === 1 ? "" : "s";
  assert.match(await page.locator("#model-device").textContent(), new RegExp(`^Running on the CPU path \\(${threads} thread${plural}\\) in a Web Worker: (the WebGPU adapter .* is a software fallback, slower than the CPU path|no WebGPU adapter|this browser has no WebGPU)\\.$`));
  await page.locator("#cached-models").getByText("SmolLM2-135M-Instruct.Q4_1.gguf").waitFor();

  await page.locator("#extract").click();
  // Both runs finish: the constrained one, then the same request without the schema.
  await page.waitForFunction(() => {
    const busy = [...document.querySelectorAll("pre[aria-busy]")].map((p) => p.getAttribute("aria-busy"));
    return busy.length === 2 && busy.every((b) => b === "false") && document.querySelector("#output-free")?.textContent.length > 0;
  }, null, { timeout: 240_000 });
  const constrained = await page.locator("#output-constrained").textContent();
  const person = JSON.parse(constrained);
  assert.deepEqual(Object.keys(person).sort(), ["citta", "eta", "nome"]);
  assert.ok(Number.isInteger(person.eta) && person.eta >= 0 && person.eta <= 120);
  const section = await page.locator("#output-constrained").locator("..").textContent();
  assert.match(section, /valid: the schema holds \(checked by jsonschema\)/);
  assert.match(section, /finish_reason: stop/);
  assert.match(section, /tokens\/s/);
  const free = await page.locator("#output-free").textContent();
  console.log(`# constrained: ${constrained.replace(/\s+/g, " ")}`);
  console.log(`# unconstrained: ${free.slice(0, 200).replace(/\s+/g, " ")}`);
  assert.match(await page.locator("#curl").textContent(), /curl http:\/\/localhost:8080\/v1\/chat\/completions/);
  await shot("01-extracted-with-and-without-the-schema");
  assert.deepEqual(problems, []);
});

test("a batch of 5 inputs fills the table and downloads JSONL", { timeout: 300_000 }, async () => {
  const inputs = [
    "Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino.",
    "Sono Marco Bianchi, 58 anni, di Napoli.",
    "Anna Verdi, 27 anni, abita a Milano.",
    "Luca Neri ha 45 anni e vive a Bologna.",
    "Ecco Sara Gallo: 19 anni, da Palermo.",
  ];
  await page.locator("#batch-inputs").fill(inputs.join("\n"));
  await page.locator("#batch-run").click();
  await page.waitForFunction(() => document.querySelector("#batch-status")?.textContent === "5 of 5 done", null, { timeout: 280_000 });
  const valid = await page.locator("#batch-results tbody tr td:last-child").allTextContents();
  assert.deepEqual(valid, ["yes", "yes", "yes", "yes", "yes"]);
  await shot("02-batch-of-5");
  const [download] = await Promise.all([page.waitForEvent("download"), page.locator("#batch-jsonl").click()]);
  const { readFileSync } = await import("node:fs");
  const lines = readFileSync(await download.path(), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => l.input), inputs);
  for (const line of lines) {
    assert.deepEqual(Object.keys(line.output).sort(), ["citta", "eta", "nome"]);
    assert.equal(line.valid, true);
  }
  console.log(`# batch: ${lines.map((l) => JSON.stringify(l.output)).join(" ")}`);
});

test("examples, GBNF mode with errors at line and column, extraction under a grammar", { timeout: 300_000 }, async () => {
  await page.locator("#example").selectOption({ label: "Order ($defs, anyOf, pattern, multipleOf)" });
  await page.locator("#report").getByText("multipleOf").waitFor();
  // The highlighted layer under the editor holds exactly the editor's text, and its
  // characters lie where the textarea's do (same box, so the caret is where the text looks).
  const highlighted = async () => page.evaluate(() => {
    const area = document.querySelector("#schema-editor");
    const layer = document.querySelector("#schema-highlight");
    const a = area.getBoundingClientRect(), l = layer.getBoundingClientRect();
    const kinds = {};
    for (const span of layer.querySelectorAll("span")) kinds[span.className] = (kinds[span.className] || 0) + 1;
    return { same: layer.textContent === area.value + "\n", kinds,
      box: [a.left - l.left, a.top - l.top, a.width - l.width, a.height - l.height] };
  });
  const schemaView = await highlighted();
  assert.ok(schemaView.same, "the highlighted copy differs from the editor's text");
  assert.deepEqual(schemaView.box, [0, 0, 0, 0]);
  assert.ok(schemaView.kinds["tok-key"] > 5 && schemaView.kinds["tok-string"] > 0, JSON.stringify(schemaView.kinds));
  await page.locator("#mode-gbnf").check();
  await page.locator("#schema-editor").fill('# answer\nroot ::= ("yes" | "no") [.]?');
  const gbnfView = await highlighted();
  assert.ok(gbnfView.same);
  for (const kind of ["tok-comment", "tok-key", "tok-string", "tok-class", "tok-punct"]) {
    assert.ok(gbnfView.kinds[kind] > 0, `${kind} in ${JSON.stringify(gbnfView.kinds)}`);
  }
  await page.locator("#schema-editor").fill('root ::= "yes" | "no"\nbad ::= (');
  const error = await page.locator("#schema-error").textContent();
  assert.match(error, /2:\d+|line 2/, error);
  await shot("03-gbnf-error-at-line-and-column");
  await page.locator("#schema-editor").fill('root ::= "yes" | "no"');
  await page.locator("#gbnf").waitFor();
  await page.locator("#input-text").fill("Is Rome in Italy? Answer yes or no.");
  await page.getByLabel("also run the same request without the constraint").uncheck();
  await page.locator("#extract").click();
  const answer = await constrainedOutput(120_000);
  assert.ok(["yes", "no"].includes(answer), answer);
  assert.match(await page.locator("#output-constrained").locator("..").textContent(), /valid: in the grammar's language/);
  await shot("04-answer-under-a-grammar");
  console.log(`# grammar answer: ${answer}; error shown: ${error}`);
});

test("an invalid schema shows its error at its line; Custom JSON with a json_schema overrides the editor's schema", { timeout: 300_000 }, async () => {
  await page.locator("#mode-schema").check();
  // An invalid schema shows its error at its line and column.
  await page.locator("#schema-editor").fill('{\n  "type": "object",\n  "properties": {\n    "a": {"type": "string",}\n  }\n}');
  assert.match(await page.locator("#schema-error").textContent(), /line 4, column 28/);
  await shot("05-invalid-schema-error-at-its-line");
  await page.locator("#example").selectOption({ label: "Person (nome, eta, citta)" });
  await page.locator("#input-text").fill("Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino.");
  const city = { type: "object", properties: { city: { type: "string" }, country: { type: "string" } },
    required: ["city", "country"], additionalProperties: false };
  await page.locator("#custom-json").fill(JSON.stringify({ json_schema: city }));
  await page.locator("#custom-json").dispatchEvent("change");
  await page.locator("#custom-constraint").waitFor();
  // The request a llama.cpp server would get carries Custom JSON's schema, not the editor's.
  const curl = await page.locator("#curl").textContent();
  assert.match(curl, /"json_schema"/);
  assert.doesNotMatch(curl, /"response_format"/);
  await page.locator("#extract").click();
  const doc = JSON.parse(await constrainedOutput(240_000));
  assert.deepEqual(Object.keys(doc).sort(), ["city", "country"]);
  assert.match(await page.locator("#output-constrained").locator("..").textContent(), /valid: the schema holds/);
  await shot("06-custom-json-overrides-the-schema");
  console.log(`# Custom JSON's schema: ${JSON.stringify(doc)}`);
  await page.locator("#custom-json").fill("");
  await page.locator("#custom-json").dispatchEvent("change");
  await page.locator("#custom-constraint").waitFor({ state: "detached" });
});

test("invalid Custom JSON is shown as an error and settings persist across a reload", { timeout: 60_000 }, async () => {
  await page.locator("#custom-json").fill("{not json");
  await page.locator("#custom-json-error").waitFor();
  await shot("07-custom-json-error");
  await page.locator("#temperature").fill("0.7");
  await page.locator("#temperature").dispatchEvent("change");
  await page.reload();
  assert.equal(await page.locator("#temperature").inputValue(), "0.7");
  assert.equal(await page.locator("#custom-json").inputValue(), "{not json");
});

test("every control is named for screen readers and reachable by Tab; results are announced", { timeout: 60_000 }, async () => {
  // Chromium's own accessibility tree: what a screen reader is given.
  const cdp = await page.context().newCDPSession(page);
  const { nodes } = await cdp.send("Accessibility.getFullAXTree");
  await cdp.detach();
  const controls = new Set(["button", "textbox", "combobox", "checkbox", "slider", "spinbutton", "link", "radio", "switch", "searchbox", "listbox"]);
  const shown = nodes.filter((n) => !n.ignored);
  const unnamed = shown.filter((n) => controls.has(n.role?.value) && !String(n.name?.value ?? "").trim());
  assert.deepEqual(unnamed.map((n) => `${n.role.value} (backend node ${n.backendDOMNodeId})`), [], "controls without an accessible name");
  const roles = new Set(shown.map((n) => n.role?.value));
  for (const landmark of ["main", "heading"]) assert.ok(roles.has(landmark), `a ${landmark} in ${[...roles].join(", ")}`);
  const named = shown.filter((n) => controls.has(n.role?.value)).length;

  // Keyboard: from the top of the page, Tab reaches every visible, enabled control.
  // A radio group is one Tab stop (arrow keys move inside it): its radios share one probe.
  const focusable = await page.evaluate(() => {
    const all = document.querySelectorAll("a[href], button, input, select, textarea, [tabindex]");
    const probes = new Set();
    [...all]
      .filter((e) => !e.disabled && e.tabIndex >= 0 && e.type !== "hidden" && e.checkVisibility({ visibilityProperty: true }))
      .forEach((e, i) => {
        e.dataset.a11yProbe = e.type === "radio" && e.name ? `radio:${e.name}` : String(i);
        probes.add(e.dataset.a11yProbe);
      });
    return [...probes];
  });
  await page.locator("h1").click();
  const reached = new Set();
  for (let i = 0; i < focusable.length + 10; i++) {
    await page.keyboard.press("Tab");
    const probe = await page.evaluate(() => document.activeElement?.dataset?.a11yProbe ?? null);
    if (probe !== null) reached.add(probe);
  }
  const missed = await page.evaluate((ids) => ids.map((id) => document.querySelector(`[data-a11y-probe="${id}"]`))
    .map((e) => `${e.tagName.toLowerCase()}#${e.id || "?"}`), focusable.filter((id) => !reached.has(id)));
  assert.deepEqual(missed, [], "controls Tab never reaches");

  // What the page reports after a run — model status, outputs, progress — is in live regions,
  // so a screen reader announces it without the user going to look.
  const live = await page.evaluate(() => ["#model-status", "#output-constrained", "#batch-status"].map((sel) => {
    const e = document.querySelector(sel);
    if (!e) return `${sel} missing`;
    return e.closest("[aria-live], [role=status], [role=log], [role=alert]") ? null : sel;
  }).filter(Boolean));
  assert.deepEqual(live, [], "results outside any live region");
  console.log(`# accessibility: ${named} named controls, ${focusable.length} reached by Tab`);
});

test("the device can be chosen: WebGPU by name runs where \"auto\" keeps to the CPU", { timeout: 300_000 }, async () => {
  await page.locator("#device-choice").selectOption("webgpu");
  await page.locator("#load-model").click();
  // (The previous model's line goes while loading; wait for the new one.)
  await page.locator("#model-ready", { hasText: "ready on the webgpu" }).waitFor({ timeout: 240_000 });
  assert.equal(await page.locator("#model-device").textContent(), "Running on WebGPU in a Web Worker.");
  await shot("08-loaded-on-webgpu");
  await page.locator("#device-choice").selectOption("auto");
});

test("installable, and with the server gone a reload still runs an extraction", { timeout: 300_000 }, async () => {
  const manifest = await page.evaluate(async () => {
    const link = document.querySelector('link[rel="manifest"]');
    return (await fetch(link.href)).json();
  });
  assert.equal(manifest.display, "standalone");
  // PNG icons at the sizes install prompts and home screens ask for, and a maskable one; each
  // is served, and is the PNG of the size it claims.
  for (const want of ["192x192 any", "512x512 any", "512x512 maskable"]) {
    const icon = manifest.icons.find((i) => i.type === "image/png" && `${i.sizes} ${i.purpose}` === want);
    assert.ok(icon, `a ${want} PNG icon in ${JSON.stringify(manifest.icons)}`);
    const size = await page.evaluate(async (src) => {
      const bitmap = await createImageBitmap(await (await fetch(src)).blob());
      return `${bitmap.width}x${bitmap.height}`;
    }, icon.src);
    assert.equal(size, icon.sizes, icon.src);
  }
  // Chromium's own verdict on installability (what its install prompt checks).
  const cdp = await page.context().newCDPSession(page);
  const { installabilityErrors } = await cdp.send("Page.getInstallabilityErrors");
  assert.deepEqual(installabilityErrors, [], JSON.stringify(installabilityErrors));
  await cdp.detach();
  const controlled = await page.evaluate(async () => {
    await navigator.serviceWorker.ready;
    // The worker claims the page once active; wait for it to control this page.
    for (let i = 0; i < 50 && !navigator.serviceWorker.controller; i++) await new Promise((r) => setTimeout(r, 100));
    return Boolean(navigator.serviceWorker.controller);
  });
  assert.ok(controlled, "the service worker controls the page");
  await server.close(); // nothing answers on the page's origin any more
  server = null;
  await page.reload();
  await page.locator("#load-model").click();
  await page.locator("#model-ready").waitFor({ timeout: 120_000 });
  assert.match(await page.locator("#model-ready").textContent(), /from cache/);
  await page.locator("#temperature").fill("0");
  await page.locator("#temperature").dispatchEvent("change");
  await page.getByLabel("also run the same request without the constraint").uncheck();
  await page.locator("#extract").click();
  const person = JSON.parse(await constrainedOutput(240_000));
  assert.deepEqual(Object.keys(person).sort(), ["citta", "eta", "nome"]);
  console.log(`# offline extraction: ${JSON.stringify(person)}`);
  await shot("09-offline-extraction");
  // The cached model can be deleted from the page.
  await page.locator(".delete-cached").first().click();
  await page.locator("#cached-models").getByText("None yet").waitFor();
});

test("nothing was sent beyond the page's origin", () => {
  assert.deepEqual(outside, []);
});
