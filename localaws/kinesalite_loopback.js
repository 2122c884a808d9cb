// kinesalite on 127.0.0.1 only, surviving clients that hang up.
// Usage: node kinesalite_loopback.js PORT
//
// kinesalite's request handler does `req.on('error', err => { throw err })`. Node emits that error ("aborted",
// ECONNRESET) whenever a client closes its connection before kinesalite has answered: while the request body is
// still arriving, or while kinesalite is still working on it (a SIGKILLed driver, a read timeout, an abandoned
// read-ahead). The throw is uncaught and the whole server exits. This wrapper hands kinesalite a request whose
// 'error' listeners log one line and drop the connection instead; every other event reaches kinesalite as before.
const kinesalite = require('kinesalite');

const port = parseInt(process.argv[2], 10);
const server = kinesalite({ createStreamMs: 50, deleteStreamMs: 50, updateStreamMs: 50, shardLimit: 10000 });

function logClientGone(req, startedMs, err) {
  const action = (req.headers['x-amz-target'] || '').split('.').pop() || req.method;
  const ms = Date.now() - startedMs;
  console.log(`kinesalite: a client hung up during ${action} after ${ms} ms (${err.code || err.message}); serving on`);
}

const [handler] = server.listeners('request');
server.removeAllListeners('request');
server.on('request', (req, res) => {
  const on = req.on;
  const startedMs = Date.now();
  req.on = function (event, listener) {
    if (event === 'error') return on.call(this, event, (err) => { logClientGone(req, startedMs, err); res.destroy(); });
    return on.call(this, event, listener);
  };
  handler(req, res);
});
// A socket error outside any request (a reset between keep-alive requests) is answered by dropping the socket.
server.on('clientError', (err, socket) => socket.destroy());

server.listen(port, '127.0.0.1', () => console.log(`kinesalite listening on 127.0.0.1:${port}`));
