"""One model attempt's answer, assembled from the fragments its stream brings (docs/providers/index.md,
"From stream to message").

Every adapter feeds one `Assembler` what its wire streams: pieces of text and of reasoning, a thinking
block's signature, redacted thinking, fragments of tool calls, calls that come whole, the model's name and
its usage. The assembler counts each piece against the attempt's `Tally` before it keeps or streams it, so
the step's bounds (workers/models/bounds.py) hold in this one place whatever the wire; it streams text,
reasoning and arguments to the step's `DeltaSink` as they come; and it builds the `Turn` at the end, each
part's pieces joined once (a server may send many, and each costs O(1)).

Parts are named by a key the adapter chooses from what its wire names them by: an Anthropic block's index,
a Chat Completions call's index or id, a Responses item's id. A piece with no key continues the part
before it when that part is of its kind (Gemini streams parts with no index: consecutive ones of a kind
are one block). What differs between wires stays in the adapter, as the key it gives a fragment.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from common.codec import dumps, new_call_id
from workers.arguments import parse_arguments
from workers.models.aliases import Aliases
from workers.models.base import DeltaSink, Turn, TurnBuilder, Usage
from workers.models.bounds import Tally

_TEXT = "text"
_THINKING = "thinking"
_CALL = "call"
# The order of a Chat Completions message: its reasoning, its text, its calls.
_GROUPED = {_THINKING: 0, _TEXT: 1, _CALL: 2}
# A provider's finish reason is a short word; a longer one is cut, not kept whole.
_FINISH_LIMIT = 64


class _Part:
    """A text or thinking block under way."""

    __slots__ = ("keyed", "kind", "pieces", "redacted", "signature")

    def __init__(self, kind: str, *, keyed: bool) -> None:
        self.kind = kind
        self.keyed = keyed
        self.pieces: list[str] = []
        # None until the wire gives one (an empty one included: it is sent back as given).
        self.signature: list[str] | None = None
        self.redacted = False


class _Call:
    """A tool call under way: its place among the turn's calls, its id and model-visible name."""

    __slots__ = ("call_id", "given", "name", "pieces", "place")
    kind = _CALL

    def __init__(self, place: int, call_id: str, name: str) -> None:
        self.place = place
        self.call_id = call_id
        self.name = name
        self.pieces: list[str] = []
        # Arguments the wire gave as an object (a whole call, a call opened with its input).
        self.given: dict[str, Any] | None = None


