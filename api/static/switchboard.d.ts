// Types of the Switchboard browser SDK (switchboard.js, the page tools it re-exports from page-tools.js, and
// the `call.ask` input-requests.js serves it), served at /sdk/switchboard.d.ts. Written by hand next to the
// modules it describes, but for the session events,
// which `python -m common.events.generate` writes from common/events/catalogue.py between the marker comments;
// tests/examples/test_typed.py checks that both export the same names and that examples/typed/ type-checks
// against this file.

// ---------------------------------------------------------------------------------------------------------
// JSON and tools

/** A JSON Schema document (a tool's `parameters`), passed to the server as it is. */
export type JsonSchema = { [keyword: string]: unknown };

/**
 * A call's arguments: a JSON object, checked by the server against the tool's `parameters`. A tool's own
 * argument type must be a type alias (`type Args = {...}`), not an interface, to fit this index signature.
 */
export type ToolArguments = { [name: string]: unknown };

/** A text block of a content result. */
export interface ResultTextContent {
  type: "text";
  text: string;
}

/** An image block of a content result: base64 (standard alphabet, padded). */
export interface ResultImageContent {
  type: "image";
  media_type: ImageMediaType;
  data: string;
}

/** An audio block of a content result (MCP's AudioContent): an `audio/...` type, base64 data. */
export interface ResultAudioContent {
  type: "audio";
  media_type: string;
  data: string;
}

/** A resource embedded in a content result (MCP's EmbeddedResource): its `text` or its `blob` (base64). */
export interface ResultResourceContent {
  type: "resource";
  resource: { uri: string; media_type?: string } & ({ text: string } | { blob: string });
}

/** A link to a resource in a content result (MCP's ResourceLink). */
export interface ResultResourceLinkContent {
  type: "resource_link";
  uri: string;
  name?: string;
  description?: string;
  media_type?: string;
}

/**
 * A result of blocks: posted as they are (up to 16; text 65,536 characters in all, images, audio and blobs
 * 5 MiB decoded in all). `structured` is the result as a JSON object too (MCP's structuredContent, 64 KiB).
 * `is_error: true` makes it an error result.
 */
export interface ToolContentResult {
  content: (
    | ResultTextContent
    | ResultImageContent
    | ResultAudioContent
    | ResultResourceContent
    | ResultResourceLinkContent
  )[];
  structured?: { [key: string]: unknown } | undefined;
  is_error?: boolean | undefined;
}

/**
 * What `execute` may return (or resolve to): a string is the result's text; `undefined` is "done"; an object
 * with a `content` array is a {@link ToolContentResult}; anything else is sent as its JSON text. A value JSON
 * cannot carry (a bigint, a function), or text over 65,536 characters, becomes an error result.
 */
export type ToolOutput = string | ToolContentResult | number | boolean | null | object | undefined | void;

/** The second argument of `execute`: the call being run. */
export interface ToolCallContext {
  /** The call's id (`call_id` of its `client_tool_dispatched` event). */
  readonly callId: string;
  /** The client serving the call. */
  readonly client: ToolClient;
  /**
   * Aborted, with an Error saying why ("the call failed: run_gone (cancelled)"), when the call fails while
   * it runs: cancelled, timed out, its run gone. Its result is then not sent.
   */
  readonly signal: AbortSignal;
  /**
   * The call's span (W3C trace context) when the deployment traces, else null (the page's own span of the
   * call, when `connect` was given a `traceCall` hook): a tool that traces its work makes its span a child
   * of it. The SDK sends it with the call's ack, progress and result.
   */
  readonly traceparent: string | null;
  /**
   * Tell the session how far the call is (`client_tool_progress`); keeps a tool with `heartbeat_s` alive.
   * `fraction` is 0 to 1. Resolves to the event the server logged; rejects with a SwitchboardError (409 once
   * the call is settled).
   */
  progress(message?: string | null, fraction?: number | null): Promise<ClientToolProgressEvent>;
  /**
   * Ask the person to fill in a form during the call (an input request: `input_requested`, an inbox item, a form
   * in the console). `schema` is MCP's `requestedSchema`: `{type: "object", properties, required?}` with flat
   * string, number, integer, boolean and enum properties. Resolves once someone holding the session's token
   * answers it; the call's result deadline and heartbeat (the server's, and this SDK's own) wait meanwhile, its
   * tool's `timeout_s` does not. Answers arrive on the stream of a connection made with `include: "extensions"`;
   * on one without, the request is read back every second. Rejects with a SwitchboardError when the server
   * refuses it (400 naming the field, 409 once the call is settled, 429 with 4 requests of the call open), and
   * with the signal's reason when the call fails meanwhile.
   */
  ask(message: string, schema: JsonSchema, options?: AskOptions): Promise<InputAnswer>;
  /**
   * Send the person to a page (URL mode: a sign-in, a secret typed where the page never sees it); resolves to
   * `accept` (with no content), `decline` or `cancel`, as {@link ToolCallContext.ask} does.
   */
  askUrl(message: string, url: string, options?: AskOptions): Promise<InputAnswer>;
}

