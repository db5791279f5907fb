/** Progress of `Stampo.load`: bytes of the current phase and, when known, the total. */
export interface LoadProgress {
  phase: "download" | "cache" | "read" | "parse" | "upload" | "warm-up" | "ready";
  loaded: number;
  total: number | null;
}

export interface LoadOptions {
  /** A URL, a File/Blob, an ArrayBuffer (or view) or a ReadableStream of a GGUF file. */
  model: string | URL | Blob | ArrayBuffer | ArrayBufferView | ReadableStream<Uint8Array>;
  /**
   * "auto" (default): WebGPU where the browser has an adapter, else the CPU. "webgpu": WebGPU
   * or an error with code `device_unavailable`. "cpu": the CPU (wasm `simd128`).
   */
  device?: "auto" | "cpu" | "webgpu";
  /** KV cache size in tokens, capped at the model's context length. Default 4096. */
  contextSize?: number;
  /**
   * Threads for the CPU path (1 to 64; default: `navigator.hardwareConcurrency`, at most 4).
   * More than one runs the threaded runtime, which needs the engine in a worker (the default)
   * and a cross-origin isolated page (COOP/COEP headers); elsewhere the load goes on with one
   * thread and `info.threads_fallback` says why.
   */
  threads?: number;
  onProgress?: (progress: LoadProgress) => void;
  signal?: AbortSignal;
  /** Keep URL downloads in the model cache, OPFS or Cache Storage (default true). */
  cache?: boolean;
  /** Expected SHA-256 (hex) of the file: checked as it streams in, from the network or the cache (`checksum_mismatch`). */
  sha256?: string;
  /** Run the engine in a dedicated Web Worker (default true); false runs it on this thread. */
  worker?: boolean;
}

export interface ModelInfo {
  name: string;
  architecture: string;
  context_size: number;
  n_vocab: number;
  weight_bytes: number;
  device: "webgpu" | "cpu";
  /** Why "auto" did not use WebGPU (no adapter, say); null otherwise. */
  webgpu_fallback: string | null;
  /** Threads the CPU path's products run on (1 on WebGPU). */
  threads: number;
  /**
   * On WebGPU, whether decoding steps replay a recording of the warm-up's step ("recorded"),
   * or launch kernel by kernel because the recording was refused ("off"); null on the CPU.
   */
  step_graphs: "recorded" | "on" | "off" | null;
  /** Why a CPU load asking for several threads runs on one (a page not cross-origin isolated, say); null otherwise. */
  threads_fallback: string | null;
  /**
   * The engine's wasm memory once loaded, in bytes: it never shrinks, so this is the most
   * the load took (weights, on the CPU path; KV cache; scratch).
   */
  wasm_memory_bytes: number | null;
  loadMs: number;
  /** Time of the warm-up pass (one token, forgotten): on WebGPU, mostly compiling kernels. */
  warmUpMs: number;
  source: "network" | "cache" | "file" | "memory" | "stream";
  /** Where a model from a URL is kept: OPFS, else Cache Storage; null when not cached. */
  cacheStore: "opfs" | "cache-storage" | null;
  bytes: number;
  /** Why the download could not be cached (a quota error, say); the model still loaded. */
  cacheError?: string | null;
}

export interface RequestOptions {
  signal?: AbortSignal;
  /** Merged over the body last, shallowly, as llama.cpp's web UI merges "Custom JSON". */
  customJson?: Record<string, unknown>;
}

export interface KeywordReport {
  pointer: string;
  keyword: string;
  status: "enforced" | "narrowed" | "annotation" | "ignored" | "refused";
  reason?: string;
}

/** An error from the engine, with a stable code (`schema_refused`, `grammar_invalid`, `device_unavailable`, `device_lost`, ...). */
export class StampoError extends Error {
  code: string;
}

export type Body = Record<string, unknown>;
export type Chunk = Record<string, any>;

export class Stampo {
  static load(options: LoadOptions): Promise<Stampo>;
  static cache: {
    list(): Promise<{ url: string; bytes: number; sha256: string | null; store: "opfs" | "cache-storage" }[]>;
    delete(url: string): Promise<boolean>;
    usage(): Promise<StorageEstimate | { usage: null; quota: null }>;
  };
  readonly info: ModelInfo;
  readonly device: "webgpu" | "cpu";
  readonly chat: {
    completions: {
      /** OpenAI's `/v1/chat/completions`: with `stream: true`, an async iterable of chunks. */
      create(body: Body & { stream: true }, options?: RequestOptions): AsyncIterable<Chunk>;
      create(body: Body, options?: RequestOptions): Promise<Record<string, any>>;
    };
  };
  /** llama.cpp's `/completion`: with `stream: true`, an async iterable of chunks. */
  completion(body: Body & { stream: true }, options?: RequestOptions): AsyncIterable<Chunk>;
  completion(body: Body, options?: RequestOptions): Promise<Record<string, any>>;
  /** Any body as it is; chunks of a streaming body go to `onChunk`. */
  request(body: Body, options?: RequestOptions & { onChunk?: (chunk: Chunk) => void }): Promise<Record<string, any> | Record<string, any>[]>;
  compileSchema(schema: object | string, options?: { strict?: boolean }): Promise<{ gbnf: string; report: KeywordReport[] }>;
  tokenize(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): Promise<number[]>;
  detokenize(ids: Iterable<number>): Promise<string>;
  unload(): Promise<void>;
}

export declare const cache: typeof Stampo.cache;

export default Stampo;
