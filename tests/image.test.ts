// Camera frames as a policy reads them (common/image.ts): a JPEG written by ImageMagick decoded to the pixels
// ImageMagick decodes, cropped and shrunk as ImageMagick's box filter does, PNG and rgb8 alike; bad frames refused
// with what is wrong.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cameraRgb, compressedSize, decodeImage, resizeRgb } from '../common/image.js';
import { encodePng } from '../common/png.js';

const jpg = new Uint8Array(readFileSync(new URL('./fixtures/camera-640x480.jpg', import.meta.url)));
const imCrop48 = new Uint8Array(readFileSync(new URL('./fixtures/camera-640x480-crop48.rgb', import.meta.url)));
const frame = { width: 640, height: 480, encoding: 'jpeg' as const, data: jpg };

describe('camera frames', () => {
  it('decodes a real JPEG to the pixels ImageMagick decodes', () => {
    const d = decodeImage(frame, 'cam');
    expect([d.width, d.height, d.rgb.length]).toEqual([640, 480, 640 * 480 * 3]);
    const px = (x: number, y: number) => Array.from(d.rgb.subarray((y * 640 + x) * 3, (y * 640 + x) * 3 + 3));
    // ImageMagick's own decode at these pixels (the red square, the green stripe, the gradient's ends).
    const want: Array<[number, number, number[]]> = [[440, 140, [224, 31, 32]], [40, 240, [33, 224, 32]], [320, 10, [34, 50, 66]], [320, 470, [125, 158, 189]], [600, 300, [92, 118, 143]]];
    for (const [x, y, rgb] of want) px(x, y).forEach((v, c) => expect(Math.abs(v - rgb[c]!), `(${x}, ${y}) channel ${c}`).toBeLessThanOrEqual(3));
    expect(compressedSize(jpg)).toEqual({ width: 640, height: 480, encoding: 'jpeg' });
  });

  it('brings a 640x480 frame to a 48x48 policy as ImageMagick does: centre crop, then the mean of each block', () => {
    const out = cameraRgb(frame, { width: 48, height: 48 }, 'cam');
    expect(out.length).toBe(48 * 48 * 3);
    // Edges of colour differ by a few levels: libjpeg upsamples 4:2:0 chroma smoothly, jpeg-js by repetition.
    let worst = 0, sum = 0;
    for (let i = 0; i < out.length; i++) {
      const d = Math.abs(out[i]! - imCrop48[i]!);
      worst = Math.max(worst, d);
      sum += d;
    }
    expect(sum / out.length).toBeLessThan(1);
    expect(worst).toBeLessThanOrEqual(8);
    // the green stripe lies outside the centred square: no green-dominant pixel is left
    for (let i = 0; i < 48 * 48; i++) expect(out[i * 3 + 1]! > 200 && out[i * 3]! < 60).toBe(false);
  });

  it('averages when shrinking and interpolates when enlarging', () => {
    // 4x2 → 2x1: each target pixel the mean of a 2x2 block
    const src = Uint8Array.from([0, 0, 0, 40, 40, 40, 100, 0, 0, 200, 0, 0, 20, 20, 20, 60, 60, 60, 100, 0, 0, 0, 0, 0]);
    expect(Array.from(resizeRgb(src, 4, 2, 2, 1))).toEqual([30, 30, 30, 100, 0, 0]);
    // 2x1 → 4x1: pixel centres interpolated, the ends clamped
    expect(Array.from(resizeRgb(Uint8Array.from([0, 0, 0, 200, 100, 40]), 2, 1, 4, 1))).toEqual([0, 0, 0, 50, 25, 10, 150, 75, 30, 200, 100, 40]);
    // a uniform frame stays uniform through crop and resample
    const grey = new Uint8Array(30 * 20 * 3).fill(77);
    expect(new Set(resizeRgb(grey, 30, 20, 7, 9))).toEqual(new Set([77]));
  });

  it('reads PNG and rgb8 frames of any size the same way', () => {
    const rgb = Uint8Array.from({ length: 8 * 6 * 3 }, (_, i) => (i * 37) % 256);
    const png = { width: 8, height: 6, encoding: 'png' as const, data: encodePng(rgb, 8, 6) };
    expect(cameraRgb(png, { width: 4, height: 3 }, 'cam')).toEqual(cameraRgb({ width: 8, height: 6, encoding: 'rgb8', data: rgb }, { width: 4, height: 3 }, 'cam'));
    expect(compressedSize(png.data)).toEqual({ width: 8, height: 6, encoding: 'png' });
    expect(cameraRgb(png, { width: 8, height: 6 }, 'cam')).toEqual(rgb);
  });

  it('refuses a frame whose bytes are not what it says, or that does not decode, naming it', () => {
    expect(() => decodeImage({ ...frame, encoding: 'png' }, 'arm camera')).toThrow(/arm camera: the frame says png but its bytes are a JPEG/);
    expect(() => decodeImage({ width: 2, height: 2, encoding: 'jpeg', data: encodePng(new Uint8Array(12), 2, 2) }, 'cam')).toThrow(/says jpeg but its bytes are a PNG/);
    expect(() => decodeImage({ ...frame, data: jpg.subarray(0, 600) }, 'cam')).toThrow(/cam: the JPEG does not decode/);
    expect(() => decodeImage({ width: 4, height: 4, encoding: 'rgb8', data: new Uint8Array(10) }, 'cam')).toThrow(/rgb8 frame of 4x4 holds 48 bytes, this one 10/);
    expect(compressedSize(Uint8Array.of(1, 2, 3, 4))).toBeNull();
  });
});
