// The wmrl command line (commander). `npm start` runs `wmrl` with no arguments: `serve`, the service.
// Each action loads its own modules, so a quick verb does not start MuJoCo, ONNX Runtime or fastify.
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { readdirSync } from 'node:fs';
import { packagePath, packageVersion } from '../common/package-root.js';
import { Type } from '@sinclair/typebox';
import { EmbodiedOptions, ResearchOptions, SIM_COMMAND_HISTORY, VlaRecipeInput } from '../recipes/options.js';
import { JSON_HELP, routeLogsToStderr } from './json-output.js';
import { addSchemaFlags, flagOf } from './schema-flags.js';

/** The benchmarks there are, read from the bench folder (the CLI runs them in a child process and imports nothing of bench/). */
const benchNames = () => readdirSync(packagePath('bench')).filter((f) => f.endsWith('.ts') && f !== 'run.ts').map((f) => f.slice(0, -3)).sort();

/** Option parsers: bad values fail with a message naming the option and the value. */
const int = (flag: string, ok: (v: number) => boolean, what: string) => (s: string) => {
  const v = Number(s);
  if (!Number.isInteger(v) || !ok(v)) throw new InvalidArgumentError(`${flag} must be ${what}, got '${s}'`);
  return v;
};
const positive = (flag: string) => int(flag, (v) => v >= 1, 'a positive integer');
const port = (flag: string) => int(flag, (v) => v >= 0 && v < 65536, 'a port number (0-65535)');
const anyInt = (flag: string) => int(flag, () => true, 'an integer');
/** The sim robot's `--command-history K` (a robot YAML sets `command_history` instead). */
const COMMAND_HISTORY_HELP = `sim robot: its observation also reports the last K commands sent (those in flight under the profile's latency; default ${SIM_COMMAND_HISTORY}); a robot YAML sets command_history`;
const steps = (flag: string) => int(flag, (v) => v >= 0 && v <= 64, 'a whole number of steps in [0, 64]');
const num = (flag: string, ok: (v: number) => boolean, what: string) => (s: string) => {
  const v = Number(s);
  if (s.trim() === '' || !Number.isFinite(v) || !ok(v)) throw new InvalidArgumentError(`${flag} must be ${what}, got '${s}'`);
  return v;
};

/** A repeatable option's values, in order. */
const collect = (v: string, all: string[]) => [...all, v];
/** `--urdf-package NAME=DIR`, repeatable: a ROS package of the robot's URDF. */
const urdfPackage = (v: string, all: Record<string, string>) => {
  const m = /^([A-Za-z0-9._-]+)=(.+)$/.exec(v);
  if (!m) throw new InvalidArgumentError(`--urdf-package must be NAME=DIR (package://NAME/... resolves in DIR), got '${v}'`);
  return { ...all, [m[1]!]: m[2]! };
};


const program = new Command('wmrl')
  .description('WMRL Bridge: post-train robot policies with World Model RL, deploy them as ONNX, watch real and imagined rollouts')
  .version(packageVersion(), '-V, --version', 'print the version of wmrl-bridge')
  .showHelpAfterError(false)
  .exitOverride()
  // Lower-case "usage:" as every other message of this CLI.
  .configureHelp({ styleTitle: (s: string) => (s === 'Usage:' ? 'usage:' : s) })
  // A verb given --json prints only its document on stdout.
  .hook('preAction', (_program, verb) => {
    if (verb.opts().json === true) routeLogsToStderr();
  });

