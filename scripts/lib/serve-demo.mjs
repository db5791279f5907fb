// Serves the built demo page and the model cache on 127.0.0.1 until interrupted.
// Usage: node scripts/lib/serve-demo.mjs DIST_DIR MODELS_DIR [PORT]
import { serve } from "./static-server.mjs";

const [dist, models, port] = process.argv.slice(2);
if (!dist || !models) {
  console.error("usage: serve-demo.mjs DIST_DIR MODELS_DIR [PORT]");
  process.exit(2);
}
const server = await serve({ "/models/": models, "/": dist }, { port: Number(port ?? 0) });
console.log(`stampo demo: ${server.origin}/  (models from ${models}; Ctrl-C to stop)`);
