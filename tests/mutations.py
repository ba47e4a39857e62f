"""Rewrites of the real vLLM 0.33.0 and 0.20.1 sources at the three fix sites, each
labelled with the verdict its check must give: rewrites that keep the code's meaning
keep the release's verdict (0.33.0 passes, 0.20.1 fails), rewrites that break (or, on
0.20.1, add) the fix change it. The mutation benchmark and the tests run them all. A bug
found in a verdict becomes a case here.

An edit is (old, new) on a file of the release; `old` must occur in it (an empty `old`
appends to the file, creating it when absent).
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from fleetcheck.lab.wheels import unpacked
from fleetcheck.status import Status

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
V2 = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
DRAFTER = "vllm/model_executor/models/qwen3_dflash.py"
SCHEDULER = "vllm/v1/core/sched/scheduler.py"
SPECULATIVE = "vllm/config/speculative.py"
HELPERS = "vllm/v1/worker/dflash_aux.py"
BASE = {"0.33.0": Status.PASS, "0.20.1": Status.FAIL}
LAYER = "dflash-layer-offset"
SWA = "dflash-swa"
DROP = "dflash-cache-drop"

@dataclass(frozen=True)
class Mutation:
    id: str
    version: str
    check: str
    keeps: bool  # keeps the meaning: the release's verdict must stay
    construct: str  # what the rewrite exercises, named where it warns
    edits: dict  # rel -> ((old, new), ...)
    expect: str = ""  # the verdict it must give ("" : the release's, or its flip)
    kind: str = ""  # the construct kind it belongs to (benchmarks' table by kind)

    @property
    def expected(self) -> str:
        if self.expect:
            return self.expect
        base = BASE[self.version]
        return base if self.keeps else (Status.FAIL if base == Status.PASS else Status.PASS)


class Cases(list):
    """The cases of one check on one release, their ids sharing a prefix."""

    def __init__(self, prefix: str, version: str, check: str):
        super().__init__()
        self.prefix, self.version, self.check = prefix, version, check

    def add(self, id: str, keeps: bool, construct: str, edits: dict, **kw) -> None:
        self.append(Mutation(self.prefix + id, self.version, self.check, keeps, construct,
                             edits, **kw))


# --- the 0.33.0 layer-offset sites ------------------------------------------------------
V1_READ = ('                layer_ids = [\n'
           '                    i + 1 for i in (dflash_config.get("target_layer_ids") or [])\n'
           '                ]\n')
V1_RETURN = ('        if layer_ids and isinstance(layer_ids, (list, tuple)):\n'
             '            return tuple(layer_ids)\n')
V2_READ = '            layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]\n'
V2_RETURN = ('    if layer_ids and isinstance(layer_ids, (list, tuple)):\n'
             '        return tuple(layer_ids)\n')
V1_PLAIN = '                layer_ids = dflash_config.get("target_layer_ids") or []\n'
V2_PLAIN = '            layer_ids = dflash_config.get("target_layer_ids") or []\n'
CLASS_END = "    def reload_weights(\n"
V2_IMPORT = "from vllm.config import SpeculativeConfig\n"


def v1(read: str, *more: tuple[str, str]) -> dict:
    return {RUNNER: ((V1_READ, read),) + more}


def guarded(test_v1: str, test_v2: str, shifted_first: bool = True) -> dict:
    """PR #40898's form on both runners: the ids are read plain and shifted on return,
    on the branch the test selects."""
    def block(indent: str, test: str) -> str:
        inner = indent + "    "
        shifted = inner + "    return tuple(layer_id + 1 for layer_id in layer_ids)\n"
        plain = inner + "    return tuple(layer_ids)\n"
        first, second = (shifted, plain) if shifted_first else (plain, shifted)
        return (indent + "if layer_ids and isinstance(layer_ids, (list, tuple)):\n" +
                inner + "if %s:\n" % test + first + inner + "else:\n" + second)
    return {RUNNER: ((V1_READ, V1_PLAIN), (V1_RETURN, block("        ", test_v1))),
            V2: ((V2_READ, V2_PLAIN), (V2_RETURN, block("    ", test_v2)))}


def matched(cases_v1: list[tuple[str, bool]], subject_v1: str = "self.speculative_config.method",
            subject_v2: str = "spec_config.method") -> dict:
    """PR #40898's form written as a `match` on the method, on both runners: each case
    (pattern, shifted) returns the ids shifted or plain."""
    def block(indent: str, subject: str) -> str:
        inner = indent + "    "
        text = indent + "if layer_ids and isinstance(layer_ids, (list, tuple)):\n" + \
            inner + "match %s:\n" % subject
        for pattern, shifted in cases_v1:
            text += inner + "    case %s:\n" % pattern + inner + "        return %s\n" % (
                "tuple(layer_id + 1 for layer_id in layer_ids)" if shifted else
                "tuple(layer_ids)")
        return text
    return {RUNNER: ((V1_READ, V1_PLAIN), (V1_RETURN, block("        ", subject_v1))),
            V2: ((V2_READ, V2_PLAIN), (V2_RETURN, block("    ", subject_v2)))}


def bound_test(test: str) -> dict:
    """PR #40898's form with the V1 runner's test bound to a name first."""
    read = "        hf_config = self.speculative_config.draft_model_config.hf_config\n"
    return {RUNNER: guarded("shifted", "")[RUNNER] + (
        (read, read + "        shifted = self.speculative_config.method %s\n" % test),),
        V2: guarded("", 'spec_config.method == "dflash"')[V2]}


def both(v1_read: str, v2_read: str, *more: tuple[str, tuple[str, str]]) -> dict:
    edits: dict = {RUNNER: [(V1_READ, v1_read)], V2: [(V2_READ, v2_read)]}
    for rel, edit in more:
        edits.setdefault(rel, []).append(edit)
    return {rel: tuple(items) for rel, items in edits.items()}


def method_helper(body: str) -> tuple[str, tuple[str, str]]:
    """A method added to GPUModelRunner, before reload_weights."""
    return RUNNER, (CLASS_END, body + "\n" + CLASS_END)


def helper_module(text: str) -> tuple[str, tuple[str, str]]:
    return HELPERS, ("", text)


V1_HELPER = '                layer_ids = %s\n'
V2_HELPER = '            layer_ids = %s\n'
IDS = 'dflash_config.get("target_layer_ids") or []'
IMPORT_V1 = ("import functools\n", "import functools\n%s")


def with_v2_import(line: str) -> tuple[str, tuple[str, str]]:
    return V2, (V2_IMPORT, V2_IMPORT + line)


