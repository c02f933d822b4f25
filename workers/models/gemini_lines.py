"""What google-genai's stream reader holds outside `data:` events, counted on the wire as it arrives
(docs/security.md, "A model's stream is bounded").

The SDK (google-genai 3.6, read for its behaviour) splits a 200 answer's body into lines at CR, LF and
CRLF. A `data: ` line joins the event under way, which a blank line ends: the wire guard bounds those as
events. Any other line that is not blank goes to a second buffer that blank lines do not end: it is held,
across events, until its `{` and `}` outside JSON strings balance at a line's end, and then parsed as one
JSON object (so a Vertex AI error that comes pretty-printed over lines in a stream that began well is
read). `{a` and a blank line, repeated, are tiny events to the event bound and one growing buffer to the
SDK, each line a str object of its own: only the wire bound would stop them, and 100 MB of them took a
worker 2,166 MB above its idle RSS and 14 s of CPU up to it (bench scenario hostile_model).

A real stream sends only `data: ` lines and blank ones, and an error over lines ends it: so every other
line of an answer counts, for the whole answer, at what holding it costs the SDK, whether or not the SDK
would have let it go since. That is never less than what the SDK holds of them at any moment (the one
string it joins them into as it lets them go is no longer than they are), and a blank or `data: ` line
costs the guard no Python of its own (a regular expression finds the others).
"""

from __future__ import annotations

import re

_DATA = b"data: "
# A line the SDK holds, after the line end before it, in a chunk whose CRs are made LFs: not blank, not
# a `data: ` line. (Sought from each LF: `^` in multi-line mode is tried at every byte of the chunk.)
_HELD = re.compile(rb"\n((?!data: )[^\n]+)")
# What a held line costs beyond its characters: a str object's header and terminator (up to 80 bytes)
# and its place in the SDK's list.
LINE_COST = 96
# What the line under way is: not known yet, a `data: ` line, a held one.
_UNDECIDED, _DATA_LINE, _HELD_LINE = 0, 1, 2


def _cost(size: int, ascii_only: bool) -> int:
    # One character past ASCII makes the whole str up to four bytes a character.
    return (size if ascii_only else 4 * size) + LINE_COST


class HeldLines:
    """The lines of one answer that google-genai's reader holds outside its events, fed the body in
    chunks: what they cost so far, however the chunks cut them."""

    __slots__ = ("_ascii", "_held", "_kind", "_line", "_start")

    def __init__(self) -> None:
        # What the held lines that ended cost.
        self._held = 0
        # The line under way: what kind it is, its first bytes while they may still begin `data: `, and
        # (held) its bytes so far and whether all of them are ASCII.
        self._kind = _UNDECIDED
        self._start = b""
        self._line = 0
        self._ascii = True

    def feed(self, chunk: bytes) -> int:
        """`chunk` of the body arrived: what the held lines cost now, the one under way by its bytes."""
        # CRLF read as two line ends adds a blank line, which holds nothing; a CR cut from its LF alike.
        text = chunk.replace(b"\r", b"\n")
        first = text.find(b"\n")
        if first < 0:
            self._piece(text)
            return self._held + self._line
        self._piece(text[:first])
        self._ended()
        last = text.rfind(b"\n")
        self._held += sum(_cost(len(line), line.isascii()) for line in _HELD.findall(text, first, last))
        self._piece(text[last + 1 :])
        return self._held + self._line

    def _piece(self, piece: bytes) -> None:
        """More of the line under way."""
        if not piece or self._kind == _DATA_LINE:
            return
        if self._kind == _UNDECIDED:
            piece = self._start + piece
            if piece.startswith(_DATA):
                self._kind, self._start = _DATA_LINE, b""
                return
            if _DATA.startswith(piece):
                self._start = piece
                return
            self._kind, self._start = _HELD_LINE, b""
        self._line += len(piece)
        self._ascii = self._ascii and piece.isascii()

    def _ended(self) -> None:
        """The line under way ended."""
        if self._kind == _UNDECIDED and self._start:
            # A start of `data: ` and no more (`data:`): held, as any line but a `data: ` one is.
            self._kind, self._line = _HELD_LINE, len(self._start)
        if self._kind == _HELD_LINE:
            self._held += _cost(self._line, self._ascii)
        self._kind, self._start, self._line, self._ascii = _UNDECIDED, b"", 0, True
