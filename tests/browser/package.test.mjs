// The npm package (pkg/src over the wasm build of crates/wasm) in headless Chromium: the
// default model loaded from a local server into the engine's worker, the Italian person
// extraction through chat.completions.create (whole and streamed), the same answer on one
// thread as on the threaded runtime's pool, one thread (and why) on a page that is not
// cross-origin isolated, an abort mid-stream, a second load served from
// Cache Storage with no request for the model, the same-thread mode.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createReadStream, existsSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium, webgpuInfo } from "./chromium.mjs";
import { serve } from "../../scripts/lib/static-server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const cache = process.env.STAMPO_CACHE ?? join(homedir(), ".cache/stampo");
const models = process.env.STAMPO_MODELS ?? join(cache, "models");
const wasmDir = process.env.STAMPO_WASM_DIR ?? join(cache, "wasm/release");
const MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf";
const MODEL_URL = `/models/${MODEL}`;

const PERSON = {
  messages: [
    { role: "system", content: "Estrai la persona dal testo come JSON." },
    { role: "user", content: "Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino." },
  ],
  temperature: 0,
  max_tokens: 96,
  response_format: {
    type: "json_schema",
    json_schema: {
      name: "persona",
      schema: {
        type: "object",
        properties: {
          nome: { type: "string" },
          eta: { type: "integer", minimum: 0, maximum: 120 },
          citta: { type: "string" },
        },
        required: ["nome", "eta", "citta"],
        additionalProperties: false,
      },
    },
  },
};

let server;
let browser;
let page;
const pageErrors = [];

before(async () => {
  for (const [what, path] of [["wasm build (run scripts/build-wasm.sh)", join(wasmDir, "stampo_wasm_bg.wasm")],
                              ["default model (run scripts/fetch-models.sh)", join(models, MODEL)]]) {
    if (!existsSync(path)) throw new Error(`${what} not found at ${path}`);
  }
  server = await serve({
    "/pkg/wasm/": wasmDir,
    "/pkg/": join(root, "pkg/src"),
    "/models/": models,
    // A download cut off halfway: the model's full Content-Length, half its bytes, then the
    // connection dropped.
    "/cut/": (req, res) => {
      const file = join(models, MODEL);
      const size = statSync(file).size;
      res.writeHead(200, { "Content-Length": size, "Cross-Origin-Resource-Policy": "same-origin" });
      const half = createReadStream(file, { end: Math.floor(size / 2) - 1 });
      half.pipe(res, { end: false });
      half.on("end", () => res.destroy());
    },
    // The blank page without COOP/COEP: not cross-origin isolated, as most sites are.
    "/open/": (req, res) => {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      res.end(readFileSync(join(root, "tests/browser/pages/blank.html")));
    },
    "/": join(root, "tests/browser/pages"),
  });
  browser = await launchChromium();
  page = await browser.context.newPage();
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  await page.goto(`${server.origin}/blank.html`);
  console.log(`# webgpu: ${JSON.stringify(await webgpuInfo(page))}`);
  await page.evaluate(async () => {
    window.stampo = await import("/pkg/index.js");
  });
});

after(async () => {
  await page?.evaluate(() => window.engine?.unload()).catch(() => {});
  await browser?.close();
  await server?.close();
});

/**
 * Whether this Chromium offers a WebGPU adapter. Without one the test is skipped, or fails
 * under STAMPO_REQUIRE_WGPU=1 (scripts/test.sh), as the native wgpu tests do.
 */
async function hasWebgpu() {
  const adapter = await webgpuInfo(page);
  if (adapter.available) return true;
  const why = `SKIPPED: no WebGPU adapter in this Chromium (${adapter.reason})`;
  if (process.env.STAMPO_REQUIRE_WGPU === "1") assert.fail(why);
  console.log(`# ${why}`);
  return false;
}

function checkPerson(text) {
  const person = JSON.parse(text);
  assert.deepEqual(Object.keys(person).sort(), ["citta", "eta", "nome"], text);
  assert.equal(typeof person.nome, "string");
  assert.equal(typeof person.citta, "string");
  assert.ok(Number.isInteger(person.eta) && person.eta >= 0 && person.eta <= 120, text);
  return person;
}