def offset_cases() -> list[Mutation]:
    out = Cases("offset-", "0.33.0", LAYER)
    case = out.add

    ok, bad = True, False
    # path conditions
    case("pr40898-form", ok, "PR #40898: shift on return when method == \"dflash\"",
         guarded('self.speculative_config.method == "dflash"',
                 'spec_config.method == "dflash"'))
    case("match-dflash-case", ok, "`match method:` with `case \"dflash\":` shifting",
         matched([('"dflash"', True), ("_", False)]))
    case("match-others-first", ok, "`match method:` whose other methods' case comes first",
         matched([('"eagle" | "eagle3"', False), ("other", True)]))
    case("match-no-catch-all", ok, "`match method:` with no catch-all: DFlash's case returns",
         matched([('"eagle3"', False), ('"mtp" | "dflash"', True)]))
    case("match-dflash-unshifted", bad, "`match method:` whose DFlash case is unshifted",
         matched([('"dflash"', False), ("_", True)]))
    case("match-falls-to-plain", bad, "`match method:` where DFlash reaches the plain catch-all",
         matched([('"eagle3"', True), ("_", False)]))
    case("method-not-equal", ok, "method != \"dflash\" guards the unshifted branch",
         guarded('self.speculative_config.method != "dflash"',
                 'spec_config.method != "dflash"', shifted_first=False))
    case("method-in-tuple", ok, "method in (\"dflash\", \"dspark\")",
         guarded('self.speculative_config.method in ("dflash", "dspark")',
                 'spec_config.method in ("dflash", "dspark")'))
    case("method-not-in-eagle", ok, "method not in the EAGLE methods",
         guarded('self.speculative_config.method not in ("eagle", "eagle3", "mtp")',
                 'spec_config.method not in ("eagle", "eagle3", "mtp")'))
    case("method-named-strings", ok, "method in a named tuple of methods",
         {RUNNER: guarded('self.speculative_config.method in _SHIFTED_METHODS',
                          'spec_config.method == "dflash"')[RUNNER] +
          (("import functools\n", 'import functools\n_SHIFTED_METHODS = ("dflash",)\n'),),
          V2: guarded('True', 'spec_config.method == "dflash"')[V2]})
    case("bound-test", ok, "a name bound to method == \"dflash\"", bound_test('== "dflash"'))
    case("use-dflash-predicate", ok, "use_dflash() read from SpeculativeConfig",
         guarded("self.speculative_config.use_dflash()", "spec_config.use_dflash()"))
    case("private-predicate", ok, "a method of the runner _is_dflash() tests the method",
         {RUNNER: guarded("self._is_dflash()", "")[RUNNER] + method_helper(
             "    def _is_dflash(self) -> bool:\n"
             '        return self.speculative_config.method == "dflash"\n')[1:],
          V2: guarded("", 'spec_config.method == "dflash"')[V2]})
    for method, keeps in (("dflash", ok), ("eagle3", bad)):
        case("predicate-function" + ("" if keeps else "-eagle"), keeps,
             "a module function _uses_dflash(config) tests the method",
             {RUNNER: guarded("_uses_dflash(self.speculative_config)", "")[RUNNER] + (
                 ("", "\n\ndef _uses_dflash(config) -> bool:\n"
                      '    return config.method == "%s"\n' % method),),
              V2: guarded("", 'spec_config.method == "dflash"')[V2]})
    # a known warn on a present fix: which proposer self.drafter holds is not DFlash's input
    # (the runner's __init__ builds it), so the executor runs both ways and names the test
    case("isinstance-dflash", ok, "isinstance(self.drafter, DFlashProposer): the proposer "
         "is not an input, a warn naming the test",
         guarded("isinstance(self.drafter, DFlashProposer)",
                 'spec_config.method == "dflash"'), expect=Status.WARN)
    case("ternary", ok, "a conditional expression on the method",
         {RUNNER: ((V1_READ, V1_PLAIN), (V1_RETURN,
                    "        if layer_ids and isinstance(layer_ids, (list, tuple)):\n"
                    "            return (tuple(i + 1 for i in layer_ids)\n"
                    '                    if self.speculative_config.method == "dflash"\n'
                    "                    else tuple(layer_ids))\n"))})
    case("eagle-branch-unshifted", ok, "an EAGLE-only branch without +1 beside DFlash's",
         v1('                if self.speculative_config.method == "eagle3":\n'
            '                    layer_ids = dflash_config.get("target_layer_ids")\n'
            '                else:\n'
            '                    layer_ids = [\n'
            '                        i + 1 for i in (dflash_config.get("target_layer_ids") or [])\n'
            '                    ]\n'))
    # breaking path conditions
    case("eagle-only-shift", bad, "shifted for EAGLE only, DFlash unshifted",
         guarded('self.speculative_config.method == "eagle3"',
                 'spec_config.method == "dflash"'))
    case("inverted-test", bad, "method != \"dflash\" guards the shifted branch",
         guarded('self.speculative_config.method != "dflash"',
                 'spec_config.method != "dflash"'))
    case("other-predicate", bad, "use_dspark() instead of use_dflash()",
         guarded("self.speculative_config.use_dspark()", "spec_config.use_dspark()"))
    case("bound-test-inverted", bad, "a name bound to method != \"dflash\"",
         bound_test('!= "dflash"'))
    # helpers, names, inlining
    for added, keeps in ((1, ok), (0, bad)):
        tag = "" if added else "-reverted"
        case("helper-function" + tag, keeps, "the +1 in a module function",
             {RUNNER: ((V1_READ, V1_HELPER % ("_dflash_aux_ids(%s)" % IDS)),
                       ("", "\n\ndef _dflash_aux_ids(ids):\n    return [i + %d for i in ids]\n"
                        % added))})
        case("helper-method" + tag, keeps, "the +1 in a method of the runner",
             {RUNNER: ((V1_READ, V1_HELPER % ("self._dflash_aux_ids(%s)" % IDS)),
                       method_helper("    def _dflash_aux_ids(self, ids):\n"
                                     "        return [i + %d for i in ids]\n" % added)[1])})
        case("helper-module" + tag, keeps, "the +1 in a helper of another vllm module",
             both(V1_HELPER % ("_aux_ids(%s)" % IDS), V2_HELPER % ("_aux_ids(%s)" % IDS),
                  (RUNNER, ("import functools\n", "import functools\n"
                            "from vllm.v1.worker.dflash_aux import aux_ids as _aux_ids\n")),
                  with_v2_import("from vllm.v1.worker.dflash_aux import aux_ids as _aux_ids\n"),
                  helper_module("def aux_ids(ids):\n    return [n + %d for n in ids]\n" % added)))
    for read, keeps, tag in ((V1_READ, ok, ""), (V1_PLAIN, bad, "-dropped")):
        case("key-named" + tag, keeps, "the key held in a module constant",
             {RUNNER: ((V1_READ, read.replace('"target_layer_ids"', "_DFLASH_IDS_KEY")),
                       ("import functools\n",
                        'import functools\n_DFLASH_IDS_KEY = "target_layer_ids"\n'))})
    case("rename", ok, "names changed",
         v1('                layer_ids = [\n'
            '                    layer_idx + 1 for layer_idx in (dflash_config.get("target_layer_ids") or [])\n'
            '                ]\n'))
    case("one-plus", ok, "1 + i", v1(V1_READ.replace("i + 1", "1 + i")))
    case("inline-getattr", ok, "the container read inline",
         v1('                layer_ids = [i + 1 for i in (getattr(hf_config, "dflash_config")'
            '.get("target_layer_ids") or [])]\n'))
    case("map-lambda", ok, "map(lambda i: i + 1, ...)",
         v1('                layer_ids = list(map(lambda i: i + 1, %s))\n' % IDS))
    case("append-loop", ok, "an append loop",
         v1("                layer_ids = []\n"
            '                for i in dflash_config.get("target_layer_ids") or []:\n'
            "                    layer_ids.append(i + 1)\n"))
    # a known warn on a present fix: numpy is a stand-in in the executor (never run)
    case("array-plus", ok, "np.asarray(ids) + 1: numpy is not run, a warn naming the line",
         v1("                layer_ids = (np.asarray(%s) + 1).tolist()\n" % IDS),
         expect=Status.WARN)
    for read, keeps, tag in ((V1_READ, ok, ""), (V1_PLAIN, bad, "-dropped")):
        case("int-cast" + tag, keeps, "each id cast with int()",
             v1(read.replace("i + 1 for i", "int(i) + 1 for i").replace(
                 '                layer_ids = dflash_config.get("target_layer_ids") or []\n',
                 '                layer_ids = [int(i) for i in dflash_config.get("target_layer_ids") or []]\n')))
    for added, keeps in ((1, ok), (0, bad)):
        case("generator-helper" + ("" if added else "-reverted"), keeps,
             "the +1 in a generator helper",
             {RUNNER: ((V1_READ, V1_HELPER % ("list(_aux_ids(%s))" % IDS)),
                       ("", "\n\ndef _aux_ids(ids):\n    for i in ids:\n        yield i + %d\n"
                        % added))})
    case("tensor-method", bad, "the ids through a tensor method, not followed",
         v1("                layer_ids = torch.tensor(%s).add(0).tolist()\n" % IDS),
         expect=Status.WARN)
    # a module's add() is a function call, not a set being filled: the path must not vanish
    case("operator-add-zero", bad, "operator.add(i, 0): a module function named add",
         v1(V1_READ.replace("i + 1", "operator.add(i, 0)")), expect=Status.WARN)
    # operator.* of the standard library, imported: the same arithmetic as + and -
    op_import = ("import functools\n", "import functools\nimport operator\n")
    for call, keeps, tag in (("operator.add(i, 1)", ok, ""), ("operator.add(1, i)", ok, "-swapped"),
                             ("operator.add(i, 0)", bad, "-zero"),
                             ("operator.sub(i, 0)", bad, "-sub-zero")):
        case("operator-imported" + tag, keeps, "%s with operator imported" % call,
             {RUNNER: ((V1_READ, V1_READ.replace("i + 1", call)), op_import)},
             kind="operator")
    case("operator-by-name", ok, "add(i, 1) imported from operator",
         {RUNNER: ((V1_READ, V1_READ.replace("i + 1", "_add(i, 1)")),
                   ("import functools\n", "import functools\nfrom operator import add as _add\n"))},
         kind="operator")
    # filter and itertools.chain carry each element unchanged
    for read, keeps, tag in ((V1_READ, ok, ""), (V1_PLAIN, bad, "-dropped")):
        ids = "[i + 1 for i in %s]" % IDS if keeps else "(%s)" % IDS
        case("filter" + tag, keeps, "filter(None, ...) over the ids",
             v1("                layer_ids = list(filter(None, %s))\n" % ids), kind="stdlib")
        case("itertools-chain" + tag, keeps, "itertools.chain of the ids",
             v1("                layer_ids = list(itertools.chain(%s))\n" % ids), kind="stdlib")
    case("itertools-chain-mixed", bad, "itertools.chain of shifted and unshifted ids",
         v1("                layer_ids = list(itertools.chain([i + 1 for i in %s], %s))\n"
            % (IDS, IDS)), kind="stdlib")
    case("numpy-add-zero", bad, "np.add(ids, 0): a module function named add",
         v1("                layer_ids = np.add(%s, 0).tolist()\n" % IDS), expect=Status.WARN)
    case("double-shift", bad, "the +1 added twice",
         v1(V1_READ.replace("i + 1", "i + 1 + 1")))
    case("helper-twice", bad, "a +1 helper applied twice",
         {RUNNER: ((V1_READ, V1_HELPER % ("_shift(_shift(%s))" % IDS)),
                   ("", "\n\ndef _shift(ids):\n    return [i + 1 for i in ids]\n"))})
    case("dropped", bad, "the +1 dropped", v1(V1_PLAIN))
    case("dropped-v2", bad, "the +1 dropped in the V2 runner only", {V2: ((V2_READ, V2_PLAIN),)})
    # named values
    for value, keeps in ((1, ok), (0, bad)):
        tag = "" if value else "-zero"
        case("module-constant" + tag, keeps, "OFFSET = %d at module level" % value,
             {RUNNER: ((V1_READ, V1_READ.replace("i + 1", "i + _DFLASH_AUX_OFFSET")),
                       ("import functools\n", "import functools\n_DFLASH_AUX_OFFSET = %d\n"
                        % value))})
        case("imported-constant" + tag, keeps, "an offset imported from a vllm module",
             both(V1_READ.replace("i + 1", "i + AUX_OFFSET"),
                  V2_READ.replace("i + 1", "i + AUX_OFFSET"),
                  (RUNNER, ("import functools\n", "import functools\n"
                            "from vllm.v1.worker.dflash_aux import AUX_OFFSET\n")),
                  with_v2_import("from vllm.v1.worker.dflash_aux import AUX_OFFSET\n"),
                  helper_module("AUX_OFFSET = %d  # hidden state k is after k layers\n"
                                % value)))
        case("class-constant" + tag, keeps, "a class-level offset read as self.X",
             {RUNNER: ((V1_READ, V1_READ.replace("i + 1", "i + self.DFLASH_AUX_OFFSET")),
                       method_helper("    DFLASH_AUX_OFFSET = %d\n" % value)[1])})
        case("default-argument" + tag, keeps, "a helper's default argument",
             {RUNNER: ((V1_READ, V1_HELPER % ("_shift(%s)" % IDS)),
                       ("", "\n\ndef _shift(ids, offset=%d):\n    return [i + offset for i "
                            "in ids]\n" % value))})
        case("partial" + tag, keeps, "a functools.partial binding of the offset",
             {RUNNER: ((V1_READ, V1_HELPER % ("_dflash_shift(%s)" % IDS)),
                       ("", "\n\ndef _shift_by(ids, offset):\n    return [i + offset for i "
                            "in ids]\n\n\n_dflash_shift = functools.partial(_shift_by, "
                            "offset=%d)\n" % value))})
        case("enum-member" + tag, keeps, "an IntEnum member",
             {RUNNER: ((V1_READ, V1_READ.replace("i + 1", "i + _AuxOffset.DFLASH")),
                       ("import functools\n", "import enum\nimport functools\n"),
                       ("", "\n\nclass _AuxOffset(enum.IntEnum):\n    EAGLE = 0\n"
                            "    DFLASH = %d\n" % value))})
        case("enum-value" + tag, keeps, "an Enum member's .value",
             {RUNNER: ((V1_READ, V1_READ.replace("i + 1", "i + _AuxOffset.DFLASH.value")),
                       ("import functools\n", "import enum\nimport functools\n"),
                       ("", "\n\nclass _AuxOffset(enum.Enum):\n    DFLASH = %d\n" % value))})
        case("reassigned-constant" + tag, keeps, "a constant reassigned (the last counts)",
             {RUNNER: ((V1_READ, V1_READ.replace("i + 1", "i + _AUX")),
                       ("import functools\n", "import functools\n_AUX = %d\n" % (1 - value)),
                       ("", "\n_AUX = %d\n" % value))})
        case("local-constant" + tag, keeps, "a local reassigned before use",
             v1("                offset = %d\n                offset = %d\n" % (1 - value, value)
                + V1_READ.replace("i + 1", "i + offset")))
        case("dict-keywords" + tag, keeps, "keywords passed to a helper as **dict",
             {RUNNER: ((V1_READ, V1_HELPER % ("_shift(**{\"ids\": %s, \"offset\": %d})"
                                             % (IDS, value))),
                       ("", "\n\ndef _shift(ids, offset):\n    return [i + offset for i "
                            "in ids]\n"))})
    # subclasses
    base_method = ("    def _dflash_aux_ids(self, ids):\n"
                   "        return [i + 1 for i in ids]\n")
    for added, keeps in ((1, ok), (0, bad)):
        case("subclass-override" + ("" if added else "-reverted"), keeps,
             "a subclass of the runner overriding the helper",
             {RUNNER: ((V1_READ, V1_HELPER % ("self._dflash_aux_ids(%s)" % IDS)),
                       method_helper(base_method)[1],
                       ("", "\n\nclass DFlashGPUModelRunner(GPUModelRunner):\n"
                            "    def _dflash_aux_ids(self, ids):\n"
                            "        return [i + %d for i in ids]\n" % added))})
    for added, keeps in ((1, ok), (0, bad)):
        case("subclass-elsewhere" + ("" if added else "-reverted"), keeps,
             "a subclass in another runner module overriding the helper",
             {RUNNER: ((V1_READ, V1_HELPER % ("self._dflash_aux_ids(%s)" % IDS)),
                       method_helper(base_method)[1]),
              "vllm/v1/worker/dflash_runner.py": (
                  ("", "from vllm.v1.worker.gpu_model_runner import GPUModelRunner\n\n\n"
                       "class DFlashGPUModelRunner(GPUModelRunner):\n"
                       "    def _dflash_aux_ids(self, ids):\n"
                       "        return [i + %d for i in ids]\n" % added),)})
    offset_construct_cases(out)
    return out


# the V1 runner's read, indented as in the DFlash branch of _get_eagle3_aux_layers_from_config
V1_IN = "                "
V1_IDS = V1_IN + "ids = %s\n" % IDS
OPERATOR_IMPORT = ("import functools\n", "import functools\nimport operator\n")


def v1_lines(*lines: str) -> str:
    return "".join(V1_IN + line + "\n" for line in lines)


