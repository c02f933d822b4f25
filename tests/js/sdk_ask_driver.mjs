// Drives the browser SDK (api/static/switchboard.js, as served at /sdk/switchboard.js) in Node: a client
// whose tool asks the person. argv[2] is one JSON object: {url, sessionId, token, include, calls, form}.
// It registers the client `web` with the tool `confirm` ({url?, form?} arguments: a page to visit, else the
// call's form or `form`),
// serves `calls` calls, and prints one JSON line per call: {callId, answer} (what `ask` resolved to) or
// {callId, error}, once the session logged every call's result; then {left: true} once the client left.
import { connect } from "../../api/static/switchboard.js";

const plan = JSON.parse(process.argv[2]);
const seen = [];
let served;
const allServed = new Promise((resolve) => {
  served = resolve;
});

const confirm = {
  description: "Asks the person to confirm",
  parameters: { type: "object", properties: { url: { type: "string" }, form: { type: "object" } } },
  async execute(args, call) {
    try {
      const answer = args.url
        ? await call.askUrl("Sign in first", args.url, { key: "sign-in" })
        : await call.ask("Confirm the amount", args.form ?? plan.form);
      seen.push({ callId: call.callId, answer });
      return answer;
    } catch (error) {
      seen.push({ callId: call.callId, error: String(error?.message ?? error), status: error?.status ?? null });
      throw error;
    }
  },
};

const session = connect({ sessionId: plan.sessionId, token: plan.token, url: plan.url, include: plan.include });
let results = 0;
session.on("tool_result", () => {
  if (++results === plan.calls) served();
});
await session.ready();
await session.registerClient({ name: "web", ttl: 0, tools: { confirm } });
await allServed;
for (const line of seen) console.log(JSON.stringify(line));
await session.close();
console.log(JSON.stringify({ left: true }));
process.exit(0);
