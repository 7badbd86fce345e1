// A two-joint velocity-controlled integrator implementing Robot, for transport tests only
// (the sim robot lives in sim/). It records every action it is given.

import type { RobotObservation, RobotDeclaration } from '../../common/robot.js';
import type { Robot } from '../../hardware/types.js';

export class FakeRobot implements Robot {
  readonly spec: RobotDeclaration = {
    name: 'fake-integrator',
    joints: ['j0', 'j1'],
    positionLimits: [[-Infinity, Infinity], [-1, 1]],
    velocityLimits: [2, 2],
    action: { kind: 'joint_velocity', names: ['j0', 'j1'], low: [-1, -1], high: [1, 1] },
    controlHz: 50,
    features: ['f0'],
  };
  position = new Float64Array(2);
  velocity = new Float64Array(2);
  actions: Float32Array[] = [];
  estopped = false;
  private t = 0;

  async observe(): Promise<RobotObservation> {
    return { stamp: this.t, position: this.position.slice(), velocity: this.velocity.slice(), features: Float32Array.of(this.t), instruction: 'hold' };
  }

  async act(action: Float32Array): Promise<Float32Array> {
    this.actions.push(action.slice());
    const dt = 1 / this.spec.controlHz;
    for (let i = 0; i < 2; i++) {
      this.velocity[i] = action[i];
      this.position[i] += action[i] * dt;
    }
    this.t += dt;
    return action;
  }

  async reset(): Promise<RobotObservation> {
    this.position.fill(0);
    this.velocity.fill(0);
    this.estopped = false;
    return this.observe();
  }

  async estop(): Promise<void> {
    this.velocity.fill(0);
    this.estopped = true;
  }

  async [Symbol.asyncDispose](): Promise<void> {}
}