def offset_construct_cases(out: Cases) -> None:
    """The layer-offset read rewritten by construct kind (issue 33): each kind with
    rewrites that keep the +1 on DFlash's path and rewrites that lose it."""
    def case(kind: str, id: str, keeps: bool, construct: str, edits: dict, **kw) -> None:
        out.add(kind + "-" + id, keeps, construct, edits, kind=kind, **kw)

    # (main's eval-* cases hold op.add(i, 1) / (i, 0) / op.sub(i + 1, 1), map over a
    # partial, itertools.repeat and lambdas, dict comprehensions keyed by layer, tuple
    # assignments and swaps, getattr(self, name, default): only what they lack is here)
    # operator imported under another name, subtracting a negative constant
    alias = ("import functools\n", "import functools\nimport operator as op\n")
    case("operator-alias", "sub-minus", True, "`import operator as op`, then op.sub(i, -1)",
         {RUNNER: ((V1_READ, V1_READ.replace("i + 1", "op.sub(i, -1)")), alias)})
    # map over the ids and a list repeated by their length, a lambda over a named list
    for value, keeps in ((1, True), (0, False)):
        tag = "" if value else "-zero"
        case("map", "repeated-list" + tag, keeps,
             "map(operator.add, ids, [%d] * len(ids))" % value,
             {RUNNER: ((V1_READ, V1_IDS + V1_HELPER % (
                 "list(map(operator.add, ids, [%d] * len(ids)))" % value)), OPERATOR_IMPORT)})
    case("map", "lambda-named", True, "map(lambda layer: 1 + layer, ids) over a named list",
         v1(V1_IDS + V1_HELPER % "list(map(lambda layer: 1 + layer, ids))"))
    # an early return before the shift
    for lines, keeps, tag, what in (
            (("ids = %s" % IDS, "if not ids:", "    return ()",
              "layer_ids = [i + 1 for i in ids]"), True, "empty", "`if not ids: return ()` "
             "before the shift"),
            (("ids = %s" % IDS, 'if self.speculative_config.method != "dflash":',
              "    return tuple(ids)", "layer_ids = [i + 1 for i in ids]"), True,
             "not-dflash", 'return unshifted when method != "dflash", then the shift'),
            (("ids = %s" % IDS, 'if self.speculative_config.method in ("eagle", "eagle3"):',
              "    return tuple(ids)", "layer_ids = [i + 1 for i in ids]"), True,
             "eagle-methods", "return unshifted for the EAGLE methods (DFlash not named)"),
            (("ids = %s" % IDS, "if ids:", "    return tuple(ids)",
              "layer_ids = [i + 1 for i in ids]"), False, "unshifted",
             "`if ids: return tuple(ids)` before the shift"),
            (("ids = %s" % IDS, 'if self.speculative_config.method == "dflash":',
              "    return tuple(ids)", "layer_ids = [i + 1 for i in ids]"), False,
             "dflash", 'return unshifted when method == "dflash": names DFlash, skips the '
             "shift for it")):
        case("early-return", tag, keeps, what, v1(v1_lines(*lines)))
    # a raise on a branch DFlash never takes
    for read, keeps, tag in (("[i + 1 for i in %s]" % IDS, True, ""),
                             ("list(%s)" % IDS, False, "-unshifted")):
        case("raise", "not-dflash" + tag, keeps,
             'raise when method != "dflash", then the ids %s' % (
                 "shifted" if keeps else "unshifted"),
             v1(v1_lines('if self.speculative_config.method != "dflash":',
                         '    raise ValueError("dflash_config needs the dflash method")',
                         "layer_ids = %s" % read)))
    for read, keeps, tag in (("[i + 1 for i in %s]" % IDS, True, ""),
                             ("list(%s)" % IDS, False, "-unshifted")):
        case("raise", "eagle-else" + tag, keeps,
             "an if raising for EAGLE, the else reading the ids %s" % (
                 "shifted" if keeps else "unshifted"),
             v1(v1_lines('if self.speculative_config.method in ("eagle", "eagle3"):',
                         '    raise ValueError("an EAGLE drafter with a dflash_config")',
                         "else:", "    layer_ids = %s" % read)))
    # try/except/else around the read
    for tail, keeps, tag in (("[i + 1 for i in ids]", True, ""), ("list(ids)", False,
                                                                    "-unshifted")):
        case("try", "else" + tag, keeps, "the ids read in a try, %s in its else" % (
            "shifted" if keeps else "unshifted"),
             v1(v1_lines("try:", '    ids = dflash_config["target_layer_ids"]',
                         "except KeyError:", "    layer_ids = []", "else:",
                         "    layer_ids = %s" % tail)))
    # the handler runs only when shifting raises TypeError, which DFlash's ids (ints) never
    # do: run, both give the shifted ids (the static readers took the handler as a path)
    for handler, keeps, tag in (("[]", True, ""), ("list(%s)" % IDS, True, "-handler")):
        case("try", "body" + tag, keeps, "the shift in a try whose handler gives %s" % (
            "no ids" if not tag else "the ids unshifted, and never runs for int ids"),
             v1(v1_lines("try:", "    layer_ids = [i + 1 for i in %s]" % IDS,
                         "except TypeError:", "    layer_ids = %s" % handler)))
    # a predicate helper with a multi-statement body guarding the shifted branch
    helpers = [
        ("early-return", True, 'early return: False without a config, then method == "dflash"',
         "        if self.speculative_config is None:\n            return False\n"
         '        return self.speculative_config.method == "dflash"\n'),
        ("early-return-eagle", False, 'early return of False for "dflash", True for the rest',
         '        if self.speculative_config.method == "dflash":\n            return False\n'
         "        return True\n"),
        ("try-else", True, "try/except/else: the method read in the try, tested in the else",
         "        try:\n            method = self.speculative_config.method\n"
         "        except AttributeError:\n            return False\n"
         '        else:\n            return method == "dflash"\n'),
        ("try-else-inverted", False, "try/except/else testing method != \"dflash\"",
         "        try:\n            method = self.speculative_config.method\n"
         "        except AttributeError:\n            return False\n"
         '        else:\n            return method != "dflash"\n'),
        ("tuple-assignment", True, "a tuple assignment of the method and DFlash's name",
         '        method, shifted = self.speculative_config.method, "dflash"\n'
         "        return method == shifted\n"),
        ("tuple-assignment-swapped", False, "a tuple assignment whose names swap the test",
         '        shifted, method = self.speculative_config.method, "eagle3"\n'
         "        return method == shifted\n"),
    ]
    for tag, keeps, what, body in helpers:
        case("predicate-helper", tag, keeps, "self._shifts_ids() guards the shift; its body: "
             + what, {RUNNER: guarded("self._shifts_ids()", "")[RUNNER] + method_helper(
                 "    def _shifts_ids(self) -> bool:\n" + body)[1:],
                 V2: guarded("", 'spec_config.method == "dflash"')[V2]})
    # a runner helper reached through super()
    base_helper = ("    def _dflash_aux_ids(self, ids):\n"
                   "        return [i + %d for i in ids]\n")
    for added, sub, keeps, tag in ((1, "super()._dflash_aux_ids(ids)", True, ""),
                                   (0, "super()._dflash_aux_ids(ids)", False, "-base-zero"),
                                   (1, "[i - 1 for i in super()._dflash_aux_ids(ids)]", False,
                                    "-undone")):
        case("super-chain", "helper" + tag, keeps,
             "a subclass of the runner whose helper returns %s" % sub,
             {RUNNER: ((V1_READ, V1_HELPER % ("self._dflash_aux_ids(%s)" % IDS)),
                       method_helper(base_helper % added)[1],
                       ("", "\n\nclass DFlashGPUModelRunner(GPUModelRunner):\n"
                            "    def _dflash_aux_ids(self, ids):\n"
                            "        return %s\n" % sub))})


def offset_cases_020() -> list[Mutation]:
    """0.20.1 reads the ids unshifted: rewrites keep the fail, the fix added passes."""
    read = '                layer_ids = dflash_config.get("target_layer_ids")\n'
    ret = V1_RETURN
    out = Cases("offset-020-", "0.20.1", LAYER)
    case = out.add

    case("rename", True, "names changed", {RUNNER: ((read, read.replace(
        "layer_ids = dflash_config", "ids_from_config = dflash_config") +
        "                layer_ids = ids_from_config\n"),)})
    def returned(method: str, shifted: str) -> dict:
        """The 0.20.1 runner returning `shifted` when the method is `method`."""
        return {RUNNER: ((ret, ret.replace(
            "            return tuple(layer_ids)\n",
            '            if self.speculative_config.method == "%s":\n' % method +
            "                return %s\n" % shifted + "            return tuple(layer_ids)\n")),)}

    case("guard-unshifted", True, "PR #40898's guard with both branches unshifted",
         returned("dflash", "tuple(layer_ids)"))
    case("fix-added", False, "the +1 added as 0.22.0 does",
         {RUNNER: ((read, V1_READ),)})
    case("pr40898-added", False, "PR #40898's form added",
         returned("dflash", "tuple(layer_id + 1 for layer_id in layer_ids)"))
    case("eagle-shift-added", True, "a +1 added for EAGLE only",
         returned("eagle3", "tuple(i + 1 for i in layer_ids)"))
    case("match-added", False, "PR #40898's form added as a `match` on the method",
         {RUNNER: ((ret, ret.replace(
             "            return tuple(layer_ids)\n",
             "            match self.speculative_config.method:\n"
             '                case "dflash":\n'
             "                    return tuple(layer_id + 1 for layer_id in layer_ids)\n"
             "            return tuple(layer_ids)\n")),)})
    return out


def dict_cases(out: Cases, what: str, rel: str, line: str, anchor: str, name: str,
               keyword: str, seed: str, kept: str, broken: tuple[str, str]) -> None:
    """The keyword argument on `line` passed through a **dict instead, each way one is
    built: with the value it had (`kept`), and with the value that breaks the fix
    (`broken`: value, id suffix)."""
    for value, keeps, tag in ((kept, True, ""), (broken[0], False, broken[1])):
        for id, construct, edits in through_dicts(rel, line, anchor, name, keyword, value, seed):
            out.add(id + tag, keeps, what + " " + construct, edits)


def through_dicts(rel: str, line: str, anchor: str, name: str, keyword: str, value: str,
                  seed: str) -> list[tuple[str, str, dict]]:
    """(id, construct, edits) of the keyword argument on `line` replaced by `keyword=value`
    passed through a **dict, each way one is built (before the statement `anchor`)."""
    call = line[:len(line) - len(line.lstrip())]
    before = anchor[:len(anchor) - len(anchor.lstrip())]
    spread = (line, call + "**%s,\n" % name)

    def built(*statements: str) -> dict:
        return {rel: (spread, (anchor, "".join(before + s + "\n" for s in statements) + anchor))}

    return [
        ("dict-literal", "passed in a **{...} dict",
         {rel: ((line, call + '**{"%s": %s},\n' % (keyword, value)),)}),
        ("dict-named", "in a dict literal built before",
         built('%s = {"%s": %s}' % (name, keyword, value))),
        ("dict-call", "in dict(%s=...)" % keyword, built("%s = dict(%s=%s)" % (name, keyword, value))),
        ("dict-item", 'set as kwargs["%s"]' % keyword,
         built("%s = {}" % name, '%s["%s"] = %s' % (name, keyword, value))),
        ("dict-update", "set by kwargs.update(%s=...)" % keyword,
         built("%s = dict(%s)" % (name, seed), "%s.update(%s=%s)" % (name, keyword, value))),
    ]


# --- the SWA window -------------------------------------------------------------------
WINDOW = "            per_layer_sliding_window=sliding_window,\n"
ATTN = "        self.attn = Attention(\n"


