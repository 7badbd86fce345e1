// The wmrl command line. `npm start` runs `wmrl` with no arguments: the default job.
// Each command loads its own modules, so a quick verb does not start MuJoCo or ONNX Runtime.

interface Command {
  summary: string;
  usage: string;
  run(args: string[]): Promise<void>;
}

const commands: Record<string, Command> = {
  demo: { summary: 'fit an ensemble world model to known dynamics and export it as ONNX (the default)', usage: 'demo [--steps N] [--out DIR] [--seed S]', run: async (a) => (await import('./commands/demo.js')).demo(a) },
  'sim-robot': {
    summary: 'run the sim robot with a hardware profile as a rosbridge v2 server (the hardware stand-in)',
    usage: 'sim-robot [--task reach|push|pick] [--profile nominal|gap|FILE.yaml] [--host H] [--port 9090] [--camera-hz F] [--image PX] [--seed S]',
    run: async (a) => (await import('./commands/sim-robot.js')).simRobot(a),
  },
  drive: {
    summary: 'run a policy on a robot through the safety layer, recording every episode',
    usage: 'drive --robot YAML|sim:TASK[:PROFILE] [--policy expert|hold|FILE.onnx] [--episodes N] [--steps N] [--store DB] [--policy-version V] [--fast]',
    run: async (a) => (await import('./commands/drive.js')).drive(a),
  },
  episodes: {
    summary: 'list recorded episodes; export one to MCAP; import an MCAP bag',
    usage: 'episodes list|export ID OUT.mcap [--lz4]|import IN.mcap [--store DB]',
    run: async (a) => (await import('./commands/episodes.js')).episodes(a),
  },
  train: {
    summary: 'post-train a policy on a robot with WMRL (or the standard-GRPO baseline), export it as .onnx',
    usage: 'train [--algo wmrl|standard] [--robot sim:TASK[:PROFILE]|ROBOT.yaml --task TASK] [--no-debias] [--no-denoise] [--pure-wm] [--anchors random|active] [--updates N] [--prompts B] [--group G] [--robots N] [--reset-seconds S] [--seed S] [--out DIR] [--resume] [--quick]',
    run: async (a) => (await import('./commands/train.js')).train(a),
  },
  inspect: { summary: 'print the inputs, outputs and metadata of an .onnx file', usage: 'inspect <model.onnx>', run: async (a) => (await import('./commands/inspect.js')).inspect(a) },
};

function help(): void {
  console.log('usage: wmrl <command> [options]\n');
  for (const c of Object.values(commands)) console.log(`  ${c.usage}\n      ${c.summary}`);
  console.log('\nwmrl <command> --help shows one command.');
}

// `wmrl help | head` closes the pipe early: that is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});

const [cmd = 'demo', ...rest] = process.argv.slice(2);
if (cmd === 'help' || cmd === '--help' || cmd === '-h') help();
else if (!commands[cmd]) {
  console.error(`wmrl: unknown command '${cmd}'`);
  help();
  process.exitCode = 2;
} else if (rest.includes('--help') || rest.includes('-h')) {
  console.log(`usage: wmrl ${commands[cmd].usage}\n\n${commands[cmd].summary}`);
} else {
  try {
    await commands[cmd].run(rest);
  } catch (e) {
    console.error(`wmrl ${cmd}: ${(e as Error).message}`);
    process.exitCode = 1;
  }
  // A finished command ends the process even if a library left a handle open (a socket's retry timer).
  process.exit();
}

export {};