test("the default model loads into the worker with progress, on the CPU", { timeout: 300_000 }, async () => {
  const info = await page.evaluate(async (url) => {
    const phases = new Set();
    const upload = [];
    let last = null;
    window.engine = await window.stampo.Stampo.load({
      model: url,
      contextSize: 1024,
      onProgress: (p) => {
        phases.add(p.phase);
        last = p;
        if (p.phase === "upload") upload.push([p.loaded, p.total]);
      },
    });
    return { ...window.engine.info, phases: [...phases], last, upload, isolated: crossOriginIsolated, cores: navigator.hardwareConcurrency };
  }, MODEL_URL);
  const { upload, ...shown } = info;
  console.log(`# loaded: ${JSON.stringify(shown)}`);
  assert.equal(info.source, "network");
  assert.equal(info.device, "cpu");
  assert.match(info.webgpu_fallback, /software fallback|no WebGPU/, "auto says why WebGPU was passed over");
  assert.equal(info.step_graphs, null, "no recorded steps on the CPU path");
  assert.equal(info.architecture, "llama");
  assert.deepEqual(info.phases, ["download", "parse", "upload", "warm-up", "ready"]);
  // The weights' upload counts up, tensor by tensor, to all of the file's tensor bytes.
  assert.ok(upload.length > 100, `${upload.length} upload reports`);
  assert.ok(upload.every(([loaded, total], i) => loaded <= total && (i === 0 || loaded >= upload[i - 1][0])));
  const [done, total] = upload.at(-1);
  assert.equal(done, total);
  assert.ok(total > 0.9 * info.bytes && total < info.bytes, `${total} tensor bytes of ${info.bytes}`);
  assert.ok(info.warmUpMs >= 0);
  assert.equal(info.last.loaded, info.bytes);
  assert.ok(info.isolated, "the page is cross-origin isolated (COOP/COEP), so aborts are cooperative");
  // Isolated, in a worker: the threaded runtime, on as many threads as the browser reports
  // cores (at most four).
  assert.equal(info.threads, Math.min(info.cores, 4), JSON.stringify(shown));
  assert.equal(info.threads_fallback, null);
  // The file streamed in: the module holds the weights once (a whole copy of the file beside
  // them would take it past two files' size), plus the KV cache and scratch.
  const kvBytes = 30 * 2 * 1024 * 192 * 4; // layers × (K, V) × positions × kv width × f32
  console.log(`# wasm memory after load: ${(info.wasm_memory_bytes / 2 ** 20).toFixed(1)} MiB for a ${(info.bytes / 2 ** 20).toFixed(1)} MiB file (KV cache ${(kvBytes / 2 ** 20).toFixed(1)} MiB)`);
  assert.ok(info.wasm_memory_bytes < info.bytes + kvBytes + 48 * 2 ** 20, `${info.wasm_memory_bytes} bytes of wasm memory`);
});

test("person extraction through chat.completions.create, whole and streamed, agree", { timeout: 300_000 }, async () => {
  const out = await page.evaluate(async (body) => {
    const t0 = performance.now();
    const whole = await window.engine.chat.completions.create(body);
    const t1 = performance.now();
    const chunks = [];
    for await (const chunk of window.engine.chat.completions.create({ ...body, stream: true })) chunks.push(chunk);
    return { whole, chunks, ms: t1 - t0 };
  }, PERSON);
  const text = out.whole.choices[0].message.content;
  const person = checkPerson(text);
  assert.equal(out.whole.choices[0].finish_reason, "stop");
  const t = out.whole.timings;
  console.log(`# extracted ${JSON.stringify(person)} in ${out.ms.toFixed(0)} ms: prompt ${t.prompt_n} tokens at ${t.prompt_per_second.toFixed(1)}/s, ${t.predicted_n} generated at ${t.predicted_per_second.toFixed(1)}/s`);
  const streamed = out.chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
  assert.equal(streamed, text, "the streamed deltas spell the whole response");
  assert.ok(out.chunks.some((c) => c.choices?.[0]?.finish_reason === "stop"), "a chunk closes with finish_reason stop");
});

