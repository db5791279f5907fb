// stampo's npm package beside wllama (llama.cpp compiled to wasm, @wllama/wllama from npm) in
// the same headless Chromium, on the same GGUF files, with the same chat requests: the person
// extraction free and under its JSON Schema (greedy, max_tokens 64, context 512). Each engine
// reports llama.cpp-style `timings`; those are what the table shows. Both run on the CPU:
// wllama with n_gpu_layers 0, stampo with device "cpu". Each runs once with 1 thread and once
// with 2 (this machine's cores): stampo's threaded runtime and wllama's multi-thread build, both
// in this cross-origin isolated page. Memory: each run gets a browser of its own, and the peak resident
// memory (VmHWM) of its renderer processes — the page, its workers, their wasm and JS buffers —
// is read from /proc once the run is done (Linux only; one browser at a time on the machine).
// Not a test: numbers depend on the machine and its load.
//
//   scripts/build-pkg.sh && node bench/browser/vs_wllama.mjs [MODEL.gguf ...]
//
// Models from $STAMPO_MODELS (default ~/.cache/stampo/models); stampo's wasm from
// $STAMPO_WASM_DIR (default ~/.cache/stampo/wasm/release); wllama from node_modules.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { launchChromium } from "../../tests/browser/chromium.mjs";
import { models, modelNames as names, PERSON_MESSAGES, personRequest, root, servePackage } from "./common.mjs";

const wllamaDir = join(root, "node_modules/@wllama/wllama/esm");
const wllamaVersion = JSON.parse(readFileSync(join(wllamaDir, "../package.json"), "utf8")).version;

const FREE = { messages: PERSON_MESSAGES, temperature: 0, max_tokens: 64 };
const CONSTRAINED = personRequest();

const server = await servePackage({ "/wllama/": wllamaDir });
/** The largest peak resident set (MiB) among Chromium's renderer processes, from /proc. */
function rendererPeakMiB() {
  let peak = 0;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (!cmdline.includes("--type=renderer")) continue;
      const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      if (hwm) peak = Math.max(peak, Number(hwm[1]) / 1024);
    } catch {
      // the process ended while being read
    }
  }
  return peak;
}

const row = (cells) => console.log(`| ${cells.join(" | ")} |`);
const fmt = (x) => (typeof x === "number" ? x.toFixed(1) : "—");
try {
  const probe = await launchChromium();
  const page = await probe.context.newPage();
  await page.goto(`${server.origin}/blank.html`);
  const isolated = await page.evaluate(() => self.crossOriginIsolated);
  await probe.close();
  console.log(`wllama ${wllamaVersion}; page cross-origin isolated: ${isolated}`);
  row(["model", "engine", "load s", "free: prefill tok/s", "free: decode tok/s", "schema: decode tok/s", "peak renderer MiB", "schema: output"]);
  row(["---", "---", "---", "---", "---", "---", "---", "---"]);
  for (const name of names) {
    if (!existsSync(join(models, name))) {
      console.log(`SKIPPED: ${name} not in ${models}`);
      continue;
    }
    const url = `/models/${name}`;
    // One browser per engine and model: nothing of one run's memory carries into the next.
    const runs = [
      ...[1, 2].map((threads) => [`stampo (${threads} thread${threads > 1 ? "s" : ""})`, async ({ url, free, constrained, threads }) => {
        const { Stampo } = await import("/pkg/index.js");
        const t0 = performance.now();
        const engine = await Stampo.load({ model: url, contextSize: 512, device: "cpu", threads });
        const load = (performance.now() - t0) / 1000;
        if (engine.info.threads !== threads) throw new Error(`stampo runs ${engine.info.threads} threads: ${engine.info.threads_fallback}`);
        const a = await engine.chat.completions.create(free);
        const b = await engine.chat.completions.create(constrained);
        await engine.unload();
        await Stampo.cache.delete(url).catch(() => {});
        return { load, a, b };
      }, { threads }]),
      ...[1, 2].map((threads) => [`wllama (${threads} thread${threads > 1 ? "s" : ""})`, async ({ url, free, constrained, threads }) => {
        const { Wllama } = await import("/wllama/index.js");
        const wllama = new Wllama({ default: "/wllama/wasm/wllama.wasm" }, { suppressNativeLog: true });
        const t0 = performance.now();
        await wllama.loadModelFromUrl(new URL(url, location.href).href, { n_ctx: 512, n_threads: threads, n_gpu_layers: 0 });
        const load = (performance.now() - t0) / 1000;
        const a = await wllama.createChatCompletion(free);
        const b = await wllama.createChatCompletion(constrained);
        await wllama.exit();
        return { load, a, b };
      }, { threads }]),
    ];
    for (const [label, fn, extra] of runs) {
      const browser = await launchChromium();
      try {
        const p = await browser.context.newPage();
        await p.goto(`${server.origin}/blank.html`);
        const r = await p.evaluate(fn, { url, free: FREE, constrained: CONSTRAINED, ...extra });
        const text = String(r.b.choices?.[0]?.message?.content ?? "").replace(/\s+/g, " ");
        row([name, label, fmt(r.load), fmt(r.a.timings?.prompt_per_second), fmt(r.a.timings?.predicted_per_second),
          fmt(r.b.timings?.predicted_per_second), rendererPeakMiB().toFixed(0), `\`${text}\``]);
      } catch (e) {
        row([name, label, "failed", String(e.message ?? e).split("\n")[0], "", "", "", ""]);
      } finally {
        await browser.close();
      }
    }
  }
} finally {
  await server.close();
}
