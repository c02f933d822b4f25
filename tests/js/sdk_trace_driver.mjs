// Drives the browser SDK (api/static/switchboard.js) in Node against a traced deployment: a client `web`
// whose tool `look` reports progress and answers. argv[2] is one JSON object: {url, sessionId, token}.
// Prints one JSON line, {callId, traceparent} (what the tool was handed), once the session logged the
// call's result; then {left: true} once the client left.
import { connect } from "../../api/static/switchboard.js";

const plan = JSON.parse(process.argv[2]);
const handed = [];
let served;
const allServed = new Promise((resolve) => {
  served = resolve;
});

const look = {
  description: "Looks",
  parameters: { type: "object", properties: {} },
  async execute(_args, call) {
    handed.push({ callId: call.callId, traceparent: call.traceparent });
    await call.progress("looking", 0.5);
    return "seen";
  },
};

const session = connect({ sessionId: plan.sessionId, token: plan.token, url: plan.url });
session.on("tool_result", () => served());
await session.ready();
await session.registerClient({ name: "web", ttl: 0, tools: { look } });
await allServed;
for (const line of handed) console.log(JSON.stringify(line));
await session.close();
console.log(JSON.stringify({ left: true }));
process.exit(0);