/** The options of {@link ToolCallContext.ask} and {@link ToolCallContext.askUrl}. */
export interface AskOptions {
  /**
   * The request's name within its call (1 to 128 of `A-Z a-z 0-9 _ . : -`, unique in it; MCP's `inputRequests`
   * key); the request id by default.
   */
  key?: string | undefined;
}

/** How an input request ended. */
export interface InputAnswer {
  /** `accept`, `decline`, or `cancel` (the person's, or the call's end first: see `reason`). */
  action: "accept" | "decline" | "cancel";
  /** What the person filled in, checked against the form's schema (for `accept` of a form); null otherwise. */
  content: { [key: string]: unknown } | null;
  /** Why the request ended with no answer: its call settled, or went back to waiting for its client. */
  reason?: "call_settled" | "call_waiting";
}

/**
 * A tool a client serves. `execute(args, call)` is run once per call (290 s at most); what it returns is the
 * result ({@link ToolOutput}); a throw is an error result whose text is the error's message.
 */
export interface Tool<Args extends ToolArguments = ToolArguments, Output extends ToolOutput = ToolOutput> {
  /** What the model reads about the tool (default ""). */
  description?: string | undefined;
  /** The JSON Schema of its arguments (default `{type: "object"}`). */
  parameters?: JsonSchema | undefined;
  /** Its result deadline after the ack, in seconds (1 to the server's SWITCHBOARD_MAX_WAIT_S, 30 days by default), in place of the server's. */
  timeout_s?: number | undefined;
  /** The call fails when neither progress nor the result came within this many seconds (1 to SWITCHBOARD_MAX_WAIT_S). */
  heartbeat_s?: number | undefined;
  /**
   * What a call does when this client leaves, lapses or stops offering the tool before answering: `"fail"`
   * (client_gone, the default) or `"wait"` for the next client of the same name that offers it (a reopened
   * tab), which is handed the call under the same id.
   */
  on_leave?: "wait" | "fail" | undefined;
  /**
   * Whether a call from an MCP caller (the session MCP server) may be a task, MCP's Tasks extension:
   * `"optional"` (the default: a task for a caller that declared the extension), `"required"` (a caller that
   * did not is refused) or `"forbidden"` (always answered in line).
   */
  task_support?: "forbidden" | "optional" | "required" | undefined;
  /**
   * The tool asks the person (`call.ask`) before its work starts: an MCP caller that takes tasks is asked
   * in line first, and its answer turns the call into a task (default false: a task at once).
   */
  asks_first?: boolean | undefined;
  /** Run the call (a method, so a tool of a narrower argument type still fits {@link Tools}). */
  execute(args: Args, call: ToolCallContext): Output | Promise<Output>;
}

/** Tools by name (`^[A-Za-z0-9_-]+$`, at most 64 characters); the model sees `client__<client>__<name>`. */
export type Tools = { [name: string]: Tool };

// ---------------------------------------------------------------------------------------------------------
// Session events, as the stream delivers them

// <generated by `python -m common.events.generate` from common/events/catalogue.py: do not edit>
/** What every logged event carries: its place in the session's log and when it was logged (ISO 8601). */
export interface LoggedEvent {
  seq: number;
  created_at: string;
}

/** The media types an image result may have. */
export type ImageMediaType = "image/png" | "image/jpeg" | "image/webp" | "image/gif";

/** A text block of a message or a tool result. */
export interface TextBlock {
  type: "text";
  data: { text: string };
}

/** A tool call block of an assistant message. */
export interface ToolCallBlock {
  type: "tool_call";
  data: { id: string; name: string; arguments: ToolArguments };
}

/** A thinking block of an assistant message. */
export interface ThinkingBlock {
  type: "thinking";
  data: { thinking: string; redacted: boolean; signature: string | null };
}

/** A block of a message. */
export type MessageBlock = TextBlock | ToolCallBlock | ThinkingBlock;

/**
 * An image block of a tool result: shown as it is only to readers that ask (`?include=images`), otherwise as a text
 * block naming the image.
 */
export interface ImageBlock {
  type: "image";
  data: {
    media_type: ImageMediaType;
    /** Base64 (standard alphabet, padded); a result's images hold at most 5 MiB decoded in all. */
    data: string;
  };
}

/**
 * An audio block of a tool result (an extension, MCP's AudioContent): shown as it is only to readers that ask
 * (`?include=extensions`), otherwise as a text block naming it.
 */
