// Drives the real @ag-ui/client HttpAgent against a Switchboard AG-UI door, as a frontend would.
// argv[2] is one JSON object: {url, token, threadId, runs: [...]}; each run is one `agent.runAgent`:
//   fresh: a new HttpAgent (a reloaded page) whose messages are `add`; otherwise `add` is appended
//   answerPending: content of a tool message added for each call the previous run left pending
//   resumePending: the payload of a resume entry for each interrupt the previous run ended on
//   tools, context: as RunAgentInput carries them; abortAfter: abort once an event of this type arrives
// With `proto: true` in the plan the agent asks for AG-UI's binary encoding (the client picks its parser by
// the answer's content type, so a server that answered SSE would fail the check on `contentType`).
// Prints one JSON line per run: {events, finished (RUN_FINISHED's outcome), error, messages, pending,
// contentType}.
import { HttpAgent } from "@ag-ui/client";
import { AGUI_MEDIA_TYPE } from "@ag-ui/proto";

const plan = JSON.parse(process.argv[2]);
let contentType = null;

class BinaryAgent extends HttpAgent {
  requestInit(input) {
    const init = super.requestInit(input);
    return { ...init, headers: { ...init.headers, Accept: AGUI_MEDIA_TYPE } };
  }
}

// Notes the content type of each answer, as the client received it.
const watched = async (url, init) => {
  const answer = await fetch(url, init);
  contentType = answer.headers.get("content-type");
  return answer;
};

const Agent = plan.proto ? BinaryAgent : HttpAgent;
const make = (messages) =>
  new Agent({
    url: plan.url,
    headers: { Authorization: `Bearer ${plan.token}` },
    threadId: plan.threadId,
    initialMessages: messages,
    fetch: watched,
  });

let agent = make([]);
let previous = null;
for (const run of plan.runs) {
  if (run.fresh) agent = make(run.add ?? []);
  else if (run.add) agent.addMessages(run.add);
  if (run.answerPending !== undefined) {
    for (const id of previous?.finished?.pendingToolCallIds ?? []) {
      agent.addMessage({ id: `answer-${id}`, role: "tool", toolCallId: id, content: run.answerPending });
    }
  }
  let resume;
  if (run.resumePending !== undefined) {
    resume = agent.pendingInterrupts.map((interrupt) => ({
      interruptId: interrupt.id,
      status: run.resumeStatus ?? "resolved",
      payload: run.resumePending,
    }));
  }
  const events = [];
  let finished = null;
  let error = null;
  const abortController = new AbortController();
  const subscriber = {
    onEvent({ event }) {
      events.push(event);
      if (run.abortAfter && event.type === run.abortAfter) abortController.abort();
    },
    onRunFinishedEvent({ event }) {
      finished = event.outcome ?? { type: "success" };
    },
  };
  try {
    await agent.runAgent({ tools: run.tools ?? [], context: run.context ?? [], resume, abortController }, subscriber);
  } catch (caught) {
    error = String(caught?.message ?? caught);
  }
  previous = { events, finished, error, messages: agent.messages, pending: agent.pendingInterrupts ?? [], contentType };
  process.stdout.write(JSON.stringify(previous) + "\n");
}
