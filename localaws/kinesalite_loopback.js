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