def swa_cases() -> list[Mutation]:
    out = Cases("swa-", "0.33.0", SWA)
    case = out.add
    dict_cases(out, "the window", DRAFTER, WINDOW, ATTN, "attn_kwargs",
               "per_layer_sliding_window", "logits_soft_cap=None", "sliding_window",
               ("None", "-none"))
    resolve = "        sliding_window, causal = _resolve_layer_attention(config, layer_idx)\n"
    case("helper-extracted", True, "the window taken out by a helper of its own",
         {DRAFTER: ((resolve, "        sliding_window = _layer_window(config, layer_idx)\n"
                              "        causal = _resolve_layer_attention(config, layer_idx)[1]\n"),
                    ("", "\n\ndef _layer_window(config, layer_idx):\n"
                         "    return _resolve_layer_attention(config, layer_idx)[0]\n"))})
    case("key-named", True, "the window's config key held in a named constant",
         {DRAFTER: (('            "swa_window_size", getattr(config, "sliding_window", None)\n',
                     '            _SWA_WINDOW_KEY, getattr(config, "sliding_window", None)\n'),
                    ('_SLIDING_ATTENTION = "sliding_attention"\n',
                     '_SLIDING_ATTENTION = "sliding_attention"\n'
                     '_SWA_WINDOW_KEY = "swa_window_size"\n'))})
    case("reverted-in-helper", False, "the resolution helper returns no window",
         {DRAFTER: (("    return sliding_window, _dflash_layer_causal(config, layer_idx)\n",
                     "    return None, _dflash_layer_causal(config, layer_idx)\n"),)})
    case("rename", True, "the window renamed on its way",
         {DRAFTER: ((WINDOW, "            per_layer_sliding_window=window,\n"),
                    (ATTN, "        window = sliding_window\n" + ATTN))})
    case("overwritten-dict-item", False, "the dict's window replaced by None",
         {DRAFTER: ((WINDOW, "            **attn_kwargs,\n"),
                    (ATTN, "        attn_kwargs = {\"per_layer_sliding_window\": sliding_window}\n"
                           "        attn_kwargs[\"per_layer_sliding_window\"] = None\n" + ATTN))})
    case("constant-none", False, "a module constant None as the window",
         {DRAFTER: ((WINDOW, "            per_layer_sliding_window=_NO_WINDOW,\n"),
                    ('_SLIDING_ATTENTION = "sliding_attention"\n',
                     '_SLIDING_ATTENTION = "sliding_attention"\n_NO_WINDOW = None\n'))})
    case("class-constant-none", False, "a class constant None read as self.X",
         {DRAFTER: ((WINDOW, "            per_layer_sliding_window=self.NO_WINDOW,\n"),
                    ('    Adapted from Qwen3Attention."""\n',
                     '    Adapted from Qwen3Attention."""\n\n    NO_WINDOW = None\n'))})
    case("dropped", False, "the window no longer passed", {DRAFTER: ((WINDOW, ""),)})
    # calls bound as Python binds them: a positional argument lands in the parameter of
    # its position in the install's own Attention.__init__ (per_layer_sliding_window is
    # its tenth, after logits_soft_cap)
    def positional(*middle: str) -> dict:
        return {DRAFTER: ((ATTN_KEYWORDS, "".join(
            "            %s,\n" % arg for arg in ATTN_FIRST + middle)),)}
    case("positional-window", True, "the window passed by position, landing in "
         "per_layer_sliding_window", positional("None", "None", "cache_config",
                                                "quant_config", "None", "sliding_window"),
         kind="positional")
    case("positional-window-shifted", False, "the window passed one position early: it "
         "lands in logits_soft_cap", positional("None", "None", "cache_config",
                                                "quant_config", "sliding_window"),
         kind="positional")
    case("positional-none", False, "None passed by position as the window",
         positional("None", "None", "cache_config", "quant_config", "None", "None"),
         kind="positional")
    # a subclass of Attention built instead: its __init__ decides what reaches the base
    sub = ("\n\nclass _WindowedAttention(Attention):\n"
           "    def __init__(self, num_heads, head_size, scale, window=None, **kwargs):\n"
           "        super().__init__(num_heads, head_size, scale,\n"
           "                         per_layer_sliding_window=%s, **kwargs)\n")
    built = ("        self.attn = Attention(\n", "        self.attn = _WindowedAttention(\n")
    for passed, keeps, tag in (("window", True, ""), ("None", False, "-drops")):
        case("subclass-init" + tag, keeps, "a subclass of Attention whose __init__ passes %s "
             "to super().__init__" % ("the window on" if keeps else "None"),
             {DRAFTER: (built, (WINDOW, "            window=sliding_window,\n"),
                        ("", sub % passed))}, kind="subclass")
    swa_construct_cases(out)
    return out


WINDOW_READ = ('        sliding_window = dflash_config.get(\n'
               '            "swa_window_size", getattr(config, "sliding_window", None)\n'
               '        )\n')
DRAFTER_IMPORT = "import io\n"


def swa_construct_cases(out: Cases) -> None:
    """The drafter's window rewritten by construct kind (issue 33)."""
    def case(kind: str, id: str, keeps: bool, construct: str, edits: dict, **kw) -> None:
        out.add(kind + "-" + id, keeps, construct, edits, kind=kind, **kw)

    def window(text: str) -> dict:
        return {DRAFTER: ((WINDOW_READ, "".join("        %s\n" % line
                                                for line in text.splitlines())),)}
    # getattr(config, "sliding_window", None) forms
    for text, keeps, tag, what in (
            ('sliding_window = dflash_config.get("swa_window_size") or '
             'getattr(config, "sliding_window", None)', True, "or",
             'dflash_config.get("swa_window_size") or getattr(config, "sliding_window", None)'),
            ('sliding_window = getattr(config, "sliding_window", None)\n'
             'if "swa_window_size" in dflash_config:\n'
             '    sliding_window = dflash_config["swa_window_size"]', True, "then-override",
             "getattr(config, \"sliding_window\", None), then the dflash_config key if present"),
            ('sliding_window = getattr(config, "sliding_window")', True, "no-default",
             'getattr(config, "sliding_window") without a default'),
            ('sliding_window = getattr(config, "sliding_window", None) and None', False,
             "and-none", 'getattr(config, "sliding_window", None) and None: always None'),
            ('sliding_window = getattr(config, "no_sliding_window", None)', False,
             "other-attribute", "getattr of an attribute DFlash's drafter config does not "
             "have: the window is None and the code refuses the sliding drafter")):
        case("getattr-window", tag, keeps, what, window(text))
    # getattr(self, name, window) of a name the attention class lacks: an nn.Module may
    # answer it (eval-swa-getattr-class-constant-none is the class constant None)
    case("getattr-default", "self-lacking", False, 'getattr(self, "NO_WINDOW", '
         "sliding_window) of a name no class of the tree has, on an nn.Module (its "
         "__getattr__ answers submodules and parameters): a warn naming the getattr",
         {DRAFTER: ((WINDOW, "            per_layer_sliding_window=getattr(self, \"NO_WINDOW\", "
                             "sliding_window),\n"),)}, expect=Status.WARN)
    case("getattr-default", "class-constant-or-window", True, 'getattr(self, "NO_WINDOW", '
         "None) or sliding_window, the class constant None: the window",
         {DRAFTER: ((WINDOW, "            per_layer_sliding_window=getattr(self, \"NO_WINDOW\", "
                             "None) or sliding_window,\n"),
                    ('    Adapted from Qwen3Attention."""\n',
                     '    Adapted from Qwen3Attention."""\n\n    NO_WINDOW = None\n'))})
    # the window bound by functools.partial(Attention, ...)
    partial_import = (DRAFTER_IMPORT, DRAFTER_IMPORT + "import functools\n")
    # (main's eval-swa-partial cases bind the window or None and pass none at the call)
    for bound, passed, keeps, tag in (("None", "sliding_window", True, "-call-overrides"),
                                      ("sliding_window", "None", False, "-call-none")):
        line = "" if passed is None else "            per_layer_sliding_window=%s,\n" % passed
        case("partial-attention", "window" + tag, keeps,
             "functools.partial(Attention, per_layer_sliding_window=%s), called with %s" % (
                 bound, "no window" if passed is None else passed),
             {DRAFTER: (partial_import, (WINDOW, line), (ATTN,
                 "        make_attn = functools.partial(Attention, "
                 "per_layer_sliding_window=%s)\n" % bound +
                 "        self.attn = make_attn(\n"))})
    # keywords built by a dict comprehension
    for comprehension, keeps, tag in (
            ('{k: v for k, v in (("per_layer_sliding_window", sliding_window),)}', True,
             "pairs"),
            ('{k: sliding_window for k in ("per_layer_sliding_window",)}', True, "keys"),
            ('{k: None for k in ("per_layer_sliding_window",)}', False, "keys-none"),
            ('{k: v for k, v in (("per_layer_sliding_window", None),)}', False, "pairs-none")):
        case("dict-comprehension", tag, keeps, "**kwargs built by %s" % comprehension,
             {DRAFTER: ((WINDOW, "            **attn_kwargs,\n"),
                        (ATTN, "        attn_kwargs = %s\n" % comprehension + ATTN))})
    # a subclass of Attention whose __init__ changes the window before super().__init__
    sub = ("\n\nclass _WindowedAttention(Attention):\n"
           "    def __init__(self, *args, per_layer_sliding_window=None, **kwargs):\n"
           "%s"
           "        super().__init__(*args, per_layer_sliding_window=per_layer_sliding_window,\n"
           "                         **kwargs)\n")
    built = (ATTN, "        self.attn = _WindowedAttention(\n")
    for body, keeps, tag, what in (
            ("        if per_layer_sliding_window is not None and per_layer_sliding_window <= 0:\n"
             "            per_layer_sliding_window = None\n", True, "validated",
             "drops a non-positive window, passes the rest on"),
            ("        per_layer_sliding_window = int(per_layer_sliding_window or 0) or None\n",
             True, "normalised", "normalises the window with int(... or 0) or None"),
            ("        per_layer_sliding_window = None\n", False, "reset",
             "sets the window to None"),
            ("        if per_layer_sliding_window is not None:\n"
             "            per_layer_sliding_window = None\n", False, "reset-if-set",
             "sets the window to None whenever one is given")):
        case("subclass-window", tag, keeps, "a subclass of Attention whose __init__ %s before "
             "super().__init__" % what, {DRAFTER: (built, ("", sub % body))})


ATTN_FIRST = ("self.num_heads", "self.head_dim", "self.scaling", "self.num_kv_heads")
ATTN_KEYWORDS = ("            self.num_heads,\n            self.head_dim,\n"
                 "            self.scaling,\n            num_kv_heads=self.num_kv_heads,\n"
                 "            cache_config=cache_config,\n            quant_config=quant_config,\n"
                 "            per_layer_sliding_window=sliding_window,\n")


def swa_cases_020() -> list[Mutation]:
    attn = ("            attn_type=attn_type,\n        )\n")
    return [
        Mutation("swa-020-dict", "0.20.1", SWA, True, "keywords moved into a **dict",
                 {DRAFTER: ((attn, "            **{\"attn_type\": attn_type},\n        )\n"),)}),
        Mutation("swa-020-none-passed", "0.20.1", SWA, True, "None passed as the window",
                 {DRAFTER: ((attn, attn.replace(
                     "        )\n", "            per_layer_sliding_window=None,\n        )\n")),)}),
        # `config` is not a name in 0.20.1's attention class: the rewrite raises NameError
        # when the drafter is built, so running it cannot pass (the static readers did)
        Mutation("swa-020-window-added", "0.20.1", SWA, False,
                 "the config's window passed per layer, from a name the class lacks",
                 {DRAFTER: ((attn, attn.replace(
                     "        )\n", "            per_layer_sliding_window=getattr(\n"
                     "                config, \"sliding_window\", None),\n        )\n")),)},
                 expect=Status.WARN),
    ]


# --- the block-drop decision ----------------------------------------------------------
DECISION = "            use_eagle=self.use_eagle_block_drop,\n"
MANAGER = "        self.kv_cache_manager = KVCacheManager(\n"
WRAPPER = "            self.use_eagle_block_drop = speculative_config.use_eagle_block_drop()\n"


