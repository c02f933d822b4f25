// The browser SDK's input requests (imported by switchboard.js, served at /sdk/input-requests.js): how a
// tool's `call.ask` waits for the person's answer, and the SDK's own result deadline that waits with it.
//
// The answer is the request's `input_provided` event, on the stream of a connection that streams
// extensions. A live frame can be lost to a reconnect, and a connection made without `extensions` never
// carries it, so a request the stream is quiet about is read back: every second on such a connection,
// after 5 s otherwise. Either way the wait ends, never the call.

const READ_BACK_MS = { streamed: 5000, unstreamed: 1000 };
// Answers heard before their ask's 201 came back (a call settled at once): few, and only briefly needed.
const EARLY_KEPT = 64;

/**
 * The SDK's own result deadline for a call: it waits while the person is asked, as the server's does (an
 * open input request pauses it), and runs on for what was left of it once every answer is in.
 */
export function pausableDeadline(ms) {
  let left = ms;
  let started = 0;
  let timer = null;
  let paused = 0;
  let expire;
  const expired = new Promise((_, reject) => {
    expire = () => reject(new Error("the tool did not answer before the deadline"));
  });
  expired.catch(() => {});
  const arm = () => {
    started = Date.now();
    timer = setTimeout(expire, left);
  };
  arm();
  return {
    expired,
    pause() {
      if (paused++ > 0) return;
      clearTimeout(timer);
      left = Math.max(0, left - (Date.now() - started));
    },
    resume() {
      if (--paused === 0) arm();
    },
    clear() {
      clearTimeout(timer);
      paused = Infinity;
    },
  };
}

/** An answer as `ask` resolves to it: from the event, or from the request read back. */
function inputAnswer({ action, content = null, reason }) {
  return { action, content: content ?? null, ...(reason ? { reason } : {}) };
}

/** The answers to the input requests one client's calls make, by request id. */
export class InputAnswers {
  constructor(connection) {
    this.connection = connection;
    this._waiting = new Map();
    this._early = new Map();
  }

  /** An `input_provided` event of the client: wakes the ask waiting for it. */
  heard(event) {
    const answered = this._waiting.get(event.request_id);
    if (answered) return answered(event);
    this._early.set(event.request_id, event);
    if (this._early.size > EARLY_KEPT) this._early.delete(this._early.keys().next().value);
  }

  /** The answer to a request; rejects with the signal's reason when the call fails meanwhile. */
  of(requestId, signal) {
    const early = this._early.get(requestId);
    if (early) {
      this._early.delete(requestId);
      return Promise.resolve(inputAnswer(early));
    }
    const streamed = this.connection._include.split(",").includes("extensions");
    const every = streamed ? READ_BACK_MS.streamed : READ_BACK_MS.unstreamed;
    const path = `/v1/sessions/${this.connection.sessionId}/input-requests/${encodeURIComponent(requestId)}`;
    return new Promise((resolve, reject) => {
      let timer = null;
      let settled = false;
      const settle = () => {
        settled = true;
        clearTimeout(timer);
        this._waiting.delete(requestId);
        signal.removeEventListener("abort", aborted);
      };
      const aborted = () => {
        settle();
        reject(signal.reason);
      };
      const answered = (ended) => {
        if (settled) return;
        settle();
        resolve(inputAnswer(ended));
      };
      const readBack = async () => {
        try {
          const read = await this.connection.request("GET", path);
          if (read.state === "answered") return answered(read);
          if (read.state === "cancelled") return answered({ action: "cancel" });
        } catch (error) {
          console.warn(`switchboard: reading input request ${requestId} failed; trying again`, error);
        }
        if (!settled) timer = setTimeout(readBack, every);
      };
      this._waiting.set(requestId, answered);
      if (signal.aborted) return aborted();
      signal.addEventListener("abort", aborted, { once: true });
      timer = setTimeout(readBack, every);
    });
  }
}
