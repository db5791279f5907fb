// stampo's JS API: a model loaded in a Web Worker, answering OpenAI- and llama.cpp-shaped
// requests whose output the grammar engine holds to a JSON Schema or GBNF grammar.
import { createHost } from "./host.js";

const CACHE_NAME = "stampo-models-v1";

/** Errors carry a stable `code` (`not_loaded`, `schema_refused`, `grammar_invalid`, ...). */
export class StampoError extends Error {
  constructor(message, code) {
    super(message);
    this.name = "StampoError";
    this.code = code;
  }
}

function abortError() {
  return new DOMException("the request was aborted", "AbortError");
}

/** Where the engine runs: a dedicated worker, or this thread (for tests). */
class Channel {
  constructor(useWorker) {
    this.next = 1;
    this.pending = new Map();
    const receive = (msg) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      if (msg.type === "chunk") return p.onChunk?.(JSON.parse(msg.chunk));
      this.pending.delete(msg.id);
      if (msg.type === "done") p.resolve(msg);
      else p.reject(new StampoError(msg.error.message, msg.error.code));
    };
    if (useWorker) {
      this.worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
      this.worker.onmessage = (e) => receive(e.data);
      this.worker.onerror = (e) => this.failAll(new StampoError(`the engine's worker failed: ${e.message}`, "worker_failed"));
      this.send = (msg, transfer) => this.worker.postMessage(msg, transfer ?? []);
    } else {
      const handle = createHost((msg) => queueMicrotask(() => receive(msg)));
      this.send = (msg) => handle(msg);
    }
  }

  call(msg, { transfer, onChunk } = {}) {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onChunk });
      this.send({ ...msg, id }, transfer);
    });
  }

  failAll(error) {
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
  }

  terminate() {
    this.worker?.terminate();
    this.failAll(abortError());
  }
}

