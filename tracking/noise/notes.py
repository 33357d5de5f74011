"""A verdict's notes as people see them: the gist in under 200 characters, the whole note behind a link.

A metric's note says everything the verdict knows of it (an inconclusive one: the shift it is blind to, where that
shift comes from, what the test detects under which noise, the runs that would decide), about 450 to 600
characters; shown whole in the report's list, on the run page and in the printed verdict, it buried the answer. The
gist is its first clause (what was found) and its last (what would decide it), the parenthesised asides left out; the
whole note stays in the report's "Notes in full" section (`NOTES_ANCHOR`), which the short one links.
"""

from __future__ import annotations

import re

# The most characters a shown note takes, its link included.
SHOWN_CHARS = 200
# The report's section that holds every note whole, and its anchor as GitHub and MLflow's markdown name it.
NOTES_HEADING = "Notes in full"
NOTES_ANCHOR = "#notes-in-full"
# Where the first clause ends: a semicolon, or a colon that is not a metric's own (`test_accuracy: ...`); after it,
# a comma ends a part too.
_CLAUSE_END = re.compile(r"; |: ")
_PART_END = re.compile(r"; |: |, ")


def gist(note: str, limit: int = SHOWN_CHARS) -> str:
    """`note` in at most `limit` characters, its parenthesised asides left out: its first clause (what was found) and
    its last (what would decide it: an inconclusive note's runs), else the first and as many of the next parts (to a
    comma, colon or semicolon) as fit; a first clause longer than `limit` is cut at a word, with an ellipsis. A note
    that fits is kept whole."""
    if len(note) <= limit:
        return note
    plain = re.sub(r"\s+", " ", _without_asides(note)).strip()
    metric, sep, rest = plain.partition(": ")
    head, body = (f"{metric}: ", rest) if sep and " " not in metric else ("", plain)
    first = next((match.start() for match in _CLAUSE_END.finditer(body)), len(body))
    shown = head + body[:first]
    clauses = body.split("; ")
    if len(clauses) > 1:
        last = clauses[-1]
        for ending in (last, last.split(": ", 1)[0]):
            if len(shown) + 2 + len(ending) <= limit:
                return f"{shown}; {ending}"
    for cut in [match.start() for match in _PART_END.finditer(body, first + 1)] + [len(body)]:
        if len(head) + cut > limit:
            break
        shown = head + body[:cut]
    if len(shown) > limit:
        shown = shown[: limit - 1].rsplit(" ", 1)[0] + "…"
    return shown


def shown_note(note: str, link: str, limit: int = SHOWN_CHARS) -> str:
    """`note` as a page shows it: whole where it fits in `limit` characters, else its gist and a markdown link to
    the whole of it (`link`), the two together within `limit`."""
    return _with_pointer(note, f" ([in full]({link}))", limit)


def said_note(note: str, where: str, limit: int = SHOWN_CHARS) -> str:
    """`note` as a terminal line says it: whole where it fits, else its gist and where the whole of it is (`where`:
    a file and its section, or "below")."""
    return _with_pointer(note, f" (in full: {where})", limit)


def _with_pointer(note: str, pointer: str, limit: int) -> str:
    return note if len(note) <= limit else gist(note, limit - len(pointer)) + pointer


def _without_asides(text: str) -> str:
    """`text` without its parenthesised asides, nested ones included (a clause's figures stay)."""
    kept, depth = [], 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif not depth:
            kept.append(char)
    return re.sub(r" +([,;:.])", r"\1", "".join(kept))
