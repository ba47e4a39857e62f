"""What the dataflow knows about a value, one small frozen class per kind of fact.

A value is a frozenset of atoms: each atom is one thing the expression may hold on some
path (alternative paths join by union). Atoms are frozen dataclasses, not tuples, so two
kinds with the same fields (ids, and one element of ids) never compare equal, and a
reader sees `atom.trail`, not `atom[2]`. A step of evidence is a plain tuple
(file, line, step, text): steps are sorted and become the findings' trails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, FrozenSet, Iterable, Optional, Tuple

Step = Tuple[str, int, str, str]
Trail = Tuple[Step, ...]


class Atom(object):
    """One fact about what an expression may hold."""

    __slots__ = ()


Value = FrozenSet[Atom]
EMPTY: Value = frozenset()


# -- key-offset: ids read under the key and where they go -------------------------------
@dataclass(frozen=True)
class Ids(Atom):
    """The ids read under the key (a collection), `offset` added so far along `trail`."""
    offset: int
    trail: Trail


@dataclass(frozen=True)
class Elem(Atom):
    """One element of the ids: an int element does not make the list an int."""
    offset: int
    trail: Trail


@dataclass(frozen=True)
class Lost(Atom):
    """Ids whose flow cannot be followed past the trail's last step, and why."""
    offset: int
    trail: Trail
    why: str


@dataclass(frozen=True)
class Container(Atom):
    """The named container the key is read from (`dflash_config`)."""


@dataclass(frozen=True)
class Int(Atom):
    """A constant int (an amount an id may be shifted by); `step`: where it is named."""
    value: int
    step: Optional[Step]


@dataclass(frozen=True)
class NonInt(Atom):
    """Some path holds something other than an int: the value is not a constant."""


NONINT = NonInt()


# -- value-source: where an argument's value comes from ----------------------------------
@dataclass(frozen=True)
class Source(Atom):
    """A read of a named config key or method, filed under the finder's label."""
    label: str
    step: Step


@dataclass(frozen=True)
class Constant(Atom):
    """A constant, shown by its repr (cut to 40 characters)."""
    text: str
    step: Step


@dataclass(frozen=True)
class Unknown(Atom):
    """Something that cannot be traced, and why."""
    why: str
    step: Step


@dataclass(frozen=True)
class ConstantLookup(object):
    """A name of another module or class that may be a constant (`flow` reads `node`)."""
    flow: Any
    node: Any


@dataclass(frozen=True)
class CallLookup(object):
    """A call of a helper outside the module, with the values it was called with."""
    flow: Any
    func: Any
    node: Any
    args: Tuple[Value, ...]
    keywords: Tuple[Tuple[str, Value], ...]


@dataclass(frozen=True)
class Deferred(Atom):
    """An untraced value that may still be followed, but only if it reaches the call
    traced (the calls building a layer are many, and their modules are not read for
    nothing); `projection`: the tuple elements taken from its result, in order."""
    why: str
    step: Step
    lookup: Any
    projection: Tuple[int, ...] = ()

    def unknown(self) -> Unknown:
        """What it is when it is not followed."""
        return Unknown(self.why, self.step)

    def element(self, index: int) -> "Deferred":
        """Element `index` of its result (tuple unpacking, x[i])."""
        return Deferred(self.why, self.step, self.lookup, self.projection + (index,))


@dataclass(frozen=True)
class Param(Atom):
    """A parameter of `ref`, to be replaced by what the module's call sites pass."""
    ref: Any
    name: str
    position: int


# -- values any question builds -----------------------------------------------------------
@dataclass(frozen=True)
class Items(Atom):
    """A tuple of known length, each item a value of its own."""
    items: Tuple[Value, ...]


@dataclass(frozen=True)
class Keyed(Atom):
    """A dict of known string keys (keywords passed as `**kwargs`), sorted by key."""
    items: Tuple[Tuple[str, Value], ...]


@dataclass(frozen=True)
class Lambda(Atom):
    """A lambda of the flow, by its index in Flow.lambdas."""
    index: int


@dataclass(frozen=True)
class Partial(Atom):
    """A functools.partial object, by its index in Analysis.partials."""
    index: int


@dataclass(frozen=True)
class Test(Atom):
    """A test bound to a name, by its index in Analysis.tests (what the name says about
    DFlash is told from the test only when a test reads the name)."""
    index: int


def keyed(items: Iterable[Tuple[str, Value]]) -> Keyed:
    """A dict of known keys (later keys replace earlier ones), as one atom."""
    merged = {}
    for key, value in items:
        merged[key] = value
    return Keyed(tuple(sorted(merged.items(), key=lambda item: item[0])))


def with_step(atom: Atom, step: Step) -> Atom:
    """An ids-carrying atom with one more step on its trail."""
    if isinstance(atom, Ids):
        return Ids(atom.offset, atom.trail + (step,))
    if isinstance(atom, Elem):
        return Elem(atom.offset, atom.trail + (step,))
    if isinstance(atom, Lost):
        return Lost(atom.offset, atom.trail + (step,), atom.why)
    return atom


IDS_KINDS = (Ids, Elem)
CARRIERS = (Ids, Elem, Lost, Container)


def carries_ids(value: Value) -> bool:
    return any(isinstance(atom, CARRIERS) or
               (isinstance(atom, Items) and any(carries_ids(v) for v in atom.items)) or
               (isinstance(atom, Keyed) and any(carries_ids(v) for _, v in atom.items))
               for atom in value)


def as_collection(value: Value) -> Value:
    """Elements gathered into a list/tuple: elements become ids again, ints are dropped
    (an int element does not make the list an int)."""
    return frozenset(Ids(atom.offset, atom.trail) if isinstance(atom, Elem) else atom
                     for atom in value if not isinstance(atom, (Int, NonInt)))


def as_elements(value: Value) -> Value:
    """What iterating over a value yields: the elements of ids, the items of tuples."""
    out = set()
    for atom in value:
        if isinstance(atom, Ids):
            out.add(Elem(atom.offset, atom.trail))
        elif isinstance(atom, Items):
            for item in atom.items:
                out |= item
        elif not isinstance(atom, (Int, NonInt)):
            out.add(atom)
    return frozenset(out)


def join(values: list) -> Value:
    """Values of alternative paths: where one path gives an int and another does not,
    the result is not a constant."""
    out = frozenset().union(*values) if values else EMPTY
    if any(any(isinstance(a, Int) for a in v) for v in values) and \
            any(not v or any(not isinstance(a, Int) for a in v) for v in values):
        out = out | frozenset([NONINT])
    return out


def flat(value: Value) -> Value:
    """The atoms of a value with tuples and dicts opened: what a call that is not followed
    gets, ids inside them included."""
    out = set()
    for atom in value:
        if isinstance(atom, Items):
            for item in atom.items:
                out |= flat(item)
        elif isinstance(atom, Keyed):
            for _, item in atom.items:
                out |= flat(item)
        else:
            out.add(atom)
    return frozenset(out)


def sources_in(value: Value) -> Value:
    """The config reads a value depends on (a test's, a comparison's)."""
    return frozenset(atom for atom in value if isinstance(atom, Source))
