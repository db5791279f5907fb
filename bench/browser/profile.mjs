// A CPU profile of every thread of the npm package in headless Chromium: the engine's worker
// and, on the threaded runtime, each of the pool's Web Workers (DevTools' profiler reaches
// only the page; Chromium's trace, category `disabled-by-default-v8.cpu_profiler`, samples
// every thread). Loads one model, runs a short warm-up request, then traces the person
// extraction (`STAMPO_FREE=1`: without its schema) and prints, per thread, the functions that
// took the most samples (self time). Not a test. STAMPO_PAD=N puts N paragraphs of filler
// before the message (as `decode.mjs` does) and runs the request once before the trace, so
// that the traced run reuses the long prompt from the cache: decoding over a long context
// (with STAMPO_PREFILL=1 it does not, and the trace is mostly the long prompt's prefill).
//
//   [STAMPO_THREADS=N] [STAMPO_FREE=1] [STAMPO_PAD=N [STAMPO_PREFILL=1]] [STAMPO_TOP=20] node bench/browser/profile.mjs MODEL.gguf [TRACE.json]
//
// Function names: `wasm-opt` drops them, so profile a build that keeps them, e.g. the
// threaded runtime's cargo output through wasm-bindgen alone:
//   . scripts/env.sh; d=$(mktemp -d); cp ~/.cache/stampo/wasm/release/* "$d"/
//   wasm-bindgen --target web --out-dir "$d" --out-name stampo_threads \
//     "$STAMPO_CACHE/target-wasm-threads/wasm32-unknown-unknown/release/stampo_wasm.wasm"
//   STAMPO_WASM_DIR="$d" node bench/browser/profile.mjs SmolLM2-135M-Instruct.Q4_1.gguf
// (a sample inside a wait, such as `park`, counts as that function's time: it is idle time).
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { launchChromium } from "../../tests/browser/chromium.mjs";
import { models, paddedPersonRequest, servePackage } from "./common.mjs";

const [name, tracePath] = process.argv.slice(2);
if (!name) {
  console.error("usage: node bench/browser/profile.mjs MODEL.gguf [TRACE.json]");
  process.exit(2);
}
if (!existsSync(join(models, name))) {
  console.log(`SKIPPED: ${name} not in ${models}`);
  process.exit(0);
}
const threads = process.env.STAMPO_THREADS ? Number(process.env.STAMPO_THREADS) : undefined;
const top = Number(process.env.STAMPO_TOP ?? 20);
const pad = Number(process.env.STAMPO_PAD ?? 0);
const { request, contextSize } = paddedPersonRequest(pad, { max_tokens: 128 });
if (process.env.STAMPO_FREE === "1") delete request.response_format;

const server = await servePackage();
const browser = await launchChromium();
try {
  const page = await browser.context.newPage();
  await page.goto(`${server.origin}/blank.html`);
  const info = await page.evaluate(async ({ url, threads, contextSize, warmUp }) => {
    const { Stampo } = await import("/pkg/index.js");
    window.engine = await Stampo.load({ model: url, contextSize, device: "cpu", threads });
    await window.engine.chat.completions.create(warmUp);
    return window.engine.info;
  }, {
    url: `/models/${name}`,
    threads,
    contextSize,
    warmUp: pad > 0 && process.env.STAMPO_PREFILL !== "1"
      ? request
      : { messages: [{ role: "user", content: "hi" }], max_tokens: 16, temperature: 0 },
  });

  const cdp = await browser.context.newCDPSession(page);
  const events = [];
  cdp.on("Tracing.dataCollected", ({ value }) => events.push(...value));
  const complete = new Promise((resolve) => cdp.once("Tracing.tracingComplete", resolve));
  await cdp.send("Tracing.start", {
    traceConfig: { includedCategories: ["disabled-by-default-v8.cpu_profiler"] },
    transferMode: "ReportEvents",
  });
  const timings = await page.evaluate(async (body) => (await window.engine.chat.completions.create(body)).timings, request);
  await cdp.send("Tracing.end");
  await complete;
  if (tracePath) writeFileSync(tracePath, JSON.stringify(events));

  console.log(`${name}: ${info.threads} thread(s), prefill ${timings.prompt_per_second.toFixed(1)} tok/s ` +
    `(${timings.prompt_n} tokens), decode ${timings.predicted_per_second.toFixed(1)} tok/s (${timings.predicted_n} tokens)`);
  for (const { thread, total, rows } of selfTimes(events)) {
    console.log(`\n== thread ${thread}: ${(total / 1000).toFixed(0)} ms sampled`);
    for (const [fn, us] of rows.slice(0, top)) {
      console.log(`${(100 * us / total).toFixed(1).padStart(5)}% ${(us / 1000).toFixed(0).padStart(6)} ms  ${fn.slice(0, 120)}`);
    }
  }
} finally {
  await browser.close();
  await server.close();
}

/** Self time per function name for each sampled thread that was not idle, busiest first. */
function selfTimes(events) {
  const profiles = new Map();
  for (const e of events) {
    if (e.name !== "ProfileChunk") continue;
    const key = `${e.pid}:${e.id}`;
    const p = profiles.get(key) ?? { thread: e.tid, nodes: new Map(), samples: [] };
    const { cpuProfile = {}, timeDeltas = [] } = e.args.data;
    for (const node of cpuProfile.nodes ?? []) p.nodes.set(node.id, node.callFrame.functionName || "(anonymous)");
    (cpuProfile.samples ?? []).forEach((s, i) => p.samples.push([s, timeDeltas[i] ?? 0]));
    profiles.set(key, p);
  }
  const out = [];
  for (const p of profiles.values()) {
    const byName = new Map();
    for (const [id, dt] of p.samples) {
      const fn = p.nodes.get(id) ?? "?";
      byName.set(fn, (byName.get(fn) ?? 0) + dt);
    }
    const total = [...byName.values()].reduce((a, b) => a + b, 0);
    const idle = (byName.get("(idle)") ?? 0) + (byName.get("(program)") ?? 0);
    if (total === 0 || idle / total > 0.9) continue;
    out.push({ thread: p.thread, total, rows: [...byName.entries()].sort((a, b) => b[1] - a[1]) });
  }
  return out.sort((a, b) => b.total - a.total);
}
