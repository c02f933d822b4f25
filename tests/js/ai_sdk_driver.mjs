// Drives the real `ai` package's DefaultChatTransport and readUIMessageStream against a Switchboard AI SDK
// door, as useChat would. argv[2] is one JSON object: {api, token, chatId, tools, runs: [...]}, each run one:
//   {send: text, id?}: a user message, sent (trigger submit-message)
//   {answerPending: output}: the last assistant message's frontend tool calls get this output, resubmitted
//   {approvePending: true | false}: its approval requests answered, resubmitted
//   {resend: true}: the same messages sent again; {resume: true}: reconnectToStream (a reloaded page)
//   abortAfter: stop reading once a chunk of this type arrives
//   answerInputs: the body posted to plan.inputsUrl/<request id> for each `data-input-request` part that
//     arrives open, as the app's form would (the stream goes on meanwhile)
// Prints one JSON line per run: {chunks, message (the assistant message read), error, none (204), answered
// (the status of each answer posted)}.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const plan = JSON.parse(process.argv[2]);
const transport = new DefaultChatTransport({
  api: plan.api,
  headers: { Authorization: `Bearer ${plan.token}` },
  body: { tools: plan.tools ?? [] },
});
const messages = [];
let counter = 0;

const lastAssistant = () => {
  const last = messages[messages.length - 1];
  return last?.role === "assistant" ? last : undefined;
};

for (const run of plan.runs) {
  let continuing;
  if (run.send !== undefined) {
    messages.push({ id: run.id ?? `user-${++counter}`, role: "user", parts: [{ type: "text", text: run.send }] });
  } else if (run.answerPending !== undefined || run.approvePending !== undefined) {
    continuing = lastAssistant();
    for (const part of continuing?.parts ?? []) {
      if (run.answerPending !== undefined && part.state === "input-available" && !part.providerExecuted) {
        Object.assign(part, { state: "output-available", output: run.answerPending });
      }
      if (run.approvePending !== undefined && part.state === "approval-requested") {
        Object.assign(part, { state: "approval-responded", approval: { id: part.approval.id, approved: run.approvePending } });
      }
    }
  } else if (run.resend) {
    continuing = lastAssistant();
  }
  const chunks = [];
  let message = null;
  let error = null;
  let none = false;
  const answered = [];
  const answering = [];
  try {
    const stream = run.resume
      ? await transport.reconnectToStream({ chatId: plan.chatId })
      : await transport.sendMessages({
          chatId: plan.chatId,
          messages,
          trigger: "submit-message",
          messageId: undefined,
          abortSignal: undefined,
        });
    if (stream === null) {
      none = true;
    } else {
      const [mine, theirs] = stream.tee();
      const reading = (async () => {
        for await (const chunk of mine) {
          // A copy: the SDK makes a data chunk the message's part, and reconciles a later one into it.
          chunks.push(structuredClone(chunk));
          if (run.answerInputs && chunk.type === "data-input-request" && chunk.data.state === "open") {
            answering.push(fetch(`${plan.inputsUrl}/${chunk.id}`, {
              method: "POST",
              headers: { Authorization: `Bearer ${plan.token}`, "Content-Type": "application/json" },
              body: JSON.stringify(run.answerInputs),
            }).then((answer) => answered.push(answer.status)));
          }
          if (run.abortAfter && chunk.type === run.abortAfter) break;
        }
      })();
      const start = continuing ? structuredClone(continuing) : undefined;
      for await (const read of readUIMessageStream({ stream: theirs, message: start })) {
        message = read;
        if (run.abortAfter && chunks.some((chunk) => chunk.type === run.abortAfter)) break;
      }
      await reading;
      await Promise.all(answering);
      if (message && !run.abortAfter) {
        if (continuing) messages[messages.length - 1] = message;
        else messages.push(message);
      }
    }
  } catch (caught) {
    error = String(caught?.message ?? caught);
  }
  process.stdout.write(JSON.stringify({ chunks, message, error, none, answered }) + "\n");
}
