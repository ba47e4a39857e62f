"""One source file as the finders see it: raw bytes (hashed once, for the integrity
check), where a needle occurs, and the windows worth lexing or parsing around it."""

import bisect
import hashlib
import itertools
import re

from fleetcheck.probe.lexer import lex

BLOCK_START = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]")
BLOCK_WORDS = ("def", "class", "async")
DEF_LINE = re.compile(r"(?:async\s+)?def\s")
WINDOW_BACK = 300
TRIPLE_QUOTE = re.compile(r"\"\"\"|\'\'\'")


def is_word_char(char):
    """Can this character continue an identifier? (The lexer's \\w, unicode-aware.)"""
    return char.isalnum() or char == "_"


class SourceFile(object):
    def __init__(self, rel, data):
        self.rel = rel
        self.data = data
        self._sha256 = None
        self._text = None
        self._lines = None
        self._starts = None
        self._tokens = {}
        self._tree = None
        self.examined = False  # a needle was found here: the file is hashed against RECORD

    @property
    def sha256(self):
        """Computed on demand: only the files a needle was found in are hashed."""
        if self._sha256 is None:
            self._sha256 = hashlib.sha256(self.data).digest()
        return self._sha256

    @property
    def text(self):
        if self._text is None:
            self._text = self.data.decode("utf-8", "replace")
        return self._text

    @property
    def lines(self):
        if self._lines is None:
            self._lines = self.text.split("\n")
        return self._lines

    def contains(self, needle):
        return needle is None or needle.encode("utf-8") in self.data

    def hit_lines(self, needle, whole_word=False):
        """1-based lines where the needle occurs; with whole_word, only where it is a whole
        identifier (`use_eagle` is not a hit inside `use_eagle_block_drop`)."""
        found = []
        text = self.text
        end = len(needle)
        position = text.find(needle)
        while position >= 0:
            if not whole_word or not (
                    (position and is_word_char(text[position - 1])) or
                    is_word_char(text[position + end:position + end + 1])):
                line = self.line_of(position)
                if not found or found[-1] != line:
                    found.append(line)
            position = text.find(needle, position + end)
        return found

    def line_of(self, position):
        """1-based line of a character offset."""
        if self._starts is None:
            self._starts = [0]
            self._starts.extend(itertools.accumulate(len(line) + 1 for line in self.lines))
        return bisect.bisect_right(self._starts, position)

    def safe_start(self, line, back):
        """A line at most `back` lines above `line` where lexing can start: one outside any
        string literal. The nearest def/class line is safe; a later line is safe when an
        even number of triple quotes lies between the two (no docstring is open there)."""
        lines = self.lines
        self.line_of(0)  # line offsets, for the triple-quote count below
        block = 1
        for index in range(line - 1, max(-1, line - 1 - WINDOW_BACK), -1):
            if lines[index].lstrip().startswith(BLOCK_WORDS) and BLOCK_START.match(lines[index]):
                block = index + 1
                break
        candidate = max(block, line - back)
        if candidate > block:
            between = self.text[self._starts[block - 1]:self._starts[candidate - 1]]
            if len(TRIPLE_QUOTE.findall(between)) % 2:
                return block
        return candidate

    def tokens_from(self, line, stop_line, extra):
        """Tokens from the start of `line` until `extra` tokens after `stop_line`."""
        key = (line, stop_line, extra)
        if key not in self._tokens:
            self.line_of(0)
            self._tokens[key] = lex(self.text, line, self._starts[line - 1], stop_line, extra)
        return self._tokens[key]

    def enclosing_function(self, line):
        """(first line, dedented source) of the innermost def containing `line`, found by
        indentation; None at module level. Callers fall back to the whole file when the
        block does not parse (odd continuation lines can fool indentation)."""
        lines = self.lines
        indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
        for index in range(line - 2, -1, -1):
            stripped = lines[index].lstrip()
            if not stripped or stripped[0] in "#)]}":
                continue  # blank, comment, or the closing line of a multi-line signature
            level = len(lines[index]) - len(stripped)
            if level >= indent:
                continue
            if DEF_LINE.match(stripped):
                return self._function_from(index, level)
            if level == 0:
                return None
            indent = level
        return None

    def parsed_function(self, line):
        """(first line, parsed def node) of the def on `line`: the block cut out by
        indentation when it parses alone, else found in the whole file (parsed once)."""
        import ast  # only the dataflow finders get here
        text = self.lines[line - 1]
        first, block = self._function_from(line - 1, len(text) - len(text.lstrip()))
        try:
            node = ast.parse(block, self.rel).body[0]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return first, node
        except (SyntaxError, ValueError, IndexError):
            pass
        if self._tree is None:
            try:
                self._tree = ast.parse(self.text, self.rel)
            except (SyntaxError, ValueError):
                self._tree = False
        for node in ast.walk(self._tree) if self._tree else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.lineno == line:
                return 1, node
        return first, None

    def enclosing_class(self, line):
        """Name of the class whose body holds `line` (by indentation), or None."""
        lines = self.lines
        indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
        for index in range(line - 2, -1, -1):
            stripped = lines[index].lstrip()
            if not stripped or stripped[0] in "#)]}@":
                continue
            level = len(lines[index]) - len(stripped)
            if level >= indent:
                continue
            if stripped.startswith("class ") or stripped.startswith("class\t"):
                return stripped[6:].split("(")[0].split(":")[0].strip()
            if level == 0:
                return None
            indent = level
        return None

    def _function_from(self, index, level):
        lines = self.lines
        end = index + 1
        while end < len(lines):
            stripped = lines[end].lstrip()
            if stripped and not stripped.startswith(("#", ")", "]", "}")) and \
                    len(lines[end]) - len(stripped) <= level:
                break
            end += 1
        block = "\n".join(text[level:] if not text[:level].strip() else text.lstrip()
                          for text in lines[index:end])
        return index + 1, block
