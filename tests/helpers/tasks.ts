// Every sim task a test runs through every adapter: the built-in tasks and the custom robot fixture.
export const TASKS = ['reach', 'push', 'pick', 'tests/fixtures/sim/custom/robot.yaml'];