def drop_cases() -> list[Mutation]:
    out = Cases("drop-", "0.33.0", DROP)
    case = out.add
    dict_cases(out, "the decision", SCHEDULER, DECISION, MANAGER, "manager_kwargs", "use_eagle",
               "", "self.use_eagle_block_drop",
               ("self.use_eagle", "-eagle"))
    case("local-name", True, "the wrapper's result through a local name",
         {SCHEDULER: ((WRAPPER, "            drop = speculative_config.use_eagle_block_drop()\n"
                                "            self.use_eagle_block_drop = drop\n"),)})
    case("inline-gate", True, "the wrapper inlined: needs_eagle_block_drop() and the flag",
         {SCHEDULER: ((WRAPPER, "            self.use_eagle_block_drop = (\n"
                                "                speculative_config.needs_eagle_block_drop()\n"
                                "                and not speculative_config.disable_eagle_block_drop\n"
                                "            )\n"),)})
    for asked, keeps in (("use_eagle_block_drop", True), ("use_eagle", False)):
        case("helper-method" + ("" if keeps else "-eagle"), keeps,
             "the decision made in a method of the scheduler",
             {SCHEDULER: ((WRAPPER, "            self.use_eagle_block_drop = self._block_drop(\n"
                                    "                speculative_config)\n"),
                          ("    def _mamba_block_aligned_split(",
                           "    def _block_drop(self, config):\n"
                           "        return config.%s()\n\n"
                           "    def _mamba_block_aligned_split(" % asked))})
    case("wrapper-to-eagle", False, "use_eagle() where use_eagle_block_drop() was",
         {SCHEDULER: ((WRAPPER, "            self.use_eagle_block_drop = speculative_config.use_eagle()\n"),)})
    case("gate-reverted", False, "needs_eagle_block_drop() no longer excludes DFlash",
         {SPECULATIVE: ((GATE, "        return self.use_eagle()\n"),)}, kind="bool")
    gate_cases(out)
    return out


GATE = ("        return self.use_eagle() and not (self.use_dflash() or "
        "self.use_dspark())\n")
WRAPPER_BODY = "        return self.needs_eagle_block_drop() and not self.disable_eagle_block_drop\n"
SPEC_CLASS_END = "    def use_dflash(self) -> bool:\n"
SPEC_IMPORT = "import copy\n"
# a module function of the config file deciding the drop, with and without a default
DROPS_BLOCK_WITH_DEFAULT = ('def _drops_block(method, own_kv=("dflash", "dspark")):\n'
                            '    return method in ("eagle", "eagle3", "mtp", "dflash", "dspark") '
                            "and method not in own_kv\n")
DROPS_BLOCK = ("def _drops_block(method, own_kv):\n"
               '    return method in ("eagle", "eagle3", "mtp", "dflash") '
               "and method not in own_kv\n")


def gate_cases(out: Cases) -> None:
    """needs_eagle_block_drop() rewritten as a fork's reviewer would: each construct kind
    with cases that keep DFlash out of the drop (pass) and cases that put it back (fail),
    among them rewrites that still name DFlash without excluding it and rewrites that
    exclude it without naming it."""
    def gate(body: str, *more: tuple[str, str]) -> dict:
        return {SPECULATIVE: ((GATE, body),) + more}

    def method(text: str) -> tuple[str, str]:
        return (SPEC_CLASS_END, text + "\n" + SPEC_CLASS_END)

    def module(text: str) -> tuple[str, str]:
        return ("", "\n\n" + text)
    cases = [
        # boolean logic over the config's own predicates
        ("bool", "or-to-and", False, "`or` turned into `and` inside not (...): names DFlash, "
         "does not exclude it",
         gate("        return self.use_eagle() and not (self.use_dflash() and "
              "self.use_dspark())\n")),
        ("bool", "or-instead", False, "use_eagle() or use_dflash(): names DFlash, includes it",
         gate("        return self.use_eagle() or self.use_dflash()\n")),
        ("bool", "de-morgan", True, "De Morgan's form: not use_dflash() and not use_dspark()",
         gate("        return self.use_eagle() and not self.use_dflash() and not "
              "self.use_dspark()\n")),
        ("bool", "dspark-only", False, "only DSpark excluded: DFlash not named, not excluded",
         gate("        return self.use_eagle() and not self.use_dspark()\n")),
        # `in` over literal tuples and sets
        ("in", "allow-list", True, "an allow-list of EAGLE methods: excludes DFlash without "
         "naming it", gate('        return self.method in ("eagle", "eagle3", "mtp")\n')),
        ("in", "allow-set", True, "an allow-list as a set",
         gate('        return self.method in {"eagle", "eagle3", "mtp"}\n')),
        ("in", "allow-list-with-dflash", False, "the allow-list with dflash in it",
         gate('        return self.method in ("eagle", "eagle3", "mtp", "dflash")\n')),
        ("in", "deny-list", True, "use_eagle() and method not in (dflash, dspark)",
         gate('        return self.use_eagle() and self.method not in ("dflash", "dspark")\n')),
        ("in", "deny-list-other", False, "a deny-list naming dspark and ngram, not dflash",
         gate('        return self.use_eagle() and self.method not in ("dspark", "ngram")\n')),
        ("in", "named-allow-list", True, "an allow-list held in a module constant",
         gate("        return self.method in _BLOCK_DROP_METHODS\n",
              (SPEC_IMPORT, SPEC_IMPORT + '_BLOCK_DROP_METHODS = ("eagle", "eagle3", "mtp")\n'))),
        ("in", "named-allow-list-dflash", False, "a module constant allow-list holding dflash",
         gate("        return self.method in _BLOCK_DROP_METHODS\n",
              (SPEC_IMPORT, SPEC_IMPORT + '_BLOCK_DROP_METHODS = ("eagle", "dflash")\n'))),
        # comparisons
        ("compare", "not-equal-chain", True, "method != dflash and != dspark",
         gate('        return self.use_eagle() and self.method != "dflash" and '
              'self.method != "dspark"\n')),
        ("compare", "equal-instead", False, "method == dflash where != was meant",
         gate('        return self.use_eagle() and self.method == "dflash"\n')),
        # conditional expressions
        ("ifexp", "ternary", True, "False if method == dflash else use_eagle()",
         gate('        return False if self.method == "dflash" else self.use_eagle()\n')),
        ("ifexp", "ternary-inverted", False, "use_eagle() if method == dflash else False",
         gate('        return self.use_eagle() if self.method == "dflash" else False\n')),
        # early return, raise, tuple assignment, try/else
        ("control", "early-return", True, "an early return of False for DFlash",
         gate("        if self.use_dflash() or self.use_dspark():\n"
              "            return False\n        return self.use_eagle()\n")),
        ("control", "early-return-true", False, "an early return of True for DFlash",
         gate("        if self.use_dflash():\n            return True\n"
              "        return self.use_eagle() and not self.use_dspark()\n")),
        ("control", "elif-chain", True, "an if/elif chain on the method",
         gate('        if self.method == "dspark":\n            return False\n'
              '        elif self.method == "dflash":\n            return False\n'
              "        else:\n            return self.use_eagle()\n")),
        ("control", "tuple-assignment", True, "the predicates bound by a tuple assignment",
         gate("        eagle, own_kv = self.use_eagle(), (self.use_dflash() or self.use_dspark())\n"
              "        return eagle and not own_kv\n")),
        ("control", "tuple-assignment-swapped", False, "a tuple assignment whose names swap",
         gate("        own_kv, eagle = self.use_eagle(), (self.use_dflash() or self.use_dspark())\n"
              "        return eagle or own_kv\n")),
        ("control", "try-else", True, "the answer returned from a try's else",
         gate("        try:\n            drops = self.use_eagle()\n        except AttributeError:\n"
              "            drops = True\n        else:\n"
              "            drops = drops and not self.use_dflash()\n        return drops\n")),
        ("control", "raise-for-dflash", False, "raises for DFlash: not a decision",
         gate("        if self.use_dflash():\n            raise ValueError(\"dflash\")\n"
              "        return self.use_eagle()\n"), Status.WARN),
        # the config's own methods and properties, getattr with a default
        ("self", "property", True, "a property of the config says which methods own their KV",
         gate("        return self.use_eagle() and not self._own_draft_kv\n",
              method("    @property\n    def _own_draft_kv(self) -> bool:\n"
                     '        return self.method in ("dflash", "dspark")\n'))),
        ("self", "property-wrong", False, "a property naming DFlash's methods wrongly",
         gate("        return self.use_eagle() and not self._own_draft_kv\n",
              method("    @property\n    def _own_draft_kv(self) -> bool:\n"
                     '        return self.method == "dspark"\n'))),
        ("self", "getattr-default", True, "getattr(self, name, default) of a name the class "
         "lacks: the default decides",
         gate('        return self.use_eagle() and not getattr(self, "_keeps_draft_kv", '
              'self.use_dflash())\n')),
        ("self", "getattr-default-wrong", False, "getattr's default does not exclude DFlash",
         gate('        return self.use_eagle() and not getattr(self, "_keeps_draft_kv", '
              'False)\n')),
        ("self", "field-default", True, "a config field's default decides (False)",
         gate("        return self.use_eagle() and not (self.use_dflash() or "
              "self.use_dspark()) and not self.disable_eagle_block_drop\n")),
        # calls bound to the callee's def, module functions, stdlib helpers
        ("call", "module-function", True, "a module function of the config file",
         gate("        return _drops_block(self.method)\n",
              module(DROPS_BLOCK_WITH_DEFAULT))),
        ("call", "module-function-keyword", False, "the default replaced by a keyword",
         gate('        return _drops_block(self.method, own_kv=("dspark",))\n',
              module(DROPS_BLOCK_WITH_DEFAULT))),
        ("call", "positional-star", True, "arguments passed as *args onto the def",
         gate('        return _drops_block(*(self.method, ("dflash",)))\n',
              module(DROPS_BLOCK))),
        ("call", "keywords-dict", False, "**kwargs naming no DFlash",
         gate('        return _drops_block(**{"method": self.method, "own_kv": ()})\n',
              module(DROPS_BLOCK))),
        ("call", "lambda", True, "a lambda applied to the method",
         gate('        return (lambda m: m in ("eagle", "eagle3", "mtp"))(self.method)\n')),
        ("call", "operator-contains", True, "operator.contains over an allow-list",
         gate('        return operator.contains(("eagle", "eagle3", "mtp"), self.method)\n',
              (SPEC_IMPORT, SPEC_IMPORT + "import operator\n"))),
        ("call", "operator-contains-dflash", False, "operator.contains over a list with dflash",
         gate('        return operator.contains(("eagle", "dflash"), self.method)\n',
              (SPEC_IMPORT, SPEC_IMPORT + "import operator\n"))),
        ("call", "partial", True, "a functools.partial binding the excluded methods",
         gate("        return _drops(self.method)\n",
              module("def _drops_for(method, own_kv):\n"
                     '    return method in ("eagle", "eagle3", "mtp", "dflash") '
                     "and method not in own_kv\n\n\n"
                     '_drops = functools.partial(_drops_for, own_kv=("dflash", "dspark"))\n'),
              (SPEC_IMPORT, SPEC_IMPORT + "import functools\n"))),
        ("call", "partial-empty", False, "a functools.partial excluding nothing",
         gate("        return _drops(self.method)\n",
              module("def _drops_for(method, own_kv):\n"
                     '    return method in ("eagle", "eagle3", "mtp", "dflash") '
                     "and method not in own_kv\n\n\n"
                     "_drops = functools.partial(_drops_for, own_kv=())\n"),
              (SPEC_IMPORT, SPEC_IMPORT + "import functools\n"))),
        # what the evaluator cannot decide: a warning naming it, never a verdict
        ("unknown", "draft-config-attribute", False, "a test on the draft model's config: "
         "not evaluated, named", gate("        return self.use_eagle() and not "
                                      "self.draft_model_config.owns_kv\n"), Status.WARN),
        # the wrapper the scheduler asks
        ("wrapper", "wrapper-ignores-gate", False, "use_eagle_block_drop() asks use_eagle(), "
         "not the gate",
         {SPECULATIVE: ((WRAPPER_BODY, "        return self.use_eagle() and not "
                                       "self.disable_eagle_block_drop\n"),)}),
        ("wrapper", "wrapper-inverted-flag", False, "the opt-out flag's default read inverted",
         {SPECULATIVE: ((WRAPPER_BODY, "        return self.needs_eagle_block_drop() or not "
                                       "self.disable_eagle_block_drop\n"),)}),
        ("wrapper", "wrapper-early-return", True, "the wrapper returns early on the flag",
         {SPECULATIVE: ((WRAPPER_BODY, "        if self.disable_eagle_block_drop:\n"
                                       "            return False\n"
                                       "        return self.needs_eagle_block_drop()\n"),)}),
    ]
    cases += [(kind, kind + "-" + id) + tuple(rest)
              for kind, id, *rest in gate_construct_cases(gate, method, module)]
    for kind, id, keeps, what, edits, *expect in cases:
        out.add("gate-" + id, keeps, what, edits, kind=kind,
                **({"expect": expect[0]} if expect else {}))


