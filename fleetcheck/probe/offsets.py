"""key-offset: how much is added to ids read under a config key, followed through names
and comprehensions inside one function; tells +1 from none and from +1 applied twice."""

import ast

from fleetcheck.probe.patterns import evidence_text

PASS_THROUGH_CALLS = {"tuple", "list", "sorted"}
PASS_THROUGH_METHODS = {"array", "asarray", "tensor", "as_tensor", "copy"}


class OffsetTracker(object):
    """Follows values read under `key` through one function: names they are assigned to,
    comprehensions that add a constant to each element. Reports the total offset each
    value carries, so `+1` once, `+1` twice and no offset are told apart."""

    def __init__(self, key):
        self.key = key

    def is_source(self, node):
        if isinstance(node, ast.Subscript):
            index = node.slice
            if isinstance(index, ast.Index):  # Python 3.8
                index = index.value
            return isinstance(index, ast.Constant) and index.value == self.key
        if isinstance(node, ast.Call):
            return any(isinstance(arg, ast.Constant) and arg.value == self.key
                       for arg in node.args)
        return False

    def offset(self, node, env):
        """(offset, first line, last line of the transform), or None when the value does
        not carry the ids."""
        if self.is_source(node):
            return (0, node.lineno, getattr(node, "end_lineno", node.lineno))
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.BoolOp):
            found = [self.offset(value, env) for value in node.values]
            found = [f for f in found if f is not None]
            return max(found) if found else None
        if isinstance(node, ast.IfExp):
            found = [self.offset(value, env) for value in (node.body, node.orelse)]
            found = [f for f in found if f is not None]
            return max(found) if found else None
        if isinstance(node, ast.Call) and self.passes_through(node.func) and node.args:
            return self.offset(node.args[0], env)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "map" and len(node.args) == 2 and \
                isinstance(node.args[0], ast.Lambda) and len(node.args[0].args.args) == 1:
            inner = self.offset(node.args[1], env)
            if inner is None:
                return None
            added = self.added_constant(node.args[0].body, node.args[0].args.args[0].arg)
            return inner if added is None else self.shifted(inner, added, node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            # an array of ids plus a constant (numpy / torch style)
            for ids, const in ((node.left, node.right), (node.right, node.left)):
                inner = self.offset(ids, env)
                if inner is not None and isinstance(const, ast.Constant) and \
                        isinstance(const.value, int) and not isinstance(const.value, bool):
                    return self.shifted(inner, const.value, node)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and \
                len(node.generators) == 1:
            gen = node.generators[0]
            inner = self.offset(gen.iter, env)
            if inner is None or not isinstance(gen.target, ast.Name):
                return None
            added = self.added_constant(node.elt, gen.target.id)
            return inner if added is None else self.shifted(inner, added, node)
        return None

    @staticmethod
    def passes_through(func):
        """Calls that keep the ids as they are: tuple(x), list(x), np.asarray(x), ..."""
        if isinstance(func, ast.Name):
            return func.id in PASS_THROUGH_CALLS
        return isinstance(func, ast.Attribute) and func.attr in PASS_THROUGH_METHODS

    @staticmethod
    def shifted(inner, added, node):
        return (inner[0] + added, node.lineno, getattr(node, "end_lineno", node.lineno))

    def loop_append(self, loop, env):
        """`for x in ids: out.append(x + 1)`: `out` carries the ids shifted."""
        inner = self.offset(loop.iter, env)
        if inner is None or not isinstance(loop.target, ast.Name):
            return
        for statement in loop.body:
            call = getattr(statement, "value", None)
            if isinstance(statement, ast.Expr) and isinstance(call, ast.Call) and \
                    isinstance(call.func, ast.Attribute) and call.func.attr == "append" and \
                    isinstance(call.func.value, ast.Name) and len(call.args) == 1:
                added = self.added_constant(call.args[0], loop.target.id)
                env[call.func.value.id] = inner if added is None else \
                    self.shifted(inner, added, loop)

    @staticmethod
    def added_constant(elt, var):
        if isinstance(elt, ast.BinOp) and isinstance(elt.op, (ast.Add, ast.Sub)):
            pairs = ((elt.left, elt.right), (elt.right, elt.left))
            for name_side, const_side in pairs:
                if isinstance(name_side, ast.Name) and name_side.id == var and \
                        isinstance(const_side, ast.Constant) and \
                        isinstance(const_side.value, int):
                    if isinstance(elt.op, ast.Sub):
                        return -const_side.value if name_side is elt.left else None
                    return const_side.value
        return None

    def function_offsets(self, func):
        """Offsets of every value derived from the key inside one function."""
        env = {}
        seen = []
        statements = sorted((n for n in ast.walk(func) if isinstance(n, ast.stmt)),
                            key=lambda n: (n.lineno, n.col_offset))
        for node in statements:
            if isinstance(node, (ast.For, ast.AsyncFor)):
                self.loop_append(node, env)
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return, ast.Expr)) and \
                    getattr(node, "value", None) is not None:
                found = self.offset(node.value, env)
                if found is None:
                    continue
                seen.append(found)
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [getattr(node, "target", None)]
                for target in targets:
                    if isinstance(target, ast.Name):
                        env[target.id] = found
        return seen

    def scan_tree(self, rel, tree, lines, line_offset=0):
        """One finding per function that handles the key: the largest offset it applies."""
        results = []
        ordered = sorted((n for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
                         key=lambda n: n.lineno)
        for func in ordered:
            offsets = self.function_offsets(func)
            if not offsets:
                continue
            total, line, end = min(offsets, key=lambda item: (-item[0], item[1]))
            line, end = line + line_offset, end + line_offset
            results.append({"file": rel, "line": line, "function": func.name,
                            "offset": total, "text": evidence_text(lines, line, end)})
        return results

    def scan(self, source_file):
        """Parse only the functions around the key's occurrences (a 250 KB runner file
        holds one or two); the whole file when a block cannot be cut out cleanly."""
        results = []
        seen = set()
        for line in source_file.hit_lines(self.key):
            block = source_file.enclosing_function(line)
            if block is None or block[0] in seen:
                continue
            seen.add(block[0])
            try:
                tree = ast.parse(block[1], source_file.rel)
            except (SyntaxError, ValueError):
                tree = ast.parse(source_file.text, source_file.rel)
                return self.scan_tree(source_file.rel, tree, source_file.lines)
            results.extend(self.scan_tree(source_file.rel, tree, source_file.lines,
                                          block[0] - 1))
        return results


# ---------------------------------------------------------------------------------------
# Running the plan's signatures
