// Looks for the flame graph in a screenshot of `strata report`'s page: decodes the PNG
// (8-bit RGB or RGBA, not interlaced: what Chromium writes) and counts the rows in which at
// least MIN_RUN pixels have the report's warm flame-graph colours (red 215-254, green
// 70-219, blue 20-69; report_template.html flameColor()). A drawn flame graph has full-width
// frames, 16 pixel rows each; the page's other warm pixels (table bars) are narrow.
//
//   node png_check.js SCREENSHOT.png [MIN_RUN]
// Prints "png width=W height=H flame_rows=R flame_pixels=P"; exit 0 (the caller decides).
'use strict';

const fs = require('fs');
const zlib = require('zlib');

const [file, minRunText] = process.argv.slice(2);
const minRun = Number(minRunText || 600);
const png = fs.readFileSync(file);
if (png.readUInt32BE(0) !== 0x89504e47) throw new Error(`${file}: not a PNG`);
let offset = 8, width = 0, height = 0, depth = 0, colorType = 0, interlace = 0;
const idat = [];
while (offset < png.length) {
  const length = png.readUInt32BE(offset);
  const type = png.toString('ascii', offset + 4, offset + 8);
  const data = png.subarray(offset + 8, offset + 8 + length);
  if (type === 'IHDR') {
    width = data.readUInt32BE(0);
    height = data.readUInt32BE(4);
    depth = data[8];
    colorType = data[9];
    interlace = data[12];
  } else if (type === 'IDAT') {
    idat.push(data);
  } else if (type === 'IEND') {
    break;
  }
  offset += 12 + length;
}
if (depth !== 8 || (colorType !== 2 && colorType !== 6) || interlace !== 0) {
  throw new Error(`${file}: unsupported PNG (depth ${depth}, colour type ${colorType}, interlace ${interlace})`);
}
const bpp = colorType === 6 ? 4 : 3;
const raw = zlib.inflateSync(Buffer.concat(idat));
const stride = width * bpp;
const pixels = Buffer.alloc(stride * height);
for (let y = 0; y < height; y++) {
  const filter = raw[y * (stride + 1)];
  const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
  const out = pixels.subarray(y * stride, (y + 1) * stride);
  const prev = y > 0 ? pixels.subarray((y - 1) * stride, y * stride) : Buffer.alloc(stride);
  for (let x = 0; x < stride; x++) {
    const a = x >= bpp ? out[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
    let v = line[x];
    if (filter === 1) v += a;
    else if (filter === 2) v += b;
    else if (filter === 3) v += (a + b) >> 1;
    else if (filter === 4) {
      const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
      v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
    }
    out[x] = v & 0xff;
  }
}
let rows = 0, total = 0;
for (let y = 0; y < height; y++) {
  let count = 0;
  for (let x = 0; x < width; x++) {
    const i = y * stride + x * bpp;
    const r = pixels[i], g = pixels[i + 1], b = pixels[i + 2];
    if (r >= 212 && g >= 66 && g <= 222 && b >= 16 && b <= 73) count++;
  }
  total += count;
  if (count >= minRun) rows++;
}
console.log(`png width=${width} height=${height} flame_rows=${rows} flame_pixels=${total}`);