program
  .command('serve', { isDefault: true })
  .summary('run the service: API, viewer, Foxglove endpoint, its robots (the sim robot, or --robot ROBOT.yaml ...) and the default job, a short WMRL post-training run (the default)')
  .usage('[--host H] [--port 8080] [--foxglove-port 8765] [--data DIR] [--robot ROBOT.yaml|sim:TASK[:PROFILE] ...] [--task reach] [--profile gap] [--urdf FILE] [--command-history K] [--camera PX] [--job wmrl-train|expert-session] [--updates N] [--episodes N] [--no-job]')
  .option('--host <H>', 'interface to listen on (loopback unless told otherwise)', '127.0.0.1')
  .option('--port <N>', 'HTTP port of the API and the viewer (0 = any free port)', port('--port'), 8080)
  .option('--foxglove-port <N>', 'Foxglove WebSocket port (0 = any free port)', port('--foxglove-port'), 8765)
  .option('--data <DIR>', 'the data folder: episode store, access token, policies, run checkpoints', 'data')
  .option('--robot <R>', "a robot to host: a robot YAML (rosbridge, ROS 2 or MQTT; its id is the YAML's name) or sim:TASK[:PROFILE] (the in-process sim); repeatable; instead of the built-in sim robot, and no default job unless --job", collect, [])
  .option('--task <T>', 'task of the built-in sim robot (default reach)')
  .option('--profile <P>', 'hardware profile of the built-in sim robot: nominal, gap or a YAML file (default gap)')
  .option('--urdf <FILE>', "the robot's URDF: the viewer draws the robot from it (joints named as the robot's), e.g. sim/assets/reach/robot.urdf")
  .option('--command-history <K>', `the built-in sim robot's observation also reports its last K commands sent (those in flight under the profile's latency; default ${SIM_COMMAND_HISTORY}); its jobs train on them`, steps('--command-history'))
  .option('--camera <PX>', 'the built-in sim robot carries a PX x PX camera image in its observation (a VLA reads it; the vla-train job needs 32, with --command-history 3)', positive('--camera'))
  .addOption(new Option('--job <kind>', 'the default job, on the first robot: WMRL post-training (the default on the built-in sim robot), or a scripted-expert session').choices(['wmrl-train', 'expert-session']))
  .option('--updates <N>', 'policy updates of the default WMRL job', positive('--updates'), 8)
  .option('--episodes <N>', 'episodes of the expert-session job', positive('--episodes'), 20)
  .option('--no-job', 'start no job; runs are started through the API')
  .option('--no-mqtt', 'do not start the embedded MQTT broker')
  .option('--mqtt-port <N>', 'embedded MQTT broker port (0 = any free port)', port('--mqtt-port'), 1883)
  .option('--allowed-host <H>', 'answer requests whose Host header names H, besides loopback, IP addresses and --host (a DNS name the service is reached by); repeatable', collect, [])
  .option('--allowed-origin <O>', 'browser pages of origin O may open /api/stream and the Foxglove endpoint (e.g. https://app.foxglove.dev); repeatable', collect, [])
  .option('--urdf-package <NAME=DIR>', "package://NAME/... of --urdf resolves in DIR (default: only the URDF's own package, its folder or the one above named NAME); repeatable", urdfPackage, {})
  .action(async (o) => (await import('./commands/serve.js')).serve(o));

program
  .command('drive')
  .summary('run a policy on a robot through the safety layer, recording every episode')
  .usage('--robot YAML|sim:TASK[:PROFILE] [--policy expert|demonstrator|hold|FILE.onnx] [--episodes N] [--steps N] [--store DB] [--policy-version V] [--fast] [--command-history K] [--json]')
  .requiredOption('--robot <R>', 'a robot YAML file, or sim:TASK[:PROFILE] for the in-process sim')
  .option('--policy <P>', "expert (the sim's scripted expert), demonstrator (the expert made robust to the profile's latency and actuation), hold, or a policy .onnx", 'expert')
  .option('--episodes <N>', 'episodes to record', positive('--episodes'), 1)
  .option('--steps <N>', "steps per episode (default: the task's horizon on the sim, 500 on a robot)", positive('--steps'))
  .option('--store <DB>', 'episode store', 'data/episodes.db')
  .option('--policy-version <V>', 'policy version recorded with each episode')
  .option('--fast', 'step the in-process sim as fast as it goes', false)
  .option('--command-history <K>', COMMAND_HISTORY_HELP, steps('--command-history'))
  .option('--json', JSON_HELP, false)
  .action(async (o) => (await import('./commands/drive.js')).drive(o));