export interface AudioBlock {
  type: "audio";
  data: {
    /** An audio/* media type. */
    media_type: string;
    /** Base64 (standard alphabet, padded); counted with the result's images against their 5 MiB. */
    data: string;
  };
}

/**
 * A resource embedded in a tool result (an extension, MCP's EmbeddedResource): shown as it is only to readers that
 * ask (`?include=extensions`), otherwise as a text block naming it.
 */
export interface ResourceBlock {
  type: "resource";
  data: {
    uri: string;
    media_type?: string;
    /** The resource's text, or (`blob`) its bytes in base64: exactly one of the two. */
    text?: string;
    blob?: string;
  };
}

/**
 * A link to a resource in a tool result (an extension, MCP's ResourceLink): shown as it is only to readers that ask
 * (`?include=extensions`), otherwise as a text block naming it.
 */
export interface ResourceLinkBlock {
  type: "resource_link";
  data: { uri: string; name?: string; description?: string; media_type?: string };
}

/** A block of a tool result. */
export type ResultBlock =
  | TextBlock
  | ToolCallBlock
  | ThinkingBlock
  | ImageBlock
  | AudioBlock
  | ResourceBlock
  | ResourceLinkBlock;

/** A message of the transcript. */
export interface Message {
  role: "user" | "assistant" | "tool_result";
  content: MessageBlock[];
  /** In Subako's shape; Switchboard writes none. */
  is_error?: boolean | null;
  /** An assistant message names the model that wrote it; a user message has no model. */
  model?: string | null;
  /** Correlates an assistant message with a proxied model call (Subako's; Switchboard writes none). */
  model_call_id?: string | null;
  /** In Subako's shape; Switchboard writes none. */
  tool_call_id?: string | null;
}

/**
 * The tokens a run's model steps used, as the provider counted them (each only where the provider gave it;
 * `input_tokens` includes the cached ones, `output_tokens` the reasoning ones).
 */
export interface TokenUsage {
  input_tokens?: number;
  output_tokens?: number;
  cached_input_tokens?: number;
  reasoning_tokens?: number;
}

/** A tool as a registration declares it. */
export interface ToolDescriptor {
  name: string;
  description: string;
  parameters: JsonSchema;
  /** Extension: its result deadline after the ack, in seconds, in place of the deployment's. */
  timeout_s?: number;
  /** Extension: the call fails when neither progress nor the result came within this many seconds. */
  heartbeat_s?: number;
  /**
   * Extension: what a call does when its registration leaves, lapses or drops the tool before answering: `fail`
   * (client_gone, the default) or `wait` for the next registration of the same name offering the tool.
   */
  on_leave?: "wait" | "fail";
}

/** How long a registration lives: until it leaves, or as long as it pings within `seconds`. */
export type ClientLifetime = { type: "never" } | { type: "ttl"; data: { seconds: number } };

export interface SessionCreatedEvent extends LoggedEvent {
  type: "session_created";
  agent_id: string;
  agent_version_id: string;
}

export interface MessageUserEvent extends LoggedEvent {
  type: "message_user";
  message: Message;
  source: "client" | "steer" | "external";
  /** Extension: what posted the input when it was not a request: `schedule`, a schedule of the session firing. */
  trigger?: "schedule";
  /** Extension: the schedule that fired (with `trigger: "schedule"`). */
  schedule_id?: string;
}

export interface MessageAssistantEvent extends LoggedEvent {
  type: "message_assistant";
  message: Message;
}

/** The model called a tool, by its model-visible name (such as `client__web__highlight_row`). */
export interface ToolCallEvent extends LoggedEvent {
  type: "tool_call";
  call_id: string;
  name: string;
  arguments: ToolArguments;
}

export interface ToolResultEvent extends LoggedEvent {
  type: "tool_result";
  call_id: string;
  content: ResultBlock[];
  is_error: boolean;
  /** Extension: the result as a JSON object too (MCP's structuredContent), where the tool gave one. */
  structured?: { [key: string]: unknown };
}

export interface RunQueuedEvent extends LoggedEvent {
  type: "run_queued";
  run_id: string;
}

export interface RunStartedEvent extends LoggedEvent {
  type: "run_started";
  run_id: string;
  /**
   * Extension: the run's W3C trace id (32 lowercase hex digits), when the deployment traces
   * (docs/observability.md).
   */
  trace_id?: string;
}

export interface RunCompletedEvent extends LoggedEvent {
  type: "run_completed";
  run_id: string;
  /** Extension: what the run's model steps used; absent when no step reported any (the scripted model's runs). */
  usage?: TokenUsage;
  /**
   * Extension: the run's W3C trace id (32 lowercase hex digits), when the deployment traces
   * (docs/observability.md).
   */
  trace_id?: string;
}

