"""Patterns of a schema (`pattern`, `patternProperties`) on RE2: matching takes time linear in the text,
whatever the pattern, where a backtracking engine takes exponential time on `^(a+)+$`."""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import re2

# A pattern's compiled program may take this much memory (past it RE2 refuses the pattern), and this many
# are kept compiled: a bound on the cache, 1,024 x 512 KiB at worst (a usual pattern takes a few KiB).
_MAX_PROGRAM_BYTES = 1 << 19
_COMPILED = 1_024
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = _MAX_PROGRAM_BYTES


class _Searcher(Protocol):
    def search(self, text: str) -> object: ...


class PatternRefused(ValueError):
    """A pattern RE2 cannot run: a construct that needs backtracking (look-around, a back-reference), a
    repetition over 1,000, or a program too large."""


@lru_cache(maxsize=_COMPILED)
def compiled(pattern: str) -> _Searcher:
    """The pattern compiled once per process; PatternRefused when RE2 cannot run it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except UnicodeEncodeError:
        raise PatternRefused("it is not Unicode text (it holds a lone surrogate), which RE2 cannot read") from None
    except re2.error as error:
        why = error.args[0] if error.args else error
        text = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise PatternRefused(text) from None


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text`; PatternRefused when either is not Unicode text."""
    try:
        return compiled(pattern).search(text) is not None
    except UnicodeEncodeError:
        raise PatternRefused("the text holds a lone surrogate, which RE2 cannot read") from None


def is_text(value: str) -> bool:
    """Whether `value` is Unicode text (JSON can carry lone surrogates, which no UTF-8 engine reads)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True
