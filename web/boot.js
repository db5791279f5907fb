// Starts the page's wasm and registers the service worker that keeps the app usable offline.
// A file rather than Trunk's injected inline script, so the page's Content-Security-Policy
// can forbid inline scripts.
import init from "./stampo-web.js";

if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("./sw.js").catch((err) => console.warn("service worker:", err));
}
await init({ module_or_path: new URL("./stampo-web_bg.wasm", import.meta.url) });
