// Drives the browser SDK (api/static/switchboard.js) in Node with a `traceCall` hook, as a page with a
// tracer of its own gives it: the hook makes a "span" (ids from argv), and its `end` is noted. argv[2] is
// one JSON object: {url, sessionId, token, spanId, fails, broken}. Prints {hook, handed, ended} once the
// call's span ended (`broken`: the hook throws, and the line is printed once the session logged the result).
import { connect } from "../../api/static/switchboard.js";

const plan = JSON.parse(process.argv[2]);
const seen = { hook: null, handed: null, ended: [] };
let ended;
const spanEnded = new Promise((resolve) => {
  ended = resolve;
});

function traceCall(dispatch) {
  seen.hook = dispatch;
  if (plan.broken) throw new Error("no tracer here");
  const trace = dispatch.traceparent.split("-")[1];
  return {
    traceparent: `00-${trace}-${plan.spanId}-01`,
    end(error) {
      seen.ended.push(error);
      ended();
    },
  };
}

const look = {
  description: "Looks",
  parameters: { type: "object", properties: {} },
  async execute(_args, call) {
    seen.handed = call.traceparent;
    await call.progress("looking", 0.5);
    if (plan.fails) throw new Error("nothing to see");
    return "seen";
  },
};

const session = connect({ sessionId: plan.sessionId, token: plan.token, url: plan.url, traceCall });
// No span to end when the hook throws: done once the session logged the call's result.
if (plan.broken) session.on("tool_result", () => ended());
await session.ready();
await session.registerClient({ name: "web", ttl: 0, tools: { look } });
await spanEnded;
console.log(JSON.stringify(seen));
await session.close();
process.exit(0);
