"""The abstract interpreter behind the fix verdicts, for what a grep cannot prove.

`trace(codebase, entry, question)` runs one question over the install's tree. The
question is an object (question.py: where its flows start, what each construct means
for it, what it finds); the interpreter is the same for every question:

- flow.py: one function's abstract execution, joining
  statements.py (assignments, branches, loops, `match`, `try`, `return`, `raise`),
  expressions.py (names, keys, subscripts, displays, comprehensions, lambdas),
  calls.py (builtins and the standard library that carry values, functools.partial,
  `**kwargs` dicts of known keys, and the helpers a call reaches, found by
  codebase.Scope, and back) and paths.py (path conditions told for DFlash, so a branch
  DFlash never takes is no DFlash path);
- values.py: the abstract values, one frozen kind per fact;
- state.py: what a trace's flows share.

The questions: key_offset.KeyOffset (the constant added to ids read under a key on
their way out) and value_source.ValueSource (what reaches one argument of a call).
Steps of evidence are (file, line, step, text).
"""

from fleetcheck.probe.trace.state import TraceState


def trace(codebase, entry, question, files=(), errors=None):
    """The question's findings over the tree, and the files its flows read: flows start
    in each file of `entry` (the files holding the finder's needle, met in order), and
    `files` are the finder's (where subclasses are looked for). A file the interpreter
    cannot run is an error appended to `errors` (never a pass), and the others go on."""
    state = TraceState(codebase, question, files)
    errors = [] if errors is None else errors
    for source in entry:
        try:
            question.examine(state, source)
        except (SyntaxError, ValueError, RecursionError) as exc:
            errors.append("%s: cannot parse: %s" % (source.rel, exc))
        except Exception as exc:  # a tree the interpreter does not expect: an error
            errors.append("%s: dataflow failed (%s: %s)" % (source.rel, type(exc).__name__,
                                                            exc))
    return question.finish(state), state.examined