program
  .command('policy-node')
  .summary('run a policy artifact on the robot itself over native ROS 2 (rclnodejs): its rate, limits and layout from its metadata')
  .requiredOption('--policy <FILE>', 'the policy .onnx (its metadata declares joints, features, action limits, control rate, camera size)')
  .option('--state-topic <T>', 'sensor_msgs/JointState topic', '/joint_states')
  .requiredOption('--command-topic <T>', 'the controller\'s command topic')
  .addOption(new Option('--command-mode <M>', 'forward_command (std_msgs/Float64MultiArray) or joint_trajectory (trajectory_msgs/JointTrajectory)').choices(['forward_command', 'joint_trajectory']).default('forward_command'))
  .addOption(new Option('--trajectory-field <F>', 'joint_trajectory: the action is positions, or velocities sent as positions one period on').choices(['positions', 'velocities']).default('positions'))
  .option('--features-topic <T>', 'std_msgs/Float32MultiArray of the task features the policy reads')
  .option('--camera-topic <T>', 'the camera topic a policy that reads images needs')
  .addOption(new Option('--camera-encoding <E>', 'rgb8 (sensor_msgs/Image) or png/jpeg (sensor_msgs/CompressedImage)').choices(['rgb8', 'png', 'jpeg']).default('jpeg'))
  .option('--instruction-topic <T>', 'std_msgs/String instruction topic')
  .option('--estop-service <S>', 'std_srvs/Trigger the watchdog calls when it stops the robot')
  .option('--steps <N>', 'stop after N control steps (default: until Ctrl-C)', positive('--steps'))
  .action(async (o) => (await import('./commands/policy-node.js')).policyNode(o));

program
  .command('robot-services')
  .summary("on the robot itself (native ROS 2): Trigger services reset (to the robot YAML's home pose) and estop (its controller manager, latched until clear), and its outcome topic")
  .usage('--robot ROBOT.yaml [--clear-service /wmrl/clear_estop]')
  .requiredOption('--robot <YAML>', 'the robot YAML: home, controller_manager, outcome_rule, and the names under services and outcome_topic')
  .option('--clear-service <S>', "the operator's std_srvs/Trigger that clears a latched e-stop", '/wmrl/clear_estop')
  .action(async (o) => (await import('./commands/robot-services.js')).robotServices(o));

const episodes = program.command('episodes').summary('list recorded episodes; export one to MCAP; import an MCAP bag; LeRobot v3.0 datasets').usage('list [--json]|export ID OUT.mcap|OUT/ [--rosbag2] [--lz4|--zstd]|import IN.mcap [--store DB]|export-lerobot DB DIR [--robot sim:TASK] [--command-history K] [--images video|png] [--camera NAME]|import-lerobot DIR DB [--robot sim:TASK] [--command-history K] [--image KEY]');
episodes
  .command('list', { isDefault: true })
  .summary('list the recorded episodes')
  .option('--store <DB>', 'episode store', 'data/episodes.db')
  .option('--json', 'print the episodes as one JSON document on stdout', false)
  .action(async (o) => (await import('./commands/episodes.js')).list(o));
episodes
  .command('export')
  .summary('export one episode as a ROS 2 MCAP bag: one .mcap file, or a rosbag2 bag folder')
  .argument('<id>', 'episode id')
  .argument('<out>', 'output .mcap file, or a new bag folder (--rosbag2 or a trailing /: OUT/metadata.yaml + OUT/<name>_0.mcap)')
  .option('--store <DB>', 'episode store', 'data/episodes.db')
  .option('--rosbag2', 'write a rosbag2 bag folder that ros2 bag info/play read', false)
  .option('--lz4', 'lz4-compress the chunks', false)
  .option('--zstd', 'zstd-compress the chunks (rosbag2\'s choice; needs Node >= 22.15)', false)
  .action(async (id, out, o) => (await import('./commands/episodes.js')).exportOne(id, out, o));
episodes
  .command('import')
  .summary('import an MCAP bag into the store')
  .argument('<file>', 'input .mcap file')
  .option('--store <DB>', 'episode store', 'data/episodes.db')
  .action(async (file, o) => (await import('./commands/episodes.js')).importOne(file, o));
