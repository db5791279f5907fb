// Renders web/icon.svg into the PNG icons the manifest lists (192 and 512 px, and a maskable
// 512 px one whose mark sits inside the 80% safe zone), with the same headless Chromium the
// browser tests use. The PNGs are committed; run this again after changing the SVG:
//   node scripts/render-icons.mjs
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium } from "../tests/browser/chromium.mjs";

const web = join(dirname(fileURLToPath(import.meta.url)), "..", "web");
const svg = readFileSync(join(web, "icon.svg"), "utf8");
const background = "#1d3557"; // the SVG's own fill, which a maskable icon must bleed to the edge

const icons = [
  { file: "icon-192.png", size: 192, maskable: false },
  { file: "icon-512.png", size: 512, maskable: false },
  { file: "icon-maskable-512.png", size: 512, maskable: true },
];

const browser = await launchChromium();
try {
  const page = await browser.context.newPage();
  for (const { file, size, maskable } of icons) {
    await page.setViewportSize({ width: size, height: size });
    // A maskable icon may be cropped to a circle of 80% of its width: the mark is drawn at
    // 70% on a full-bleed background.
    const inner = maskable ? Math.round(size * 0.7) : size;
    const html = `<!doctype html><style>html,body{margin:0;width:${size}px;height:${size}px;
      display:grid;place-items:center;background:${maskable ? background : "transparent"}}
      svg{width:${inner}px;height:${inner}px;display:block}</style>${svg}`;
    await page.setContent(html);
    const png = await page.screenshot({ omitBackground: !maskable, clip: { x: 0, y: 0, width: size, height: size } });
    writeFileSync(join(web, file), png);
    console.log(`${file}: ${size}×${size}, ${png.length} bytes`);
  }
} finally {
  await browser.close();
}
