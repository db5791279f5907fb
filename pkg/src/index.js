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

/** A model crosses to the engine in pieces of at most this many bytes (from memory)... */
const PIECE_BYTES = 8 << 20;
/** ...and at most this many bytes are on their way at once, so a slow upload bounds memory. */
const IN_FLIGHT_BYTES = 32 << 20;

/** A stream's chunks as an async iterable; the stream is cancelled if the reader stops early. */
async function* chunksOf(stream, signal) {
  const reader = stream.getReader();
  let finished = false;
  try {
    for (;;) {
      if (signal?.aborted) throw abortError();
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        return;
      }
      yield value;
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => {});
  }
}

/** `length` bytes of `buffer` from `offset`, as copies of at most PIECE_BYTES (the caller's
 * buffer is left as it is). */
function* piecesOf(buffer, offset, length) {
  for (let at = 0; at < length; at += PIECE_BYTES) {
    yield new Uint8Array(buffer.slice(offset + at, offset + Math.min(at + PIECE_BYTES, length)));
  }
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
    /** A model written as it arrives; only `commit` makes it a cached model. */
    async writer(url) {
      const name = await urlKey(url);
      await remove(name);
      // A writable file is written to a swap file and replaces the file only on close().
      const model = await (await dir.getFileHandle(`${name}.gguf`, { create: true })).createWritable();
      let bytes = 0;
      return {
        async write(chunk) {
          await model.write(chunk);
          bytes += chunk.byteLength;
        },
        async commit(sha256) {
          try {
            await model.close();
            const meta = await (await dir.getFileHandle(`${name}.json`, { create: true })).createWritable();
            await meta.write(JSON.stringify({ url, bytes, sha256: sha256 ?? null }));
            await meta.close();
          } catch (err) {
            await remove(name);
            throw err;
          }
        },
        async abandon() {
          await model.abort().catch(() => {});
          await remove(name);
        },
      };
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
    /** A model written as it arrives: Cache.put stores the whole response or nothing. */
    async writer(url, { total, sha256 }) {
      let controller;
      let drained = null; // resolves when Cache.put has taken what is queued
      const body = new ReadableStream(
        { start: (c) => (controller = c), pull: () => drained?.() },
        new ByteLengthQueuingStrategy({ highWaterMark: IN_FLIGHT_BYTES }),
      );
      const headers = { "x-stampo-sha256": sha256 ?? "" };
      if (total) headers["content-length"] = String(total);
      const put = cache.put(url, new Response(body, { headers }));
      // A refusal (a quota error) stops the writes: the next one throws it.
      let refused = null;
      put.catch((err) => {
        refused = err;
        drained?.();
      });
      return {
        // A copy (the caller hands the chunk itself on to the engine), and a wait while
        // more than IN_FLIGHT_BYTES are queued, so a slow cache does not gather the file.
        async write(chunk) {
          if (refused) throw refused;
          controller.enqueue(chunk.slice());
          while (!refused && !(controller.desiredSize > 0)) await new Promise((resolve) => (drained = resolve));
          if (refused) throw refused;
        },
        async commit() {
          controller.close();
          await put;
        },
        async abandon() {
          controller.error(new Error("the model was not cached"));
          await put.catch(() => {});
        },
      };
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

/**
 * Where a model's bytes come from: `chunks` (an async iterable of Uint8Array), `total` (bytes,
 * when known), the progress `phase` they are reported under, `source`, and for a URL its
 * `store` (the model cache), whether it was a cache `hit`, and the `url`.
 */
async function openModel(model, { signal, cache }) {
  if (model instanceof ArrayBuffer) {
    return { chunks: piecesOf(model, 0, model.byteLength), total: model.byteLength, phase: "read", source: "memory" };
  }
  if (ArrayBuffer.isView(model)) {
    return { chunks: piecesOf(model.buffer, model.byteOffset, model.byteLength), total: model.byteLength, phase: "read", source: "memory" };
  }
  if (typeof Blob !== "undefined" && model instanceof Blob) {
    return { chunks: chunksOf(model.stream(), signal), total: model.size, phase: "read", source: "file" };
  }
  if (typeof ReadableStream !== "undefined" && model instanceof ReadableStream) {
    return { chunks: chunksOf(model, signal), total: null, phase: "download", source: "stream" };
  }
  const url = new URL(String(model), globalThis.location?.href).href;
  const store = cache ? await openStore() : null;
  const hit = await store?.match(url);
  if (hit) {
    return { chunks: chunksOf(hit.body.body, signal), total: hit.bytes, phase: "cache", source: "cache", store, hit: true, url };
  }
  return fromNetwork(url, store, signal);
}

/** A URL's bytes from the server; a failed request or a body cut short is `download_failed`. */
async function fromNetwork(url, store, signal) {
  const failed = (err) => {
    if (err?.name === "AbortError" || err instanceof StampoError) return err;
    return new StampoError(`${url}: ${err?.message ?? err}`, "download_failed");
  };
  const response = await fetch(url, { signal }).catch((err) => {
    throw failed(err);
  });
  if (!response.ok) throw new StampoError(`${url}: HTTP ${response.status}`, "download_failed");
  const total = Number(response.headers.get("content-length")) || null;
  // A compressed body's length is not the file's.
  const exact = total !== null && !response.headers.get("content-encoding");
  async function* chunks() {
    let loaded = 0;
    try {
      for await (const chunk of chunksOf(response.body, signal)) {
        loaded += chunk.byteLength;
        yield chunk;
      }
    } catch (err) {
      if (err?.name === "AbortError" || err instanceof StampoError) throw err;
      const of = total === null ? "" : ` of ${total}`;
      throw new StampoError(`${url}: the download broke off after ${loaded}${of} bytes (${err?.message ?? err})`, "download_failed");
    }
    if (exact && loaded !== total) {
      throw new StampoError(`${url}: the download stopped after ${loaded} of ${total} bytes`, "download_failed");
    }
  }
  return { chunks: chunks(), total, phase: "download", source: "network", store, hit: false, url };
}

/**
 * Streams an opened model into the engine: each piece goes to the engine (transferred, not
 * copied, to a worker) and, for a URL, into the model cache, so the file is never held whole.
 * The cache entry is committed only once the engine has loaded the model.
 */
async function streamModel(channel, opened, { contextSize, device, threads, sha256, onProgress, signal, worker }) {
  const onChunk = (p) => onProgress?.(p); // the engine's "parse" and "upload" reports
  await channel.call({ type: "loadBegin", contextSize, device, threads, sha256: sha256 ?? null });
  let cacheError = null;
  let sink = null;
  if (opened.store && !opened.hit) {
    sink = await opened.store.writer(opened.url, { total: opened.total, sha256 }).catch((err) => {
      cacheError = `${err.name}: ${err.message}`;
      return null;
    });
  }
  const inFlight = [];
  let inFlightBytes = 0;
  let loaded = 0;
  let failure = null;
  try {
    for await (let chunk of opened.chunks) {
      if (failure) throw failure;
      if (signal?.aborted) throw abortError();
      // Only a chunk that owns its whole buffer can be transferred.
      if (chunk.byteOffset !== 0 || chunk.byteLength !== chunk.buffer.byteLength) chunk = chunk.slice();
      if (sink) {
        try {
          await sink.write(chunk);
        } catch (err) {
          // A quota error: the model still loads, uncached, and the cache keeps nothing of it.
          cacheError = `${err.name}: ${err.message}`;
          await sink.abandon();
          sink = null;
        }
      }
      const size = chunk.byteLength;
      loaded += size;
      const sent = channel.call({ type: "loadChunk", chunk }, { transfer: worker ? [chunk.buffer] : [], onChunk });
      sent.catch((err) => {
        failure ??= err;
      });
      inFlight.push([sent, size]);
      inFlightBytes += size;
      onProgress?.({ phase: opened.phase, loaded, total: opened.total });
      while (inFlightBytes > IN_FLIGHT_BYTES) {
        const [oldest, bytes] = inFlight.shift();
        inFlightBytes -= bytes;
        await oldest;
      }
    }
    for (const [p] of inFlight) await p;
    if (signal?.aborted) throw abortError();
    const msg = await channel.call({ type: "loadEnd" });
    if (sink) {
      try {
        navigator.storage?.persist?.().catch(() => {});
        await sink.commit(sha256);
      } catch (err) {
        cacheError = `${err.name}: ${err.message}`;
      }
    }
    return { msg, bytes: loaded, cacheError };
  } catch (err) {
    await sink?.abandon();
    // Frees what the engine had taken of the file (a worker is stopped by the caller).
    channel.call({ type: "loadAbort" }).catch(() => {});
    throw err;
  }
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

/** The most threads a CPU load may ask for. */
const MAX_THREADS = 64;

/**
 * Threads for the CPU path when the caller names none: the cores the browser reports, at most
 * four (decoding reads every weight once a token, and past a few threads memory is the limit).
 */
function defaultThreads() {
  return Math.max(1, Math.min(globalThis.navigator?.hardwareConcurrency ?? 1, 4));
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
  static async load({ model, device = "auto", contextSize = 4096, threads = defaultThreads(), onProgress, signal, cache = true, sha256, worker = true } = {}) {
    if (!["auto", "cpu", "webgpu"].includes(device)) throw new StampoError(`device must be "auto", "cpu" or "webgpu", got ${JSON.stringify(device)}`, "invalid_argument");
    if (!Number.isInteger(threads) || threads < 1 || threads > MAX_THREADS) {
      throw new StampoError(`threads must be a whole number from 1 to ${MAX_THREADS}, got ${JSON.stringify(threads)}`, "invalid_argument");
    }
    if (signal?.aborted) throw abortError();
    const channel = new Channel(worker);
    try {
      const options = { contextSize, device, threads, sha256, onProgress, signal, worker };
      let opened = await openModel(model, { signal, cache });
      let loaded;
      try {
        loaded = await streamModel(channel, opened, options);
      } catch (err) {
        // A cached copy that fails its checksum or is no longer a readable GGUF is dropped,
        // and the model fetched again.
        if (!opened.hit || !["checksum_mismatch", "gguf_invalid"].includes(err.code)) throw err;
        await opened.store.delete(opened.url);
        opened = await fromNetwork(opened.url, opened.store, signal);
        loaded = await streamModel(channel, opened, options);
      }
      const { msg, bytes, cacheError } = loaded;
      // One token through the model, forgotten: on WebGPU this compiles the kernels, which
      // the first request would otherwise wait for.
      onProgress?.({ phase: "warm-up", loaded: bytes, total: bytes });
      const { warmUpMs, stepGraphs } = await channel.call({ type: "warmUp" });
      onProgress?.({ phase: "ready", loaded: bytes, total: bytes });
      const store = opened.store?.kind ?? null;
      return new Stampo(channel, { ...msg.info, step_graphs: stepGraphs, loadMs: msg.loadMs, warmUpMs, source: opened.source, cacheStore: store, bytes, cacheError });
    } catch (err) {
      // A failed load leaves nothing running: the worker (and all it held) is stopped.
      channel.worker?.terminate();
      throw err;
    }
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