episodes
  .command('export-lerobot')
  .summary('export the store\'s episodes as one LeRobot v3.0 dataset folder')
  .argument('<db>', 'episode store')
  .argument('<dir>', 'new dataset folder')
  .option('--robot <R>', 'sim:TASK[:PROFILE] whose observation layout and control rate name the state entries and fps')
  .option('--ids <ID...>', 'episode ids (default: every complete episode)')
  .option('--all', 'include partial and recording episodes', false)
  .option('--fps <N>', 'frames per second (default: the robot\'s control rate, else measured)', positive('--fps'))
  .addOption(new Option('--images <FORMAT>', 'camera frames as a video feature (mp4 encoded by ffmpeg, as LeRobot records) or PNG image features in the parquet (exact)').choices(['video', 'png']).default('video'))
  .option('--camera <NAME>', 'the camera\'s name: its feature is observation.images.NAME', 'camera')
  .option('--command-history <K>', `--robot sim:…: its observation reports the last K commands sent (episodes recorded with drive --command-history K; default ${SIM_COMMAND_HISTORY})`, steps('--command-history'))
  .action(async (db, dir, o) => (await import('./commands/episodes.js')).exportLeRobotCmd(db, dir, { ...o, status: o.all ? 'all' : 'complete' }));
episodes
  .command('import-lerobot')
  .summary('import a LeRobot v3.0 dataset folder into the store')
  .argument('<dir>', 'dataset folder')
  .argument('<db>', 'episode store')
  .option('--robot <R>', 'sim:TASK[:PROFILE] whose observation layout observation.state must have (needed for datasets this project did not write)')
  .option('--image <KEY>', 'which camera (image or video feature, e.g. observation.images.front) becomes the episode image (default observation.image, or the only one)')
  .option('--command-history <K>', `--robot sim:…: its observation reports the last K commands sent (default ${SIM_COMMAND_HISTORY})`, steps('--command-history'))
  .action(async (dir, db, o) => (await import('./commands/episodes.js')).importLeRobotCmd(dir, db, o));

program
  .command('export')
  .summary('export recorded episodes (all, or those given) as MCAP bags into a folder, with progress')
  .usage('[ID...] --out DIR [--store DB] [--rosbag2] [--lz4|--zstd] [--json]')
  .argument('[ids...]', 'episode ids (default: every complete episode)')
  .requiredOption('--out <DIR>', 'output folder (one <id>.mcap per episode, or with --rosbag2 one bag folder <id>/)')
  .option('--store <DB>', 'episode store', 'data/episodes.db')
  .option('--rosbag2', 'one rosbag2 bag folder per episode', false)
  .option('--lz4', 'lz4-compress the chunks', false)
  .option('--zstd', 'zstd-compress the chunks (needs Node >= 22.15)', false)
  .option('--json', JSON_HELP, false)
  .action(async (ids, o) => (await import('./commands/episodes.js')).exportMany(ids, o));

program
  .command('deploy')
  .summary('upload a policy .onnx to the running service and deploy it on one of its robots')
  .usage('<policy.onnx> [--url http://127.0.0.1:8080] [--id NAME] [--robot ID] [--episodes N] [--token-file data/token] [--json]')
  .argument('<policy>', 'policy .onnx file (input obs, output action)')
  .option('--id <NAME>', "the policy's id on the service (default: the file name without .onnx)")
  .option('--url <URL>', 'the service', 'http://127.0.0.1:8080')
  .option('--robot <ID>', 'robot id on the service (default: its only robot)')
  .option('--episodes <N>', 'episodes to run', positive('--episodes'), 5)
  .option('--token-file <F>', 'access token file (or set WMRL_TOKEN)', 'data/token')
  .option('--json', JSON_HELP, false)
  .action(async (file, o) => (await import('./commands/deploy.js')).deploy(file, o));

program
  .command('bc')
  .summary('behaviour cloning from recorded episodes (episode store, MCAP, LeRobot v3.0), exported as a policy .onnx')
  .usage('--from store:DB|mcap:FILE|lerobot:DIR --robot sim:TASK[:PROFILE]|ROBOT.yaml --out policy.onnx [--policy gaussian|vla] [--epochs N] [--batch N] [--lr F] [--chunk N] [--ids ID...] [--partial] [--seed S] [--command-history K] [--json]')
  .requiredOption('--from <SRC>', 'store:DB (complete episodes of an episode store), mcap:FILE (one recording) or lerobot:DIR (a LeRobot v3.0 dataset)')
  .requiredOption('--robot <R>', 'sim:TASK[:PROFILE] or a robot YAML: its observation layout, action spec and control rate')
  .requiredOption('--out <FILE>', 'the policy .onnx to write')
  .addOption(new Option('--policy <P>', 'gaussian (observation vector) or vla (also camera image and instruction)').choices(['gaussian', 'vla']).default('gaussian'))
  .option('--epochs <N>', 'passes over the demonstrations', positive('--epochs'), 30)
  .option('--batch <N>', 'rows per step', positive('--batch'), 256)
  .option('--lr <F>', 'Adam learning rate', num('--lr', (v) => v > 0, 'a positive number'), 1e-3)
  .option('--chunk <N>', 'VLA: actions per decision', positive('--chunk'), 1)
  .option('--ids <ID...>', 'store: these episodes (default every complete one)')
  .option('--partial', 'store: include partial episodes', false)
  .option('--seed <S>', 'seed', anyInt('--seed'), 0)
  .option('--policy-version <V>', 'policy version written into the artifact', 'bc-1')
  .option('--run-id <ID>', 'training run id written into the artifact', 'bc')
  .option('--command-history <K>', COMMAND_HISTORY_HELP, steps('--command-history'))
  .option('--json', JSON_HELP, false)
  .action(async (o) => (await import('./commands/bc.js')).bc(o));

