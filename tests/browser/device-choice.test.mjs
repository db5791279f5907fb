// The package's choice of device for "auto", against fake WebGPU adapters (Node, no browser):
// a hardware adapter is taken, even one granting only WebGPU's default limits; a software
// fallback is passed over.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chooseDevice } from "../../pkg/src/host.js";

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

test("auto takes a hardware adapter granting only WebGPU's guaranteed 8 storage buffers", async () => {
  await withAdapter(hardware(8), async () => {
    assert.deepEqual(await chooseDevice("auto"), { device: "auto", fallback: null });
    assert.deepEqual(await chooseDevice("webgpu"), { device: "webgpu", fallback: null });
  });
});

test("auto passes over a software fallback adapter", async () => {
  await withAdapter({ ...hardware(10), isFallbackAdapter: true }, async () => {
    assert.match((await chooseDevice("auto")).fallback, /software fallback/);
  });
});
