"""The catalogue read as data: each record's fields with their types, presence and words, in declared order.

Every writer of a derived copy (Lua, pydantic, TypeScript, the docs' table) reads the catalogue through this
module only, so they cannot read it differently.
"""

from __future__ import annotations

import ast
import inspect
import re
import types
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import msgspec
from msgspec import UnsetType

from common.events import catalogue
from common.events.catalogue import EVENTS, Event, Record, Shown, type_name


@dataclass(frozen=True, slots=True)
class Scalar:
    name: Literal["str", "int", "float", "bool"]


@dataclass(frozen=True, slots=True)
class Choice:
    """One of fixed values (a Literal); `alias` the catalogue's name for it, if it has one."""

    values: tuple[str | bool, ...]
    alias: str | None


@dataclass(frozen=True, slots=True)
class JsonMap:
    """A JSON object of any keys and values."""


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Kind


@dataclass(frozen=True, slots=True)
class Ref:
    """A nested record, by its class name."""

    name: str


@dataclass(frozen=True, slots=True)
class OneOf:
    """One of several tagged records (told apart by `type`); `alias` the catalogue's name for the union."""

    names: tuple[str, ...]
    alias: str | None


Kind = Scalar | Choice | JsonMap | ListOf | Ref | OneOf


class Presence(Enum):
    REQUIRED = "required"
    # Always written, `null` when it has no value.
    NULLABLE = "nullable"
    # Written only when it has a value.
    OPTIONAL = "optional"
    # Written only when it has a value, which may be `null`.
    OPTIONAL_NULLABLE = "optional, nullable"


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    """The Python name (`from_`)."""
    wire: str
    """The name written (`from`)."""
    kind: Kind
    presence: Presence
    extension: bool
    doc: str | None
    ge: int | None = None

    @property
    def written_always(self) -> bool:
        return self.presence in (Presence.REQUIRED, Presence.NULLABLE)

    @property
    def nullable(self) -> bool:
        return self.presence in (Presence.NULLABLE, Presence.OPTIONAL_NULLABLE)


@dataclass(frozen=True, slots=True)
class Shape:
    """One record of the catalogue: an event, a tagged record (a block, a lifetime) or a plain one."""

    name: str
    tag: str | None
    doc: str | None
    fields: tuple[Field, ...]
    shown: Shown | None
    """An event's audience; None for a record that is not an event."""

    @property
    def is_event(self) -> bool:
        return self.shown is not None

    @property
    def data(self) -> str | None:
        """For a tagged record whose only field is a plain record `data` (`{"type":"text","data":{...}}`),
        that record's name: the writers flatten it into its parent."""
        if self.tag is None or len(self.fields) != 1 or self.fields[0].wire != "data":
            return None
        kind = self.fields[0].kind
        return kind.name if isinstance(kind, Ref) else None


@dataclass(frozen=True, slots=True)
class Alias:
    """A name the catalogue gives a union or a Literal, with its comment."""

    name: str
    kind: Kind
    doc: str | None


@dataclass(frozen=True, slots=True)
class Catalogue:
    shapes: dict[str, Shape]
    """Every record by class name, in the order the catalogue declares them."""
    aliases: dict[str, Alias]

    @property
    def events(self) -> list[Shape]:
        return [self.shapes[cls.__name__] for cls in EVENTS]

    @property
    def records(self) -> list[Shape]:
        """The records that are not events, each before those that use it."""
        return [shape for shape in self.shapes.values() if not shape.is_event]

    def data_records(self) -> set[str]:
        return {name for shape in self.shapes.values() if (name := shape.data) is not None}


_EXT_KEY = "extension"


def _comments(source: list[str], line: int) -> str | None:
    """The comment lines just above source line `line` (1-based), joined."""
    found: list[str] = []
    at = line - 2
    while at >= 0 and source[at].strip().startswith("#"):
        found.insert(0, source[at].strip().removeprefix("#").strip())
        at -= 1
    return " ".join(found) or None


def _docs() -> tuple[dict[str, str | None], dict[tuple[str, str], str | None], dict[str, str | None]]:
    """Docstrings by class, field comments by (class, field), alias comments by name: read from the source,
    since a comment is not kept at run time."""
    text = inspect.getsource(catalogue)
    lines = text.splitlines()
    classes: dict[str, str | None] = {}
    fields: dict[tuple[str, str], str | None] = {}
    aliases: dict[str, str | None] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef):
            doc = ast.get_docstring(node)
            classes[node.name] = re.sub(r"\s+", " ", doc) if doc else None
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    fields[(node.name, item.target.id)] = _comments(lines, item.lineno)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            aliases[node.targets[0].id] = _comments(lines, node.lineno)
    return classes, fields, aliases