def gate_construct_cases(gate, method, module) -> list:
    """needs_eagle_block_drop() by construct kind, issue 33: (kind, id, keeps, construct,
    edits[, expect]). The helpers it asks have bodies of several statements; each kind
    holds rewrites naming DFlash without excluding it and rewrites excluding it unnamed."""
    helper = "        return self.use_eagle() and not self._own_kv()\n"

    def own_kv(body: str) -> tuple[str, str]:
        return method("    def _own_kv(self) -> bool:\n" + body)
    contains = (SPEC_IMPORT, SPEC_IMPORT + "import operator\n")
    chain = ("    @property\n    def _own_draft_kv(self) -> bool:\n"
             "        return self._from_hidden_state\n\n"
             "    @property\n    def _from_hidden_state(self) -> bool:\n"
             "        return %s\n")
    return [
        # the gate's own helper: tuple assignment, try/else, early return
        ("nested-helper", "tuple-assignment", True, "a helper binding (method, own) by a "
         "tuple assignment", gate(helper, own_kv(
             '        method, own = self.method, ("dflash", "dspark")\n'
             "        return method in own\n"))),
        ("nested-helper", "tuple-assignment-other", False, "a helper's tuple assignment "
         "naming dflash_legacy, not dflash", gate(helper, own_kv(
             '        method, own = self.method, ("dspark", "dflash_legacy")\n'
             "        return method in own\n"))),
        ("nested-helper", "try-else", True, "a helper answering from a try's else",
         gate(helper, own_kv(
             "        try:\n            method = self.method\n        except AttributeError:\n"
             '            return True\n        else:\n            return method in ("dflash", '
             '"dspark")\n'))),
        ("nested-helper", "try-else-and", False, "a helper's try/else asking dflash and "
         "dspark at once", gate(helper, own_kv(
             "        try:\n            method = self.method\n        except AttributeError:\n"
             '            return True\n        else:\n            return method == "dflash" '
             'and method == "dspark"\n'))),
        ("nested-helper", "early-return", True, "a helper's early return of True for DFlash",
         gate(helper, own_kv('        if self.method == "dflash":\n            return True\n'
                             '        return self.method == "dspark"\n'))),
        ("nested-helper", "early-return-false", False, "a helper's early return of False "
         "for DFlash", gate(helper, own_kv(
             '        if self.method == "dflash":\n            return False\n'
             '        return self.method == "dspark"\n'))),
        ("nested-helper", "module-early-return", True, "a module function returning False "
         "early for DFlash and DSpark", gate("        return _drops_for(self.method)\n", module(
             'def _drops_for(method):\n    if method in ("dflash", "dspark"):\n'
             '        return False\n    return method in ("eagle", "eagle3", "mtp", "dflash")\n'))),
        ("nested-helper", "module-early-return-other", False, "a module function returning "
         "False early for DSpark only", gate("        return _drops_for(self.method)\n", module(
             'def _drops_for(method):\n    if method == "dspark":\n'
             '        return False\n    return method in ("eagle", "eagle3", "mtp", "dflash")\n'))),
        # operator.contains beside the existing allow-list forms: a deny-list, negated
        ("operator", "contains-deny-list", True, "not operator.contains over (dflash, dspark)",
         gate('        return self.use_eagle() and not operator.contains(("dflash", "dspark"), '
              "self.method)\n", contains)),
        ("operator", "not-contains", True, "operator.not_(operator.contains(...)) over the "
         "methods owning their KV", gate(
             '        return self.use_eagle() and operator.not_(operator.contains('
             '("dflash", "dspark"), self.method))\n', contains)),
        ("operator", "contains-or", False, "use_eagle() or operator.contains((dflash,), ...): "
         "names DFlash, includes it", gate(
             '        return self.use_eagle() or operator.contains(("dflash",), self.method)\n',
             contains)),
        ("operator", "contains-deny-other", False, "not operator.contains over (dspark, ngram)",
         gate('        return self.use_eagle() and not operator.contains(("dspark", "ngram"), '
              "self.method)\n", contains)),
        # getattr(self, "method", default)
        ("getattr-method", "allow-list", True, 'getattr(self, "method", "") in the EAGLE '
         "methods: excludes DFlash unnamed",
         gate('        return getattr(self, "method", "") in ("eagle", "eagle3", "mtp")\n')),
        ("getattr-method", "not-equal", True, 'getattr(self, "method", "") != "dflash"',
         gate('        return self.use_eagle() and getattr(self, "method", "") != "dflash" '
              "and not self.use_dspark()\n")),
        ("getattr-method", "default-dflash", False, 'getattr(self, "method", "dflash") != '
         '"dspark": names dflash in the default only',
         gate('        return self.use_eagle() and getattr(self, "method", "dflash") != '
              '"dspark"\n')),
        ("getattr-method", "allow-list-dflash", False, 'getattr(self, "method", "") in '
         "(eagle, dflash)",
         gate('        return getattr(self, "method", "") in ("eagle", "dflash")\n')),
        # a property read through another property
        ("property-chain", "methods", True, "a property chain ending in method in (dflash, "
         "dspark)", gate("        return self.use_eagle() and not self._own_draft_kv\n",
                         method(chain % 'self.method in ("dflash", "dspark")'))),
        ("property-chain", "predicates", True, "a property chain ending in the predicates",
         gate("        return self.use_eagle() and not self._own_draft_kv\n",
              method(chain % "self.use_dflash() or self.use_dspark()"))),
        ("property-chain", "and", False, "a property chain ending in use_dflash() and "
         "use_dspark()", gate("        return self.use_eagle() and not self._own_draft_kv\n",
                              method(chain % "self.use_dflash() and self.use_dspark()"))),
        ("property-chain", "dspark", False, "a property chain ending in DSpark only",
         gate("        return self.use_eagle() and not self._own_draft_kv\n",
              method(chain % 'self.method == "dspark"'))),
        # allow-lists that exclude DFlash without naming it
        ("allow-list", "class-constant", True, "an allow-list held in a class constant",
         gate("        return self.method in self._BLOCK_DROP_METHODS\n",
              method('    _BLOCK_DROP_METHODS = ("eagle", "eagle3", "mtp")\n'))),
        ("allow-list", "class-constant-dflash", False, "a class-constant allow-list holding "
         "dflash", gate("        return self.method in self._BLOCK_DROP_METHODS\n",
                        method('    _BLOCK_DROP_METHODS = ("eagle", "eagle3", "dflash")\n'))),
        ("allow-list", "frozenset", True, "an allow-list built by frozenset(...) at module level",
         gate("        return self.method in _DROPS\n", (SPEC_IMPORT, SPEC_IMPORT +
              '_DROPS = frozenset(("eagle", "eagle3", "mtp"))\n'))),
        ("allow-list", "frozenset-dflash", False, "a frozenset allow-list holding dflash",
         gate("        return self.method in _DROPS\n", (SPEC_IMPORT, SPEC_IMPORT +
              '_DROPS = frozenset(("eagle", "dflash"))\n'))),
        ("allow-list", "dict-get", True, "an allow-list as a dict read with .get(method, False)",
         gate('        return {"eagle": True, "eagle3": True, "mtp": True}.get(self.method, '
              "False)\n")),
        ("allow-list", "dict-get-dflash", False, "a dict allow-list holding dflash",
         gate('        return {"eagle": True, "dflash": True}.get(self.method, False)\n')),
        # DFlash named in a comment, a string, an unused name: the blocks still drop
        ("mention", "comment", False, "use_eagle() with a comment saying DFlash is excluded",
         gate("        return self.use_eagle()  # dflash and dspark keep their blocks\n")),
        ("mention", "docstring", False, "a string naming DFlash's exclusion, then use_eagle()",
         gate('        """Not for dflash: not self.use_dflash()."""\n'
              "        return self.use_eagle()\n")),
        ("mention", "unused-name", False, "not use_dflash() bound to a name never read",
         gate("        keeps = not (self.use_dflash() or self.use_dspark())\n"
              "        return self.use_eagle()\n")),
        ("mention", "logged", False, "use_dflash() logged, not asked",
         gate('        logger.debug("block drop; dflash=%s", self.use_dflash())\n'
              "        return self.use_eagle()\n")),
        ("mention", "used-name", True, "the exclusion bound to a name and read, with a comment",
         gate("        keeps = self.use_dflash() or self.use_dspark()  # dflash keeps its KV\n"
              "        return self.use_eagle() and not keeps\n")),
        ("mention", "comment-kept", True, "the gate kept, a comment naming DFlash beside it",
         gate("        # dflash: see needs_eagle_block_drop's docstring\n" + GATE)),
    ]


def drop_cases_020() -> list[Mutation]:
    return [
        Mutation("drop-020-dict", "0.20.1", DROP, True, "the decision passed in a **dict",
                 {SCHEDULER: (("            use_eagle=self.use_eagle,\n",
                               "            **{\"use_eagle\": self.use_eagle},\n"),)}),
        Mutation("drop-020-gate-added", "0.20.1", DROP, False,
                 "needs_eagle_block_drop() added and asked for the decision",
                 {SPECULATIVE: (("    def use_dflash(self) -> bool:\n"
                                 "        return self.method == \"dflash\"\n",
                                 "    def use_dflash(self) -> bool:\n"
                                 "        return self.method == \"dflash\"\n\n"
                                 "    def needs_eagle_block_drop(self) -> bool:\n"
                                 "        return self.use_eagle() and not self.use_dflash()\n"),),
                  SCHEDULER: (("            use_eagle=self.use_eagle,\n",
                               "            use_eagle=bool(speculative_config and\n"
                               "                           speculative_config.needs_eagle_block_drop()),\n"),)}),
        # use_eagle()'s body inlined: on DFlash's path a constant True reaches the decision
        Mutation("drop-020-predicate-guard", "0.20.1", DROP, True,
                 "use_eagle() inlined as a method test: a constant True on DFlash's path",
                 {SCHEDULER: (("            if speculative_config.use_eagle():\n",
                               "            if speculative_config.method in (\"eagle\", \"eagle3\", \"mtp\", \"dflash\"):\n"),)}),
    ]


# --- constructs the evaluator runs as Python does (issue "verdicts by evaluation") -------
OP_ALIAS = ("import functools\n", "import functools\nimport itertools\nimport operator as op\n")
MIXIN = "vllm/v1/worker/lora_model_runner_mixin.py"
PREDICATE_BODIES = {
    "early-return": ("        spec = self.speculative_config\n        if spec is None:\n"
                     "            return False\n        return spec.method == \"dflash\"\n"),
    "early-return-excludes": ("        spec = self.speculative_config\n"
                              "        if spec.method == \"dflash\":\n            return False\n"
                              "        return True\n"),
    "try-else": ("        try:\n            method = self.speculative_config.method\n"
                 "        except AttributeError:\n            return False\n        else:\n"
                 "            return method == \"dflash\"\n"),
    "tuple-assignment": ("        method, enabled = self.speculative_config.method, True\n"
                         "        return enabled and method == \"dflash\"\n"),
    "raise-otherwise": ("        if self.speculative_config.method != \"dflash\":\n"
                        "            raise ValueError(\"not DFlash\")\n        return True\n"),
    "mentions-dflash": ("        if self.speculative_config.method == \"dflash\":\n            pass\n"
                        "        return self.speculative_config.method == \"eagle3\"\n"),
    "allow-list": "        return self.speculative_config.method in (\"eagle\", \"eagle3\", \"mtp\")\n",
}


