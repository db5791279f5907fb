// The demo's service worker: the app's files are cached at install, so a reload with the
// network off still opens the page; the models come from the cache the runtime keeps (OPFS,
// read by the package without a request; or Cache Storage's "stampo-models-v1" in browsers
// without writable OPFS files, which this worker serves from). Online,
// the app's files come from the network first, so a new build is picked up.
const APP_CACHE = "stampo-app-v1";
const MODEL_CACHE = "stampo-models-v1";
const APP_FILES = [
  "./",
  "index.html",
  "boot.js",
  "stampo-web.js",
  "stampo-web_bg.wasm",
  "style.css",
  "icon.svg",
  "icon-192.png",
  "icon-512.png",
  "icon-maskable-512.png",
  "manifest.webmanifest",
  "stampo/index.js",
  "stampo/host.js",
  "stampo/worker.js",
  "stampo/thread.js",
  "stampo/wasm/stampo_wasm.js",
  "stampo/wasm/stampo_wasm_bg.wasm",
  // The threaded CPU runtime, which this page (served cross-origin isolated) runs on a CPU
  // with more than one core.
  "stampo/wasm/stampo_threads.js",
  "stampo/wasm/stampo_threads_bg.wasm",
  // Not the WebGPU runtime (stampo/wasm/stampo_webgpu*, 3 MB gzipped), which a browser without
  // a hardware adapter never fetches: the fetch handler below keeps it once it has been used.
];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(APP_CACHE).then((cache) => cache.addAll(APP_FILES)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== self.location.origin) return;
  if (url.pathname.includes("/models/")) {
    event.respondWith(caches.open(MODEL_CACHE).then(async (cache) => (await cache.match(request)) ?? fetch(request)));
    return;
  }
  event.respondWith(
    fetch(request)
      .then((response) => {
        if (response.ok) {
          const copy = response.clone();
          caches.open(APP_CACHE).then((cache) => cache.put(request, copy));
        }
        return response;
      })
      .catch(async () => (await caches.match(request, { ignoreSearch: true })) ?? Response.error()),
  );
});