export interface RunCancelledEvent extends LoggedEvent {
  type: "run_cancelled";
  run_id: string;
  /**
   * Extension: the run's W3C trace id (32 lowercase hex digits), when the deployment traces
   * (docs/observability.md).
   */
  trace_id?: string;
}

export interface RunFailedEvent extends LoggedEvent {
  type: "run_failed";
  run_id: string;
  error: string;
  /**
   * Extension: the run's W3C trace id (32 lowercase hex digits), when the deployment traces
   * (docs/observability.md).
   */
  trace_id?: string;
}

/** An error of the session (one of the Subako event types). */
export interface SessionErrorEvent extends LoggedEvent {
  type: "error";
  message: string;
}

export interface ApprovalRequestedEvent extends LoggedEvent {
  type: "approval_requested";
  call_id: string;
  server: string;
  tool: string;
  arguments: ToolArguments;
  args_hash: string;
  /** Extension: where a call no run made came from (`mcp`: an MCP client of the session). */
  from?: string;
}

export interface ApprovalResolvedEvent extends LoggedEvent {
  type: "approval_resolved";
  call_id: string;
  decision: "allow" | "deny";
  deny_message: string | null;
  resolved_by: string | null;
  /** Extension: the decision is remembered for later calls of the same tool in this session. */
  remember?: "session";
  /** Extension: decided by a remembered decision. */
  remembered?: true;
  /** Extension: the arguments the call runs with instead of the model's. */
  arguments?: ToolArguments;
  /**
   * Extension: why it was decided without a person: `timeout`, its policy's approval_timeout_s ran out (a deny).
   */
  reason?: "timeout";
}

export interface ClientRegisteredEvent extends LoggedEvent {
  type: "client_registered";
  client_id: string;
  name: string;
  lifetime: ClientLifetime;
  tools: ToolDescriptor[];
}

export interface ClientToolsUpdatedEvent extends LoggedEvent {
  type: "client_tools_updated";
  client_id: string;
  tools: ToolDescriptor[];
}

export interface ClientLeftEvent extends LoggedEvent {
  type: "client_left";
  client_id: string;
  reason: "departed" | "timed_out";
}

/** A call sent to a client; the browser SDK acks and runs it when the client is one of its connection's. */
export interface ClientToolDispatchedEvent extends LoggedEvent {
  type: "client_tool_dispatched";
  client_id: string;
  call_id: string;
  /** The tool's own name, as the client declared it. */
  tool: string;
  arguments: ToolArguments;
  /** Extension: where a call no run made came from (`mcp`: an MCP client of the session). */
  from?: string;
  /**
   * Extension: the W3C trace context of the call's `execute_tool` span, when the deployment traces
   * (docs/observability.md): a client that traces its work makes its span a child of it and sends its own span back
   * as the `traceparent` header of the ack, progress and result requests.
   */
  traceparent?: string;
}

export interface ClientToolAckedEvent extends LoggedEvent {
  type: "client_tool_acked";
  client_id: string;
  call_id: string;
}

/** A client call that cannot be answered any more; the browser SDK aborts a running `execute`'s signal. */
export interface ClientToolFailedEvent extends LoggedEvent {
  type: "client_tool_failed";
  client_id: string;
  call_id: string;
  reason: "client_gone" | "ack_timeout" | "result_timeout" | "run_gone";
  /** Extension: `cancelled` when the call was cancelled on its own. */
  detail?: string;
}

/**
 * An event of a kind of its own. Of Switchboard's kinds, `timing` (a run's or a step's) is shown only to readers
 * that ask (`?include=timing`).
 */
export interface SessionCustomEvent extends LoggedEvent {
  type: "custom";
  kind: string;
  payload: { [key: string]: unknown };
}

/** Progress on a client call (with `include: "progress"`). */
export interface ClientToolProgressEvent extends LoggedEvent {
  type: "client_tool_progress";
  client_id: string;
  call_id: string;
  message: string | null;
  fraction: number | null;
}

/**
 * An MCP server's progress on a server call: `server` the grant's name, `tool` the MCP tool's (with
 * `include: "progress"`).
 */
export interface ToolProgressEvent extends LoggedEvent {
  type: "tool_progress";
  call_id: string;
  server: string;
  tool: string;
  message: string | null;
  fraction: number | null;
}

/**
 * A call of a tool declared `on_leave: "wait"` whose registration left, lapsed or dropped the tool before
 * answering: it waits for the next registration of `client_name` that offers `tool` (dispatched again then, with
 * the same `call_id`), and fails with `client_gone` at `deadline` if none comes (with `include: "extensions"`).
 */
export interface ClientToolWaitingEvent extends LoggedEvent {
  type: "client_tool_waiting";
  call_id: string;
  /** The tool's own name, as the client declared it. */
  tool: string;
  /** The name a registration must hold to be handed the call. */
  client_name: string;
  /** When the wait began. */
  since: string;
  /**
   * When the call fails with client_gone unless a registration took it: its tool's timeout_s (or the deployment's
   * result deadline) after its first dispatch.
   */
  deadline: string;
  /** The run that made the call; null for a call no run made (an MCP client's). */
  run_id: string | null;
}