def _members(hint: Any) -> list[Any]:
    if get_origin(hint) in (Union, types.UnionType):
        return [member for arg in get_args(hint) for member in _members(arg)]
    return [hint]


class _Reader:
    def __init__(self) -> None:
        self.unions: dict[frozenset[type], str] = {}
        self.literals: dict[tuple[object, ...], str] = {}
        for name, value in vars(catalogue).items():
            if get_origin(value) is Literal:
                self.literals[get_args(value)] = name
            elif get_origin(value) in (Union, types.UnionType) and all(
                isinstance(arg, type) and issubclass(arg, Record) for arg in get_args(value)
            ):
                self.unions[frozenset(get_args(value))] = name

    def kind(self, hint: Any) -> Kind:
        members = _members(hint)
        if len(members) > 1:
            if not all(isinstance(m, type) and issubclass(m, Record) for m in members):
                raise TypeError(f"a union of records only: {hint}")
            return OneOf(tuple(m.__name__ for m in members), self.unions.get(frozenset(members)))
        origin = get_origin(hint)
        if origin is Literal:
            return Choice(get_args(hint), self.literals.get(get_args(hint)))
        if origin is list:
            return ListOf(self.kind(get_args(hint)[0]))
        if origin is dict:
            return JsonMap()
        if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
            return Ref(hint.__name__)
        if hint in (str, int, float, bool):
            return Scalar(hint.__name__)
        raise TypeError(f"the catalogue declares a type its writers do not know: {hint}")

    def field(self, cls: type[msgspec.Struct], name: str, hint: Any, doc: str | None) -> Field:
        members = _members(hint)
        optional = UnsetType in members
        nullable = type(None) in members
        rest = [m for m in members if m not in (UnsetType, type(None))]
        extension, ge = False, None
        bare: list[Any] = []
        for member in rest:
            if get_origin(member) is Annotated:
                inner, *metas = get_args(member)
                for meta in metas:
                    if isinstance(meta, msgspec.Meta):
                        extension = extension or bool((meta.extra or {}).get(_EXT_KEY))
                        ge = meta.ge if meta.ge is not None else ge
                member = inner
            bare.append(member)
        presence = {
            (False, False): Presence.REQUIRED,
            (False, True): Presence.NULLABLE,
            (True, False): Presence.OPTIONAL,
            (True, True): Presence.OPTIONAL_NULLABLE,
        }[(optional, nullable)]
        wire = cls.__struct_encode_fields__[cls.__struct_fields__.index(name)]
        kind = self.kind(bare[0] if len(bare) == 1 else Union[tuple(bare)])  # noqa: UP007 (made at run time)
        return Field(name, wire, kind, presence, extension, doc, int(ge) if ge is not None else None)


def _names(kind: Kind) -> list[str]:
    if isinstance(kind, Ref):
        return [kind.name]
    if isinstance(kind, OneOf):
        return list(kind.names)
    if isinstance(kind, ListOf):
        return _names(kind.item)
    return []


def _held(shapes: dict[str, Shape]) -> set[str]:
    """The events and every record they hold, at any depth: what the copies describe (a struct the
    catalogue declares for another use, such as reading a payload, is not one)."""
    found: set[str] = set()
    todo = [cls.__name__ for cls in EVENTS]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += [held for field in shapes[name].fields for held in _names(field.kind)]
    return found


def read() -> Catalogue:
    """The catalogue as data."""
    class_docs, field_docs, alias_docs = _docs()
    reader = _Reader()
    shapes: dict[str, Shape] = {}
    for name in class_docs:
        cls = getattr(catalogue, name)
        if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)) or cls in (Record, Event):
            continue
        hints = get_type_hints(cls, include_extras=True)
        own = [f for f in cls.__struct_fields__ if f not in Event.__struct_fields__ or not issubclass(cls, Event)]
        fields = tuple(reader.field(cls, f, hints[f], field_docs.get((name, f))) for f in own)
        tag = type_name(cls) if issubclass(cls, Record) else None
        shown = cls.shown if issubclass(cls, Event) else None
        shapes[name] = Shape(name, tag, class_docs[name], fields, shown)
    held = _held(shapes)
    shapes = {name: shape for name, shape in shapes.items() if name in held}
    aliases = {
        name: Alias(name, reader.kind(getattr(catalogue, name)), doc)
        for name, doc in alias_docs.items()
        if name in reader.unions.values() or name in reader.literals.values()
    }
    return Catalogue(shapes, aliases)


def shown_note(shown: Shown, *, include: str) -> str:
    """Who sees events of a type, in words: `include` formats the word a reader asks with."""
    parts = []
    if shown.include is not None:
        parts.append(f"with {include.format(shown.include)}")
    if not shown.logged:
        parts.append("live only: no seq")
    return "; ".join(parts)
