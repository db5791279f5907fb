// The dedicated worker the engine runs in by default, so the page never waits on a forward pass.
import { createHost } from "./host.js";

const handle = createHost((msg) => self.postMessage(msg));
self.onmessage = (event) => handle(event.data);