/**
 * A client asked the person during a call it acked (as MCP elicitation does), or an agent's MCP grant's server
 * asked during a call of its tool: a form (`schema`, a flat object of string, number, integer, boolean and enum
 * properties) or a page to visit (`url`). Answered at `POST /v1/sessions/{sid}/input-requests/{request_id}`; a
 * client call's result deadline and heartbeat wait meanwhile (its tool's `timeout_s` does not; a grant's call waits
 * within its grant's `timeout_s`) (with `include: "extensions"`).
 */
export interface InputRequestedEvent extends LoggedEvent {
  type: "input_requested";
  request_id: string;
  call_id: string;
  /** The registration that asked; empty for a grant's server (`source` `mcp`). */
  client_id: string;
  /** The tool's own name, as the client (or the grant's server) declared it. */
  tool: string;
  /**
   * The request's name within its call (MCP's `inputRequests` key): the request id unless the client chose one; a
   * grant's server's own key.
   */
  key: string;
  message: string;
  /** Who asks: `client`, a client tool through its registration; `mcp`, an agent's MCP grant's server. */
  source: "client" | "mcp";
  /** The form asked for (MCP's `requestedSchema`); absent for a URL-mode request. */
  schema?: { [key: string]: unknown };
  /** The page the person is sent to (URL mode); absent for a form. */
  url?: string;
  /** The grant whose server asks (source `mcp`); absent for a client's request. */
  grant?: string;
}

/**
 * An input request ended: the person answered it (`action`, with the form's `content` for `accept`), or its call
 * settled or went back to waiting for its client first (`reason`; `action` is then `cancel`) (with
 * `include: "extensions"`).
 */
export interface InputProvidedEvent extends LoggedEvent {
  type: "input_provided";
  request_id: string;
  call_id: string;
  /** The registration that asked. */
  client_id: string;
  action: "accept" | "decline" | "cancel";
  /** What the person filled in (for `accept`); null otherwise. */
  content: { [key: string]: unknown } | null;
  /**
   * Why the request ended with no answer: `call_settled` (the call got its result or failed) or `call_waiting` (its
   * client left and the call waits for the next one); absent for a person's answer.
   */
  reason?: "call_settled" | "call_waiting";
}

/**
 * A step needed an OAuth grant whose server the person has not signed in to (no token kept for the session's
 * subject, else the session): opening `authorization_url` in a browser signs them in, until `expires_at`. Declined
 * at `POST /v1/sessions/{sid}/mcp-authorizations/{authorization_id}/decline`. The run waits for it, held by no
 * worker, until it completes, is declined or runs out (with `include: "extensions"`).
 */
export interface McpAuthorizationRequiredEvent extends LoggedEvent {
  type: "mcp_authorization_required";
  authorization_id: string;
  /** The grant's name, as the agent's version declares it. */
  grant: string;
  server_url: string;
  authorization_url: string;
  expires_at: string;
}

/**
 * The person signed in to an OAuth grant's MCP server: the authorization server sent their browser back to
 * `GET /v1/mcp/oauth/callback` and the code it carried was exchanged for tokens, now kept for the session's subject
 * (else the session). A run waiting for it goes on with the grant's tools (with `include: "extensions"`).
 */
export interface McpAuthorizationCompletedEvent extends LoggedEvent {
  type: "mcp_authorization_completed";
  authorization_id: string;
  /** The grant's name, as the agent's version declares it. */
  grant: string;
  server_url: string;
}

/**
 * A sign-in the session asked for ended without one: the person declined it (at
 * `POST /v1/sessions/{sid}/mcp-authorizations/{authorization_id}/decline`) or it ran out (`expires_at` passed). A
 * run waiting for it goes on without the grant's tools, the model told why; the grant is not asked for again in
 * that run (nor, once declined, in the session) (with `include: "extensions"`).
 */
export interface McpAuthorizationDeclinedEvent extends LoggedEvent {
  type: "mcp_authorization_declined";
  authorization_id: string;
  /** The grant's name, as the agent's version declares it. */
  grant: string;
  server_url: string;
  /** `declined`: the person said no; `expired`: the wait (SWITCHBOARD_MCP_AUTHORIZATION_TIMEOUT_S) ran out. */
  reason: "declined" | "expired";
}

/** Text the model is writing, as it streams (with `include: "deltas"`; live only: no seq). */
export interface MessageDeltaEvent {
  type: "message_delta";
  run_id: string;
  step: number;
  delta: string;
  /** Extension: voids the step's deltas so far. */
  reset?: true;
}

