"""What the interpreter knows about a value, one small frozen class per kind of fact.

A value is a frozenset of atoms: each atom is one thing the expression may hold on some
path (alternative paths join by union). Atoms are named tuples, so a reader sees
`atom.trail`, not `atom[2]`, and they hash and compare at tuple speed (a flow builds and
unions many). Each ends in its `kind`, so two kinds with the same fields (ids, and one
element of ids) never compare equal. Not dataclasses or typing.NamedTuple: importing
those (inspect, typing) and building their classes would cost every host ~15 ms of the
probe's start. A step of evidence is a plain tuple (file, line, step, text): steps are
sorted and become the findings' trails.
"""

from collections import namedtuple


def kind(name, fields, defaults=()):
    """The named tuple of one kind of atom: `fields` (the last ones' `defaults`), then
    the kind's own tag."""
    return namedtuple(name, fields + ["kind"], defaults=tuple(defaults) + (name,))


EMPTY = frozenset()


# -- key-offset: ids read under the key and where they go -------------------------------
class Ids(kind("Ids", ["offset", "trail"])):
    """The ids read under the key (a collection), `offset` added so far along `trail`."""
    __slots__ = ()


class Elem(kind("Elem", ["offset", "trail"])):
    """One element of the ids: an int element does not make the list an int."""
    __slots__ = ()


class Lost(kind("Lost", ["offset", "trail", "why"])):
    """Ids whose flow cannot be followed past the trail's last step, and why."""
    __slots__ = ()


class Container(kind("Container", [])):
    """The named container the key is read from (`dflash_config`)."""
    __slots__ = ()


class Int(kind("Int", ["value", "step"])):
    """A constant int (an amount an id may be shifted by); `step`: where it is named, or
    None for a literal."""
    __slots__ = ()


class NonInt(kind("NonInt", [])):
    """Some path holds something other than an int: the value is not a constant."""
    __slots__ = ()


NONINT = NonInt()


# -- value-source: where an argument's value comes from ----------------------------------
class Source(kind("Source", ["label", "step"])):
    """A read of a named config key or method, filed under the finder's label."""
    __slots__ = ()


class Constant(kind("Constant", ["text", "step"])):
    """A constant, shown by its repr (cut to 40 characters)."""
    __slots__ = ()


class Unknown(kind("Unknown", ["why", "step"])):
    """Something that cannot be traced, and why."""
    __slots__ = ()


class ConstantLookup(kind("ConstantLookup", ["flow", "node"])):
    """A name of another module or class that may be a constant (`flow` reads `node`)."""
    __slots__ = ()


class CallLookup(kind("CallLookup", ["flow", "func", "node", "args", "keywords"])):
    """A call of a helper outside the module, with the values it was called with
    (`keywords`: sorted (name, value) pairs)."""
    __slots__ = ()


class Deferred(kind("Deferred", ["why", "step", "lookup", "projection"], [()])):
    """An untraced value that may still be followed (a ConstantLookup or CallLookup), but
    only if it reaches the call traced: the calls building a layer are many, and their
    modules are not read for nothing. `projection`: the tuple elements taken from its
    result, in order."""
    __slots__ = ()

    def unknown(self):
        """What it is when it is not followed."""
        return Unknown(self.why, self.step)

    def element(self, index):
        """Element `index` of its result (tuple unpacking, x[i])."""
        return Deferred(self.why, self.step, self.lookup, self.projection + (index,))


class Param(kind("Param", ["ref", "name", "position"])):
    """A parameter of `ref`, to be replaced by what the module's call sites pass."""
    __slots__ = ()


class Kwargs(kind("Kwargs", ["ref", "name", "known"])):
    """The `**kwargs` parameter `name` of `ref` in a flow started there: the keys set on
    it here (`known`, sorted (key, value) pairs), any other key what the module's call
    sites pass under it (a Param of that name)."""
    __slots__ = ()


# -- values any question builds -----------------------------------------------------------
class Items(kind("Items", ["items"])):
    """A tuple of known length, each item a value of its own."""
    __slots__ = ()