test("one thread gives the pool's answer; off a worker the pool falls back to one thread and says why", { timeout: 300_000 }, async () => {
  const out = await page.evaluate(async ({ url, body }) => {
    const answer = async (engine) => (await engine.chat.completions.create(body)).choices[0].message.content;
    const pooled = await answer(window.engine);
    const single = await window.stampo.Stampo.load({ model: url, contextSize: 1024, threads: 1 });
    const one = { text: await answer(single), info: single.info };
    await single.unload();
    const here = await window.stampo.Stampo.load({ model: url, contextSize: 1024, threads: 2, worker: false });
    const sameThread = { text: await answer(here), info: here.info };
    await here.unload();
    let refused = null;
    await window.stampo.Stampo.load({ model: url, threads: 0 }).catch((e) => (refused = { code: e.code, message: e.message }));
    return { pooled, one, sameThread, refused, poolThreads: window.engine.info.threads };
  }, { url: MODEL_URL, body: PERSON });
  console.log(`# ${out.poolThreads} threads: ${out.pooled}; one thread: ${out.one.text}; same thread: ${out.sameThread.text}`);
  assert.equal(out.one.info.threads, 1);
  assert.equal(out.one.info.threads_fallback, null, "one thread asked for is not a fallback");
  assert.equal(out.one.text, out.pooled, "the same tokens on one thread as on the pool");
  assert.equal(out.sameThread.info.threads, 1);
  assert.match(out.sameThread.info.threads_fallback, /page's thread/);
  assert.equal(out.sameThread.text, out.pooled);
  assert.equal(out.refused?.code, "invalid_argument", JSON.stringify(out.refused));
  assert.match(out.refused.message, /threads must be a whole number from 1 to 64, got 0/);
});

test("on a page that is not cross-origin isolated the model loads on one thread and says why", { timeout: 300_000 }, async () => {
  const open = await browser.context.newPage();
  try {
    await open.goto(`${server.origin}/open/blank.html`);
    const out = await open.evaluate(async ({ url, body }) => {
      const { Stampo } = await import("/pkg/index.js");
      const engine = await Stampo.load({ model: url, contextSize: 1024, device: "cpu", threads: 2 });
      const text = (await engine.chat.completions.create(body)).choices[0].message.content;
      await engine.unload();
      return { isolated: crossOriginIsolated, info: engine.info, text };
    }, { url: MODEL_URL, body: PERSON });
    assert.equal(out.isolated, false);
    assert.equal(out.info.device, "cpu");
    assert.equal(out.info.threads, 1);
    assert.match(out.info.threads_fallback, /not cross-origin isolated/);
    checkPerson(out.text);
  } finally {
    await open.close();
  }
});

test("an abort mid-stream rejects with AbortError and the engine goes on serving", { timeout: 300_000 }, async () => {
  const out = await page.evaluate(async (body) => {
    const controller = new AbortController();
    let seen = 0;
    let error = null;
    try {
      for await (const chunk of window.engine.chat.completions.create({ ...body, stream: true, max_tokens: 200 }, { signal: controller.signal })) {
        if (chunk.choices?.[0]?.delta?.content) seen += 1;
        if (seen === 3) controller.abort();
      }
    } catch (e) {
      error = { name: e.name, message: e.message };
    }
    const after = await window.engine.tokenize("ciao");
    return { seen, error, after };
  }, PERSON);
  assert.equal(out.error?.name, "AbortError", JSON.stringify(out));
  assert.ok(out.seen >= 3 && out.seen < 10, `chunks before the abort took hold: ${out.seen}`);
  assert.ok(out.after.length > 0);
});

test("on WebGPU the model gives the CPU path's first-token probabilities and a schema-shaped answer", { timeout: 600_000 }, async () => {
  // Here the adapter is SwiftShader (a software fallback, so "auto" keeps to the CPU):
  // "webgpu" is asked for by name. Slow (a CPU emulating a GPU), but the same WGSL kernels a
  // GPU runs.
  if (!(await hasWebgpu())) return;
  const out = await page.evaluate(async ({ url }) => {
    const probe = { prompt: "The capital of France is", n_predict: 1, temperature: 0, n_probs: 5 };
    // Constrained, kept short (SwiftShader takes seconds a token): the same prompt, which the
    // KV cache still holds, under a JSON Schema.
    const city = {
      prompt: probe.prompt,
      temperature: 0,
      n_predict: 8,
      json_schema: { enum: ["Paris", "London", "Rome"] },
    };
    const cpu = await window.engine.completion(probe);
    const cpuCity = await window.engine.completion(city);
    const t0 = performance.now();
    const gpu = await window.stampo.Stampo.load({ model: url, device: "webgpu", contextSize: 256 });
    const loadMs = performance.now() - t0;
    try {
      const onGpu = await gpu.completion(probe);
      const gpuCity = await gpu.completion(city);
      return { device: gpu.device, fallback: gpu.info.webgpu_fallback, stepGraphs: gpu.info.step_graphs, loadMs, warmUpMs: gpu.info.warmUpMs, wasmMemory: gpu.info.wasm_memory_bytes, fileBytes: gpu.info.bytes, cpu, onGpu, cpuCity, gpuCity };
    } finally {
      await gpu.unload();
    }
  }, { url: MODEL_URL });
  assert.equal(out.device, "webgpu");
  assert.equal(out.fallback, null);
  // The warm-up's step was recorded, so the answer's decoding steps replay it (a refused
  // recording would fall back to launching kernel by kernel: "off").
  assert.equal(out.stepGraphs, "recorded");
  const top = (r) => r.completion_probabilities[0].top_logprobs;
  const [cpuTop, gpuTop] = [top(out.cpu), top(out.onGpu)];
  const show = (list) => JSON.stringify(list.map((t) => [t.token, Math.exp(t.logprob).toFixed(3)]));
  console.log(`# WebGPU loaded in ${out.loadMs.toFixed(0)} ms (warm-up ${out.warmUpMs.toFixed(0)} ms); first token on the CPU ${show(cpuTop)}, on WebGPU ${show(gpuTop)}`);
  // Each tensor went to the GPU as it arrived: the module never held the file.
  console.log(`# WebGPU runtime's wasm memory after load: ${(out.wasmMemory / 2 ** 20).toFixed(1)} MiB for a ${(out.fileBytes / 2 ** 20).toFixed(1)} MiB file`);
  assert.ok(out.wasmMemory < out.fileBytes, `${out.wasmMemory} bytes of wasm memory`);
  assert.equal(gpuTop[0].id, cpuTop[0].id, "the same most likely first token");
  // The CPU path rounds activations to 8 bits as llama.cpp does; WebGPU multiplies them in
  // f32: probabilities agree to a few hundredths, not bit for bit.
  for (const t of cpuTop.slice(0, 3)) {
    const g = gpuTop.find((x) => x.id === t.id);
    assert.ok(g, `token ${JSON.stringify(t.token)} in both top 5`);
    assert.ok(Math.abs(Math.exp(g.logprob) - Math.exp(t.logprob)) < 0.03, `p(${JSON.stringify(t.token)}): CPU ${Math.exp(t.logprob)}, WebGPU ${Math.exp(g.logprob)}`);
  }
  const answer = out.gpuCity.content;
  const t = out.gpuCity.timings;
  console.log(`# WebGPU (SwiftShader) answered ${answer} (the CPU: ${out.cpuCity.content}): ${t.predicted_n} tokens at ${t.predicted_per_second.toFixed(2)}/s; probe prompt ${out.onGpu.timings.prompt_n} tokens at ${out.onGpu.timings.prompt_per_second.toFixed(2)}/s`);
  assert.ok(["Paris", "London", "Rome"].includes(JSON.parse(answer)), answer);
  assert.equal(out.gpuCity.stop_type, "eos");
});

test("a lost WebGPU device is a typed error, and the model loads again", { timeout: 600_000 }, async () => {
  if (!(await hasWebgpu())) return;
  const probe = { prompt: "The capital of France is", n_predict: 1, temperature: 0 };
  await page.evaluate(async (url) => {
    window.gpu = await window.stampo.Stampo.load({ model: url, device: "webgpu", contextSize: 64 });
  }, MODEL_URL);
  // What a driver reset or a GPU process crash does to every WebGPU device in the browser.
  const cdp = await browser.context.newCDPSession(page);
  await cdp.send("Browser.crashGpuProcess");
  const out = await page.evaluate(async ({ url, probe }) => {
    let lost = null;
    try {
      await window.gpu.completion(probe);
    } catch (e) {
      lost = { code: e.code, message: e.message };
    }
    await window.gpu.unload();
    const again = await window.stampo.Stampo.load({ model: url, device: "webgpu", contextSize: 64 });
    try {
      return { lost, device: again.device, text: (await again.completion(probe)).content };
    } finally {
      await again.unload();
    }
  }, { url: MODEL_URL, probe });
  console.log(`# device lost: ${JSON.stringify(out.lost)}; loaded again on ${out.device}: ${JSON.stringify(out.text)}`);
  assert.equal(out.lost?.code, "device_lost", JSON.stringify(out.lost));
  assert.match(out.lost.message, /device was lost .*load the model again/s);
  assert.equal(out.device, "webgpu");
  assert.equal(out.text, " Paris");
  // The CPU engine, in its own worker, never noticed.
  const cpu = await page.evaluate((probe) => window.engine.completion(probe), probe);
  assert.equal(cpu.content, " Paris");
});

test("a bad request is a typed error, never unconstrained output", { timeout: 60_000 }, async () => {
  const err = await page.evaluate(async () => {
    try {
      await window.engine.completion({ prompt: "x", grammar: "root ::= (", n_predict: 4 });
      return null;
    } catch (e) {
      return { name: e.name, code: e.code, message: e.message };
    }
  });
  assert.equal(err?.code, "grammar_invalid", JSON.stringify(err));
});

test("a bad model is a typed error, nothing is cached, and the next load works", { timeout: 300_000 }, async () => {
  const out = await page.evaluate(async (url) => {
    const { Stampo } = window.stampo;
    const attempt = async (options) => {
      try {
        const engine = await Stampo.load({ contextSize: 256, device: "cpu", ...options });
        await engine.unload();
        return { loaded: true };
      } catch (e) {
        return { name: e.name, code: e.code, message: e.message };
      }
    };
    const whole = await (await fetch(url)).arrayBuffer();
    const results = {
      missing: await attempt({ model: "/models/no-such-model.gguf" }),
      notGguf: await attempt({ model: "/pkg/index.js" }),
      cutShort: await attempt({ model: new Blob([whole.slice(0, whole.byteLength / 2)]) }),
      cutDownload: await attempt({ model: `/cut/${url.split("/").pop()}` }),
      // A checksum that cannot match: the URL is not cached (it was not cached before).
      checksum: await attempt({ model: `${url}?fresh`, sha256: "0".repeat(64) }),
      cutShortSameThread: await attempt({ model: whole.slice(0, 5000), worker: false }),
    };
    const cached = (await Stampo.cache.list()).map((c) => c.url);
    const engine = await Stampo.load({ model: whole, contextSize: 256, device: "cpu", worker: false });
    results.after = { source: engine.info.source, ids: await engine.tokenize("Ciao") };
    await engine.unload();
    return { results, cached, wholeBytes: whole.byteLength };
  }, MODEL_URL);
  const r = out.results;
  console.log(`# bad models: ${JSON.stringify(r)}`);
  assert.equal(r.missing.code, "download_failed", JSON.stringify(r.missing));
  assert.match(r.missing.message, /HTTP 404/);
  assert.equal(r.notGguf.code, "gguf_invalid", JSON.stringify(r.notGguf));
  assert.equal(r.cutShort.code, "gguf_invalid", JSON.stringify(r.cutShort));
  assert.match(r.cutShort.message, /tensor '/, "names the tensor it stopped in");
  assert.equal(r.checksum.code, "checksum_mismatch", JSON.stringify(r.checksum));
  assert.equal(r.cutDownload.code, "download_failed", JSON.stringify(r.cutDownload));
  assert.match(r.cutDownload.message, /broke off after \d+ of 98362432 bytes/);
  assert.equal(r.cutShortSameThread.code, "gguf_invalid", JSON.stringify(r.cutShortSameThread));
  assert.ok(!out.cached.some((u) => u.includes("?fresh") || u.includes("/cut/") || u.endsWith("/pkg/index.js")), `nothing bad cached: ${out.cached}`);
  assert.equal(r.after.source, "memory");
  assert.ok(r.after.ids.length > 0);
  assert.deepEqual(pageErrors, []);
});

test("a quota error while caching leaves the model loaded and nothing cached", { timeout: 300_000 }, async () => {
  const out = await page.evaluate(async (url) => {
    const { Stampo } = window.stampo;
    // The third write into OPFS fails as a full disk makes it fail.
    const write = FileSystemWritableFileStream.prototype.write;
    let writes = 0;
    FileSystemWritableFileStream.prototype.write = function (data) {
      writes += 1;
      if (writes === 3) return Promise.reject(new DOMException("the quota is exceeded", "QuotaExceededError"));
      return write.call(this, data);
    };
    try {
      const engine = await Stampo.load({ model: `${url}?quota`, contextSize: 256, device: "cpu" });
      const ids = await engine.tokenize("Ciao");
      await engine.unload();
      const cached = (await Stampo.cache.list()).map((c) => c.url);
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("stampo-models");
      const files = [];
      for await (const [name] of dir.entries()) files.push(name);
      return { info: engine.info, ids, cached, files };
    } finally {
      FileSystemWritableFileStream.prototype.write = write;
    }
  }, MODEL_URL);
  assert.match(out.info.cacheError ?? "", /QuotaExceededError/, JSON.stringify(out.info));
  assert.equal(out.info.source, "network");
  assert.ok(out.ids.length > 0, "the model loaded and serves");
  assert.ok(!out.cached.some((u) => u.includes("?quota")), `not listed as cached: ${out.cached}`);
  // Only the records and bytes of whole models remain: two files per cached model.
  assert.equal(out.files.length, 2 * out.cached.length, `OPFS holds ${out.files}`);
  assert.deepEqual(pageErrors, []);
});

test("where OPFS has no writable files, the model is cached in Cache Storage", { timeout: 300_000 }, async () => {
  const url = `${MODEL_URL}?cache-storage`;
  const out = await page.evaluate(async (url) => {
    const { Stampo } = window.stampo;
    // What a browser without writable OPFS files (an older Safari) offers.
    const proto = FileSystemFileHandle.prototype;
    const createWritable = Object.getOwnPropertyDescriptor(proto, "createWritable");
    delete proto.createWritable;
    try {
      const load = async () => {
        const engine = await Stampo.load({ model: url, contextSize: 256, device: "cpu", worker: false });
        const ids = await engine.tokenize("Ciao");
        await engine.unload();
        return { source: engine.info.source, store: engine.info.cacheStore, cacheError: engine.info.cacheError, ids };
      };
      const first = await load();
      const second = await load();
      const listed = (await Stampo.cache.list()).filter((c) => c.url.endsWith(url));
      const deleted = await Stampo.cache.delete(url);
      const after = (await Stampo.cache.list()).filter((c) => c.url.endsWith(url));
      // A full disk: Cache.put refuses; the model still loads, uncached.
      const put = Cache.prototype.put;
      Cache.prototype.put = () => Promise.reject(new DOMException("the quota is exceeded", "QuotaExceededError"));
      let full;
      try {
        full = await load();
      } finally {
        Cache.prototype.put = put;
      }
      const afterFull = (await Stampo.cache.list()).filter((c) => c.url.endsWith(url));
      return { first, second, listed, deleted, after, full, afterFull };
    } finally {
      Object.defineProperty(proto, "createWritable", createWritable);
    }
  }, url);
  assert.deepEqual([out.first.source, out.first.store, out.first.cacheError], ["network", "cache-storage", null], JSON.stringify(out.first));
  assert.deepEqual([out.second.source, out.second.store], ["cache", "cache-storage"], JSON.stringify(out.second));
  assert.deepEqual(out.second.ids, out.first.ids);
  // The first load and the one the full disk left uncached; the second asked nothing.
  assert.equal(server.requests.filter((r) => r === url).length, 2, "the second load asked the server nothing");
  assert.equal(out.listed.length, 1, JSON.stringify(out.listed));
  assert.equal(out.listed[0].store, "cache-storage");
  assert.equal(out.listed[0].bytes, 98362432);
  assert.ok(out.deleted);
  assert.deepEqual(out.after, []);
  assert.equal(out.full.source, "network");
  assert.match(out.full.cacheError ?? "", /QuotaExceededError/, JSON.stringify(out.full));
  assert.deepEqual(out.full.ids, out.first.ids);
  assert.deepEqual(out.afterFull, []);
  assert.deepEqual(pageErrors, []);
});

test("a second load comes from the model cache (OPFS) without asking the server", { timeout: 300_000 }, async () => {
  const before = server.requests.filter((r) => r.startsWith(MODEL_URL)).length;
  const info = await page.evaluate(async (url) => {
    const second = await window.stampo.Stampo.load({ model: url, contextSize: 256, worker: false });
    const ids = await second.tokenize("Ciao, mondo!");
    const text = await second.detokenize(ids);
    const cached = await window.stampo.Stampo.cache.list();
    await second.unload();
    return { source: second.info.source, store: second.info.cacheStore, ids, text, cached };
  }, MODEL_URL);
  const afterCount = server.requests.filter((r) => r.startsWith(MODEL_URL)).length;
  assert.equal(info.source, "cache");
  assert.equal(info.store, "opfs", "Chromium has OPFS with writable files");
  assert.equal(afterCount, before, "no request for the model");
  assert.equal(info.text, "Ciao, mondo!");
  assert.ok(info.cached.some((c) => c.url.endsWith(MODEL_URL) && c.store === "opfs" && c.bytes > 0), JSON.stringify(info.cached));
  assert.deepEqual(pageErrors, []);
});

test("a model cut short in the cache is not taken for a cached one", { timeout: 300_000 }, async () => {
  // What a quota error or a closed tab mid-write leaves: the bytes, truncated, without their
  // record. The next load must fetch the model again (and cache it whole).
  const before = server.requests.filter((r) => r.startsWith(MODEL_URL)).length;
  const out = await page.evaluate(async (url) => {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("stampo-models");
    const names = [];
    for await (const [name] of dir.entries()) names.push(name);
    const record = names.find((n) => n.endsWith(".json"));
    const model = record.replace(/\.json$/, ".gguf");
    await dir.removeEntry(record);
    const file = await (await dir.getFileHandle(model)).createWritable({ keepExistingData: true });
    await file.truncate(1000);
    await file.close();
    const listed = await window.stampo.Stampo.cache.list();
    const again = await window.stampo.Stampo.load({ model: url, contextSize: 256, worker: false });
    const source = again.info.source;
    await again.unload();
    return { listed, source, cached: await window.stampo.Stampo.cache.list() };
  }, MODEL_URL);
  const afterCount = server.requests.filter((r) => r.startsWith(MODEL_URL)).length;
  assert.deepEqual(out.listed, [], "bytes without a record are not listed");
  assert.equal(out.source, "network");
  assert.equal(afterCount, before + 1, "the model was fetched again");
  assert.ok(out.cached.some((c) => c.url.endsWith(MODEL_URL) && c.bytes > 1000), JSON.stringify(out.cached));
});