/**
 * What the model reasons, as it streams (where the provider shows it); shown to a reader that asks for `deltas` as
 * well (with `include: "thinking"`; live only: no seq).
 */
export interface ThinkingDeltaEvent {
  type: "thinking_delta";
  run_id: string;
  step: number;
  delta: string;
}

/**
 * A fragment of a tool call's arguments' JSON text, as the model writes it (with `include: "deltas"`; live only: no
 * seq).
 */
export interface ToolCallDeltaEvent {
  type: "tool_call_delta";
  run_id: string;
  step: number;
  call_id: string;
  /** The call's place among the step's calls, from 0. */
  index: number;
  /** The model-visible name, such as `client__web__lookup`. */
  name: string;
  delta: string;
}

/** The 20 event types the Subako SDK knows: what the default stream carries. */
export type SessionEvent =
  | SessionCreatedEvent
  | MessageUserEvent
  | MessageAssistantEvent
  | ToolCallEvent
  | ToolResultEvent
  | RunQueuedEvent
  | RunStartedEvent
  | RunCompletedEvent
  | RunCancelledEvent
  | RunFailedEvent
  | SessionErrorEvent
  | ApprovalRequestedEvent
  | ApprovalResolvedEvent
  | ClientRegisteredEvent
  | ClientToolsUpdatedEvent
  | ClientLeftEvent
  | ClientToolDispatchedEvent
  | ClientToolAckedEvent
  | ClientToolFailedEvent
  | SessionCustomEvent;

/** Events shown only to a reader whose `include` asks for them. */
export type ExtensionEvent =
  | ClientToolProgressEvent
  | ToolProgressEvent
  | ClientToolWaitingEvent
  | InputRequestedEvent
  | InputProvidedEvent
  | McpAuthorizationRequiredEvent
  | McpAuthorizationCompletedEvent
  | McpAuthorizationDeclinedEvent
  | MessageDeltaEvent
  | ThinkingDeltaEvent
  | ToolCallDeltaEvent;

/** Every event a stream may carry. */
export type StreamEvent = SessionEvent | ExtensionEvent;

/** The `type` of a stream event. */
export type StreamEventType = StreamEvent["type"];

/** The stream event of one type. */
export type StreamEventOf<K extends StreamEventType> = Extract<StreamEvent, { type: K }>;

/** What the stream asks for beyond the default view (`?include=`). */
export type StreamInclude = "timing" | "progress" | "extensions" | "images" | "deltas" | "thinking";
// </generated>

// ---------------------------------------------------------------------------------------------------------
// The connection

/** Where a connection is: `failed` and `closed` are for good. */
export type ConnectionStatus = "connecting" | "open" | "reconnecting" | "failed" | "closed";

/** Returns a credential (a session token or an API key); called first and again after a 401. */
export type TokenSource = () => string | Promise<string>;

/** What {@link ConnectOptions} holds besides the credential. */
export interface ConnectOptionsBase {
  /** The session to follow. */
  sessionId: string;
  /** The API's origin (default: this page's origin). */
  url?: string | undefined;
  /** Replay the whole log before the live events (default false). */
  history?: boolean | undefined;
  /** Fail after this many reconnects in a row that saw no event (default Infinity). */
  maxReconnects?: number | undefined;
  /** Extensions the default view leaves out: `"progress,images"` or `["progress", "images"]`. */
  include?: string | readonly StreamInclude[] | undefined;
  /**
   * This page's own span of each call it runs, from a tracer of the page's (see docs/observability.md):
   * its `traceparent` is what the tool is handed and what the call's ack, progress and result carry. No
   * hook, a hook that throws, or one that gives no valid traceparent: the call's own is passed through.
   */
  traceCall?: ((call: TracedCall) => CallSpan) | null | undefined;
}

/** What a {@link ConnectOptionsBase.traceCall} hook is given for each call. */
export interface TracedCall {
  readonly tool: string;
  readonly callId: string;
  /** The call's span when the deployment traces, else null. */
  readonly traceparent: string | null;
}

/** The page's span of a call, as its `traceCall` hook made it. */
export interface CallSpan {
  /** Its W3C trace context, sent with the call's ack, progress and result. */
  readonly traceparent?: string | null | undefined;
  /**
   * Called once the call is over: `error` null, or what went wrong (`tool_error`, `cancelled`, `refused`,
   * `ack_failed`).
   */
  end?(error: "tool_error" | "cancelled" | "refused" | "ack_failed" | null): void;
}

/** The options of {@link connect}: `sessionId`, and `token` or `getToken` (or both). */
export type ConnectOptions = ConnectOptionsBase &
  (
    | { token: string; getToken?: TokenSource | null | undefined }
    | { token?: string | null | undefined; getToken: TokenSource }
  );

