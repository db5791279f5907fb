// Time to first token in headless Chromium, cold (the model downloaded from localhost, the
// cache emptied first) and warm (a second load, from the model cache), and the engine's wasm
// memory after each load. The npm package in its worker, on the CPU path; per model, the
// person extraction of tests/browser/package.test.mjs, streamed: the first token is the first
// chunk with content. Not a test: numbers depend on the machine and its load.
//
//   scripts/build-pkg.sh && node bench/browser/load.mjs [MODEL.gguf ...]
//
// Models are read from $STAMPO_MODELS (default ~/.cache/stampo/models); the wasm from
// $STAMPO_WASM_DIR (default ~/.cache/stampo/wasm/release).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { launchChromium } from "../../tests/browser/chromium.mjs";
import { models, modelNames as names, personRequest, servePackage } from "./common.mjs";

const PERSON = personRequest({ max_tokens: 8, stream: true });

const server = await servePackage();
const browser = await launchChromium();
const mib = (b) => (b / 2 ** 20).toFixed(0);
try {
  const page = await browser.context.newPage();
  await page.goto(`${server.origin}/blank.html`);
  await page.evaluate(async () => { window.stampo = await import("/pkg/index.js"); });
  console.log("| model | file MiB | cold: load s, first token s | warm (cache): load s, first token s | wasm memory MiB (weights MiB) |");
  console.log("|---|---|---|---|---|");
  for (const name of names) {
    if (!existsSync(join(models, name))) {
      console.log(`SKIPPED: ${name} not in ${models}`);
      continue;
    }
    const r = await page.evaluate(async ({ url, body }) => {
      const { Stampo } = window.stampo;
      await Stampo.cache.delete(url).catch(() => {});
      const once = async () => {
        const t0 = performance.now();
        const engine = await Stampo.load({ model: url, contextSize: 512, device: "cpu" });
        const loaded = performance.now();
        let first = null;
        for await (const chunk of engine.chat.completions.create(body)) {
          if (first === null && chunk.choices?.[0]?.delta?.content) first = performance.now();
        }
        await engine.unload();
        return { load: (loaded - t0) / 1000, first: (first - t0) / 1000, info: engine.info };
      };
      const cold = await once();
      const warm = await once();
      await Stampo.cache.delete(url).catch(() => {});
      return { cold, warm };
    }, { url: `/models/${name}`, body: PERSON });
    const { cold, warm } = r;
    if (cold.info.source !== "network" || warm.info.source !== "cache") {
      throw new Error(`${name}: sources ${cold.info.source}, ${warm.info.source}`);
    }
    console.log(`| ${name} | ${mib(cold.info.bytes)} | ${cold.load.toFixed(2)}, ${cold.first.toFixed(2)} | ${warm.load.toFixed(2)}, ${warm.first.toFixed(2)} | ${mib(cold.info.wasm_memory_bytes)} (${mib(cold.info.weight_bytes)}) |`);
  }
} finally {
  await browser.close();
  await server.close();
}
