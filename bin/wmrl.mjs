#!/usr/bin/env node
// The `wmrl` command of package.json's "bin" (`npx wmrl`, the ROS 2 launch file): runs bin/wmrl.ts
// through tsx's loader, so nothing needs building. A bundled dist/ was not made: the code finds its
// package.json, bench/, sim assets and sandbox runner relative to each module's import.meta.url.
import { register } from 'tsx/esm/api';

register();
await import('./wmrl.ts');
