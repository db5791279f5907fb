// The grammar engine in the browser: stampo's wasm build beside XGrammar's (@mlc-ai/web-xgrammar
// from npm, XGrammar compiled to wasm by emscripten) in the same headless Chromium, and beside
// stampo native, on the same MaskBench schemas, vocabulary and token sequences (a cases file
// from bench/grammar/peers.py). Per schema: compile time, and the time of each token mask while
// walking every valid instance; medians over the schemas both engines compiled.
//
//   scripts/build-wasm.sh && . scripts/env.sh && node bench/browser/grammar.mjs [CASES.json ...]
//
// The browser's clock (performance.now()) is coarsened to 5 µs in this cross-origin isolated
// page, so p50s of a few µs are quantised; p99 and max are not much affected. XGrammar's
// getNextTokenBitmask returns a promise (its JS binding), whose cost is in its times, as a web
// app pays it. Not a test: numbers depend on the machine and its load.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { launchChromium } from "../../tests/browser/chromium.mjs";
import { serve } from "../../scripts/lib/static-server.mjs";
import { root, wasmDir } from "./common.mjs";

const files = process.argv.slice(2).length > 0 ? process.argv.slice(2) : [
  join(root, "bench/grammar/out/cases-smollm2.json"),
  join(root, "bench/grammar/out/cases-qwen.json"),
];

/** stampo native on the same cases (the grammar crate's example, a release build). */
function native(path) {
  const out = execFileSync("cargo", ["run", "--quiet", "--release", "-p", "stampo-grammar", "--example", "bench_cases", "--", path], {
    cwd: root, maxBuffer: 1 << 28, encoding: "utf8",
  });
  return JSON.parse(out);
}