class Assembler:
    """One attempt's answer, fed fragment by fragment: each piece counted against `tally` (the moment a
    bound is passed, StreamBoundPassed), then streamed to `sink` (if any) and kept. `grouped`: the turn's
    blocks are its reasoning, then its text, then its calls, whatever order they came in (one Chat
    Completions message); else each part takes its place as it first came. `keep=False`: only counted and
    streamed, for a wire whose turn is read from a last event that holds it whole (the Responses API)."""

    def __init__(
        self, tally: Tally, aliases: Aliases, sink: DeltaSink | None = None, *, grouped: bool = False, keep: bool = True
    ) -> None:
        self._tally = tally
        self._aliases = aliases
        self._sink = sink
        self._grouped = grouped
        self._keep = keep
        self._parts: list[_Part | _Call] = []
        self._keyed: dict[object, _Part | _Call] = {}
        self._calls = 0
        self._model: str | None = None
        self._usage: Usage | None = None
        self._finish: str | None = None
        self.has_text = False
        self.has_reasoning = False

    @property
    def calls(self) -> int:
        """How many tool calls the turn holds so far."""
        return self._calls

    def knows(self, key: object) -> bool:
        """A part (or call) was opened under `key`."""
        return key in self._keyed

    def model(self, name: str | None) -> None:
        """The model the provider says answered; the latest given wins."""
        if name is not None:
            self._model = name

    def usage(self, usage: Usage | None) -> None:
        """The provider's counts so far; the latest given wins (a server may send them growing)."""
        if usage is not None:
            self._usage = usage

    def finish(self, reason: object) -> None:
        """Why the model stopped, as the provider said it (text only; the latest given wins)."""
        if isinstance(reason, str) and reason:
            self._finish = reason[:_FINISH_LIMIT]

    def text(self, piece: str, key: object = None) -> None:
        """A piece of the text block `key` names (opened by its first piece, even an empty one)."""
        part = self._part(_TEXT, key)
        if part is None or not piece:
            return
        self._tally.text(piece)
        if self._sink is not None:
            self._sink.text(piece)
        if self._keep:
            part.pieces.append(piece)
        self.has_text = True

    def reasoning(self, piece: str, key: object = None, *, signature: str | None = None) -> None:
        """A piece of the thinking block `key` names, and of its signature (counted and kept, never
        streamed). With no key, a signature starts a block of its own: it goes back with what it came on."""
        part = self._part(_THINKING, key, fresh=key is None and signature is not None)
        if part is None:
            return
        if signature is not None:
            self._tally.text(signature)
            part.signature = part.signature or []
            self._kept(part.signature, signature)
        if piece:
            self._tally.text(piece)
            if self._sink is not None:
                self._sink.reasoning(piece)
            self._kept(part.pieces, piece)
            self.has_reasoning = True

    def redacted(self, data: str, key: object) -> None:
        """A redacted thinking block, whole: its data counted and kept, never streamed."""
        part = self._part(_THINKING, key)
        if part is None:
            return
        part.redacted = True
        self._tally.text(data)
        self._kept(part.pieces, data)

    def call(self, key: object, *, call_id: str | None = None, name: str | None = None, arguments: str = "") -> None:
        """A fragment of the tool call `key` names, opened by its first (with the wire's id, else one
        made): its name where the wire gives it, and a piece of its arguments' JSON text."""
        found = self._keyed.get(key)
        if found is None:
            call = self._open_call(key, call_id, name or "")
        elif isinstance(found, _Call):
            call = found
            if name and not call.name:
                self._tally.arguments(call.place, name)
                call.name = self._aliases.inward(name)
        else:
            return
        if arguments:
            self._tally.arguments(call.place, arguments)
            if self._sink is not None:
                self._sink.tool_input(call.place, call.call_id, call.name, arguments)
            self._kept(call.pieces, arguments)

    def opened_with(self, key: object, arguments: dict[str, Any]) -> None:
        """The arguments the call `key` opened with, as an object: counted and kept, not streamed; the
        turn takes the streamed ones over them."""
        call = self._keyed.get(key)
        if isinstance(call, _Call) and arguments:
            self._tally.arguments(call.place, dumps(arguments))
            call.given = arguments if self._keep else None

    def whole_call(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        """A call that comes whole: its arguments counted and streamed as their JSON, kept as given."""
        call = self._open_call(None, call_id, name)
        text = dumps(arguments)
        self._tally.arguments(call.place, text)
        if self._sink is not None:
            self._sink.tool_input(call.place, call.call_id, call.name, text)
        call.given = arguments if self._keep else None

    def turn(self) -> Turn:
        """The turn's blocks, its calls among them, with the model and usage the provider gave."""
        built = TurnBuilder()
        parts = sorted(self._parts, key=lambda part: _GROUPED[part.kind]) if self._grouped else self._parts
        for part in parts:
            if isinstance(part, _Call):
                _add_call(built, part)
            elif part.kind == _TEXT:
                built.text("".join(part.pieces))
            elif part.redacted:
                built.thinking("".join(part.pieces), redacted=True)
            else:
                _add_thinking(built, part)
        return built.turn(self._model, self._usage, self._finish)

    def _part(self, kind: str, key: object, *, fresh: bool = False) -> _Part | None:
        """The part `key` names (None if it is not of `kind`); with no key, the part before if it is an
        unkeyed one of `kind` (and not `fresh`), else a new one."""
        if key is not None:
            found = self._keyed.get(key)
            if found is None:
                found = self._keyed[key] = _Part(kind, keyed=True)
                self._parts.append(found)
            return found if found.kind == kind and isinstance(found, _Part) else None
        last = self._parts[-1] if self._parts else None
        if fresh or not _continued(last, kind):
            last = _Part(kind, keyed=False)
            self._parts.append(last)
        return last

    def _open_call(self, key: object, call_id: str | None, name: str) -> _Call:
        # Counted before it is kept: a new place is a new call among the step's calls.
        self._tally.arguments(self._calls, name)
        call = _Call(self._calls, call_id or new_call_id(), self._aliases.inward(name))
        self._calls += 1
        self._parts.append(call)
        if key is not None:
            self._keyed[key] = call
        return call

    def _kept(self, pieces: list[str], piece: str) -> None:
        if self._keep and piece:
            pieces.append(piece)


def _continued(last: _Part | _Call | None, kind: str) -> TypeGuard[_Part]:
    """`last` is an unkeyed part of `kind`, which a piece of that kind with no key continues."""
    return isinstance(last, _Part) and last.kind == kind and not last.keyed


def _add_call(built: TurnBuilder, call: _Call) -> None:
    if call.pieces:
        arguments, invalid = parse_arguments("".join(call.pieces))
    else:
        # A call with no parameters may come with no arguments at all.
        arguments, invalid = (call.given if call.given is not None else {}), ""
    built.call(call.call_id, call.name, arguments, invalid)


def _add_thinking(built: TurnBuilder, part: _Part) -> None:
    # A block the wire opened by key is the turn's however empty; an unkeyed one only if it holds text
    # or a signature (which goes back on the block it came with).
    signature = "".join(part.signature) if part.signature is not None else None
    if part.keyed or part.pieces or signature is not None:
        built.thinking("".join(part.pieces), signature=signature)
