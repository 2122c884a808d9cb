// Loaded into kinesalite with NODE_OPTIONS="--require <this file>": Date.now() answers KINESALITE_CLOCK_MS always.
//
// kinesalite builds every sequence number from the stream's creation time, the put time (both in seconds) and a
// per-stream counter, and reads the clock nowhere else that matters. With the clock fixed, the same stream
// created again and given the same records in the same order gets the same shard ids and the same sequence
// numbers, so a stored checkpoint of it can be resumed on a fresh server
// (tests/connector/support/stored_checkpoint.py). Records never age past the retention period either, since no
// time passes. Timers (setTimeout) keep real time.
const fixed = Number(process.env.KINESALITE_CLOCK_MS);
if (!Number.isSafeInteger(fixed) || fixed <= 0) {
  throw new Error(`KINESALITE_CLOCK_MS must be epoch milliseconds, got ${process.env.KINESALITE_CLOCK_MS}`);
}
Date.now = () => fixed;
