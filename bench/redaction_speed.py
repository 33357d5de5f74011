"""Time of the redactor against a text's length and its number of distinct tokens: one pass against one replace a token.

One line of `x<i> ghp_<36 random characters> ` pairs, its distinct tokens growing with it (as in a diff of many
files); each size is redacted as a file name is (`redact_name`: the tokens found, then taken out) and by the one-pass
replacement alone (`replace_all`), beside the replacement it took the place of (`str.replace` a token, longest
first), which is timed up to 400,000 characters only. A second table holds the length at 10 MB and varies the
tokens. Beside each time, seconds per million characters: linear time keeps it flat down a column, whatever the
length and the tokens. Run: `.venv/bin/python bench/redaction_speed.py`.
"""

from __future__ import annotations

import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracking.redaction import REDACTED, known_tokens, redact_name, replace_all

OLD_UP_TO = 400_000  # characters: beyond, one replace a token takes minutes


def replace_each(text: str, tokens: set[str]) -> str:
    """The replacement before the one pass: one `str.replace` a token, longest first."""
    for token in sorted(tokens, key=len, reverse=True):
        text = text.replace(token, REDACTED)
    return text


def line_of(length: int, distinct: int, seed: int = 0) -> str:
    """One line of about `length` characters holding `distinct` different GitHub-like tokens, in turn."""
    chooser = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    tokens = ["ghp_" + "".join(chooser.choices(alphabet, k=36)) for _ in range(distinct)]
    pairs = []
    size = 0
    while size < length:
        pairs.append(f"x{len(pairs)} {tokens[len(pairs) % distinct]} ")
        size += len(pairs[-1])
    return "".join(pairs)[:length]


def seconds(call: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    call(*args)
    return time.perf_counter() - start


def table(rows: list[tuple[int, int]]) -> None:
    """Each (length, distinct tokens) timed three ways, each time beside its seconds per million characters."""
    print(
        f"{'characters':>11} {'tokens':>8} | {'redact_name':>11} {'s/M':>6} | {'one pass':>9} {'s/M':>6} | "
        f"{'replace a token':>15} {'s/M':>6}"
    )
    for length, distinct in rows:
        text = line_of(length, distinct)
        tokens = known_tokens(text)
        named = seconds(redact_name, text)
        one = seconds(replace_all, text, tokens)
        old = seconds(replace_each, text, tokens) if length <= OLD_UP_TO else None
        assert old is None or replace_all(text, tokens) == replace_each(text, tokens)
        ratios = [f"{taken / length * 1e6:6.2f}" if taken is not None else f"{'':>6}" for taken in (named, one, old)]
        shown_old = f"{old:15.3f}" if old is not None else f"{'-':>15}"
        print(
            f"{length:>11,} {len(tokens):>8,} | {named:11.3f} {ratios[0]} | {one:9.3f} {ratios[1]} | "
            f"{shown_old} {ratios[2]}"
        )


def main() -> None:
    known_tokens("")  # detect-secrets' patterns compiled once, before any row is timed
    print("time (s) against the length, tokens growing with it:")
    table([(25_000, 500), (100_000, 2_000), (400_000, 8_000), (2_500_000, 50_000), (10_000_000, 100_000)])
    print("\ntime (s) against the tokens, at 10 MB:")
    table([(10_000_000, 1_000), (10_000_000, 10_000), (10_000_000, 100_000)])


if __name__ == "__main__":
    main()
