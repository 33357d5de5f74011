"""The one home of what counts as a secret, and of how it is taken out of what a run records.

Three kinds of secret are recognised, wherever the product captures text (the uncommitted diff, environment
variables, URLs):
- a credential by its name: an assignment or variable named like a password, token, API key, ...; the name
  stays, the value goes;
- the user:password@ part of a URL;
- a token by its format: the detectors of detect-secrets (GitHub, GitLab, AWS, Slack, Stripe, SendGrid,
  Twilio, PyPI, npm, JWTs, private keys, ...), maintained upstream, plus the prefixes it lacks (Hugging Face,
  `sk-` API keys, fine-grained GitHub tokens). detect-secrets' entropy detectors are not used: they flag
  ordinary identifiers, and a redacted diff line makes a run impossible to re-create exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

REDACTED = "<redacted>"
# "auth" alone or as "authorization", not "author" or "authoritative".
SECRET_NAME = re.compile(
    r"passw(?:or)?d|secret|token|api[_-]?key|private[_-]?key|credential|auth(?:ori[sz]ation)?(?![a-z])", re.IGNORECASE
)
# Tokens detect-secrets does not know, or knows at one exact length only: as a prefix (an environment value's
# word) and as a whole token in running text.
TOKEN_PREFIXES = (
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "sk-",
    "hf_",
    "AKIA",
    "ASIA",
    "eyJ",
)
_PREFIXED_TOKEN = re.compile(
    r"\b(?:(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|glpat-[A-Za-z0-9_\-]{16,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}|sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+)"
)
_ASSIGNMENT = re.compile(
    r"(?P<key>[\w.\-]*(?:" + SECRET_NAME.pattern + r")s?[\w.\-]*[\"'\]]*\s*[:=]\s*)(?P<value>.+)$", re.IGNORECASE
)
URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)[^\s/@'\"]+@", re.IGNORECASE)
_OPAQUE = re.compile(r"^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_\-+/=]{32,}$")
_PRIVATE_KEY = re.compile(r"-----(?P<edge>BEGIN|END) [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
# detect-secrets detectors that judge a line by something other than a token's format.
_NOT_FORMATS = {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector"}
_DELIMITERS = " \t=:\"'"


@cache
def _format_patterns() -> tuple[re.Pattern[str], ...]:
    """The regular expressions of detect-secrets' token-format detectors, loaded once per process.

    Only the patterns are used: detect-secrets' own scan may verify a secret over the network.
    """
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes = get_mapping_from_secret_type_to_class().values()
    return tuple(pattern for cls in classes if cls.__name__ not in _NOT_FORMATS for pattern in cls.denylist)


def known_tokens(text: str) -> set[str]:
    """The substrings of `text` that have a known token format."""
    found = {match.group(0) for match in _PREFIXED_TOKEN.finditer(text)}
    for pattern in _format_patterns():
        if pattern.search(text):  # most lines match no format: one search each, no generator
            # The whole match, not detect-secrets' capture groups (a GitHub token's group is its prefix alone),
            # without the delimiters some patterns include around the token.
            found.update(match.group(0).strip(_DELIMITERS) for match in pattern.finditer(text))
    found.discard("")
    return found


def redact_line(line: str) -> str:
    """`line` with credential values, URL user:password and tokens replaced by '<redacted>'; unchanged otherwise."""
    if SECRET_NAME.search(line):  # a cheap test first: the assignment pattern is the slowest one
        line = _ASSIGNMENT.sub(lambda m: f"{m['key']}{REDACTED}", line)
    line = URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", line)
    for token in sorted(known_tokens(line), key=len, reverse=True):
        line = line.replace(token, REDACTED)
    return line


def redact_lines(lines: list[str], keep: tuple[str, ...] = ()) -> Iterator[str]:
    """Each line redacted; the body of a private key block (between its BEGIN and END lines) replaced whole.

    Lines starting with one of `keep` (a diff's file headers) pass unchanged. A line's trailing "\\r" is kept.
    """
    in_key = False
    for line in lines:
        if line.startswith(keep):
            yield line
            continue
        body, end = (line[:-1], "\r") if line.endswith("\r") else (line, "")
        edge = _PRIVATE_KEY.search(body)
        if in_key and not edge:
            yield _keep_diff_marker(body) + REDACTED + end
            continue
        in_key = bool(edge and edge["edge"] == "BEGIN")
        yield redact_line(body) + end


def _keep_diff_marker(body: str) -> str:
    return body[:1] if body[:1] in "+- " else ""


def looks_secret(name: str, value: str) -> bool:
    """A variable whose name says it holds a credential, or whose value has a word that looks like a token.

    A command-line flag (`--xla_..._count=8`) is judged by its value only, so long flag names stay readable.
    """
    if SECRET_NAME.search(name):
        return True
    if known_tokens(value):
        return True
    for word in re.split(r"[\s,;]+", value):
        key, assigns, assigned = word.partition("=")
        if assigns and SECRET_NAME.search(key):
            return True
        candidates = [assigned] if word.startswith("-") else [word, assigned] if assigns else [word]
        if any(_token_like(candidate) for candidate in candidates):
            return True
    return False


def _token_like(word: str) -> bool:
    """A known token prefix, or a long opaque word of letters and digits that is not a path."""
    return word.startswith(TOKEN_PREFIXES) or bool(_OPAQUE.match(word) and not word.startswith("/"))


def strip_url_userinfo(text: str) -> str:
    """`text` with every URL's user:password@ part removed (`https://bob:pw@host/x` -> `https://host/x`)."""
    return URL_USERINFO.sub(r"\g<scheme>", text)


def strip_credentials(url: str) -> str:
    """The URL without user, password or query: `https://user:tok@host/r.git?t=x` -> `https://host/r.git`."""
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.username is None and not parts.query:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def was_redacted(line: str) -> bool:
    """Whether redaction may have changed this line: it holds the placeholder (a line holding '<redacted>'
    literally is counted too, erring on the safe side)."""
    return REDACTED in line
