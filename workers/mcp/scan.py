"""What a grant's server sends, told from its bytes as they arrive, without parsing them: how many JSON
values a message holds (where the events of an event stream end is workers/bounded_stream.py's).

The `mcp` client parses each message whole, and what it makes of one is far larger than its text for
some texts: 16 MB of empty lists (`[],[],...`) became about 1.8 GB at the peak of parsing, about 330 bytes
a value. So a message is held to a number of values as it is read (workers/mcp/budget.py), counted
conservatively: every `,`, `[` and `{` outside a string (each value after the first in an array or an
object follows one of them), found by C-speed searches of each chunk, a few a chunk whatever it holds.

Strings are told apart exactly for valid JSON: escapes are dropped first, then each quote opens or closes
one. A JSON string never holds a raw line break, so a line's end closes whatever a stray quote opened (a
comment line of an event stream, a line that is not valid JSON), and the count of the next line is
exact again; a message that is not valid JSON fails in the client's parser at its first error, and
what comes before that point was counted right."""

from __future__ import annotations

import re

_ESCAPE = re.compile(rb"\\[^\r\n]")
_STRING = re.compile(rb'"[^"\r\n]*"')
# A quote left once the strings are gone opens a string that runs to its line's end (or past the chunk).
_OPENED = re.compile(rb'"[^\r\n]*')


class JsonValues:
    """The JSON values in the text fed so far (see the module's docstring); `count` is the total."""

    def __init__(self) -> None:
        self.count = 0
        self._in_string = False
        # A backslash that ended the last chunk: what it escapes is in the next one.
        self._held = b""

    def feed(self, chunk: bytes) -> int:
        """Count `chunk`'s values; how many it held."""
        text = _ESCAPE.sub(b"", self._held + chunk)
        self._held = b""
        if text.endswith(b"\\"):
            self._held, text = b"\\", text[:-1]
        if self._in_string:
            # Where the open string ends: its closing quote, or (not valid JSON) its line's end. Found by
            # `find`, at memory speed: a message that is one long string is most of what a call's is.
            closed = [at for at in (text.find(b'"'), text.find(b"\n"), text.find(b"\r")) if at >= 0]
            if not closed:
                return 0
            text = text[min(closed) + 1 :]
            self._in_string = False
        outside = _STRING.sub(b"", text)
        line = max(outside.rfind(b"\n"), outside.rfind(b"\r")) + 1
        self._in_string = b'"' in outside[line:]
        outside = _OPENED.sub(b"", outside)
        found = outside.count(b",") + outside.count(b"[") + outside.count(b"{")
        self.count += found
        return found
