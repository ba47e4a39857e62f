"""What the flows of one trace share: the question, the partials and tests they bound,
the predicates told for DFlash, the memo of helpers followed, the files examined and
the findings; and the limits every trace keeps."""

from fleetcheck.probe.codebase import FunctionRef

MAX_CALL_DEPTH = 4
MAX_FINDINGS = 40


class TraceState(object):
    def __init__(self, codebase, question, files=()):
        self.codebase = codebase
        self.question = question
        self.files = files  # the finder's files: where subclasses are looked for
        self.partials = []  # (flow, function expression, bound args, bound keywords)
        self.predicates = {}  # function key -> what it returns for DFlash
        self.predicate_refs = {}  # call site -> the predicate it calls
        self.tests = []  # (flow, expression, env) of each test bound to a name
        self.told = {}  # index in tests -> what the test is for DFlash
        self.stdlib_mentions = {}  # (file, module) -> does it import it, from it
        self.findings = []
        self.memo = {}
        self.examined = set()

    def functions_around(self, source, lines):
        """(text, FunctionRef) of each function holding one of the lines, once each."""
        seen = set()
        for line in lines:
            block = source.enclosing_function(line)
            if block is None or block[0] in seen:
                continue
            seen.add(block[0])
            first, node = source.parsed_function(block[0])
            if node is None:
                raise ValueError("cannot parse the function at line %d" % block[0])
            cls = source.enclosing_class(block[0])
            yield block[1], FunctionRef(source.rel, node.name, node, first - 1,
                                        (source.rel, cls) if cls else None)
