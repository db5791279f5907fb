// The worker is an ES module (it imports the wasm bindings), so Vite bundles workers as ES.
export default {
  build: { outDir: "dist", emptyOutDir: true, target: "es2022" },
  worker: { format: "es" },
};
