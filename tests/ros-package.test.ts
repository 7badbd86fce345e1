// The ROS 2 package ros/wmrl_bridge (ROS 2 cannot be installed here: it was never built with colcon nor launched).
// What is checked instead: the launch files against the ROS 2 Launch XML Format (the tags, attributes and
// substitutions ros2/design's article 151 describes, v0.1.1, written out below), every `$(var x)` declared before
// its use, every `$(find-pkg-share p)` a declared exec_depend; package.xml against format 3's required elements
// (REP 149); CMakeLists.txt installing what exists; and the command each launch file starts run as it is — the
// service on the in-process sim robot, the two robot-side nodes on an in-process rclnodejs stand-in.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { layoutOf } from '../common/layout.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { exportPolicyArtifact } from '../policies/artifact.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { parseXml, type XmlElement } from './helpers/xml.js';

const ROOT = resolve(import.meta.dirname, '..');
const PKG = join(ROOT, 'ros/wmrl_bridge');
const PACKAGE_LAUNCH = readdirSync(join(PKG, 'launch')).map((f) => join(PKG, 'launch', f));
const LAUNCH_FILES = [...PACKAGE_LAUNCH, join(ROOT, 'launch/wmrl_bridge.launch.xml')];
const dir = mkdtempSync(join(tmpdir(), 'wmrl-ros-package-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// ---------------------------------------------------------------- the launch XML format, as the spec describes it

interface TagSpec {
  required: string[];
  optional: string[];
  children: string[];
}
/** "Every tag's execution can be conditioned on a boolean predicate via if or unless" — except <env>, which "doesn't allow conditional execution". */
const IF = ['if', 'unless'];
const OUTPUT = ['log', 'screen'];
/** Tag (as `parent/tag` where its meaning depends on the parent) → its attributes and the tags it may hold. */
const TAGS: Record<string, TagSpec> = {
  // `version` is in the schema; launch_xml never reads it, and no launch file in practice (rosbridge_server's included) carries it.
  launch: { required: [], optional: ['version'], children: ['arg', 'let', 'include', 'group', 'executable', 'node', 'set_env', 'unset_env'] },
  arg: { required: ['name'], optional: ['default', 'value', 'description', ...IF], children: [] },
  let: { required: ['name', 'value'], optional: IF, children: [] },
  include: { required: ['file'], optional: IF, children: ['include/arg'] },
  'include/arg': { required: ['name', 'value'], optional: IF, children: [] },
  group: { required: [], optional: ['scoped', ...IF], children: ['executable', 'node', 'group', 'include', 'let', 'set_env', 'unset_env'] },
  executable: { required: ['cmd'], optional: ['cwd', 'name', 'args', 'shell', 'launch-prefix', 'output', ...IF], children: ['env'] },
  node: { required: ['pkg', 'exec'], optional: ['name', 'ros_args', 'args', 'namespace', 'launch-prefix', 'output', ...IF], children: ['env', 'param', 'remap'] },
  param: { required: [], optional: ['name', 'value', 'sep', 'value-sep', 'from'], children: ['param'] },
  remap: { required: ['from', 'to'], optional: [], children: [] },
  env: { required: ['name', 'value'], optional: [], children: [] },
  set_env: { required: ['name', 'value'], optional: IF, children: [] },
  unset_env: { required: ['name'], optional: IF, children: [] },
};
/** The built-in substitutions and how many arguments each takes. */
const SUBSTITUTIONS: Record<string, [number, number]> = {
  'find-pkg-prefix': [1, 1], 'find-pkg-share': [1, 1], 'find-exec': [1, 1], 'exec-in-package': [2, 2],
  var: [1, 1], env: [1, 2], eval: [1, Infinity], dirname: [0, 0],
};

interface LaunchFacts {
  problems: string[];
  /** Launch configurations the file declares (arg, let), in order. */
  declared: string[];
  packages: string[];
  executables: XmlElement[];
}

/** Every departure of a launch file from the format, and what it declares and uses. */
function checkLaunch(xml: string): LaunchFacts {
  const facts: LaunchFacts = { problems: [], declared: [], packages: [], executables: [] };
  const bad = (el: XmlElement, why: string) => facts.problems.push(`line ${el.line} <${el.name}>: ${why}`);
  const root = parseXml(xml);
  if (root.name !== 'launch') bad(root, 'the root tag must be <launch>');
  const visit = (el: XmlElement, key: string) => {
    const spec = TAGS[key]!;
    for (const a of spec.required) if (!(a in el.attrs)) bad(el, `needs attribute ${a}`);
    for (const [a, v] of Object.entries(el.attrs)) {
      if (![...spec.required, ...spec.optional].includes(a)) bad(el, `attribute ${a} is not in the format`);
      if (a === 'output' && !OUTPUT.includes(v)) bad(el, `output must be log or screen, got ${v}`);
      if (v.replace(/\$\([^()]*\)/g, '').includes('$(')) bad(el, `an unclosed or nested substitution in ${a}`);
      for (const m of v.matchAll(/\$\(([^()]*)\)/g)) {
        const [fn, ...args] = m[1]!.trim().split(/\s+/);
        const arity = SUBSTITUTIONS[fn!];
        if (!arity) bad(el, `$(${fn}) is not a built-in substitution`);
        else if (args.length < arity[0] || args.length > arity[1]) bad(el, `$(${fn}) takes ${arity[0]}–${arity[1]} arguments, got ${args.length}`);
        if (fn === 'var' && !facts.declared.includes(args[0]!)) bad(el, `$(var ${args[0]}) is used before any <arg> or <let> declares it`);
        if (fn === 'find-pkg-share' || fn === 'find-pkg-prefix') facts.packages.push(args[0]!);
      }
    }
    if (el.text && key !== 'param') bad(el, `text content '${el.text.slice(0, 20)}' is not in the format`);
    if ((key === 'arg' || key === 'let') && el.attrs.name) {
      if (facts.declared.includes(el.attrs.name)) bad(el, `${el.attrs.name} is declared twice`);
      facts.declared.push(el.attrs.name);
    }
    if (key === 'executable') facts.executables.push(el);
    for (const child of el.children) {
      const childKey = spec.children.find((c) => c.split('/').at(-1) === child.name);
      if (!childKey) bad(child, `<${child.name}> may not appear inside <${el.name}>`);
      else visit(child, childKey);
    }
  };
  if (root.name === 'launch') visit(root, 'launch');
  return facts;
}

/** The arguments rosbridge_server's launch/rosbridge_websocket_launch.xml declares (read from rosbridge_suite's file). */
const ROSBRIDGE_ARGS = ['port', 'address', 'url_path', 'ssl', 'certfile', 'keyfile', 'namespace', 'retry_startup_delay', 'fragment_timeout', 'delay_between_messages', 'max_message_size', 'unregister_timeout', 'use_compression', 'call_services_in_new_thread', 'default_call_service_timeout', 'send_action_goals_in_new_thread', 'topics_glob', 'services_glob', 'params_glob', 'params_timeout', 'bson_only_mode', 'respawn', 'binary_encoder'];

// ---------------------------------------------------------------- package.xml (REP 149, format 3)

const FORMAT3_TAGS = ['name', 'version', 'description', 'maintainer', 'license', 'url', 'author', 'buildtool_depend', 'buildtool_export_depend', 'build_depend', 'build_export_depend', 'depend', 'exec_depend', 'test_depend', 'doc_depend', 'conflict', 'replace', 'group_depend', 'member_of_group', 'export'];
const pkg = parseXml(readFileSync(join(PKG, 'package.xml'), 'utf8'));
const all = (tag: string) => pkg.children.filter((c) => c.name === tag);
const execDepends = all('exec_depend').map((d) => d.text);

describe('ros/wmrl_bridge/package.xml', () => {
  it('has format 3\'s required elements, in order, well formed', () => {
    expect(pkg.name).toBe('package');
    expect(pkg.attrs.format).toBe('3');
    expect(pkg.children.slice(0, 3).map((c) => c.name)).toEqual(['name', 'version', 'description']);
    expect(pkg.children.map((c) => c.name).filter((n) => !FORMAT3_TAGS.includes(n))).toEqual([]);
    const [name] = all('name');
    expect(name!.text).toMatch(/^[a-z][a-z0-9_]*$/);
    expect(name!.text).toBe('wmrl_bridge');
    expect(all('version')[0]!.text).toMatch(/^\d+\.\d+\.\d+$/);
    expect(all('version')[0]!.text).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
    expect(all('description')[0]!.text.length).toBeGreaterThan(20);
    expect(all('maintainer').length).toBeGreaterThanOrEqual(1);
    for (const m of all('maintainer')) {
      expect(m.attrs.email).toMatch(/^[^@\s]+@[^@\s]+\.[^@\s]+$/);
      expect(m.text).not.toBe('');
    }
    expect(all('license').length).toBeGreaterThanOrEqual(1);
    expect(all('license').every((l) => l.text !== '')).toBe(true);
  });

  it('builds with ament_cmake and runs with rosbridge_server and Node.js', () => {
    expect(all('buildtool_depend').map((d) => d.text)).toEqual(['ament_cmake']);
    expect(execDepends).toEqual(expect.arrayContaining(['rosbridge_server', 'nodejs', 'ros2launch']));
    expect(new Set(execDepends).size).toBe(execDepends.length);
    const exp = all('export');
    expect(exp).toHaveLength(1);
    expect(exp[0]!.children.map((c) => [c.name, c.text])).toEqual([['build_type', 'ament_cmake']]);
  });

  it('CMakeLists.txt is the package\'s, and installs launch/ and config/, which exist', () => {
    const cmake = readFileSync(join(PKG, 'CMakeLists.txt'), 'utf8').replace(/#.*$/gm, '');
    expect(/project\((\w+)\)/.exec(cmake)![1]).toBe('wmrl_bridge');
    expect(cmake).toMatch(/find_package\(ament_cmake REQUIRED\)/);
    const install = /install\(DIRECTORY ([\w ]+) DESTINATION share\/\$\{PROJECT_NAME\}\)/.exec(cmake);
    expect(install![1]!.split(' ')).toEqual(['launch', 'config']);
    for (const d of ['launch', 'config']) expect(readdirSync(join(PKG, d)).length).toBeGreaterThan(0);
    expect(cmake.trim().split('\n').at(-1)).toBe('ament_package()');
    expect(readdirSync(join(PKG, 'launch')).sort()).toEqual(['bridge.launch.xml', 'policy_node.launch.xml', 'robot_services.launch.xml']);
  });
});

describe('the launch files, against the ROS 2 launch XML format', () => {
  it.each(LAUNCH_FILES.map((f) => [f.slice(ROOT.length + 1), f]))('%s', (_name, file) => {
    const facts = checkLaunch(readFileSync(file, 'utf8'));
    expect(facts.problems).toEqual([]);
    // $(find-pkg-share p): a package this one declares it runs with, or this one
    expect(facts.packages.filter((p) => p !== 'wmrl_bridge' && !execDepends.includes(p))).toEqual([]);
    // each starts this checkout's wmrl in the checkout
    expect(facts.executables.length).toBeGreaterThan(0);
    for (const e of facts.executables) {
      expect(e.attrs.cmd).toMatch(/^node bin\/wmrl\.mjs [a-z-]+ /);
      expect(e.attrs.cwd).toBe('$(var wmrl_dir)');
    }
  });

  it('the checker refuses what the format does not allow', () => {
    const problems = (body: string) => checkLaunch(`<launch>${body}</launch>`).problems;
    expect(problems('<node pkg="p"/>')).toEqual(['line 1 <node>: needs attribute exec']);
    expect(problems('<executable cmd="x" respawn="true"/>')).toEqual(['line 1 <executable>: attribute respawn is not in the format']);
    expect(problems('<executable cmd="x" output="both"/>')).toEqual(['line 1 <executable>: output must be log or screen, got both']);
    expect(problems('<executable cmd="$(var a)"/><arg name="a"/>')).toEqual(['line 1 <executable>: $(var a) is used before any <arg> or <let> declares it']);
    expect(problems('<arg name="a" default="$(find x)"/>')).toEqual(['line 1 <arg>: $(find) is not a built-in substitution']);
    expect(problems('<arg name="a" default="$(env)"/>')).toEqual(['line 1 <arg>: $(env) takes 1–2 arguments, got 0']);
    expect(problems('<group><arg name="a"/></group>')).toEqual(['line 1 <arg>: <arg> may not appear inside <group>']);
    expect(problems('<include file="f"><arg name="a"/></include>')).toEqual(['line 1 <arg>: needs attribute value']);
    expect(problems('<executable cmd="x"><env name="a" value="b" if="c"/></executable>')).toEqual(['line 1 <env>: attribute if is not in the format']);
    expect(() => checkLaunch('<launch><arg name="a"></launch>')).toThrow(/<\/launch> closes <arg>/);
    expect(() => checkLaunch('<launch><!-- a -- b --></launch>')).toThrow(/'--' inside a comment/);
  });

  it('bridge.launch.xml includes rosbridge_server\'s WebSocket launch with arguments it declares', () => {
    const root = parseXml(readFileSync(join(PKG, 'launch/bridge.launch.xml'), 'utf8'));
    const include = root.children.find((c) => c.name === 'include')!;
    expect(include.attrs.file).toBe('$(find-pkg-share rosbridge_server)/launch/rosbridge_websocket_launch.xml');
    expect(include.children.map((a) => a.attrs.name).filter((n) => !ROSBRIDGE_ARGS.includes(n!))).toEqual([]);
    expect(include.children.map((a) => [a.attrs.name, a.attrs.value])).toEqual([['port', '$(var port)'], ['address', '$(var address)']]);
    // required from the user: the robot; the checkout from the environment unless given
    const args = Object.fromEntries(root.children.filter((c) => c.name === 'arg').map((a) => [a.attrs.name, a.attrs.default]));
    expect(args.robot).toBeUndefined();
    expect(args.wmrl_dir).toBe('$(env WMRL_DIR)');
  });
});

// ---------------------------------------------------------------- the commands the launch files start

/**
 * The launch file's <executable cmd> as launch splits it (at white space outside substitutions), its $(var x)
 * substituted; a token that is only a substitution of an empty value stays one empty argument, as launch passes it.
 */
function command(file: string, values: Record<string, string>): string[] {
  const root = parseXml(readFileSync(join(PKG, 'launch', file), 'utf8'));
  const defaults = Object.fromEntries(root.children.filter((c) => c.name === 'arg').map((a) => [a.attrs.name!, a.attrs.default]));
  const tokens = root.children.find((c) => c.name === 'executable')!.attrs.cmd!.match(/(?:\$\([^()]*\)|[^\s$])+/g)!;
  const argv = tokens.map((tok) => tok.replace(/\$\(var (\w+)\)/g, (_, k: string) => {
    const v = values[k] ?? defaults[k];
    if (v === undefined || v.includes('$(')) throw new Error(`${file}: no value for ${k}`);
    return v;
  }));
  expect(argv.slice(0, 2)).toEqual(['node', 'bin/wmrl.mjs']);
  return argv.slice(1);
}

/** Runs `node ARGV` in the checkout: once `ready` matches its stdout, `then` (if given) and SIGTERM; else to its own end. */
function run(argv: string[], env: Record<string, string>, ready?: RegExp, then?: (stdout: string) => Promise<void>): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const p = spawn(process.execPath, argv, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    const t = setTimeout(() => {
      p.kill('SIGKILL');
      fail(new Error(`timed out: ${argv.join(' ')}\n${stdout}\n${stderr}`));
    }, 90_000);
    p.stdout.on('data', (d) => {
      stdout += d;
      if (ready?.test(stdout)) {
        ready = undefined;
        void (then ?? (async () => {}))(stdout).then(() => p.kill('SIGTERM'), (e: unknown) => {
          p.kill('SIGKILL');
          fail(e);
        });
      }
    });
    p.stderr.on('data', (d) => (stderr += d));
    p.on('exit', (code, signal) => {
      clearTimeout(t);
      done({ code, signal, stdout, stderr });
    });
  });
}

/** The child's `import('rclnodejs')` gets the in-process ROS 2 stand-in, configured by `robot` and `calls`. */
const rosEnv = (report: string, robot: object, calls: string[] = [], stopAfter?: object) => ({
  ROS_DISTRO: 'jazzy',
  AMENT_PREFIX_PATH: '/opt/ros/jazzy',
  NODE_OPTIONS: `--import ${pathToFileURL(join(ROOT, 'tests/helpers/rclnodejs-process/hook.mjs')).href}`,
  WMRL_STANDIN_ROBOT: JSON.stringify(robot),
  WMRL_STANDIN_CALLS: JSON.stringify(calls),
  WMRL_STANDIN_REPORT: report,
  ...(stopAfter ? { WMRL_STANDIN_STOP_AFTER: JSON.stringify(stopAfter) } : {}),
});

describe('the commands the launch files start run', () => {
  it('bridge.launch.xml: wmrl serve hosting the robot (the in-process sim in place of a ROS robot)', async () => {
    const argv = command('bridge.launch.xml', { robot: 'sim:reach', wmrl_dir: ROOT, http_port: '0', foxglove_port: '0', mqtt_port: '0', data: join(dir, 'data') });
    expect(argv.slice(1, 4)).toEqual(['serve', '--robot', 'sim:reach']);
    // the service answers for the robot before it is stopped
    let robots: Array<{ id: string }> = [];
    const r = await run(argv, {}, /Ctrl-C stops/, async (out) => {
      const url = /serving on (http:\/\/\S+)/.exec(out)![1]!;
      robots = (await (await fetch(`${url}/api/robots`)).json()) as Array<{ id: string }>;
    });
    expect(robots.map((x) => x.id)).toEqual(['sim']);
    expect(r.stdout).toMatch(/WMRL Bridge \S+ serving on http:\/\/127\.0\.0\.1:\d+/);
    expect(r.stdout).toMatch(/robot sim/);
    expect(r.code, `${r.signal} ${r.stdout} ${r.stderr}`).toBe(0);
    expect(existsSync(join(dir, 'data/token'))).toBe(true);
  }, 120_000);

  it('policy_node.launch.xml: wmrl policy-node streaming an exported policy to the controller until stopped', async () => {
    const sim = await SimRobot.create({ task: 'reach' });
    const layout = layoutOf(sim.spec);
    const policy = new GaussianPolicy({ obsDim: layout.joints.length * 2 + layout.features.length, actDim: 2, hidden: [8], seed: 1 });
    const file = join(dir, 'reach.onnx');
    exportPolicyArtifact(policy, file, { layout, action: sim.spec.action, controlHz: sim.spec.controlHz, policyVersion: 'v1', runId: 'r' });
    await sim[Symbol.asyncDispose]?.();
    const cmdTopic = '/forward_command_controller/commands';
    const argv = command('policy_node.launch.xml', { policy: file, command_topic: cmdTopic, wmrl_dir: ROOT, features_topic: '/wmrl/task_state' });
    // the optional topics left empty are passed empty, and mean none
    expect(argv).toEqual(expect.arrayContaining(['--features-topic=/wmrl/task_state', '--camera-topic=', '--estop-service=']));
    const report = join(dir, 'policy-node.json');
    const r = await run(argv, rosEnv(report, { joints: ['shoulder', 'elbow'], featuresTopic: '/wmrl/task_state', features: 13 }, [], { topic: cmdTopic, count: 25 }));
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const stats = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { steps: number; heldStale: number; estopped: boolean };
    expect(stats.steps).toBeGreaterThanOrEqual(25);
    expect([stats.heldStale, stats.estopped]).toEqual([0, false]);
    const seen = JSON.parse(readFileSync(report, 'utf8')) as { published: Record<string, number> };
    // every step's command, and the hold sent on the way out
    expect(seen.published[cmdTopic]).toBe(stats.steps + 1);
  }, 120_000);

  it('robot_services.launch.xml: wmrl robot-services with the package\'s example robot, its services called as an operator would', async () => {
    const robot = join(PKG, 'config/ur_arm.yaml');
    const argv = command('robot_services.launch.xml', { robot, wmrl_dir: ROOT });
    const report = join(dir, 'robot-services.json');
    const joints = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint'];
    const calls = ['/wmrl/reset', '/wmrl/estop', '/wmrl/reset', '/wmrl/clear_estop', '/wmrl/reset'];
    const r = await run(argv, rosEnv(report, { joints, trajectoryTopic: '/joint_trajectory_controller/joint_trajectory', controllers: ['forward_velocity_controller'] }, calls));
    expect(r.code, r.stderr).toBe(0);
    const seen = JSON.parse(readFileSync(report, 'utf8')) as { offered: string[]; answers: Array<{ service: string; success: boolean; message: string }>; published: Record<string, number>; switches: Array<{ activate_controllers: string[]; deactivate_controllers: string[] }> };
    expect(seen.offered).toEqual(['/wmrl/reset', '/wmrl/estop', '/wmrl/clear_estop']);
    expect(seen.answers.map((a) => [a.service, a.success])).toEqual([['/wmrl/reset', true], ['/wmrl/estop', true], ['/wmrl/reset', false], ['/wmrl/clear_estop', true], ['/wmrl/reset', true]]);
    // a reset goes through the home controller and back; the e-stop and the clear switch the command controller
    expect(seen.switches.map((s) => `+${s.activate_controllers.join(',')} -${s.deactivate_controllers.join(',')}`)).toEqual([
      '+joint_trajectory_controller -forward_velocity_controller', '+forward_velocity_controller -joint_trajectory_controller',
      '+ -forward_velocity_controller',
      '+forward_velocity_controller -',
      '+joint_trajectory_controller -forward_velocity_controller', '+forward_velocity_controller -joint_trajectory_controller',
    ]);
    expect(seen.published['/wmrl/outcome']).toBeGreaterThan(0);
    expect(r.stderr).toMatch(/\/wmrl\/clear_estop \(std_srvs\/srv\/Trigger\): the operator's clear/);
  }, 120_000);
});
