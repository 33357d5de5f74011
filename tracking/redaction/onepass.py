"""Every occurrence of many known strings replaced in one pass over a text, in time linear in its length.

One `str.replace` per token cost time in the text's length times the number of tokens (a 400k-character text with
its many distinct tokens took 17 s); one RE2 alternation of 100,000 tokens still took 37 s on 10 MB (its DFA
outgrows its memory). Here each window of the text, as long as the shortest token's first `_GRAM` characters,
is hashed at once with numpy, and only the windows whose hash starts a token are compared: time grows with the
text's length, not with the number of tokens (bench/redaction_speed.py measures both).

What is replaced is every character any occurrence of any token covers: tokens nested in one another (a token
and a longer one holding it) give what replacing them longest first gave, and two occurrences that overlap in
part go together, where that left the tail of one in the text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

REDACTED = "<redacted>"
_GRAM = 8  # a window's length at most: long enough that few windows start a token by chance
_BASE = 0x100000001B3  # odd, so its powers stay distinct modulo 2**64
_TABLE = 1 << 22  # the heads' low hash bits (4 MB): 100,000 heads pass 2% of the windows but theirs


def replace_all(text: str, tokens: Iterable[str], by: str = REDACTED) -> str:
    """`text` with each stretch that occurrences of `tokens` cover replaced by `by` (one `by` per stretch of
    overlapping occurrences; occurrences that only touch stay apart)."""
    spans = _covered(text, {token for token in tokens if token})
    if not spans:
        return text
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], by]
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _covered(text: str, tokens: set[str]) -> list[tuple[int, int]]:
    """The stretches of `text` occurrences of `tokens` cover, in order, overlapping ones merged."""
    if not tokens:
        return []
    gram = min(_GRAM, *map(len, tokens))
    longest_first: dict[str, list[str]] = {}
    for token in sorted(tokens, key=len, reverse=True):
        longest_first.setdefault(token[:gram], []).append(token)
    spans: list[tuple[int, int]] = []
    for start in _starts(text, list(longest_first), gram):
        # The longest token starting here: a shorter one it holds covers nothing more.
        token = next(
            (token for token in longest_first.get(text[start : start + gram], ()) if text.startswith(token, start)),
            None,
        )
        if token is None:
            continue
        end = start + len(token)
        if spans and start < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def _starts(text: str, heads: list[str], gram: int) -> list[int]:
    """The positions in `text` whose next `gram` characters hash as one of `heads` does (each `gram` long), in
    order; a position may be a hash collision, which the caller's comparison rules out."""
    import numpy as np

    if len(text) < gram:
        return []
    codes = _codes(text)
    windows = _hashes([codes[offset : len(codes) - gram + 1 + offset] for offset in range(gram)])
    wanted = np.sort(_hashes(list(_codes("".join(heads)).reshape(len(heads), gram).T)))
    # A table of the heads' low hash bits passes a few windows but theirs, which alone are looked up in the sorted
    # heads: time in the text's length, never a sort of the text.
    table = np.zeros(_TABLE, dtype=bool)
    table[wanted & np.uint64(_TABLE - 1)] = True
    starts = np.flatnonzero(table[windows & np.uint64(_TABLE - 1)])
    found = wanted[np.minimum(np.searchsorted(wanted, windows[starts]), len(wanted) - 1)] == windows[starts]
    return starts[found].tolist()


def _codes(text: str) -> Any:
    """The text's code points as unsigned 64-bit integers."""
    import numpy as np

    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint64)


def _hashes(columns: list[Any]) -> Any:
    """The polynomial hash, modulo 2**64, of rows whose characters are `columns` (the first character first)."""
    import numpy as np

    found = columns[0].copy()
    for column in columns[1:]:  # in place: no array of the text's length made per character
        found *= np.uint64(_BASE)
        found += column
    return found
