// An in-process stand-in for the rclnodejs API (ROS 2 and rclnodejs cannot be installed on these machines): a ROS
// graph whose topics deliver asynchronously, as DDS does, whose services answer once advertised, and whose actions
// take goals as a ROS 2 action server does (accepted or rejected, then a result with a final status).
import type { RclActionClient, RclGoalHandle, RclNode, Rclnodejs } from '../../bridge/ros2native.js';

/** action_msgs/msg/GoalStatus values. */
export const GOAL_STATUS = { SUCCEEDED: 4, CANCELED: 5, ABORTED: 6 } as const;

/**
 * An action server's handler: undefined rejects the goal; otherwise the result and its final status (an abort
 * still carries a result, as FollowJointTrajectory's error_code).
 */
export type ActionHandler = (goal: unknown) => undefined | Promise<{ status: number; result: unknown }>;

/** A ROS graph in one process: topics deliver asynchronously, as DDS does; services answer once advertised. */
export class Graph {
  readonly subs = new Map<string, Array<{ type: string; qos?: string; cb: (m: unknown) => void }>>();
  readonly published: Array<{ topic: string; type: string; msg: unknown }> = [];
  /** A handler answering undefined (or a promise of it) never answers. */
  readonly services = new Map<string, { type: string; handler: (req: unknown) => unknown }>();
  readonly actions = new Map<string, { type: string; handler: ActionHandler }>();
  /** Every service request, in order. */
  readonly calls: Array<{ service: string; req: unknown }> = [];
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

  /** Calls a service as a client would; resolves with its answer. */
  call(name: string, type: string, req: unknown = {}): Promise<unknown> {
    const s = this.services.get(name);
    if (s?.type !== type) return Promise.reject(new Error(`no ${type} service ${name}`));
    this.calls.push({ service: name, req });
    return Promise.resolve(s.handler(structuredClone(req)));
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
          this.calls.push({ service: name, req });
          void Promise.resolve(this.services.get(name)!.handler(structuredClone(req))).then((r) => {
            if (r !== undefined) cb(r);
          });
        }, 1),
      }),
      createService: (type, name, _options, cb) => {
        if (this.services.has(name)) throw new Error(`service ${name} is already advertised`);
        this.services.set(name, { type, handler: (req) => new Promise((resolve) => cb(req, { send: resolve })) });
        return {};
      },
      destroy: () => void this.destroyed++,
    };
  }

  module(): Rclnodejs {
    const actions = this.actions;
    class ActionClient implements RclActionClient {
      constructor(_node: RclNode, private readonly type: string, private readonly name: string) {}
      async waitForServer(): Promise<boolean> {
        return actions.get(this.name)?.type === this.type;
      }
      async sendGoal(goal: unknown): Promise<RclGoalHandle> {
        await new Promise((r) => setTimeout(r, 1));
        const running = actions.get(this.name)!.handler(structuredClone(goal));
        let status = running ? 2 : 0; // EXECUTING, or UNKNOWN for a rejected goal
        return {
          isAccepted: () => running !== undefined,
          getResult: async () => {
            const r = await running!;
            status = r.status;
            return r.result;
          },
          isSucceeded: () => status === GOAL_STATUS.SUCCEEDED,
          get status() {
            return status;
          },
        };
      }
      destroy(): void {}
    }
    return { init: async () => {}, createNode: () => this.node(), spin: () => {}, shutdown: () => void this.shutdowns++, ActionClient };
  }
}
