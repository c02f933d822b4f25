// A React hook over the browser SDK: connects on mount, registers the component's tools, closes on unmount,
// and hands the component the connection's status and its latest events.
//
//   const tools = useMemo(() => ({ highlight_row }), []);             // the same object between renders
//   const { status, events, clientName, send } = useSwitchboard({ url, sessionId, token, tools });

import { useCallback, useEffect, useRef, useState } from "react";

import {
  connect,
  type Connection,
  type ConnectionStatus,
  type StreamEvent,
  type SubmitOutcome,
  type ToolClient,
  type Tools,
} from "/sdk/switchboard.js";

export type UseSwitchboardOptions = {
  /** The API's origin (default: this page's). */
  url?: string;
  sessionId: string;
  /** A session token from your backend. */
  token: string;
  /** The tools this component serves; a new object replaces them on the server. */
  tools: Tools;
  /** The client's name (default "web"). */
  name?: string;
  /** How many of the latest events to keep (default 100). */
  keep?: number;
};

export type Switchboard = {
  status: ConnectionStatus;
  /** The latest events, oldest first. */
  events: StreamEvent[];
  /** The registration serving the tools, once it is registered. */
  client: ToolClient | null;
  /** Its name (`web`, `web-2`, ...); a client that registers again may get another. */
  clientName: string | null;
  /** Why connecting or registering failed, if it did. */
  error: Error | null;
  /** Post a user message. */
  send: (text: string) => Promise<SubmitOutcome>;
};

function asError(failure: unknown): Error {
  return failure instanceof Error ? failure : new Error(String(failure));
}

export function useSwitchboard({ url, sessionId, token, tools, name = "web", keep = 100 }: UseSwitchboardOptions): Switchboard {
  const [status, setStatus] = useState<ConnectionStatus>("connecting");
  const [events, setEvents] = useState<StreamEvent[]>([]);
  const [client, setClient] = useState<ToolClient | null>(null);
  const [clientName, setClientName] = useState<string | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const connection = useRef<Connection | null>(null);
  // The tools of the latest render, and the set the server has: a new `tools` object replaces them on the
  // server without reconnecting (so keep it the same object between renders: a constant, or useMemo).
  const latest = useRef(tools);
  const served = useRef<Tools | null>(null);
  const kept = useRef(keep);
  useEffect(() => {
    latest.current = tools;
    kept.current = keep;
  });

  useEffect(() => {
    let gone = false;
    const session = connect({ url, sessionId, token });
    connection.current = session;
    setStatus(session.status);
    setEvents([]);
    setError(null);
    const stopStatus = session.on("status", setStatus);
    const stopEvents = session.on("*", (event) => setEvents((seen) => [...seen, event].slice(-kept.current)));
    session.ready().catch((failure: unknown) => {
      if (!gone) setError(asError(failure));
    });
    served.current = latest.current;
    session
      .registerClient({ name, tools: latest.current })
      .then(async (registered) => {
        // Unmounted while registering: close() could not leave a client it did not have yet.
        if (gone) {
          await registered.leave();
          return;
        }
        registered.onRegistered = (again) => setClientName(again.name);
        setClient(registered);
        setClientName(registered.name);
      })
      .catch((failure: unknown) => {
        if (!gone) setError(asError(failure));
      });
    return () => {
      gone = true;
      stopStatus();
      stopEvents();
      connection.current = null;
      setClient(null);
      setClientName(null);
      void session.close();
    };
  }, [url, sessionId, token, name]);

  useEffect(() => {
    if (!client || served.current === tools) return;
    served.current = tools;
    client.setTools(tools).catch((failure: unknown) => setError(asError(failure)));
  }, [client, tools]);

  const send = useCallback((text: string): Promise<SubmitOutcome> => {
    const session = connection.current;
    if (!session) return Promise.reject(new Error("useSwitchboard: not connected"));
    return session.send(text);
  }, []);

  return { status, events, client, clientName, error, send };
}
