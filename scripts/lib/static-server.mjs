// A static file server on 127.0.0.1 (the demo and the browser tests), with the COOP/COEP headers that
// wasm threads (SharedArrayBuffer) need. It serves `routes` (URL prefix -> folder, or a
// function `(req, res)` that answers itself: a test's misbehaving server) and records every
// request so a test can assert what the page asked for.
import { createServer } from "node:http";
import { createReadStream, statSync } from "node:fs";
import { extname, join, normalize } from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript",
  ".wasm": "application/wasm", ".json": "application/json", ".css": "text/css",
  ".gguf": "application/octet-stream", ".webmanifest": "application/manifest+json",
  ".png": "image/png", ".svg": "image/svg+xml",
};

export async function serve(routes, { port = 0 } = {}) {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push(req.url);
    const url = new URL(req.url, "http://127.0.0.1");
    const prefix = Object.keys(routes)
      .filter((p) => url.pathname.startsWith(p))
      .sort((a, b) => b.length - a.length)[0];
    if (typeof routes[prefix] === "function") return routes[prefix](req, res);
    let rel = prefix === undefined ? null : normalize(decodeURIComponent(url.pathname.slice(prefix.length)));
    if (rel !== null && (rel === "." || rel === "" || rel.endsWith("/"))) rel = join(rel, "index.html");
    if (rel === null || rel.startsWith("..")) { res.writeHead(404).end(); return; }
    const file = join(routes[prefix], rel);
    let size;
    try { size = statSync(file).size; } catch { res.writeHead(404).end(); return; }
    res.writeHead(200, {
      "Content-Type": TYPES[extname(file)] ?? "application/octet-stream",
      "Content-Length": size,
      "Cross-Origin-Opener-Policy": "same-origin",
      "Cross-Origin-Embedder-Policy": "require-corp",
    });
    createReadStream(file).pipe(res);
  });
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  const { port: bound } = server.address();
  return {
    origin: `http://127.0.0.1:${bound}`,
    requests,
    // Stops listening and drops kept-alive connections, so the origin is really gone.
    close: () => new Promise((resolve) => {
      server.close(resolve);
      server.closeAllConnections();
    }),
  };
}
