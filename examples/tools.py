"""Tools a trusted backend serves to a session, for `switchboard tools serve`.

Each function is a tool: its name is the tool's name, its docstring's first paragraph the description the
model reads, its annotations the JSON Schema of its arguments (arguments are checked against it before
the function runs). A string return is the result text, anything else goes as JSON, and an exception is
an error result the model can read. Serve them from this folder:

    switchboard session new                     # prints a session id and its token
    export SWITCHBOARD_SESSION_TOKEN=swb_st_...  # the token, from the environment: `--token` would show in `ps`
    cd examples
    switchboard tools serve tools:TOOLS --url http://127.0.0.1:8000 --session SESSION_ID --name shop

The model then sees `client__shop__order_status`, `client__shop__shipping_quote` and
`client__shop__export_orders`; with the scripted model, input such as
`/call client__shop__order_status {"order_id": "A-1001"}` calls one.
"""

from __future__ import annotations

import time

from switchboard.typed_tools import Call

# Stands in for the backend's own database.
ORDERS: dict[str, dict[str, object]] = {
    "A-1001": {"status": "shipped", "carrier": "DHL", "items": 2},
    "A-1002": {"status": "packing", "carrier": None, "items": 1},
    "A-1003": {"status": "delivered", "carrier": "UPS", "items": 5},
}
RATES_PER_KG = {"DE": 4.5, "FR": 5.0, "JP": 12.0, "US": 9.5}


def order_status(order_id: str) -> dict[str, object]:
    """Look up an order by its id (such as A-1001): its status, carrier and number of items."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise LookupError(f"there is no order {order_id!r}; known orders are {', '.join(sorted(ORDERS))}")
    return {"order_id": order_id.strip().upper(), **order}


def shipping_quote(weight_kg: float, country: str, express: bool = False) -> str:
    """Quote the shipping price of a parcel (up to 30 kg) to a country, by its ISO code such as DE or JP;
    express doubles the price."""
    rate = RATES_PER_KG.get(country.strip().upper())
    if rate is None:
        raise ValueError(f"no shipping to {country!r}; we ship to {', '.join(sorted(RATES_PER_KG))}")
    if not 0 < weight_kg <= 30:
        raise ValueError(f"a parcel weighs more than 0 and at most 30 kg, not {weight_kg}")
    price = round(weight_kg * rate * (2 if express else 1), 2)
    return f"{weight_kg:g} kg to {country.upper()}{' by express' if express else ''}: EUR {price:.2f}"


def export_orders(call: Call) -> str:
    """Export every order as CSV lines (a slow job that reports its progress)."""
    lines = ["order_id,status,items"]
    for done, (order_id, order) in enumerate(sorted(ORDERS.items()), start=1):
        if call.cancelled:
            # The call failed while it ran (cancelled, timed out): nobody reads a result any more.
            return "cancelled"
        time.sleep(0.1)
        lines.append(f"{order_id},{order['status']},{order['items']}")
        call.progress(f"exported {done} of {len(ORDERS)}", done / len(ORDERS))
    return "\n".join(lines)


TOOLS = [order_status, shipping_quote, export_orders]
