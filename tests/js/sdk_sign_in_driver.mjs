// Drives the browser SDK's sign-in surface (api/static/switchboard.js) in Node against a served stack.
// argv[2] is one JSON object: {url, sessionId, token, include, decline}. It replays the log and listens with
// onAuthorizationRequired and onAuthorizationEnded, and prints one JSON line each: {required: {...}} (what the
// listener was given, without its decline function, and `declines: true` when it had one), then either
// {declined: answer} (with `decline`: it calls signIn.decline(), then declineAuthorization again, printing
// {again: {status, code}}) or {ended: {...}} once the sign-in ended.
import { connect, SwitchboardError } from "../../api/static/switchboard.js";

const plan = JSON.parse(process.argv[2]);
const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const { sessionId, token, url, include } = plan;
const session = connect({ sessionId, token, url, include, history: true });
let finish;
const finished = new Promise((resolve) => {
  finish = resolve;
});

session.onAuthorizationRequired(async (signIn) => {
  const { decline, event, ...shown } = signIn;
  print({ required: { ...shown, eventType: event.type, declines: typeof decline === "function" } });
  if (!plan.decline) return;
  print({ declined: await decline() });
  try {
    await session.declineAuthorization(signIn.authorizationId);
  } catch (error) {
    print({ again: error instanceof SwitchboardError ? { status: error.status, code: error.code } : String(error) });
  }
  finish();
});
session.onAuthorizationEnded(({ event, ...ended }) => {
  print({ ended: { ...ended, eventType: event.type } });
  // Declining, the driver is done once its own answers are in (the end may come before or after them).
  if (!plan.decline) finish();
});
await session.ready();
await finished;
await session.close();
process.exit(0);