const median = (xs) => {
  const s = xs.filter((x) => typeof x === "number").sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const server = await serve({
  "/pkg/wasm/": wasmDir,
  "/xgrammar/": join(root, "node_modules/@mlc-ai/web-xgrammar/lib"),
  "/cases/": dirname(files[0]),
  "/": join(root, "tests/browser/pages"),
});
const browser = await launchChromium();
try {
  for (const path of files) {
    const text = readFileSync(path, "utf8");
    const nativeRun = native(path);
    const page = await browser.context.newPage();
    await page.goto(`${server.origin}/blank.html`);
    const run = await page.evaluate(async (text) => {
      const cases = JSON.parse(text);
      const stampo = await import("/pkg/wasm/stampo_wasm.js");
      await stampo.default({ module_or_path: "/pkg/wasm/stampo_wasm_bg.wasm" });
      // Each engine runs every case twice and both passes are kept: the first runs largely in
      // V8's baseline (Liftoff) code while the optimising tier compiles in the background, the
      // second is the steady state a page reaches after its first document or two.
      const oursFirst = JSON.parse(stampo.benchGrammar(text));
      const ours = JSON.parse(stampo.benchGrammar(text));

      // XGrammar: the vocabulary as a byte-level BPE's token strings (GPT-2's byte-to-char map).
      const byteChar = [];
      let extra = 0;
      for (let b = 0; b < 256; b++) {
        const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        byteChar[b] = String.fromCodePoint(printable ? b : 256 + extra++);
      }
      const vocab = cases.vocab_hex.map((h) => {
        let s = "";
        for (let i = 0; i < h.length; i += 2) s += byteChar[parseInt(h.slice(i, i + 2), 16)];
        return s;
      });
      // A UMD bundle: imported as a module, it sets globalThis.xgrammar.
      await import("/xgrammar/index.js");
      const xgr = globalThis.xgrammar;
      const eos = cases.eos[0];
      const info = await xgr.TokenizerInfo.createTokenizerInfo(vocab, "byte_level", false, vocab.length, [eos]);
      const compiler = await xgr.GrammarCompiler.createGrammarCompiler(info, false);
      const stats = (xs) => {
        if (xs.length === 0) return null;
        const s = [...xs].sort((a, b) => a - b);
        const q = (p) => s[Math.round((s.length - 1) * p)];
        return { n: s.length, mean: s.reduce((a, b) => a + b, 0) / s.length, p50: q(0.5), p99: q(0.99), max: s.at(-1) };
      };
      const xgrammarPass = async () => {
      const theirs = [];
      for (const c of cases.cases) {
        const rec = { name: c.name };
        const t0 = performance.now();
        let compiled;
        try {
          compiled = await compiler.compileJSONSchema(JSON.stringify(c.schema), true, undefined, undefined, false);
        } catch (e) {
          rec.error = String(e?.message ?? e).slice(0, 200);
          theirs.push(rec);
          continue;
        }
        rec.compile_ms = performance.now() - t0;
        const times = [];
        let rejected = 0;
        let acceptedInvalid = 0;
        for (const tokens of c.valid) {
          const m = await xgr.GrammarMatcher.createGrammarMatcher(compiled);
          let ok = true;
          for (const t of tokens) {
            const t1 = performance.now();
            await m.getNextTokenBitmask();
            times.push((performance.now() - t1) * 1e3);
            if (!m.acceptToken(t)) {
              ok = false;
              break;
            }
          }
          if (!(ok && m.acceptToken(eos))) rejected += 1;
          m.dispose();
        }
        for (const tokens of c.invalid) {
          const m = await xgr.GrammarMatcher.createGrammarMatcher(compiled);
          if (tokens.every((t) => m.acceptToken(t)) && m.acceptToken(eos)) acceptedInvalid += 1;
          m.dispose();
        }
        compiled.dispose();
        Object.assign(rec, { mask_us: stats(times), valid_rejected: rejected, invalid_accepted: acceptedInvalid });
        theirs.push(rec);
      }
      return theirs;
      };
      const theirsFirst = await xgrammarPass();
      const theirs = await xgrammarPass();
      return { oursFirst: oursFirst.files, ours: ours.files, theirsFirst, theirs };
    }, text);
    await page.close();

    const engines = [
      ["stampo native", nativeRun.files],
      ["stampo wasm, first pass", run.oursFirst],
      ["stampo wasm", run.ours],
      ["web-xgrammar, first pass", run.theirsFirst],
      ["web-xgrammar", run.theirs],
    ];
    const ok = (f) => f && typeof f.compile_ms === "number";
    const names = run.ours.map((f) => f.name).filter((n) => engines.every(([, fs]) => ok(fs.find((f) => f.name === n))));
    console.log(`\n${basename(path)}: ${run.ours.length} schemas, ${names.length} compiled by all (medians over those)`);
    console.log("| engine | compiled | compile ms | mask µs p50 | mask µs p99 | mask µs max | valid rejected | invalid accepted |");
    console.log("|---|---|---|---|---|---|---|---|");
    const pick = (fs, key) => names.map((n) => fs.find((f) => f.name === n)).map(key);
    const row = {};
    for (const [label, fs] of engines) {
      row[label] = {
        compile: median(pick(fs, (f) => f.compile_ms)),
        p50: median(pick(fs, (f) => f.mask_us?.p50)),
        p99: median(pick(fs, (f) => f.mask_us?.p99)),
        max: median(pick(fs, (f) => f.mask_us?.max)),
      };
      const sum = (k) => fs.filter(ok).reduce((a, f) => a + (f[k] ?? 0), 0);
      const r = row[label];
      console.log(`| ${label} | ${fs.filter(ok).length} / ${fs.length} | ${r.compile.toFixed(2)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(1)} | ${sum("valid_rejected")} | ${sum("invalid_accepted")} |`);
    }
    const ratio = (a, b) => ["compile", "p50", "p99", "max"].map((k) => (row[a][k] / row[b][k]).toFixed(2)).join(", ");
    console.log(`stampo wasm / stampo native (compile, p50, p99, max): ${ratio("stampo wasm", "stampo native")}`);
    console.log(`  first pass: ${ratio("stampo wasm, first pass", "stampo native")}`);
    console.log(`stampo wasm / web-xgrammar (compile, p50, p99, max): ${ratio("stampo wasm", "web-xgrammar")}`);
    console.log(`  first pass: ${ratio("stampo wasm, first pass", "web-xgrammar, first pass")}`);
  }
} finally {
  await browser.close();
  await server.close();
}