// `train`'s flags are the embodied recipe's options (recipes/options.ts EmbodiedOptions).
const train = program
  .command('train')
  .summary('post-train a policy on a robot with WMRL (or the standard-GRPO baseline), export it as .onnx')
  .usage('[--policy gaussian|vla [--proprio robot|all]] [--algo wmrl|standard] [--robot sim:TASK[:PROFILE]|ROBOT.yaml [--robot …] --task TASK] [--quick] [--out DIR] [--resume] [--json] [options]')
  .option('--out <DIR>', 'the run folder: config.json, the checkpoint, episodes.db, history.json, policy.onnx (default runs/ALGO-TIME)')
  .option('--resume', 'continue the run in --out as it was started (only --updates may change, to extend it)', false)
  .option('--command-history <K>', COMMAND_HISTORY_HELP, steps('--command-history'))
  .option('--json', JSON_HELP, false)
  .addOption(new Option('--policy <kind>', 'the policy post-trained: the Gaussian MLP, or the VLA (recipes/vla.ts: cloned on the gap robot, then WMRL; takes --robot sim:TASK:gap, --quick, --seed, --updates, --kl-coef, --proprio, --out)').choices(['gaussian', 'vla']).default('gaussian'));
// --robot is repeatable (a fleet): the schema's default stands until the first one given.
const ROBOT_DEFAULT = [EmbodiedOptions.properties.robot.default as string];
train.addOption(new Option('--robot <R>', EmbodiedOptions.properties.robot.description).default(ROBOT_DEFAULT, JSON.stringify(ROBOT_DEFAULT[0])).argParser((v: string, all: string[]) => (all === ROBOT_DEFAULT ? [v] : [...all, v])));
const trainKeys = [...addSchemaFlags(train, EmbodiedOptions, ['commandHistory', 'robot']), 'commandHistory', 'robot'];
// --policy vla's own settings, from the VLA recipe's schema (recipes/vla-options.ts).
const vlaKeys = addSchemaFlags(train, Type.Pick(VlaRecipeInput, ['proprio']));
train.action(async (o: Record<string, unknown>, cmd: typeof train) => {
  const given = [...trainKeys, ...vlaKeys].filter((k) => cmd.getOptionValueSource(k) === 'cli');
  const vlaOnly = vlaKeys.filter((k) => given.includes(k));
  if (o.policy !== 'vla' && vlaOnly.length) throw new Error(`${vlaOnly.map(flagOf).join(', ')}: the VLA recipe's option; give --policy vla`);
  const robots = o.robot as string[];
  if (robots.length === 1) o.robot = robots[0];
  else if (o.policy === 'vla') throw new Error(`--policy vla trains on one sim robot; got --robot ${robots.join(', --robot ')}`);
  if (o.policy === 'vla') return (await import('./commands/train-vla.js')).trainVla(o as unknown as Parameters<typeof import('./commands/train-vla.js').trainVla>[0], given);
  await (await import('./commands/train.js')).train(o as Parameters<typeof import('./commands/train.js').train>[0], trainKeys, given);
});