def evaluation_cases() -> list[Mutation]:
    """Each construct kind with rewrites that keep the fix and rewrites that break it,
    on the layer offset and the window: values through the standard library, dicts
    keyed by layer, tuple assignments, getattr with a default resolved against the
    class, super() chains, and guards whose predicate is told from its whole body."""
    out = Cases("eval-", "0.33.0", LAYER)
    case = out.add
    def read(expression: str, *more: tuple[str, str]) -> dict:
        return {RUNNER: ((V1_READ, "                layer_ids = %s\n" % expression),
                         OP_ALIAS) + more}
    for call, keeps, tag in (("op.add(i, 1)", True, ""), ("op.add(i, 0)", False, "-zero"),
                             ("op.sub(i + 1, 1)", False, "-undone")):
        case("operator-alias" + tag, keeps, "%s with `import operator as op`" % call,
             {RUNNER: ((V1_READ, V1_READ.replace("i + 1", call)), OP_ALIAS)},
             kind="operator-alias")
    for function, keeps, tag in (("functools.partial(op.add, 1)", True, "partial"),
                                 ("functools.partial(op.add, 0)", False, "partial-zero"),
                                 ("lambda i: i + 1", True, "lambda"),
                                 ("lambda i: i", False, "lambda-identity")):
        case("map-" + tag, keeps, "map(%s, ids)" % function,
             read("list(map(%s, %s))" % (function, IDS)), kind="map")
    for amount, keeps, tag in ((1, True, ""), (0, False, "-zero")):
        case("map-operator-repeat" + tag, keeps, "map(op.add, ids, itertools.repeat(%d))"
             % amount, read("list(map(op.add, %s, itertools.repeat(%d)))" % (IDS, amount)),
             kind="map")
        case("map-helper" + tag, keeps, "map over a module function adding %d" % amount,
             read("list(map(_shift_aux_id, %s))" % IDS,
                  ("", "\n\ndef _shift_aux_id(i):\n    return i + %d\n" % amount)), kind="map")
    for expression, keeps, tag, what in (
            ("list({i: i + 1 for i in %s}.values())", True, "values", "the values of {i: i + 1}"),
            ("list({i: i for i in %s}.values())", False, "values-unshifted", "the values of {i: i}"),
            ("list({i: i + 1 for i in %s})", False, "keys", "the keys of {i: i + 1} (unshifted)"),
            ("sorted({i: i + 1 for i in %s}.keys())", False, "keys-view", "the keys() view")):
        case("dict-comprehension-" + tag, keeps, what, read(expression % IDS),
             kind="dict-comprehension")
    lookup = ("                shifted = {i: i + %d for i in %s}\n"
              "                layer_ids = [shifted[i] for i in %s]\n")
    for amount, keeps, tag in ((1, True, ""), (0, False, "-unshifted")):
        case("dict-comprehension-lookup" + tag, keeps, "each id looked up in {i: i + %d}"
             % amount, {RUNNER: ((V1_READ, lookup % (amount, IDS, IDS)),)},
             kind="dict-comprehension")
    unpack = ("                raw, offset = (%s), %d\n"
              "                layer_ids = [i + offset for i in raw]\n")
    for amount, keeps, tag in ((1, True, ""), (0, False, "-zero")):
        case("tuple-assignment" + tag, keeps, "ids and an offset of %d unpacked together"
             % amount, {RUNNER: ((V1_READ, unpack % (IDS, amount)),)}, kind="tuple-assignment")
    swap = ("                offset, other = %d, %d\n                offset, other = other, offset\n"
            "                layer_ids = [i + offset for i in (%s)]\n")
    case("tuple-swap", False, "a swap leaves the offset 0",
         {RUNNER: ((V1_READ, swap % (1, 0, IDS)),)}, kind="tuple-assignment")
    case("tuple-swap-back", True, "a swap leaves the offset 1",
         {RUNNER: ((V1_READ, swap % (0, 1, IDS)),)}, kind="tuple-assignment")
    # getattr(self, name, default): the runner's bases are all in the tree
    def offset_by(expression: str, *more: tuple[str, str]) -> dict:
        return {RUNNER: ((V1_READ, V1_READ.replace("i + 1", "i + " + expression)),) + more}
    case("getattr-default", True, "getattr(self, name, 1) of an attribute no class has",
         offset_by('getattr(self, "_aux_shift", 1)'), kind="getattr-default")
    case("getattr-default-zero", False, "getattr(self, name, 0) of an attribute no class has",
         offset_by('getattr(self, "_aux_shift", 0)'), kind="getattr-default")
    case("getattr-class-constant", True, "getattr(self, name, 0) of a class constant 1",
         offset_by('getattr(self, "_AUX_SHIFT", 0)', (CLASS_END, "    _AUX_SHIFT = 1\n\n" +
                                                      CLASS_END)), kind="getattr-default")
    case("getattr-class-constant-zero", False, "getattr(self, name, 1) of a class constant 0",
         offset_by('getattr(self, "_AUX_SHIFT", 1)', (CLASS_END, "    _AUX_SHIFT = 0\n\n" +
                                                      CLASS_END)), kind="getattr-default")
    case("getattr-default-set-elsewhere", False, "getattr(self, name, 1) of an attribute "
         "another function sets to 0 on the runner: not the default",
         offset_by('getattr(self, "_aux_shift", 1)',
                   ("", "\n\ndef _unshift(runner):\n    runner._aux_shift = 0\n")),
         expect=Status.WARN, kind="getattr-default")
    case("getattr-default-subclass-constant", False, "getattr(self, name, 1) of an attribute "
         "a subclass of the runner sets to 0: not the default",
         offset_by('getattr(self, "_aux_shift", 1)',
                   ("", "\n\nclass _UnshiftedRunner(GPUModelRunner):\n    _aux_shift = 0\n")),
         kind="getattr-default")  # run, the subclass returns the ids unshifted
    case("getattr-class-constant-overridden", False, "getattr(self, name, 1) of a class "
         "constant 1 that a subclass of the runner sets to 0",
         offset_by('getattr(self, "_AUX_SHIFT", 1)',
                   (CLASS_END, "    _AUX_SHIFT = 1\n\n" + CLASS_END),
                   ("", "\n\nclass _UnshiftedRunner(GPUModelRunner):\n    _AUX_SHIFT = 0\n")),
         kind="getattr-default")  # run, the subclass returns the ids unshifted
    # super() reaches a base's helper; `self` there is still the runner
    def through_super(shift: int) -> dict:
        return {RUNNER: ((V1_READ, "                layer_ids = super()._dflash_aux(%s)\n" % IDS),
                         (CLASS_END, "    def _aux_shift(self, i):\n        return i + %d\n\n"
                          % shift + CLASS_END)),
                MIXIN: (("class LoRAModelRunnerMixin:\n",
                         "class LoRAModelRunnerMixin:\n    def _dflash_aux(self, ids):\n"
                         "        return [self._aux_shift(i) for i in ids]\n\n"
                         "    def _aux_shift(self, i):\n        return i\n\n"),)}
    case("super-helper", True, "super()'s helper calls the runner's own +1", through_super(1),
         kind="super")
    case("super-helper-unshifted", False, "super()'s helper calls the runner's +0",
         through_super(0), kind="super")
    # calls bound as Python binds them: a *spread of a known tuple, keyword-only defaults
    spread = ("                layer_ids = _shift_by(*((%s), %d))\n", "\n\ndef _shift_by(ids, n):\n"
              "    return [i + n for i in ids]\n")
    for amount, keeps, tag in ((1, True, ""), (0, False, "-zero")):
        case("star-args" + tag, keeps, "ids and %d passed as *(ids, %d)" % (amount, amount),
             {RUNNER: ((V1_READ, spread[0] % (IDS, amount)), ("", spread[1]))}, kind="binding")
        case("keyword-only-default" + tag, keeps, "a keyword-only parameter defaulting to %d"
             % amount, {RUNNER: ((V1_READ, "                layer_ids = _shift_by(%s)\n" % IDS),
                                 ("", "\n\ndef _shift_by(ids, *, n=%d):\n"
                                      "    return [i + n for i in ids]\n" % amount))},
             kind="binding")
    # PR #40898's guarded form, the V1 test a predicate method told from its whole body
    for name, body in sorted(PREDICATE_BODIES.items()):
        excludes = name in ("early-return-excludes", "mentions-dflash", "allow-list")
        for shifted_first in (True, False):
            # the V2 runner shifts on DFlash's path either way
            edits = guarded("self._is_dflash_run()", 'spec_config.method %s "dflash"'
                            % ("==" if shifted_first else "!="), shifted_first)
            edits[RUNNER] = edits[RUNNER] + (
                (CLASS_END, "    def _is_dflash_run(self):\n" + body + "\n" + CLASS_END),)
            keeps = shifted_first != excludes
            case("predicate-%s%s" % (name, "" if shifted_first else "-swapped"), keeps,
                 "a guard whose predicate (%s) is %s for DFlash, shifting when it holds%s" % (
                     name, "false" if excludes else "true",
                     "" if shifted_first else ", swapped"), edits, kind="predicate")
    # 0.20.1: the fix added through the same constructs
    fixed = Cases("eval-020-", "0.20.1", LAYER)
    plain = '                layer_ids = dflash_config.get("target_layer_ids")\n'
    fixed.add("map-partial-added", False, "the +1 added as map(partial(op.add, 1), ids)",
              {RUNNER: ((plain, "                layer_ids = list(map(functools.partial("
                         "op.add, 1), dflash_config.get(\"target_layer_ids\") or []))\n"),
                        OP_ALIAS)}, kind="map")
    fixed.add("dict-comprehension-added", False, "the +1 added as {i: i + 1}.values()",
              {RUNNER: ((plain, "                layer_ids = list({i: i + 1 for i in (dflash_config"
                         ".get(\"target_layer_ids\") or [])}.values())\n"),)},
              kind="dict-comprehension")
    fixed.add("dict-comprehension-keys", True, "{i: i + 1}'s keys: still unshifted",
              {RUNNER: ((plain, "                layer_ids = list({i: i + 1 for i in (dflash_config"
                         ".get(\"target_layer_ids\") or [])})\n"),)}, kind="dict-comprehension")
    # the window bound in a functools.partial of Attention
    window = Cases("eval-swa-", "0.33.0", SWA)
    for passed, keeps, tag in (("sliding_window", True, ""), ("None", False, "-none")):
        window.add("partial" + tag, keeps, "functools.partial(Attention, "
                   "per_layer_sliding_window=%s)" % passed,
                   {DRAFTER: ((ATTN, "        make_attn = functools.partial(Attention, "
                               "per_layer_sliding_window=%s)\n        self.attn = make_attn(\n"
                               % passed), (WINDOW, ""), ("", "\nimport functools\n"))},
                   kind="partial")
    # a chain of Attention's subclasses: the outer one's super().__init__ is the inner's
    chain = ("\n\nclass _Inner(Attention):\n"
             "    def __init__(self, num_heads, head_size, scale, window=None, **kwargs):\n"
             "        super().__init__(num_heads, head_size, scale,\n"
             "                         per_layer_sliding_window=window, **kwargs)\n"
             "\n\nclass _Middle(_Inner):\n    pass\n")
    outer = ("\n\nclass _Outer(_Middle):\n"
             "    def __init__(self, num_heads, head_size, scale, window=None, **kwargs):\n"
             "        super().__init__(num_heads, head_size, scale, window=%s, **kwargs)\n")
    for built, passed, keeps, tag in (("_Outer", "window", True, ""),
                                      ("_Outer", "None", False, "-outer-drops"),
                                      ("_Middle", None, True, "-inherited")):
        window.add("subclass-chain" + tag, keeps, "%s(window=...) built, its chain to "
                   "Attention passing %s" % (built, passed or "the window on"),
                   {DRAFTER: ((ATTN, "        self.attn = %s(\n" % built),
                              (WINDOW, "            window=sliding_window,\n"),
                              ("", chain + (outer % passed if passed else "")))},
                   kind="subclass")
    # a subclass whose class header is wrapped over two lines (as formatters write it)
    wrapped = ("\n\nclass _WindowedAttention(\n        Attention):\n"
               "    def __init__(self, num_heads, head_size, scale, window=None, **kwargs):\n"
               "        super().__init__(num_heads, head_size, scale,\n"
               "                         per_layer_sliding_window=%s, **kwargs)\n")
    for passed, keeps, tag in (("window", True, ""), ("None", False, "-none")):
        window.add("subclass-wrapped-header" + tag, keeps, "a subclass of Attention whose "
                   "header is wrapped, passing %s" % passed,
                   {DRAFTER: ((ATTN, "        self.attn = _WindowedAttention(\n"),
                              (WINDOW, "            window=sliding_window,\n"),
                              ("", wrapped % passed))}, kind="subclass")
    # a subclass passing **kwargs on: each key what its callers pass, unless it changes it
    kwargs_sub = ("\n\nclass _WindowedAttention(Attention):\n"
                  "    def __init__(self, *args, **kwargs):\n%s"
                  "        super().__init__(*args, %s**kwargs)\n")
    for tag, keeps, before, passed, what in (
            ("", True, "", "", "passed on untouched"),
            ("-popped", False, '        kwargs.pop("per_layer_sliding_window", None)\n', "",
             "with the window popped"),
            ("-deleted", False, '        del kwargs["per_layer_sliding_window"]\n', "",
             "with the window deleted"),
            ("-popped-and-passed", True,
             '        window = kwargs.pop("per_layer_sliding_window", None)\n',
             "per_layer_sliding_window=window, ", "the window popped and passed by keyword"),
            ("-set-none", False, '        kwargs["per_layer_sliding_window"] = None\n', "",
             "the window replaced by None")):
        window.add("subclass-kwargs" + tag, keeps, "a subclass's **kwargs %s" % what,
                   {DRAFTER: ((ATTN, "        self.attn = _WindowedAttention(\n"),
                              ("", kwargs_sub % (before, passed)))}, kind="kwargs")
    window.add("subclass-kwargs-updated", False, "a subclass's **kwargs updated by a call: "
               "its keys unknown", {DRAFTER: (
                   (ATTN, "        self.attn = _WindowedAttention(\n"),
                   ("", kwargs_sub % ("        kwargs.update(per_layer_sliding_window=None)\n",
                                      "")))}, kind="kwargs")
    window.add("subclass-keyword-only", True, "a subclass's keyword-only window set into "
               "**kwargs", {DRAFTER: (
                   (ATTN, "        self.attn = _WindowedAttention(\n"),
                   (WINDOW, "            window=sliding_window,\n"),
                   ("", "\n\nclass _WindowedAttention(Attention):\n"
                        "    def __init__(self, *args, window=None, **kwargs):\n"
                        "        kwargs[\"per_layer_sliding_window\"] = window\n"
                        "        super().__init__(*args, **kwargs)\n"))}, kind="kwargs")
    window.add("getattr-class-constant-none", False, "getattr(self, name, window) of a class "
               "constant None", {DRAFTER: (
                   (WINDOW, "            per_layer_sliding_window=getattr(self, \"NO_WINDOW\", "
                            "sliding_window),\n"),
                   ('    Adapted from Qwen3Attention."""\n',
                    '    Adapted from Qwen3Attention."""\n\n    NO_WINDOW = None\n'))},
               kind="getattr-default")
    return list(out) + list(fixed) + list(window)


