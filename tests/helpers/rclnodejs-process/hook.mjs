// `node --import ./hook.mjs …`: the child process's `import('rclnodejs')` loads ./rclnodejs.mjs instead, a ROS 2
// stand-in (ROS 2 and rclnodejs cannot be installed on these machines), so a launch file's command runs unchanged.
import { register } from 'node:module';

register('./resolve.mjs', import.meta.url);
