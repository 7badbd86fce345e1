// The ROS 2 launch file: well-formed, includes rosbridge_server's WebSocket launch, and the command
// it starts is a real `wmrl` invocation (run here with the in-process sim robot in place of ROS).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-launch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const xml = readFileSync('launch/wmrl_bridge.launch.xml', 'utf8');

describe('launch/wmrl_bridge.launch.xml', () => {
  it('declares its arguments and includes rosbridge_server', () => {
    expect(xml).toMatch(/<launch>[\s\S]*<\/launch>/);
    const args = [...xml.matchAll(/<arg name="([^"]+)" default="([^"]*)"/g)].map((m) => m[1]);
    expect(args).toEqual(expect.arrayContaining(['robot_config', 'policy', 'episodes', 'steps', 'store', 'port']));
    expect(xml).toMatch(/<include file="\$\(find-pkg-share rosbridge_server\)\/launch\/rosbridge_websocket_launch\.xml">/);
    expect(xml).toMatch(/<arg name="port" value="\$\(var port\)"\/>/);
  });

  it('starts a command that runs: wmrl drive with its arguments substituted', () => {
    const cmd = /<executable cmd="([^"]+)"/.exec(xml)![1]!;
    const values: Record<string, string> = { robot_config: 'sim:reach', policy: 'hold', episodes: '1', steps: '5', store: join(dir, 'ep.db') };
    const argv = cmd.replace(/\$\(var (\w+)\)/g, (_, k: string) => values[k] ?? `<${k}>`).split(/\s+/);
    // package.json's bin entry: plain node, no tsx on the command line.
    expect(argv.slice(0, 2)).toEqual(['node', 'bin/wmrl.mjs']);
    expect(argv.filter((a) => a.startsWith('<'))).toEqual([]);
    const r = spawnSync(process.execPath, argv.slice(1), { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/1 episode\(s\) recorded/);
  });
});
