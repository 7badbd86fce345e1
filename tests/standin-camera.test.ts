// The stand-in's camera at a size other than the default: frames arrive over rosbridge as PNGs of
// the requested size (a 96 px request once crashed the stand-in with "encodePng: size mismatch").
import { Ros, Topic } from 'roslib';
import { describe, expect, it } from 'vitest';
import { startStandIn, STANDIN } from '../hardware/standin.js';

describe('stand-in camera', () => {
  it('publishes PNG frames of the requested size', async () => {
    const standIn = await startStandIn({ task: 'reach', port: 0, cameraHz: 20, image: 96 });
    const ros = new Ros({});
    try {
      const up = new Promise<void>((r) => ros.once('connection', () => r()));
      await ros.connect(`ws://127.0.0.1:${standIn.port}`);
      await up;
      const frame = await new Promise<Buffer>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no camera frame in 3 s')), 3000);
        new Topic<{ format: string; data: string }>({ ros, name: STANDIN.camera, messageType: 'sensor_msgs/msg/CompressedImage' }).subscribe((m) => {
          clearTimeout(t);
          expect(m.format).toBe('png');
          resolve(Buffer.from(m.data, 'base64'));
        });
      });
      expect(frame.subarray(1, 4).toString()).toBe('PNG');
      // IHDR: width and height, big-endian, at bytes 16 and 20.
      expect([frame.readUInt32BE(16), frame.readUInt32BE(20)]).toEqual([96, 96]);
    } finally {
      ros.close();
      await standIn.stop();
    }
  });
});
