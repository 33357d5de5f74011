"""Text judged line by line: credentials by their name, their context, their format, a URL's user:password@.

A private key's block ends at its END line, on the same line or a later one, and at a diff's next file or hunk
header, which is never redacted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tracking.redaction.formats import known_tokens, linear, random_word
from tracking.redaction.onepass import REDACTED, replace_all
from tracking.redaction.words import POSITION_WORDS, SECRET_NAME, names_secret


def _group(match: Any, name: str) -> tuple[int, int]:
    """The span of the named group `name` of an RE2 match (RE2's `start` and `end` take group numbers only)."""
    return match.span(match.re.groupindex[name])


# Credentials in a command line, a file format or a URL, by what precedes them (each form's value is its named
# group): a `--password`-like flag's value, `sshpass -p`'s, a `mysql -p<password>`, a `.netrc` password, a signed
# URL's signature (Azure SAS `sig=`, GCS `X-Goog-Signature=`, S3 `X-Amz-Signature=`), a quoted string given to a
# key named `key` (`wandb.login(key="...")`, Kaggle's `"key": "..."`), a JDBC URL's `user/password@`, a `.pgpass`
# line's password (host:port:database:user:password), an HTTP cookie header's value (a quoted one up to its
# closing quote, so the rest of an error line stays), `HTTPBasicAuth`'s password.
_FLAGGED_GROUPS = ("flag", "sshpass", "mysql", "netrc", "sig", "keyed", "keyed1", "jdbc", "pgpass", "cookie", "basic")
_FLAGGED = linear(
    r"(?:^|\s)--?[\w-]*(?:passw(?:or)?d|passphrase|token|secret|api-?key)\s+['\"]?(?P<flag>[^\s'\"=:-][^\s'\"]*)"
    r"|\bsshpass\s+-p\s*['\"]?(?P<sshpass>[^\s'\"]+)"
    r"|\bmysql(?:dump|admin)?\b.*?\s-p(?P<mysql>[^\s'\"]+)"
    r"|(?:\blogin\s+\S+\s+|^[\s+\-]*)password\s+(?P<netrc>[^\s=:]\S*)"
    r"|[?&;](?:sig|x-goog-signature|x-amz-signature|signature|(?:api[_-]?|access[_-]?)?key|apikey|"
    r"(?:access[_-]?|auth[_-]?|id[_-]?|refresh[_-]?|session[_-]?)?token|secret|password|passwd|pwd)=(?P<sig>[^&\s'\"#]+)"
    r"|(?:^|[^\w.])['\"]?key['\"]?\s*[:=]\s*(?:\"(?P<keyed>[^'\"]{8,})\"|'(?P<keyed1>[^'\"]{8,})')"
    r"|\bjdbc:[\w:]+?:@?[^\s/@:'\"]+/(?P<jdbc>[^\s@'\"]+)@"
    r"|(?:^|[\s'\"(\[,=])[\w.\-*]+:(?:[0-9]{1,5}|\*):[\w.\-*]+:[\w.\-*]+:(?P<pgpass>[^\s'\"]+)"
    r"|\b(?:set-)?cookie[\"']?\s*:\s*(?P<cookie>\"[^\"]*\"|'[^']*'|.+)"
    r"|\bHTTP(?:Basic|Digest|Proxy)Auth\(\s*(?:[\"'][^\"']*[\"']|\w+)\s*,\s*[\"']?(?P<basic>[^\"'\s)]+)",
    ignore_case=True,
)
# A credential's assignment: its name (`key`: SECRET_NAME's words, each ending its name or followed by the
# rest of it) and its value, a quoted string that a delimiter closes (`{"api_key": "x"}, ...`: the delimiter is
# `tail`), or else the rest of the line (`password = "a" + b`).
_ASSIGNMENT = linear(
    r"(?P<key>[\w.\-]*(?:(?:passw(?:or)?d|passphrase|secret|token|(?:api|private|access|account)[_-]?key|credential)"
    r"s?[\w.\-]*|(?:(?:^|[^a-z])(?:pass|pwd|pw)|auth(?:ori[sz]ation)?)(?:[0-9_.\-][\w.\-]*)?)[\"'\]]*\s*[:=]\s*)"
    r"(?P<value>(?:\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*')(?P<tail>\s*[,;)}\]]|\s*$)|.+$)",
    ignore_case=True,
)
# A team's code named "package.module:function" (`data.loader: 'team_secrets_loader:load'`) is not an assignment of
# `load` to a name holding `secret`, unless the module's last word is itself a credential's (`db_password:hunter2`):
# a credential's name ends in what it holds, a module's in what it does.
_FUNCTION = linear(r"[A-Za-z_]\w*(?:$|[\s'\"),;\]])")
_MODULE_LAST_WORD = linear(r"(?:^|[^A-Za-z0-9])(?P<word>[A-Za-z0-9]+):$")
_CODE_SPECS_A_LINE = 10  # past this many on one line, the rest is judged as assignments (time linear in the line)
# A value written after a word of a credential's position in a name or a line (`export_session_<token>.npz`,
# `sig=<hex>`, `"X-Sig": "<token>"`), taken when it has a random token's form (`random_word`), the rest of the name kept.
_POSITION_VALUE = linear(
    r"(?:^|[^A-Za-z])(?:" + "|".join(sorted(POSITION_WORDS)) + r")[_\-=.:\s\"']+(?P<token>[A-Za-z0-9+/=~_\-]{16,})",
    ignore_case=True,
)
# A URL's user:password@, the password possibly holding an unencoded `/` (`https://bob:pa/ss@host`).
URL_USERINFO = linear(r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)(?:[^\s/@:'\"]*:[^\s@'\"]*|[^\s/@:'\"]+)@", ignore_case=True)
_PRIVATE_KEY = linear(r"-----(?P<edge>BEGIN|END) [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
# A private key's body on the line of its BEGIN marker, up to its END marker or the line's end.
_PRIVATE_KEY_ON_A_LINE = linear(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(?P<body>.+?)"
    r"(?P<end>-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)"
)
# Lines that end a private key's block whatever it held: a multi-line secret cannot cross a diff's file or hunk header.
_BOUNDARIES = ("diff --git ", "@@ ")


def redact_line(line: str) -> str:
    """`line` with credential values, URL user:password and tokens replaced by '<redacted>'; unchanged otherwise.

    A private key's body on its BEGIN marker's line goes, up to its END marker or the line's end."""
    line = _PRIVATE_KEY_ON_A_LINE.sub(lambda m: f"{m['begin']}{REDACTED}{m['end']}", line)
    if SECRET_NAME.search(line):  # a cheap test first: the assignment pattern is the slowest one
        line = _redact_assignments(line)
    line = _FLAGGED.sub(_redact_flagged, line)
    return redact_name(line)


def _redact_assignments(line: str, specs: int = 0) -> str:
    """`line` with each credential's assignment's value replaced by '<redacted>', a team's code named
    "package.module:function" kept (`_code_function`). Such a match took the rest of the line for its value: the
    rest is judged again, past the function's name, `specs` counting how many were kept (at most
    `_CODE_SPECS_A_LINE`, so the time stays linear in the line)."""

    def replaced(match: Any) -> str:
        key = match["key"]
        function = _code_function(key, match) if specs < _CODE_SPECS_A_LINE and key.endswith(":") else None
        if function is None:
            return f"{key}{REDACTED}{match['tail'] or ''}"
        return key + function + _redact_assignments(match["value"][len(function) :], specs + 1)

    return _ASSIGNMENT.sub(replaced, line)


def _code_function(key: str, match: Any) -> str | None:
    """The function's name when the assignment `match` of `key` is a team's code named "package.module:function" (a
    colon between two names, no space) whose module's last word names no credential; None otherwise."""
    word = _MODULE_LAST_WORD.search(key)
    function = _FUNCTION.match(match["value"])
    if word is None or function is None or names_secret(word["word"]):
        return None
    return function[0].rstrip(" \t\n'\"),;]")


def _redact_flagged(match: Any) -> str:
    """The match of `_FLAGGED` with its one value group replaced by '<redacted>'."""
    group = next(name for name in _FLAGGED_GROUPS if match[name] is not None)
    start, end = (index - match.start() for index in _group(match, group))
    return match[0][:start] + REDACTED + match[0][end:]


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """Any text leaving the process (an error line, a log message, a worker's message): each line redacted
    (`redact_lines`), and each of `known` (a credential's value given to the code that wrote the text) taken
    out wherever it appears."""
    return "\n".join(redact_lines(replace_all(text, known).split("\n")))


def redact_printed(text: str) -> str:
    """A line for the terminal (a log message, an `error:` line): a URL's user:password@ removed, then redacted as
    any text leaving the process (`redact_text`)."""
    return redact_text(strip_url_userinfo(text))


def redact_name(name: str) -> str:
    """A file name, path or URL with its tokens and URL user:password replaced by '<redacted>'.

    The assignment rule is left out: a name that merely says `password` (`password_reset.py`) names code.
    """
    name = URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", name)
    placed = {match["token"] for match in _POSITION_VALUE.finditer(name) if random_word(match["token"])}
    return replace_all(name, known_tokens(name) | placed)


def redact_lines(lines: list[str], names: tuple[str, ...] = ()) -> Iterator[str]:
    """Each line redacted; the body of a private key block (between its BEGIN and END lines) replaced whole.

    Lines starting with one of `names` (a diff's file headers) are judged as names (`redact_name`): a token in
    a file's name goes, `password_reset.py` stays. A block also ends at a diff's next file or hunk header
    (`_BOUNDARIES`), so a key cut short cannot take the rest of a diff. A line's trailing "\\r" is kept.
    """
    in_key = False
    for line in lines:
        if line.startswith(_BOUNDARIES):
            in_key = False
        if line.startswith(names):
            yield redact_name(line)
            continue
        body, end = (line[:-1], "\r") if line.endswith("\r") else (line, "")
        edges = [edge["edge"] for edge in _PRIVATE_KEY.finditer(body)]
        if in_key and not edges:
            yield _keep_diff_marker(body) + REDACTED + end
            continue
        in_key = (edges[-1] == "BEGIN") if edges else False
        yield redact_line(body) + end


def _keep_diff_marker(body: str) -> str:
    return body[:1] if body[:1] in "+- " else ""


def strip_url_userinfo(text: str) -> str:
    """`text` with every URL's user:password@ part removed (`https://bob:pw@host/x` -> `https://host/x`)."""
    return URL_USERINFO.sub(r"\g<scheme>", text)


def strip_credentials(url: str) -> str:
    """The URL's scheme, host (and port) and path only; a scp-like `git@host:r.git` as it is; either with its
    tokens redacted (`redact_name`). User, password, query, fragment go: `https://u:p@h/r?t=x#f` -> `https://h/r`."""
    from urllib.parse import urlsplit

    if "://" not in url:
        return redact_name(url)
    parts = urlsplit(strip_url_userinfo(url))
    # Joined by hand: urlunsplit drops the empty authority of a scheme it does not know (`sqlite:////abs/mlflow.db`
    # came back as `sqlite://abs/mlflow.db`, a host named abs), and a store's URI must stay one MLflow opens.
    return redact_name(f"{parts.scheme}://{parts.netloc}{parts.path}")


def was_redacted(line: str) -> bool:
    """Whether redaction may have changed this line: it holds the placeholder (a line holding '<redacted>'
    literally is counted too, erring on the safe side)."""
    return REDACTED in line
