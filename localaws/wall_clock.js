// Loaded before kinesis-mock (node --require): its clock reads the wall clock.
//
// kinesis-mock (cats-effect on Node) takes the time of day as performance.timeOrigin + performance.now(): the wall
// clock at its start plus a monotonic clock. When the machine's wall clock steps forward (a paused VM resumed, NTP),
// that sum falls behind by the step for the rest of the process, while AWS, kinesalite and our processes read the
// wall clock: AT_TIMESTAMP positions taken from our clock are refused as in the future, and records get arrival
// times from before they were put (docs/localaws.md, "kinesis-mock's clock"). Here timeOrigin follows the wall
// clock, so that sum is Date.now(); performance.now() stays monotonic for the timers that need it.
const { performance } = require("perf_hooks");

for (const perf of new Set([performance, globalThis.performance])) {
  Object.defineProperty(perf, "timeOrigin", { get: () => Date.now() - perf.now(), configurable: true });
}
