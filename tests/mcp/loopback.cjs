// Loaded with `node --require` in front of an MCP server the tests start over HTTP (tests/mcp_proxy.rs): every
// server it opens listens on 127.0.0.1 only (whatever host it asks for), and prints the port it got, so the test can
// start it with PORT=0 and nothing listens beyond the loopback.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = typeof args[0] === "object" && args[0] !== null ? args[0].port : args[0];
  const callback = args.find((a) => typeof a === "function");
  this.once("listening", () => console.error(`loopback listening on port ${this.address().port}`));
  return callback ? listen.call(this, Number(port) || 0, "127.0.0.1", callback) : listen.call(this, Number(port) || 0, "127.0.0.1");
};
