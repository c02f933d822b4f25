"""Delegate a turn to a Switchboard session and serve its tools from here (the first seed's `chat()`).

    result = await chat(
        "http://127.0.0.1:8000", session_id, token, "What time is it for the user?",
        client_tools=[ClientTool("get_timezone", "The user's time zone", {"type": "object"})],
        on_client_tool_call=lambda call: "Europe/Paris",
    )
    print(result.text)

The tools are offered for that run only. Each call they get runs `on_client_tool_call` (sync or async);
its return value is the result (a string as it is, anything else as JSON), and an exception becomes an
error result the model reads, while the run goes on. Without a callback the calls are never acknowledged,
so they fail at the session's ack deadline (`ack_timeout`, 60 s by default) and the run goes on without
them. Setting `cancel` cancels the run; a callback already running is not interrupted (its late result is
refused by the server and dropped).
"""

from delegate.chat import ChatResult, ClientTool, ToolCallRequest, chat

__all__ = ["ChatResult", "ClientTool", "ToolCallRequest", "chat"]
