// bench vla's worker process: runs the jobs bench/vla.ts sends it (a setup part, a task's setup, an arm's cell) one at
// a time, keeping the task's setup loaded between them. The computation key hashes this file and all it imports.
import { serveJobs } from '../lib/worker-pool.js';
import { JobRunner, type Job, type JobResult } from './vla.js';

const runner = new JobRunner();
serveJobs<Job, JobResult>((job, progress) => runner.run(job, progress));
