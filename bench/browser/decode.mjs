// Prefill and decode speed of the npm package in headless Chromium (the worker; the CPU path,
// or WebGPU with STAMPO_DEVICE=webgpu),
// per model: the person extraction of tests/browser/package.test.mjs under its schema, run
// twice after loading (the second run reuses the prompt from the KV cache, so the first run's
// prefill is the one reported). Not a test: numbers depend on the machine and its load.
//
//   scripts/build-pkg.sh && [STAMPO_DEVICE=auto|cpu|webgpu] node bench/browser/decode.mjs [MODEL.gguf ...]
//
// STAMPO_PAD=N puts N copies of a paragraph of filler text (about 60 tokens each) before the
// user's message, with a context of 4,096: a long prompt's prefill.
// STAMPO_FREE=1 runs the request without its schema (every logit computed at every step).
// STAMPO_THREADS=N loads with N threads (the package's default: the cores the browser reports,
// at most four; more than one runs the threaded runtime, this page being cross-origin isolated).
// STAMPO_DEVICE defaults to "cpu". Here WebGPU is SwiftShader (a CPU emulating a GPU), whose
// numbers say nothing of a GPU's.
// Models are read from $STAMPO_MODELS (default ~/.cache/stampo/models); the wasm from
// $STAMPO_WASM_DIR (default ~/.cache/stampo/wasm/release).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { launchChromium } from "../../tests/browser/chromium.mjs";
import { models, modelNames as names, paddedPersonRequest, servePackage } from "./common.mjs";

const device = process.env.STAMPO_DEVICE ?? "cpu";
const pad = Number(process.env.STAMPO_PAD ?? 0);
const { request: PERSON, contextSize } = paddedPersonRequest(pad);
const threads = process.env.STAMPO_THREADS ? Number(process.env.STAMPO_THREADS) : undefined;
if (process.env.STAMPO_FREE === "1") delete PERSON.response_format;

const server = await servePackage();
const browser = await launchChromium();
try {
  const page = await browser.context.newPage();
  await page.goto(`${server.origin}/blank.html`);
  await page.evaluate(async () => { window.stampo = await import("/pkg/index.js"); });
  console.log("| model | load s | prefill tok/s | decode tok/s (run 1, run 2) | masks: mean µs, share of decode | output |");
  console.log("|---|---|---|---|---|---|");
  for (const name of names) {
    if (!existsSync(join(models, name))) {
      console.log(`SKIPPED: ${name} not in ${models}`);
      continue;
    }
    const r = await page.evaluate(async ({ url, body, device, contextSize, threads }) => {
      const t0 = performance.now();
      const engine = await window.stampo.Stampo.load({ model: url, contextSize, device, threads });
      const load = (performance.now() - t0) / 1000;
      const runs = [];
      for (let i = 0; i < 2; i++) runs.push(await engine.chat.completions.create(body));
      await engine.unload();
      await window.stampo.Stampo.cache.delete(url).catch(() => {});
      return { load, device: engine.device, threads: engine.info.threads, runs: runs.map((o) => ({ t: o.timings, mask: o.mask_stats, text: o.choices[0].message.content })) };
    }, { url: `/models/${name}`, body: PERSON, device, contextSize, threads });
    const [a, b] = r.runs;
    console.log(`| ${name} (${r.device}, ${r.threads} thread${r.threads > 1 ? "s" : ""}) | ${r.load.toFixed(1)} | ${a.t.prompt_per_second.toFixed(1)} (${a.t.prompt_n} tokens) | ${a.t.predicted_per_second.toFixed(1)}, ${b.t.predicted_per_second.toFixed(1)} | ${a.mask ? `${a.mask.mean_us.toFixed(0)}, ${(100 * a.mask.share_of_decode).toFixed(0)}%` : "none"} | ${a.text.replace(/\s+/g, " ")} |`);
  }
} finally {
  await browser.close();
  await server.close();
}
