"""Token patterns matched against lexed source: `$x` binds one name, `...` skips up to
MAX_GAP_TOKENS tokens without crossing a def/class, strings match by containment."""

MAX_EVIDENCE_CHARS = 300
MAX_GAP_TOKENS = 60

SCOPE_BARRIERS = {"def", "class"}


def match_at(pattern, tokens, pi, ti, bindings):
    """Backtracking match; a gap never crosses a def/class, so a pattern stays inside
    the function it starts in."""
    if pi == len(pattern):
        return ti
    kind, value = pattern[pi]
    if kind == "gap":
        limit = min(len(tokens), ti + MAX_GAP_TOKENS + 1)
        for skip in range(ti, limit):
            end = match_at(pattern, tokens, pi + 1, skip, bindings)
            if end is not None:
                return end
            if tokens[skip][0] == "N" and tokens[skip][1] in SCOPE_BARRIERS:
                return None
        return None
    if ti >= len(tokens):
        return None
    tkind, tvalue = tokens[ti][0], tokens[ti][1]
    if kind == "var":
        if tkind != "N":
            return None
        bound = bindings.get(value)
        if bound is not None and bound != tvalue:
            return None
        fresh = bound is None
        bindings[value] = tvalue
        end = match_at(pattern, tokens, pi + 1, ti + 1, bindings)
        if end is None and fresh:
            del bindings[value]
        return end
    if tkind != kind:
        return None
    if tvalue != value and not (kind == "S" and value in tvalue):
        return None
    return match_at(pattern, tokens, pi + 1, ti + 1, bindings)


def evidence_text(lines, first, last):
    """The matched code on one line; a long match shows its first and last line."""
    picked = [line.strip() for line in lines[first - 1:last]]
    picked = [part for part in picked if part]
    if len(picked) > 5:
        picked = picked[:2] + ["..."] + picked[-2:]
    text = " ".join(picked)
    if len(text) > MAX_EVIDENCE_CHARS:
        text = text[:MAX_EVIDENCE_CHARS - 3] + "..."
    return text


def find_pattern(rel, lines, tokens, pattern):
    hits = []
    if not pattern:
        return hits
    first_kind, first_value = pattern[0]
    for ti, tok in enumerate(tokens):
        if first_kind not in ("var", "gap") and (tok[0] != first_kind or tok[1] != first_value):
            continue
        end = match_at(pattern, tokens, 0, ti, {})
        if end is not None:
            start_line = tok[2]
            end_line = tokens[end - 1][3]
            hits.append({"file": rel, "line": start_line,
                         "text": evidence_text(lines, start_line, end_line)})
    return hits


def find_string(rel, lines, tokens, text):
    return [{"file": rel, "line": tok[2], "text": evidence_text(lines, tok[2], tok[3])}
            for tok in tokens if tok[0] == "S" and text in tok[1]]