async function sha256Hex(buffer) {
  const digest = await crypto.subtle.digest("SHA-256", buffer);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Reads a response body into one buffer, reporting progress; one copy when the size is known. */
async function readBody(response, total, onProgress, phase, signal) {
  const reader = response.body.getReader();
  let buffer = total ? new Uint8Array(total) : null;
  const parts = [];
  let loaded = 0;
  for (;;) {
    if (signal?.aborted) {
      await reader.cancel();
      throw abortError();
    }
    const { done, value } = await reader.read();
    if (done) break;
    if (buffer && loaded + value.length <= buffer.length) buffer.set(value, loaded);
    else {
      if (buffer) parts.push(buffer.subarray(0, loaded));
      buffer = null;
      parts.push(value);
    }
    loaded += value.length;
    onProgress?.({ phase, loaded, total: total ?? null });
  }
  if (buffer) return buffer.length === loaded ? buffer.buffer : buffer.slice(0, loaded).buffer;
  const out = new Uint8Array(loaded);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out.buffer;
}

/**
 * Where downloaded models are kept: the Origin Private File System where the browser has one
 * with writable files, else Cache Storage. Both hold a model whole or not at all.
 *
 * OPFS keeps each model as two files in `stampo-models/`, named by the SHA-256 of its URL: the
 * bytes, and a JSON record (`url`, `bytes`, `sha256`) written only once the bytes are complete.
 * A model without its record — a write cut short by a quota error or a closed tab — is not a
 * cached model, and is removed when next seen.
 */
async function openStore() {
  const root = await navigator.storage?.getDirectory?.().catch(() => null);
  if (root && typeof FileSystemFileHandle !== "undefined" && "createWritable" in FileSystemFileHandle.prototype) {
    return opfsStore(await root.getDirectoryHandle(OPFS_DIR, { create: true }));
  }
  if (typeof caches !== "undefined") return cacheStorageStore(await caches.open(CACHE_NAME));
  return null;
}

const OPFS_DIR = "stampo-models";

async function urlKey(url) {
  return sha256Hex(new TextEncoder().encode(url));
}

function opfsStore(dir) {
  const record = async (name) => {
    try {
      const file = await (await dir.getFileHandle(`${name}.json`)).getFile();
      return JSON.parse(await file.text());
    } catch {
      return null;
    }
  };
  const remove = async (name) => {
    for (const entry of [`${name}.json`, `${name}.gguf`]) await dir.removeEntry(entry).catch(() => {});
  };
  return {
    kind: "opfs",
    async match(url) {
      const name = await urlKey(url);
      const meta = await record(name);
      if (!meta) return null;
      const file = await (await dir.getFileHandle(`${name}.gguf`)).getFile().catch(() => null);
      if (!file || file.size !== meta.bytes) {
        await remove(name);
        return null;
      }
      return { body: new Response(file.stream()), bytes: meta.bytes, sha256: meta.sha256 };
    },
    async put(url, buffer, sha256) {
      const name = await urlKey(url);
      await remove(name);
      try {
        // A writable file is written to a swap file and replaces the file only on close().
        const model = await (await dir.getFileHandle(`${name}.gguf`, { create: true })).createWritable();
        await model.write(buffer);
        await model.close();
        const meta = await (await dir.getFileHandle(`${name}.json`, { create: true })).createWritable();
        await meta.write(JSON.stringify({ url, bytes: buffer.byteLength, sha256: sha256 ?? null }));
        await meta.close();
      } catch (err) {
        await remove(name);
        throw err;
      }
    },
    async delete(url) {
      const name = await urlKey(url);
      const had = (await record(name)) !== null;
      await remove(name);
      return had;
    },
    async list() {
      const out = [];
      for await (const [entry] of dir.entries()) {
        if (!entry.endsWith(".json")) continue;
        const meta = await record(entry.slice(0, -5));
        if (meta) out.push({ url: meta.url, bytes: meta.bytes, sha256: meta.sha256, store: "opfs" });
      }
      return out;
    },
  };
}

function cacheStorageStore(cache) {
  return {
    kind: "cache-storage",
    async match(url) {
      const hit = await cache.match(url);
      if (!hit) return null;
      return { body: hit, bytes: Number(hit.headers.get("content-length")) || null, sha256: hit.headers.get("x-stampo-sha256") || null };
    },
    async put(url, buffer, sha256) {
      // Cache.put stores the whole response or nothing: a quota error leaves no partial copy.
      await cache.put(url, new Response(buffer.slice(0), { headers: { "content-length": String(buffer.byteLength), "x-stampo-sha256": sha256 ?? "" } }));
    },
    delete: (url) => cache.delete(url),
    async list() {
      const out = [];
      for (const req of await cache.keys()) {
        const res = await cache.match(req);
        out.push({ url: req.url, bytes: Number(res?.headers.get("content-length")) || 0, sha256: res?.headers.get("x-stampo-sha256") || null, store: "cache-storage" });
      }
      return out;
    },
  };
}

/** The model's bytes from a URL (through the cache), a File/Blob, an ArrayBuffer or a stream. */
async function modelBytes(model, { onProgress, signal, cache, sha256 }) {
  if (model instanceof ArrayBuffer) return { buffer: model, source: "memory" };
  if (ArrayBuffer.isView(model)) return { buffer: model.buffer.slice(model.byteOffset, model.byteOffset + model.byteLength), source: "memory" };
  if (typeof Blob !== "undefined" && model instanceof Blob) {
    onProgress?.({ phase: "read", loaded: 0, total: model.size });
    const buffer = await model.arrayBuffer();
    onProgress?.({ phase: "read", loaded: model.size, total: model.size });
    return { buffer, source: "file" };
  }
  if (typeof ReadableStream !== "undefined" && model instanceof ReadableStream) {
    return { buffer: await readBody(new Response(model), null, onProgress, "download", signal), source: "stream" };
  }
  const url = new URL(String(model), globalThis.location?.href).href;
  const store = cache ? await openStore() : null;
  const hit = await store?.match(url);
  if (hit) {
    const buffer = await readBody(hit.body, hit.bytes, onProgress, "cache", signal);
    if (!sha256 || (await sha256Hex(buffer)) === sha256) return { buffer, source: "cache", store: store.kind };
    await store.delete(url); // a corrupt copy is dropped and fetched again
  }
  const response = await fetch(url, { signal });
  if (!response.ok) throw new StampoError(`${url}: HTTP ${response.status}`, "download_failed");
  const total = Number(response.headers.get("content-length")) || null;
  const buffer = await readBody(response, total, onProgress, "download", signal);
  if (sha256) {
    const got = await sha256Hex(buffer);
    if (got !== sha256) throw new StampoError(`${url}: sha256 ${got}, expected ${sha256}`, "checksum_mismatch");
  }
  let cacheError = null;
  if (store) {
    try {
      navigator.storage?.persist?.().catch(() => {});
      await store.put(url, buffer, sha256);
    } catch (err) {
      cacheError = `${err.name}: ${err.message}`;
    }
  }
  return { buffer, source: "network", cacheError, store: store?.kind ?? null };
}

function requestStream(channel, body, opts) {
  const queue = [];
  let wake = null;
  let finished = false;
  let failure = null;
  const done = run(channel, { ...body, stream: true }, opts, (chunk) => {
    queue.push(chunk);
    wake?.();
  });
  done.then(
    () => { finished = true; wake?.(); },
    (err) => { failure = err; finished = true; wake?.(); },
  );
  return {
    async *[Symbol.asyncIterator]() {
      for (;;) {
        while (queue.length) yield queue.shift();
        if (failure) throw failure;
        if (finished) return;
        await new Promise((r) => (wake = r));
        wake = null;
      }
    },
  };
}

async function run(channel, body, { signal, customJson } = {}, onChunk) {
  if (signal?.aborted) throw abortError();
  const shared = globalThis.crossOriginIsolated ? new SharedArrayBuffer(4) : null;
  const onAbort = () => {
    if (shared) Atomics.store(new Int32Array(shared), 0, 1);
    else channel.terminate(); // without shared memory the worker cannot be told mid-request
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const msg = await channel.call(
      { type: "run", body: JSON.stringify(body), customJson: customJson ? JSON.stringify(customJson) : "", abort: shared },
      { onChunk },
    );
    if (signal?.aborted) throw abortError();
    return JSON.parse(msg.response);
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

export class Stampo {
  /**
   * Loads a GGUF model. `model`: a URL, File, Blob, ArrayBuffer or ReadableStream.
   * `device`: "auto" (WebGPU where the browser has an adapter, else the CPU; `info.webgpu_fallback`
   * says why not), "webgpu" (an error with code `device_unavailable` when it cannot start) or
   * "cpu". `engine.device` says which one runs.
   */
  static async load({ model, device = "auto", contextSize = 4096, onProgress, signal, cache = true, sha256, worker = true } = {}) {
    if (!["auto", "cpu", "webgpu"].includes(device)) throw new StampoError(`device must be "auto", "cpu" or "webgpu", got ${JSON.stringify(device)}`, "invalid_argument");
    const { buffer, source, cacheError, store } = await modelBytes(model, { onProgress, signal, cache, sha256 });
    const channel = new Channel(worker);
    onProgress?.({ phase: "parse", loaded: buffer.byteLength, total: buffer.byteLength });
    const size = buffer.byteLength;
    const msg = await channel.call({ type: "load", buffer, contextSize, device }, {
      transfer: worker ? [buffer] : [],
      onChunk: ({ loaded, total }) => onProgress?.({ phase: "upload", loaded, total }),
    });
    // One token through the model, forgotten: on WebGPU this compiles the kernels, which
    // the first request would otherwise wait for.
    onProgress?.({ phase: "warm-up", loaded: size, total: size });
    const { warmUpMs } = await channel.call({ type: "warmUp" });
    onProgress?.({ phase: "ready", loaded: size, total: size });
    return new Stampo(channel, { ...msg.info, loadMs: msg.loadMs, warmUpMs, source, cacheStore: store ?? null, bytes: size, cacheError });
  }

  constructor(channel, info) {
    this.channel = channel;
    this.info = info;
    this.device = info.device;
    this.chat = {
      completions: {
        create: (body, opts) => (body.stream ? requestStream(this.channel, body, opts) : run(this.channel, body, opts)),
      },
    };
  }

  /** llama.cpp's `/completion` body; with `stream: true`, an async iterable of chunks. */
  completion(body, opts) {
    return body.stream ? requestStream(this.channel, body, opts) : run(this.channel, body, opts);
  }

  /**
   * Any body, either shape, as it is: chunks of a streaming body go to `onChunk`; resolves
   * with the response (for a streaming body, the last object). For callers that cannot
   * consume async iterables (the demo page's Rust UI).
   */
  request(body, { onChunk, signal, customJson } = {}) {
    return run(this.channel, body, { signal, customJson }, onChunk);
  }

  /** `{gbnf, report}` for a JSON Schema (object or JSON text). */
  async compileSchema(schema, { strict = false } = {}) {
    const text = typeof schema === "string" ? schema : JSON.stringify(schema);
    return JSON.parse((await this.channel.call({ type: "compileSchema", schema: text, strict })).result);
  }

  async tokenize(text, { addSpecial = true, parseSpecial = false } = {}) {
    return (await this.channel.call({ type: "tokenize", text, addSpecial, parseSpecial })).ids;
  }

  async detokenize(ids) {
    return (await this.channel.call({ type: "detokenize", ids: Array.from(ids) })).text;
  }

  /** Frees the model and stops the worker. */
  async unload() {
    await this.channel.call({ type: "unload" }).catch(() => {});
    this.channel.worker?.terminate();
  }
}

/** Models cached by URL: in OPFS where the browser has it, else in Cache Storage. */
Stampo.cache = {
  async list() {
    return (await openStore())?.list() ?? [];
  },
  async delete(url) {
    const store = await openStore();
    return store ? store.delete(new URL(url, globalThis.location?.href).href) : false;
  },
  async usage() {
    return (await navigator.storage?.estimate?.()) ?? { usage: null, quota: null };
  },
};

/** The model cache as a named export (for callers that cannot reach static members). */
export const cache = Stampo.cache;

export default Stampo;
