// The browser SDK's pausable result deadline (api/static/input-requests.js) on its own: argv[2] is
// {ms, pausedMs}. It arms a deadline of `ms`, pauses it at once for `pausedMs`, resumes it, and prints
// {expiredWhilePaused, msAfterResume} (how long after the resume it expired).
import { pausableDeadline } from "../../api/static/input-requests.js";

const plan = JSON.parse(process.argv[2]);
let expiredAt = null;
const deadline = pausableDeadline(plan.ms);
deadline.expired.catch(() => {
  expiredAt = Date.now();
});
deadline.pause();
await new Promise((resolve) => setTimeout(resolve, plan.pausedMs));
const expiredWhilePaused = expiredAt !== null;
const resumed = Date.now();
deadline.resume();
await deadline.expired.catch(() => {});
console.log(JSON.stringify({ expiredWhilePaused, msAfterResume: expiredAt - resumed }));
