"""A backend tool that asks the person to confirm an amount before it acts, for `switchboard tools serve`.

The model may call `refund` with any amount; the person confirms it (or lowers it) in a form before any
money moves. `call.ask()` posts an input request for the call (the event `input_requested`, an inbox
item, a form in the console) and returns once someone holding the session's token answers it with
`POST /v1/sessions/{sid}/input-requests/{request_id}`. While the form is open the call's result deadline
waits for the person. Serve it from this folder:

    switchboard session new                     # prints a session id and its token
    export SWITCHBOARD_SESSION_TOKEN=swb_st_...  # the token, from the environment: `--token` would show in `ps`
    cd examples
    switchboard tools serve refund_ask:TOOLS --url http://127.0.0.1:8000 --session SESSION_ID --name billing

With the scripted model, `/call client__billing__refund {"order_id": "A-1001", "amount": 40}` calls it.
"""

from __future__ import annotations

from switchboard.typed_tools import Call

# Stands in for the backend's own ledger: what each order was paid, and what was refunded.
PAID = {"A-1001": 120.0, "A-1002": 35.5}
REFUNDED: dict[str, float] = {}


def confirmation(order_id: str, amount: float) -> dict[str, object]:
    """The form the person fills in: the amount (at most what is left to refund) and a yes."""
    left = PAID[order_id] - REFUNDED.get(order_id, 0.0)
    return {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "title": "Amount (EUR)", "minimum": 0.01, "maximum": left, "default": amount},
            "confirm": {"type": "boolean", "title": f"Refund order {order_id}"},
        },
        "required": ["amount", "confirm"],
    }


async def refund(order_id: str, amount: float, call: Call) -> str:
    """Refund part or all of an order (such as A-1001) in EUR; the person confirms the amount first."""
    order_id = order_id.strip().upper()
    if order_id not in PAID:
        raise LookupError(f"there is no order {order_id!r}; known orders are {', '.join(sorted(PAID))}")
    answer = await call.ask(f"Refund EUR {amount:.2f} for order {order_id}?", confirmation(order_id, amount))
    content = answer.content or {}
    if answer.action != "accept" or not content.get("confirm"):
        # Said as a result, not raised: the model should tell the person, not try again.
        return f"nothing was refunded for {order_id}: the person did not confirm it ({answer.action})"
    confirmed = float(content["amount"])
    REFUNDED[order_id] = REFUNDED.get(order_id, 0.0) + confirmed
    return f"refunded EUR {confirmed:.2f} for order {order_id}"


TOOLS = [refund]