/** The options of {@link Connection.request}. */
export interface RequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  /** Let the request outlive the page (fetch `keepalive`); not retried after a network error. */
  keepalive?: boolean | undefined;
  headers?: Record<string, string> | undefined;
}

/** What posting input answers: a new run or a steered one, and the run-scoped client of `clientTools`. */
export interface SubmitOutcome {
  outcome: "new_run" | "steered";
  run_id: string;
  client_id?: string;
}

/** What cancelling answers: the run cancelled, or null when none was active. */
export interface CancelOutcome {
  run_id: string | null;
}

/** The options of {@link Connection.send}. */
export interface SendOptions {
  /** Tools offered for this run only; this connection serves their calls until the run ends. */
  clientTools?: Tools | null | undefined;
}

/** The options of {@link Connection.registerClient}. */
export interface RegisterClientOptions {
  /** The name asked for (`^[a-z0-9-]+$`); a second tab gets `web-2` and so on. */
  name: string;
  /** Lease in seconds, kept by pinging at ttl/2 (default 60); 0 lives until it leaves. */
  ttl?: number | undefined;
  tools?: Tools | undefined;
}

/** An error the server answered, with its status and envelope code. */
export declare class SwitchboardError extends Error {
  constructor(status: number, code: string, message: string);
  readonly name: "SwitchboardError";
  /** The HTTP status. */
  readonly status: number;
  /** The error envelope's code (`not_found`, `conflict`, ...), or `unknown`. */
  readonly code: string;
}

/**
 * Open a session's live event stream. `token` (a session token or API key) or `getToken` (called again after a
 * 401); `url` defaults to this page's origin; `history: true` replays the whole log first; `include` (such as
 * "progress,images") asks for the extensions the default view leaves out.
 */
export declare function connect(options: ConnectOptions): Connection;

/** A session's live event stream, and the clients served over it. Made by {@link connect}. */
export declare class Connection {
  /** Starts streaming at once; throws a TypeError without `sessionId`, or without `token` and `getToken`. */
  constructor(options: ConnectOptions);
  readonly sessionId: string;
  /** The API's origin, without a trailing slash. */
  readonly url: string;
  readonly status: ConnectionStatus;
  /** The seq of the last logged event seen; a reconnect resumes after it. */
  readonly lastSeq: number;
  /** Why the connection failed (a SwitchboardError when the server refused the stream), once it has. */
  readonly error?: Error;

  /** Resolves once the stream is open (and rejects if it never opens). */
  ready(): Promise<void>;

  /** Listen to status changes; returns a function that stops listening. */
  on(type: "status", listener: (status: ConnectionStatus) => void): () => void;
  /** Listen to every event, in order, across reconnects. */
  on(type: "*", listener: (event: StreamEvent) => void): () => void;
  /** Listen to the events of one type. */
  on<K extends StreamEventType>(type: K, listener: (event: StreamEventOf<K>) => void): () => void;

  /**
   * A request to the API: JSON in and out (null for an empty body), retried as the Subako SDK retries, one
   * Idempotency-Key per call. Rejects with a SwitchboardError when the server refuses it.
   */
  request(method: string, path: string, options?: RequestOptions): Promise<unknown>;

  /**
   * Post a user message: it starts a run, or steers the active one (the agent's concurrency policy).
   * `clientTools` are offered for that run only; this connection serves their calls until the run ends.
   */
  send(text: string, options?: SendOptions): Promise<SubmitOutcome>;

  /** Cancel the active run. */
  cancel(): Promise<CancelOutcome>;

  /**
   * Call `listener` each time the session asks the person to sign in to an OAuth grant's MCP server
   * (`mcp_authorization_required`, an extension: connect with `include` naming "extensions"). Returns a function
   * that stops listening.
   */
  onAuthorizationRequired(listener: (signIn: AuthorizationRequired) => void): () => void;

  /** Call `listener` each time a sign-in ends (completed, declined or run out); returns a function that stops it. */
  onAuthorizationEnded(listener: (ended: AuthorizationEnded) => void): () => void;

  /**
   * Decline a sign-in the session asked for: the step goes on without the grant's tools. Rejects with a
   * SwitchboardError: 404 for a sign-in the session did not ask for, 409 for one that ended already.
   */
  declineAuthorization(authorizationId: string): Promise<DeclinedAuthorization>;

  /** Register a client serving `tools`; resolves once the server has it. */
  registerClient(options: RegisterClientOptions): Promise<ToolClient>;

  /** Stop streaming and leave every client of this connection. */
  close(): Promise<void>;
}