class Keyed(kind("Keyed", ["items"])):
    """A dict of known string keys (keywords passed as `**kwargs`), sorted by key."""
    __slots__ = ()


class Mapping(kind("Mapping", ["keys", "values", "step"])):
    """A dict built by a comprehension keyed by layer (`{i: i + 1 for i in ids}`): what
    one key and one value hold, and where it was built."""
    __slots__ = ()


class Lambda(kind("Lambda", ["index"])):
    """A lambda of the flow, by its index in Flow.lambdas."""
    __slots__ = ()


class Partial(kind("Partial", ["index"])):
    """A functools.partial object, by its index in TraceState.partials."""
    __slots__ = ()


class Test(kind("Test", ["index"])):
    """A test bound to a name, by its index in TraceState.tests (what the name says about
    DFlash is told from the test only when a test reads the name)."""
    __slots__ = ()


def keyed(items):
    """A dict of known keys (later keys replace earlier ones), as one atom."""
    merged = {}
    for key, value in items:
        merged[key] = value
    return Keyed(tuple(sorted(merged.items(), key=lambda item: item[0])))


def with_key(value, key, held):
    """The value after `d[key] = held` on its dicts of known keys and **kwargs; other
    atoms unchanged. None when it holds neither."""
    if not any(isinstance(atom, (Keyed, Kwargs)) for atom in value):
        return None
    out = set()
    for atom in value:
        if isinstance(atom, Keyed):
            out.add(keyed(atom.items + ((key, held),)))
        elif isinstance(atom, Kwargs):
            out.add(Kwargs(atom.ref, atom.name, keyed(atom.known + ((key, held),)).items))
        else:
            out.add(atom)
    return frozenset(out)


def with_step(atom, step):
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


def carries_ids(value):
    return any(isinstance(atom, CARRIERS) or
               (isinstance(atom, Items) and any(carries_ids(v) for v in atom.items)) or
               (isinstance(atom, Keyed) and any(carries_ids(v) for _, v in atom.items)) or
               (isinstance(atom, Mapping) and (carries_ids(atom.keys) or
                                               carries_ids(atom.values)))
               for atom in value)


def as_collection(value):
    """Elements gathered into a list/tuple: elements become ids again, ints are dropped
    (an int element does not make the list an int)."""
    return frozenset(Ids(atom.offset, atom.trail) if isinstance(atom, Elem) else atom
                     for atom in value if not isinstance(atom, (Int, NonInt)))


def as_elements(value):
    """What iterating over a value yields: the elements of ids, the items of tuples."""
    out = set()
    for atom in value:
        if isinstance(atom, Ids):
            out.add(Elem(atom.offset, atom.trail))
        elif isinstance(atom, Items):
            for item in atom.items:
                out |= item
        elif isinstance(atom, Mapping):
            out |= atom.keys  # iterating a dict yields its keys
        elif not isinstance(atom, (Int, NonInt)):
            out.add(atom)
    return frozenset(out)


def iterated(value):
    """A value as list(x) or tuple(x) gathers it: a dict's keys, anything else as is."""
    if not any(isinstance(atom, Mapping) for atom in value):
        return value
    return frozenset().union(*[as_collection(atom.keys) if isinstance(atom, Mapping)
                               else frozenset([atom]) for atom in value])


def join(values):
    """Values of alternative paths: where one path gives an int and another does not,
    the result is not a constant."""
    out = frozenset().union(*values) if values else EMPTY
    if any(any(isinstance(a, Int) for a in v) for v in values) and \
            any(not v or any(not isinstance(a, Int) for a in v) for v in values):
        out = out | frozenset([NONINT])
    return out


def flat(value):
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
        elif isinstance(atom, Mapping):
            out |= flat(atom.keys) | flat(atom.values)
        else:
            out.add(atom)
    return frozenset(out)


def sources_in(value):
    """The config reads a value depends on (a test's, a comparison's)."""
    return frozenset(atom for atom in value if isinstance(atom, Source))
