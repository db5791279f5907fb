// The package's choice of device for "auto", against fake WebGPU adapters (Node, no browser):
// a hardware adapter is taken only when it grants the storage buffers the WebGPU path binds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chooseDevice, STORAGE_BUFFERS_NEEDED } from "../../pkg/src/host.js";

function withAdapter(adapter, run) {
  const before = Object.getOwnPropertyDescriptor(globalThis, "navigator");
  Object.defineProperty(globalThis, "navigator", {
    value: { gpu: { requestAdapter: async () => adapter } },
    configurable: true,
    writable: true,
  });
  return run().finally(() => {
    if (before) Object.defineProperty(globalThis, "navigator", before);
    else delete globalThis.navigator;
  });
}

const hardware = (storage) => ({
  info: { vendor: "acme", architecture: "test" },
  isFallbackAdapter: false,
  limits: { maxStorageBuffersPerShaderStage: storage },
});

test("auto takes a hardware adapter granting the storage buffers the WebGPU path binds", async () => {
  assert.equal(STORAGE_BUFFERS_NEEDED, 9);
  await withAdapter(hardware(10), async () => {
    assert.deepEqual(await chooseDevice("auto"), { device: "auto", fallback: null });
  });
});

test("auto passes over an adapter granting WebGPU's guaranteed 8 storage buffers, and says why", async () => {
  await withAdapter(hardware(8), async () => {
    const chosen = await chooseDevice("auto");
    assert.equal(chosen.device, "cpu");
    assert.match(chosen.fallback, /grants 8 storage buffers a shader stage; the WebGPU path binds 9/);
    // Asked for by name, WebGPU is still tried.
    assert.deepEqual(await chooseDevice("webgpu"), { device: "webgpu", fallback: null });
  });
});

test("auto passes over a software fallback adapter first", async () => {
  await withAdapter({ ...hardware(10), isFallbackAdapter: true }, async () => {
    assert.match((await chooseDevice("auto")).fallback, /software fallback/);
  });
});
