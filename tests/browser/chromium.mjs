// The one place that says how stampo's browser tests start Chromium: Debian's build at
// /usr/bin/chromium, driven by playwright-core (never a downloaded browser). Every browser
// test launches through `launchChromium` so the flags stay the same everywhere.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const CHROMIUM_PATH = process.env.STAMPO_CHROMIUM ?? "/usr/bin/chromium";

// --enable-unsafe-webgpu gives Chromium's SwiftShader WebGPU adapter on machines with no GPU
// (no shader-f16). Do not add --use-angle=swiftshader, --enable-features=Vulkan or
// --disable-vulkan-surface beside it: together they make requestAdapter() hang.
// The rest keeps Chromium from calling out to the network, which these machines refuse.
export const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--enable-unsafe-webgpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Launches headless Chromium with a fresh profile; `close()` removes the profile too. */
export async function launchChromium({ extraFlags = [] } = {}) {
  const userDataDir = mkdtempSync(join(tmpdir(), "stampo-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [...CHROMIUM_FLAGS, ...extraFlags],
  });
  return {
    context,
    flags: [...CHROMIUM_FLAGS, ...extraFlags],
    async close() {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/** What WebGPU offers in this page: null when there is no adapter. */
export async function webgpuInfo(page) {
  return page.evaluate(async () => {
    if (!("gpu" in navigator)) return { available: false, reason: "navigator.gpu missing" };
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return { available: false, reason: "requestAdapter() returned null" };
    const info = adapter.info ?? {};
    return {
      available: true,
      vendor: info.vendor, architecture: info.architecture, description: info.description,
      isFallbackAdapter: adapter.isFallbackAdapter ?? info.isFallbackAdapter ?? null,
      shaderF16: adapter.features.has("shader-f16"),
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    };
  });
}
