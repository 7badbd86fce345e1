// An in-process stand-in for the rclnodejs API (ROS 2 and rclnodejs cannot be installed on these machines): a ROS
// graph whose topics deliver asynchronously, as DDS does, and whose services answer once advertised.
import type { RclNode, Rclnodejs } from '../../bridge/ros2native.js';

/** A ROS graph in one process: topics deliver asynchronously, as DDS does; services answer once advertised. */
export class Graph {
  readonly subs = new Map<string, Array<{ type: string; qos?: string; cb: (m: unknown) => void }>>();
  readonly published: Array<{ topic: string; type: string; msg: unknown }> = [];
  readonly services = new Map<string, { type: string; handler: (req: unknown) => unknown }>();
  destroyed = 0;
  shutdowns = 0;

  publish(topic: string, type: string, msg: unknown, delayMs = 0): void {
    this.published.push({ topic, type, msg });
    setTimeout(() => {
      for (const s of this.subs.get(topic) ?? []) {
        if (s.type !== type) throw new Error(`type mismatch on ${topic}: ${s.type} vs ${type}`);
        s.cb(structuredClone(msg));
      }
    }, delayMs);
  }

  node(): RclNode {
    return {
      createPublisher: (type, topic) => ({ publish: (msg) => this.publish(topic, type, msg) }),
      createSubscription: (type, topic, options, cb) => {
        const list = this.subs.get(topic) ?? [];
        list.push({ type, qos: options.qos, cb });
        this.subs.set(topic, list);
        return {};
      },
      createClient: (type, name) => ({
        waitForService: async () => this.services.get(name)?.type === type,
        sendRequest: (req, cb) => setTimeout(() => {
          const r = this.services.get(name)!.handler(req);
          if (r !== undefined) cb(r);
        }, 1),
      }),
      destroy: () => void this.destroyed++,
    };
  }

  module(): Rclnodejs {
    return { init: async () => {}, createNode: () => this.node(), spin: () => {}, shutdown: () => void this.shutdowns++ };
  }
}

