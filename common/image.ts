// Camera frames as a policy reads them: any frame a robot sends (raw rgb8, PNG or JPEG, at the camera's own size)
// decoded to RGB and brought to the size the policy was trained at. A frame of another aspect ratio is first
// cropped about its centre to the policy's aspect, so the scene is never stretched; shrinking averages the source
// pixels each target pixel covers (no aliasing at 640x480 → 64x64), enlarging interpolates linearly.
import jpeg from 'jpeg-js';
import { decodePng, isPng } from './png.js';
import type { Image } from './robot.js';

/** Largest frame decoded, in megapixels: a bigger one is refused before its pixels are allocated. */
const MAX_MEGAPIXELS = 40;

export const isJpeg = (bytes: Uint8Array): boolean => bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff;

/** A frame's bytes as RGB, row-major height x width x 3. `who` names the frame in errors. */
export function decodeImage(img: Image, who: string): { width: number; height: number; rgb: Uint8Array } {
  if (img.encoding === 'rgb8') {
    if (img.data.length !== img.width * img.height * 3) throw new Error(`${who}: an rgb8 frame of ${img.width}x${img.height} holds ${img.width * img.height * 3} bytes, this one ${img.data.length}`);
    return { width: img.width, height: img.height, rgb: img.data };
  }
  if (img.encoding === 'png') {
    if (!isPng(img.data)) throw new Error(`${who}: the frame says png but its bytes are ${isJpeg(img.data) ? 'a JPEG' : 'not a PNG'}`);
    return decodePng(img.data, who);
  }
  if (!isJpeg(img.data)) throw new Error(`${who}: the frame says jpeg but its bytes are ${isPng(img.data) ? 'a PNG' : 'not a JPEG'}`);
  let d: { width: number; height: number; data: Uint8Array };
  try {
    d = jpeg.decode(img.data, { useTArray: true, formatAsRGBA: false, maxResolutionInMP: MAX_MEGAPIXELS, maxMemoryUsageInMB: 512 });
  } catch (e) {
    throw new Error(`${who}: the JPEG does not decode: ${(e as Error).message}`);
  }
  return { width: d.width, height: d.height, rgb: d.data };
}

/** The [start, end) source span about the centre with the target's aspect ratio, on one axis. */
function centreSpan(n: number, keep: number): [number, number] {
  const start = (n - keep) / 2;
  return [start, start + keep];
}

/**
 * Per target index, the source indices and weights that make it: the average over the source span it covers when
 * shrinking, linear interpolation between the two nearest source centres when enlarging.
 */
function axisWeights(from: number, span: [number, number], size: number): Array<Array<[number, number]>> {
  const scale = (span[1] - span[0]) / size;
  return Array.from({ length: size }, (_, i) => {
    if (scale > 1) {
      const a = span[0] + i * scale, b = a + scale, w: Array<[number, number]> = [];
      for (let s = Math.floor(a); s < Math.ceil(b); s++) {
        const cover = Math.min(b, s + 1) - Math.max(a, s);
        if (cover > 1e-9) w.push([Math.min(from - 1, s), cover / scale]);
      }
      return w;
    }
    const x = Math.min(Math.max(span[0] + (i + 0.5) * scale - 0.5, 0), from - 1), s = Math.floor(x), f = x - s;
    return f > 0 && s + 1 < from ? [[s, 1 - f], [s + 1, f]] : [[s, 1]];
  });
}

/** RGB `width` x `height` → `W` x `H`: centre-cropped to W:H, then resampled (see the file's comment). */
export function resizeRgb(rgb: Uint8Array, width: number, height: number, W: number, H: number): Uint8Array {
  if (rgb.length !== width * height * 3) throw new Error(`resizeRgb: ${rgb.length} bytes for ${width}x${height} RGB`);
  if (!(Number.isInteger(W) && W >= 1 && Number.isInteger(H) && H >= 1)) throw new Error(`resizeRgb: target ${W}x${H} is not a size`);
  if (W === width && H === height) return rgb;
  // The largest centred region of the target's aspect.
  const keepW = Math.min(width, (height * W) / H), keepH = Math.min(height, (width * H) / W);
  const wx = axisWeights(width, centreSpan(width, keepW), W), wy = axisWeights(height, centreSpan(height, keepH), H);
  const rows = new Float32Array(height * W * 3);
  for (let y = 0; y < height; y++) {
    for (let X = 0; X < W; X++) {
      let r = 0, g = 0, b = 0;
      for (const [s, w] of wx[X]!) {
        const o = (y * width + s) * 3;
        r += rgb[o]! * w;
        g += rgb[o + 1]! * w;
        b += rgb[o + 2]! * w;
      }
      const o = (y * W + X) * 3;
      rows[o] = r;
      rows[o + 1] = g;
      rows[o + 2] = b;
    }
  }
  const out = new Uint8Array(W * H * 3);
  for (let Y = 0; Y < H; Y++) {
    for (let X = 0; X < W; X++) {
      for (let c = 0; c < 3; c++) {
        let v = 0;
        for (const [s, w] of wy[Y]!) v += rows[(s * W + X) * 3 + c]! * w;
        out[(Y * W + X) * 3 + c] = Math.min(255, Math.max(0, Math.round(v)));
      }
    }
  }
  return out;
}

/** A robot's frame as a policy trained at `size` reads it: decoded, centre-cropped to its aspect and resampled. */
export function cameraRgb(img: Image, size: { width: number; height: number }, who: string): Uint8Array {
  const d = decodeImage(img, who);
  return resizeRgb(d.rgb, d.width, d.height, size.width, size.height);
}

/**
 * Width and height from a PNG's or a JPEG's header, without decoding its pixels: what a compressed frame from a
 * robot holds, whatever size its camera declared. Null when the bytes are neither or the header is cut short.
 */
export function compressedSize(bytes: Uint8Array): { width: number; height: number; encoding: 'png' | 'jpeg' } | null {
  if (isPng(bytes)) {
    if (bytes.length < 24) return null;
    const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    return { width: v.getUint32(16), height: v.getUint32(20), encoding: 'png' };
  }
  if (!isJpeg(bytes)) return null;
  // Walk the marker segments to the first start-of-frame (SOF0-SOF15 except DHT C4, JPG C8, DAC CC).
  let o = 2;
  while (o + 4 <= bytes.length) {
    if (bytes[o] !== 0xff) return null;
    const marker = bytes[o + 1]!;
    if (marker === 0xff) {
      o++;
      continue;
    }
    const len = (bytes[o + 2]! << 8) | bytes[o + 3]!;
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      if (o + 9 > bytes.length) return null;
      return { height: (bytes[o + 5]! << 8) | bytes[o + 6]!, width: (bytes[o + 7]! << 8) | bytes[o + 8]!, encoding: 'jpeg' };
    }
    o += 2 + len;
  }
  return null;
}
