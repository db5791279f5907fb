// Times stampo-gguf's header parse inside node's wasm engine: node wasm-parse.mjs MODULE.wasm MODEL.gguf
// Prints the best of 10 parse times in milliseconds.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const [wasmPath, modelPath] = process.argv.slice(2);
const { instance } = await WebAssembly.instantiate(readFileSync(wasmPath), {});
const file = readFileSync(modelPath);
const ptr = instance.exports.alloc(file.length);
new Uint8Array(instance.exports.memory.buffer, ptr, file.length).set(file);
let best = Infinity;
let tensors = -1;
for (let i = 0; i < 10; i++) {
  const t = performance.now();
  tensors = Number(instance.exports.parse_header(ptr, file.length));
  best = Math.min(best, performance.now() - t);
}
if (tensors < 0) {
  console.error(`${modelPath}: parse failed`);
  process.exit(1);
}
console.log(best.toFixed(2));