DECODER_RESOLVE = "        sliding_window, causal = _resolve_layer_attention(config, layer_idx)\n"
SLIDING_NAME = '_SLIDING_ATTENTION = "sliding_attention"\n'
RESOLVE_RETURN = "    return sliding_window, _dflash_layer_causal(config, layer_idx)\n"
ATTENTION_WINDOW = "            per_layer_sliding_window=sliding_window,\n"
GATE = "        return self.use_eagle() and not (self.use_dflash() or self.use_dspark())\n"


def held_out_cases() -> list[Mutation]:
    """Rewrites of the kinds the static readers missed (issue 41), held out of their
    development: each decided by running the code."""
    out = Cases("held-", "0.33.0", SWA)
    out.add("swa-read-before-set", False, "the window read from self before the line that "
            "sets it", {DRAFTER: ((DECODER_RESOLVE,
                                   '        sliding_window = getattr(self, "_window", None)\n'
                                   "        self._window, causal = "
                                   "_resolve_layer_attention(config, layer_idx)\n"),)},
            kind="held-out")
    out.add("swa-layer-index-off-by-one", False, "layer_types read one layer early",
            {DRAFTER: (("        is_sliding = layer_types[layer_idx] == _SLIDING_ATTENTION\n",
                        "        is_sliding = layer_types[layer_idx - 1] == _SLIDING_ATTENTION\n"),)},
            kind="held-out")
    out.add("swa-type-name-no-layer-has", False, "a layer-type name no layer has",
            {DRAFTER: ((SLIDING_NAME, '_SLIDING_ATTENTION = "sliding_window_attention"\n'),)},
            kind="held-out")
    out.add("swa-pair-swapped", False, "the returned (window, causal) pair in the wrong order",
            {DRAFTER: ((RESOLVE_RETURN,
                        "    return _dflash_layer_causal(config, layer_idx), sliding_window\n"),)},
            kind="held-out")
    out.add("swa-namedtuple-classmethod", True, "a NamedTuple's classmethod resolves the "
            "layer", {DRAFTER: ((DECODER_RESOLVE,
                                 "        sliding_window, causal = _LayerAttention.of(config, "
                                 "layer_idx)\n"),
                                ("", "\n\nfrom typing import NamedTuple\n\n\n"
                                     "class _LayerAttention(NamedTuple):\n"
                                     "    window: int | None\n"
                                     "    causal: bool\n\n"
                                     "    @classmethod\n"
                                     "    def of(cls, config, layer_idx):\n"
                                     "        return cls(*_resolve_layer_attention(config, "
                                     "layer_idx))\n"))},
            kind="held-out")
    out.add("swa-dict-merge-kwargs", True, "the window passed in a dict merge as **kwargs",
            {DRAFTER: ((ATTENTION_WINDOW,
                        '            **({"per_layer_sliding_window": sliding_window} | {}),\n'),)},
            kind="kwargs")
    out.add("swa-dict-merge-kwargs-none", False, "a dict merge whose right side overrides "
            "the window with None", {DRAFTER: ((ATTENTION_WINDOW,
                                               '            **({"per_layer_sliding_window": '
                                               'sliding_window} | {"per_layer_sliding_window": '
                                               "None}),\n"),)},
            kind="kwargs")
    layers = Cases("held-", "0.33.0", LAYER)
    layers.add("offset-lambda-table", True, "a table of lambdas shifts the ids",
               v1(v1_lines('_shift = {"dflash": lambda ids: [i + 1 for i in ids]}',
                           'layer_ids = _shift["dflash"](dflash_config.get("target_layer_ids")'
                           " or [])")), kind="lambda-table")
    layers.add("offset-lambda-table-wrong-key", False, "a table of lambdas whose DFlash entry "
               "does not shift", v1(v1_lines(
                   '_shift = {"dflash": lambda ids: list(ids), "eagle": lambda ids: '
                   "[i + 1 for i in ids]}",
                   'layer_ids = _shift["dflash"](dflash_config.get("target_layer_ids") or [])')),
               kind="lambda-table")
    layers.add("offset-enumerate", True, "enumerate over the ids",
               v1(v1_lines('layer_ids = [i + 1 for _, i in enumerate('
                           'dflash_config.get("target_layer_ids") or [])]')), kind="enumerate")
    layers.add("offset-enumerate-index", False, "enumerate's index shifted instead of the id",
               v1(v1_lines('layer_ids = [n + 1 for n, i in enumerate('
                           'dflash_config.get("target_layer_ids") or [])]')), kind="enumerate")
    drops = Cases("held-", "0.33.0", DROP)
    drops.add("drop-any-generator", True, "a generator inside any() excludes DFlash",
              {SPECULATIVE: ((GATE, "        return self.use_eagle() and not any(m == "
                                    "self.method for m in (\"dflash\", \"dspark\"))\n"),)},
              kind="generator")
    drops.add("drop-any-generator-without-dflash", False, "a generator inside any() that "
              "leaves DFlash in the drop", {SPECULATIVE: ((GATE, "        return self.use_eagle() "
                                                                 "and not any(m == self.method "
                                                                 "for m in (\"dspark\",))\n"),)},
              kind="generator")
    drops.add("drop-enum", True, "an Enum of the drafters that skip the drop",
              {SPECULATIVE: ((GATE, "        return self.use_eagle() and self.method not in "
                                    "{d.value for d in _NoDrop}\n"),
                             ("", "\n\nimport enum\n\n\nclass _NoDrop(enum.Enum):\n"
                                  "    DFLASH = \"dflash\"\n    DSPARK = \"dspark\"\n"))},
              kind="enum")
    drops.add("drop-enum-without-dflash", False, "an Enum of the drafters that skip the "
              "drop, without DFlash", {SPECULATIVE: ((GATE, "        return self.use_eagle() and "
                                                            "self.method not in {d.value for d "
                                                            "in _NoDrop}\n"),
                                                     ("", "\n\nimport enum\n\n\nclass "
                                                          "_NoDrop(enum.Enum):\n"
                                                          "    DSPARK = \"dspark\"\n"))},
              kind="enum")
    return out + layers + drops


def every_case() -> list[Mutation]:
    return (offset_cases() + offset_cases_020() + swa_cases() + swa_cases_020() +
            drop_cases() + drop_cases_020() + evaluation_cases() + held_out_cases())


# Cases whose verdict is still wrong, kept out of corpus() with what the executor must
# learn (none today: the cases the static readers could not decide run with the rest).
PENDING_REASONS: dict[str, str] = {}


def corpus() -> list[Mutation]:
    """The cases the benchmark and the tests run: every case but the PENDING ones."""
    return [m for m in every_case() if m.id not in PENDING_REASONS]


# the cases a dataflow change must first learn (see PENDING_REASONS), never in corpus()
PENDING = [m for m in every_case() if m.id in PENDING_REASONS]


def vacuous(mutation: Mutation, result) -> bool:
    """A layer-offset pass whose evidence comes from none of the runner files the
    rewrite edited: the rewritten read was not found, and another runner passed alone."""
    if mutation.check != LAYER or result.status != Status.PASS:
        return False
    edited = set(mutation.edits) & {RUNNER, V2}
    return bool(edited) and not edited <= {e.file for e in result.evidence}


def link_tree(source: str, target: str) -> str:
    """A copy of a tree made of hard links: an edited file is replaced, never written
    through into the cached original."""
    shutil.copytree(source, target, symlinks=True, copy_function=os.link)
    return target


class MutableRelease:
    """One linked copy of a release's unpacked tree; each mutation is applied, probed
    and undone in it (copying the tree per mutation would cost more than probing)."""

    def __init__(self, version: str, workdir: str):
        self.original = unpacked(version)
        self.root = link_tree(self.original, os.path.join(workdir, "vllm-" + version))
        self.site = os.path.join(self.root, "lib", "python3", "site-packages")
        self.original_site = os.path.join(self.original, "lib", "python3", "site-packages")

    @contextmanager
    def apply(self, mutation: Mutation) -> Iterator[str]:
        """Edit the tree (each `old` must be found), yield its root, restore it."""
        touched = []
        try:
            for rel, edits in mutation.edits.items():
                path = os.path.join(self.site, rel)
                text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
                for old, new in edits:
                    if old:
                        if old not in text:
                            raise ValueError("%s: %s does not hold %r" % (mutation.id, rel, old))
                        text = text.replace(old, new, 1)
                    else:
                        text += new
                touched.append(rel)
                if os.path.exists(path):
                    os.unlink(path)
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(text)
            yield self.root
        finally:
            for rel in touched:
                path = os.path.join(self.site, rel)
                os.unlink(path)
                original = os.path.join(self.original_site, rel)
                if os.path.exists(original):
                    os.link(original, path)
