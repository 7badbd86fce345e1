// PNG, the one codec of the project (reference frames, camera images, LeRobot `image` features). LeRobot (PIL) writes 8-bit PNGs with any row filter and colour type,
// so the decoder takes all five filters and grey, grey+alpha, RGB, RGBA and palette images (8-bit),
// and returns RGB. The encoder writes RGB, filter 0.
import { deflateSync, inflateSync } from 'node:zlib';

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

function crc32(buf: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'ascii');
  Buffer.from(data).copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export function isPng(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && SIGNATURE.every((b, i) => bytes[i] === b);
}

/** RGB (row-major H x W x 3) → PNG bytes. */
export function encodePng(rgb: Uint8Array, width: number, height: number): Uint8Array {
  if (rgb.length !== width * height * 3) throw new Error(`encodePng: ${rgb.length} bytes for ${width}x${height} RGB (needs ${width * height * 3})`);
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) Buffer.from(rgb.buffer, rgb.byteOffset + y * width * 3, width * 3).copy(raw, y * (width * 3 + 1) + 1);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  return new Uint8Array(Buffer.concat([SIGNATURE, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw, { level: 6 })), chunk('IEND', new Uint8Array(0))]));
}

const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/** PNG bytes → RGB. `what` names the image in errors. */
export function decodePng(png: Uint8Array, what = 'image'): { width: number; height: number; rgb: Uint8Array } {
  if (!isPng(png)) throw new Error(`${what}: not a PNG (bad signature)`);
  const buf = Buffer.from(png.buffer, png.byteOffset, png.length);
  let o = 8;
  let width = 0, height = 0, colour = -1, depth = 0, interlace = 0;
  let palette: Uint8Array | undefined;
  const idat: Buffer[] = [];
  while (o + 8 <= buf.length) {
    const len = buf.readUInt32BE(o);
    const type = buf.toString('ascii', o + 4, o + 8);
    if (o + 12 + len > buf.length) throw new Error(`${what}: PNG chunk ${type} runs past the end of the data`);
    const data = buf.subarray(o + 8, o + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      depth = data[8]!;
      colour = data[9]!;
      interlace = data[12]!;
    } else if (type === 'PLTE') palette = new Uint8Array(data);
    else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    o += 12 + len;
  }
  const ch = CHANNELS[colour];
  if (ch === undefined) throw new Error(`${what}: PNG colour type ${colour} is not a PNG colour type`);
  if (depth !== 8) throw new Error(`${what}: PNG bit depth ${depth}; only 8-bit images are read`);
  if (interlace !== 0) throw new Error(`${what}: interlaced PNG is not read`);
  if (colour === 3 && !palette) throw new Error(`${what}: palette PNG without a PLTE chunk`);
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * ch;
  if (raw.length < (stride + 1) * height) throw new Error(`${what}: PNG data holds ${raw.length} bytes, ${width}x${height} needs ${(stride + 1) * height}`);
  const px = new Uint8Array(stride * height);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)]!;
    const src = y * (stride + 1) + 1, dst = y * stride, up = dst - stride;
    for (let x = 0; x < stride; x++) {
      const r = raw[src + x]!;
      const a = x >= ch ? px[dst + x - ch]! : 0;
      const b = y > 0 ? px[up + x]! : 0;
      const c = x >= ch && y > 0 ? px[up + x - ch]! : 0;
      let v: number;
      if (f === 0) v = r;
      else if (f === 1) v = r + a;
      else if (f === 2) v = r + b;
      else if (f === 3) v = r + ((a + b) >> 1);
      else if (f === 4) v = r + paeth(a, b, c);
      else throw new Error(`${what}: PNG row ${y} has filter ${f} (0-4 exist)`);
      px[dst + x] = v & 0xff;
    }
  }
  const rgb = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) {
    const s = i * ch;
    if (colour === 2 || colour === 6) rgb.set(px.subarray(s, s + 3), i * 3);
    else if (colour === 0 || colour === 4) rgb.fill(px[s]!, i * 3, i * 3 + 3);
    else rgb.set(palette!.subarray(px[s]! * 3, px[s]! * 3 + 3), i * 3);
  }
  return { width, height, rgb };
}
