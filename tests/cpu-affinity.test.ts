// CPU lists as Linux writes them, and this process's own CPUs read back from /proc.
import { describe, expect, it } from 'vitest';
import { allowedCpus, cpuSplit, parseCpuList } from '../server/cpu-affinity.js';

describe('cpu affinity', () => {
  it('parses ranges and single CPUs, in order, and refuses what is not a CPU list, naming it', () => {
    expect(parseCpuList('0-2,5')).toEqual([0, 1, 2, 5]);
    expect(parseCpuList('3,1\n')).toEqual([1, 3]);
    expect(() => parseCpuList('0-x')).toThrow("not a CPU list: '0-x'");
  });

  it("splits this process's CPUs: the last for the control threads, the others for serving", () => {
    const cpus = allowedCpus('/proc/self');
    expect(cpus.length).toBeGreaterThan(0);
    const split = cpuSplit();
    if (cpus.length < 2) expect(split).toMatch(/none to give the control threads alone/);
    else expect(split).toEqual({ control: cpus.at(-1), serving: cpus.slice(0, -1) });
  });
});