const research = program
  .command('research')
  .summary('post-train an AutoResearch agent on a built-in task with WMRL (or the standard-GRPO baseline), proposals executed in the sandbox')
  .usage('[--task classifier|controller] [--algo wmrl|standard] [--quick] [--out DIR] [--resume] [--json] [options]')
  .option('--out <DIR>', 'the run folder: config.json, executions.jsonl (the checkpoint), steps.json, policy.json (default runs/research-ALGO-TIME)')
  .option('--resume', 'continue the run in --out as it was started (journaled executions are not run again)', false)
  .option('--unsafe-no-sandbox', "run proposals WITHOUT the bubblewrap sandbox (this machine's network, files and processes open to them); only where bwrap cannot run", false)
  .option('--json', JSON_HELP, false);
const researchKeys = addSchemaFlags(research, ResearchOptions);
research.action(async (o: Record<string, unknown>, cmd: typeof research) => {
  // Flags given on the command line (not defaults), which --resume refuses.
  const given = researchKeys.filter((k) => cmd.getOptionValueSource(k) === 'cli').map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
  await (await import('./commands/research.js')).research(o as Parameters<typeof import('./commands/research.js').research>[0], researchKeys, given);
});

program
  .command('bench')
  .summary('run a benchmark: prints a markdown table and a RESULT line (see README)')
  .usage('<name> [--quick] [--all | --task T | --combine] [--seed N]')
  .argument('<name>', benchNames().join(', '))
  .option('--quick', 'under a minute, prints only', false)
  .option('--all', 'every task the benchmark knows (embodied: push beside reach)', false)
  .option('--task <T>', 'one task of those --all runs, instead of the default (embodied: push)')
  .option('--combine', 'build the report from full --task runs\' kept results, running nothing (vla)', false)
  .option('--seed <N>', 'rerun the RL rows with another seed, its own report (vla)')
  .action(async (name, o) => (await import('./commands/bench.js')).bench(name, o));

program
  .command('reward-serve')
  .summary('serve the reward API for external RL trainers (OpenRLHF /get_reward, /grade, /health) over a research task')
  .usage('[--task classifier|controller] [--host H] [--port 8090] [--slots N] [--deadline-ms MS] [--anchor-fraction F] [--invalid-reward R] [--token T | --no-token] [--allowed-host H] [--unsafe-no-sandbox]')
  .option('--task <T>', 'built-in research task: classifier or controller', 'classifier')
  .option('--host <H>', 'interface to listen on', '127.0.0.1')
  .option('--port <N>', 'port (0 = any free port)', port('--port'), 8090)
  .option('--slots <N>', 'sandbox slots', positive('--slots'), 2)
  .option('--deadline-ms <MS>', 'per request: items not executed by then are answered from the calibrated world model', positive('--deadline-ms'), 30_000)
  .option('--anchor-fraction <F>', 'share of GRPO groups executed for real (at least one per request)', num('--anchor-fraction', (v) => v >= 0 && v <= 1, 'in [0, 1]'), 0.1)
  .option('--invalid-reward <R>', 'reward of a response that is not a valid proposal', num('--invalid-reward', () => true, 'a number'), 0)
  .option('--token <T>', '/get_reward and /grade need this bearer token (default: a new one, printed at start)')
  .option('--no-token', 'no token (refused unless --host is loopback)')
  .option('--allowed-host <H>', 'answer requests whose Host header names H (besides loopback, IP addresses and --host); repeatable', collect, [])
  .option('--unsafe-no-sandbox', "run proposals WITHOUT the bubblewrap sandbox (this machine's network, files and processes open to them); only where bwrap cannot run, never for untrusted proposals", false)
  .action(async (o) => (await import('./commands/reward-serve.js')).rewardServe(o));

