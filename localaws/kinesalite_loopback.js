// kinesalite listens on all interfaces by default; this wrapper binds it to 127.0.0.1 only.
// Usage: node kinesalite_loopback.js PORT
const kinesalite = require('kinesalite');

const port = parseInt(process.argv[2], 10);
const server = kinesalite({ createStreamMs: 50, deleteStreamMs: 50, updateStreamMs: 50, shardLimit: 10000 });
server.listen(port, '127.0.0.1', () => console.log(`kinesalite listening on 127.0.0.1:${port}`));
