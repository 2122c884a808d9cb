// kinesalite on 127.0.0.1 only, surviving clients that hang up, with a gate for tests.
// Usage: node kinesalite_loopback.js PORT
//
// Clients that hang up: kinesalite's request handler does `req.on('error', err => { throw err })`. Node emits that
// error ("aborted", ECONNRESET) whenever a client closes its connection before kinesalite has answered: while the
// request body is still arriving, or while kinesalite is still working on it (a SIGKILLed driver, a read timeout,
// an abandoned read-ahead). The throw is uncaught and the whole server exits. This wrapper hands kinesalite a
// request whose 'error' listeners log one line and drop the connection instead; other events reach it as before.
//
// The gate (GET /__localaws/gate, a path kinesalite never serves) lets a test catch a client in the middle of a
// call: `?close=GetRecords` holds every new GetRecords request before kinesalite has read its body (where a hang-up
// used to kill the server);
// `?open` lets the held ones go on; each answer is {"held": requests held whose client is still connected,
// "hungUp": clients that hung up mid-request so far}.
//
// Large records (LOCALAWS_MAX_RECORD_BYTES, e.g. 10485760): kinesalite takes records up to that size, as a stream
// raised by UpdateMaxRecordSize does on AWS (kinesalite has no such call: every stream takes them; its requests stay
// under 7 MiB). GetRecords answers hold at most 10 MiB, as AWS's: a longer answer is cut after the records that fit
// (at least one), with MillisBehindLatest above 0 since more records wait (kinesalite says 0 for every answer).
const MAX_ANSWER_BYTES = 10 * 1024 * 1024;
const maxRecordBytes = parseInt(process.env.LOCALAWS_MAX_RECORD_BYTES || '0', 10);
if (maxRecordBytes > 0) {
  for (const action of ['putRecord', 'putRecords']) {
    const types = require(`kinesalite/validations/${action}`).types;
    (types.Records ? types.Records.children.children : types).Data.lengthLessThanOrEqual = maxRecordBytes;
  }
}
const getRecordsPath = require.resolve('kinesalite/actions/getRecords');
const getRecords = require(getRecordsPath);
const recordBytes = (record) => Buffer.byteLength(record.Data, 'base64') + Buffer.byteLength(record.PartitionKey);
require.cache[getRecordsPath].exports = function getRecordsUpTo10MiB(store, data, cb) {
  getRecords(store, data, (err, answer) => {
    if (err || !answer || !answer.Records || answer.Records.length <= 1) return cb(err, answer);
    let total = 0;
    const fit = answer.Records.findIndex((record) => (total += recordBytes(record)) > MAX_ANSWER_BYTES);
    if (fit < 0) return cb(err, answer);
    // kinesalite's iterators hold only a position: asked again with the Limit that fits, it answers the same records
    getRecords(store, { ...data, Limit: Math.max(fit, 1) }, (cutErr, cut) => {
      if (cut && cut.Records && cut.Records.length) {
        const arrivedMs = Math.round(cut.Records[cut.Records.length - 1].ApproximateArrivalTimestamp * 1000);
        cut.MillisBehindLatest = Math.max(1, Date.now() - arrivedMs);
      }
      cb(cutErr, cut);
    });
  });
};
const kinesalite = require('kinesalite');

const port = parseInt(process.argv[2], 10);
const server = kinesalite({ createStreamMs: 50, deleteStreamMs: 50, updateStreamMs: 50, shardLimit: 10000 });

const gate = { action: null, held: [], hungUp: 0 };

function actionOf(req) {
  return (req.headers['x-amz-target'] || '').split('.').pop() || req.method;
}

function logClientGone(req, startedMs, err) {
  gate.hungUp += 1;
  const agent = req.headers['user-agent'] || '-';
  console.log(`${new Date().toISOString()} kinesalite: a client hung up during ${actionOf(req)} after ` +
    `${Date.now() - startedMs} ms (${err.code || err.message}; User-Agent ${agent}); serving on`);
}

function serveGate(req, res) {
  const query = new URL(req.url, 'http://localhost').searchParams;
  if (query.has('close')) gate.action = query.get('close');
  if (query.has('open')) {
    const held = gate.held;
    gate.action = null;
    gate.held = [];
    held.forEach(({ release }) => release());
  }
  const held = gate.held.filter(({ req: r }) => r.socket && !r.socket.destroyed).length;
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify({ held, hungUp: gate.hungUp }));
}

const [handler] = server.listeners('request');
server.removeAllListeners('request');
server.on('request', (req, res) => {
  if (req.method === 'GET' && req.url.startsWith('/__localaws/gate')) return serveGate(req, res);
  const on = req.on;
  const startedMs = Date.now();
  req.on = function (event, listener) {
    if (event === 'error') return on.call(this, event, (err) => { logClientGone(req, startedMs, err); res.destroy(); });
    return on.call(this, event, listener);
  };
  handler(req, res);
  if (gate.action === actionOf(req)) {  // kinesalite listens for the body: keep it unread, so the call stays open
    req.pause();
    gate.held.push({ req, release: () => req.resume() });
  }
});
// A socket error outside any request (a reset between keep-alive requests) is answered by dropping the socket.
server.on('clientError', (err, socket) => socket.destroy());

server.listen(port, '127.0.0.1', () => console.log(`kinesalite listening on 127.0.0.1:${port}`));