program
  .command('sim-robot')
  .summary('run the sim robot with a hardware profile as a rosbridge v2 server, or over MQTT through a broker (the hardware stand-in)')
  .usage('[--task reach|push|pick] [--profile nominal|gap|FILE.yaml] [--host H] [--port 9090] [--camera-hz F] [--image PX] [--seed S] [--secret-env VAR] [--allowed-host H] [--allowed-origin O] | --transport mqtt --broker URL [--robot-id ID] [--protocol 4|5] [--credentials FILE | --username U --password-env VAR]')
  .option('--task <T>', 'reach, push or pick', 'reach')
  .option('--profile <P>', 'nominal, gap or a profile YAML', 'nominal')
  .option('--host <H>', 'interface to listen on', '127.0.0.1')
  .option('--port <N>', 'rosbridge port (0 = any free port)', port('--port'), 9090)
  .option('--seed <S>', 'seed', anyInt('--seed'), 0)
  .option('--camera-hz <F>', 'camera frames per second (0 = none)', num('--camera-hz', (v) => v >= 0 && v <= 60, 'in [0, 60]'), 0)
  .option('--image <PX>', 'camera image side, px', int('--image', (v) => v >= 8 && v <= 512, 'an integer in [8, 512]'), 64)
  .option('--secret-env <VAR>', 'environment variable holding the rosbridge shared secret (clients must send the auth op); required with a --host other than loopback')
  .option('--allowed-host <H>', 'accept connections whose Host header names H, besides loopback, IP addresses and --host (a DNS name or proxy the robot is reached by); repeatable', collect, [])
  .option('--allowed-origin <O>', 'browser pages of origin O may connect (e.g. https://app.foxglove.dev); other web pages are refused; repeatable', collect, [])
  .addOption(new Option('--transport <T>', 'rosbridge: serve rosbridge v2 on --host/--port; mqtt: be reached through the broker --broker, as robot --robot-id').choices(['rosbridge', 'mqtt']).default('rosbridge'))
  .option('--broker <URL>', 'mqtt: the broker (mqtt://host:1883), e.g. the service\'s embedded one')
  .option('--robot-id <ID>', "mqtt: the robot's id in wmrl/robots/ID/... (a robot YAML's mqtt.robot_id; default sim-TASK)")
  .option('--protocol <V>', 'mqtt: protocol version, 4 (MQTT 3.1.1: every broker, the embedded one included; the default) or 5')
  .option('--credentials <FILE>', "mqtt: the service's mqtt-credentials.json (a copy): log in as robot:ID with the password derived from its robot key")
  .option('--username <U>', 'mqtt: log in as U (a broker login of its own, e.g. Mosquitto\'s password_file); the password in --password-env')
  .option('--password-env <VAR>', "mqtt: environment variable holding --username's password (never the password itself)")
  .action(async (o) => (await import('./commands/sim-robot.js')).simRobot(o));

program
  .command('inspect')
  .summary('print the inputs, outputs and metadata of an .onnx file')
  .usage('<model.onnx> [--json]')
  .argument('<model>', '.onnx file')
  .option('--json', 'print the inputs, outputs and metadata as one JSON document on stdout', false)
  .action(async (path, o) => (await import('./commands/inspect.js')).inspect(path, o));

program
  .command('demo')
  .summary('fit an ensemble world model to known dynamics and export it as ONNX')
  .usage('[--steps N] [--out DIR] [--seed S]')
  .option('--steps <N>', 'training steps', positive('--steps'), 1500)
  .option('--out <DIR>', 'output folder', 'runs/demo')
  .option('--seed <S>', 'seed', anyInt('--seed'), 0)
  .action(async (o) => (await import('./commands/demo.js')).demo(o));

// `wmrl help | head` closes the pipe early: that is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});

const argv = process.argv.slice(2);
if (argv[0] === 'help') argv[0] = '--help';
const known = program.commands.flatMap((c) => [c.name(), ...c.aliases()]);
try {
  // `serve` is the default command, so commander would take an unknown verb for its argument.
  if (argv[0] && !argv[0].startsWith('-') && !known.includes(argv[0])) throw new CommanderError(2, 'commander.unknownCommand', `wmrl: unknown command '${argv[0]}'`);
  await program.parseAsync(argv, { from: 'user' });
} catch (e) {
  if (e instanceof CommanderError) {
    // Help and version are not errors; an unknown command is a usage error (2), bad options 1.
    process.exitCode = e.code === 'commander.helpDisplayed' || e.code === 'commander.help' || e.code === 'commander.version' ? 0 : e.code === 'commander.unknownCommand' ? 2 : 1;
    if (e.code === 'commander.unknownCommand') console.error(`${e.message}\nrun wmrl --help for the commands`);
  } else {
    const cmd = argv.find((a) => !a.startsWith('-')) ?? 'serve';
    console.error(`wmrl ${cmd}: ${(e as Error).message}`);
    process.exitCode = 1;
  }
}
// A finished command ends the process even if a library left a handle open (a socket's retry timer).
process.exit();
