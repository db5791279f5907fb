// Starts the page's wasm. A file rather than Trunk's injected inline script, so the page's
// Content-Security-Policy can forbid inline scripts.
import init from "./stampo-web.js";

await init({ module_or_path: new URL("./stampo-web_bg.wasm", import.meta.url) });