/** A sign-in the session asks of the person, as {@link Connection.onAuthorizationRequired} gives it. */
export interface AuthorizationRequired {
  authorizationId: string;
  /** The grant's name, as the agent's version declares it. */
  grant: string;
  serverUrl: string;
  /** The page to open (in a new tab) to sign in; null when the event's is not an http(s) address. */
  authorizationUrl: string | null;
  /** When the link stops working (ISO 8601). */
  expiresAt: string;
  event: McpAuthorizationRequiredEvent;
  /** {@link Connection.declineAuthorization} of this sign-in. */
  decline(): Promise<DeclinedAuthorization>;
}

/** The end of a sign-in (`mcp_authorization_completed`, or `mcp_authorization_declined`: declined or run out). */
export interface AuthorizationEnded {
  authorizationId: string;
  grant: string;
  serverUrl: string;
  state: "completed" | "declined" | "expired";
  event: McpAuthorizationCompletedEvent | McpAuthorizationDeclinedLike;
}

/** `mcp_authorization_declined` as this SDK reads it (`reason`: `declined`, or `expired` when the wait ran out). */
export interface McpAuthorizationDeclinedLike {
  type: "mcp_authorization_declined";
  seq: number;
  created_at: string;
  authorization_id: string;
  grant: string;
  server_url: string;
  reason: string;
}

/** What {@link Connection.declineAuthorization} resolves to. */
export interface DeclinedAuthorization {
  authorization_id: string;
  grant: string;
  state: "declined";
}

/** Where a client is: `left` is for good, unless its lease lapsed (it then registers again). */
export type ToolClientStatus = "joining" | "serving" | "failed" | "left";

/**
 * A registration serving tools: it acks each call addressed to it, runs the tool's `execute` and posts the
 * result; it pings at ttl/2 and leaves on `pagehide`. Made by {@link Connection.registerClient} (and by
 * {@link Connection.send} for `clientTools`); one constructed directly is not registered.
 */
export declare class ToolClient {
  constructor(connection: Connection, name: string, ttl: number, tools: Tools);
  readonly connection: Connection;
  /** The name asked for. */
  readonly requestedName: string;
  /** The lease in seconds; 0 for none. */
  readonly ttl: number;
  /** The tools served; replace them with {@link ToolClient.setTools}. */
  readonly tools: Tools;
  /** The registration's id (lowercase), once registered. */
  readonly id: string | null;
  /** The name the server gave (`web`, `web-2`, ...), once registered; `turn` for a run's client tools. */
  readonly name: string | null;
  readonly status: ToolClientStatus;
  /** Called with the client after it registered again under a new id (and maybe a new name). */
  onRegistered: ((client: ToolClient) => void) | null;

  /** Replace the whole tool set; resolves to the `client_tools_updated` event once the server has it. */
  setTools(tools: Tools): Promise<ClientToolsUpdatedEvent>;

  /** Leave: the name is freed and calls still owed fail with `client_gone`. */
  leave(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------
// The page tools (page-tools.js)

/** The options of {@link pageTools}. */
export interface PageToolsOptions {
  /** What the tools see and touch (default `document.body`). */
  root?: Element | null | undefined;
  /** Opens a URL of this origin in place of a full page load (for single-page apps). */
  navigate?: ((url: string) => void) | null | undefined;
}

export type ReadPageArgs = { max_chars?: number };
export type ReadPageOutput = { title: string; url: string; text: string; truncated: boolean };
/** A field found by its visible label, its name, or a CSS selector (one of the three). */
export type FillFormField = { label?: string; name?: string; selector?: string; value: string | number | boolean };
export type FillFormArgs = { fields: FillFormField[] };
export type SubmitFormArgs = { form?: string };
export type ClickArgs = { text?: string; selector?: string };
export type HighlightArgs = { selector?: string; text?: string; color?: string };
export type NavigateArgs = { url: string };
export type ScreenshotArgs = { selector?: string };

/** The tools {@link pageTools} makes; each answers with what it did, or throws saying what went wrong. */
export type PageTools = {
  /** The page's visible text, title and URL. */
  read_page: Tool<ReadPageArgs, ReadPageOutput>;
  /** Fill form fields. */
  fill_form: Tool<FillFormArgs, string>;
  /** Submit a form (reports what stops it from being submitted). */
  submit_form: Tool<SubmitFormArgs, string>;
  /** Click a button or link, by its text or a CSS selector. */
  click: Tool<ClickArgs, string>;
  /** Scroll to an element and outline it. */
  highlight: Tool<HighlightArgs, string>;
  /** Open a page of this origin. */
  navigate: Tool<NavigateArgs, string>;
  /** A PNG of the page or of one element: only where the page can draw one. */
  screenshot?: Tool<ScreenshotArgs, ToolContentResult>;
};

/**
 * The page tools, for `registerClient({tools})`: read_page, fill_form, submit_form, click, highlight,
 * navigate, and screenshot where the page can render one.
 */
export declare function pageTools(options?: PageToolsOptions): PageTools;

// Only what is marked `export` above is exported (a declaration file exports every declaration otherwise).
export {};
