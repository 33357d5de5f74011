"""The one home of what counts as a secret, and of how it is taken out of what a run records.

Four kinds of secret are recognised, wherever the product captures or prints text (the uncommitted diff and
its file names, untracked file names, environment variables, params, URLs, the data source's name):
- a credential by its name: an assignment or variable named like a password, passphrase, token, API key, ...;
  the name stays, the value goes. A param's or an environment variable's name is judged by its words
  (`names_secret`: `kaggle_key`, `db_pw`, `SharedAccessKey`, in any case and position), whatever its value;
- the user:password@ part of a URL;
- a credential by its context: the value after `Bearer`/`Basic`, the `user:password` of `curl -u`/`--user`,
  the value of a `--password`-like flag and of `sshpass -p`, a `.netrc` password, a SAS URL's `sig=`, a
  quoted string given to a `key` (`wandb.login(key="...")`, a Kaggle JSON `"key"`);
- a token by its format: the detectors of detect-secrets (GitHub, GitLab, AWS, Slack, Stripe, SendGrid,
  Twilio, PyPI, npm, JWTs, private keys, ...), maintained upstream, plus the formats it lacks (`TOKEN_FORMATS`:
  Google, npm, Databricks, Vault, DigitalOcean, Shopify, Atlassian, Postman, Mailgun, Azure client secrets,
  a bare 40-character AWS secret key, ...). detect-secrets' entropy detectors are not used: they flag the run's
  own digests (commits, md5s, SHA-256s, run ids) and found no secret these rules miss (measured in
  docs/guarantees.md), and a redacted diff line or param makes a run impossible to re-create exactly.
Text is judged line by line: a private key's block ends at its END line, on the same line or a later one, and at
a diff's next file or hunk header, which is never redacted. Every pattern that reads text from outside runs on
RE2 (`google-re2`), in time linear in the line: no lookaround, no back-reference; what RE2 cannot say (a
token's mix of cases) is checked in Python on the few candidates it finds. A 1 MB line takes well under a second.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from tracking.yaml_text import flatten, param_text

REDACTED = "<redacted>"
MIN_KNOWN_CHARS = 4  # a credential's value shorter than this is not searched for in text: it would match anywhere


def _linear(pattern: str, ignore_case: bool = False) -> Any:
    """`pattern` compiled by RE2, which matches in time linear in the text (no lookaround, no back-reference):
    every pattern here runs on text from outside, where a backtracking one could take minutes on one line."""
    import re2

    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    options.max_mem = 64 << 20  # the DFA's memory: the formats' alternation stays on the fast path
    return re2.compile(pattern, options)


def _group(match: Any, name: str) -> tuple[int, int]:
    """The span of the named group `name` of an RE2 match (RE2's `start` and `end` take group numbers only)."""
    return match.span(match.re.groupindex[name])


# "auth" alone or as "authorization", not "author" or "authoritative"; "pass", "pwd" and "pw" as words of a name
# (`db_pass`, `MYSQL_PWD`, `db_pw`), not inside one (`bypass`, `compass`); the letter around is matched, not looked at.
SECRET_NAME = _linear(
    r"passw(?:or)?d|passphrase|(?:^|[^a-z])(?:pass|pwd|pw)(?:$|[^a-z])|secret|token|(?:api|private|access|account)"
    r"[_-]?key|credential|auth(?:ori[sz]ation)?(?:$|[^a-z])",
    ignore_case=True,
)
# A param or an environment variable is a credential by its name when one of its words (split at `.`, `_`,
# `-` and lower-to-upper case: `data.kwargs.kaggle_key`, `DB_PW`, `SharedAccessKey`) is one of SECRET_WORDS, or
# its name holds one of SECRET_PARTS written together (`dbpassword`, `APIKEY`), or a word ends in one of
# SECRET_ENDINGS (`apitoken`, `hftoken`, `dbpass`, `dbpwd`, `accountkey`, `signingkey`) and is none of
# NOT_SECRET_WORDS. `max_tokens`, `tokenizer`, `author`, `bypass` and `monkey` name no credential.
SECRET_WORDS = frozenset(
    {
        "key",
        "token",
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
        "passcode",
        "pass",
        "pw",
        "pwd",
        "otp",
        "totp",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "apikey",
        "dsn",
        "cookie",
    }
)
SECRET_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "secret",
    "credential",
    "apikey",
    "accesskey",
    "accountkey",
    "privatekey",
    "signingkey",
)
SECRET_ENDINGS = ("token", "pass", "pwd", "pw", "key", "pin", "otp", "cookie", "sig")
NOT_SECRET_WORDS = frozenset(
    {
        "bypass",
        "compass",
        "encompass",
        "overpass",
        "underpass",
        "surpass",
        "trespass",
        "multipass",
        "onepass",
        "twopass",
        "monkey",
        "donkey",
        "turkey",
        "hockey",
        "jockey",
        "whiskey",
        "hotkey",
        "keypin",
        "spin",
        "backspin",
        "topspin",
        "hairpin",
        "linchpin",
        "lynchpin",
    }
)
# A `key` beside one of these words names a tensor's width, not a credential: Keras's MultiHeadAttention takes
# `key_dim`, and a transformer's builder passes it on (`model.kwargs.key_dim`); redacting it would make every such
# run impossible to re-create with `tracking rerun`.
SHAPE_WORDS = frozenset({"dim", "dims", "size", "shape", "axis", "axes"})
# Linear: `[A-Z]+` gives back at most one letter to its lookahead.
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Prefixes of tokens, for an environment value's word that may be cut short or not match a full format.
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
    "AIza",
    "npm_",
    "GOCSPX-",
    "hvs.",
    "dop_v1_",
    "shpat_",
    "ATATT",
    "PMAK-",
)
# Token formats detect-secrets does not know, or knows at one exact length only, each as a whole token in
# running text (a file name included). One row per service; the table test plants one of each everywhere.
TOKEN_FORMATS = {
    "GitHub": r"(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}",
    "GitLab": r"gl(?:pat|dt|ft|rt|ptt|soat|cbt|imt)-[A-Za-z0-9_\-]{16,}",
    "Slack": r"xox[abeoprs]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}",
    "sk- API keys (OpenAI, Anthropic, ...)": r"sk-[A-Za-z0-9_\-]{16,}",
    "Hugging Face": r"(?:hf|api_org)_[A-Za-z0-9]{16,}",
    "AWS access key id": r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}",
    "JWT": r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+",
    "Google API key": r"AIza[0-9A-Za-z_\-]{35}",
    "Google OAuth client secret": r"GOCSPX-[A-Za-z0-9_\-]{20,}",
    "Google OAuth access token": r"ya29\.[A-Za-z0-9_\-]{20,}",
    "npm": r"npm_[A-Za-z0-9]{36}",
    "PyPI": r"pypi-AgE[A-Za-z0-9_\-]{50,}",
    "RubyGems": r"rubygems_[a-f0-9]{48}",
    "Docker Hub": r"dckr_pat_[A-Za-z0-9_\-]{20,}",
    "Databricks": r"dapi[a-f0-9]{32}(?:-\d+)?",
    "HashiCorp Vault": r"hv[sbr]\.[A-Za-z0-9_\-]{24,}",
    "Terraform Cloud": r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,}",
    "DigitalOcean": r"do[opr]_v1_[a-f0-9]{64}",
    "Shopify": r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
    "Atlassian": r"ATATT[A-Za-z0-9_\-=]{30,}|ATCTT[A-Za-z0-9_\-=]{30,}|ATBB[A-Za-z0-9]{28,}",
    "Postman": r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}",
    "Mailgun": r"key-[0-9a-zA-Z]{32}",
    "Azure AD client secret": r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}",
    "Stripe": r"(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}|whsec_[A-Za-z0-9]{24,}",
    "Square": r"sq0(?:atp|csp)-[0-9A-Za-z_\-]{22,}",
    "Grafana": r"glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
    "Sentry": r"sntr[yu]s_[A-Za-z0-9_=+/\-]{30,}",
    "New Relic": r"NRAK-[A-Z0-9]{27}",
    "Linear": r"lin_api_[A-Za-z0-9]{40}",
    "Doppler": r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}",
    "PlanetScale": r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.=]{32,}",
    "Pulumi": r"pul-[a-f0-9]{40}",
    "Supabase": r"sbp_[a-f0-9]{40}",
    "Tailscale": r"tskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}",
    "age": r"AGE-SECRET-KEY-1[0-9A-Z]{58}",
    "Groq": r"gsk_[A-Za-z0-9]{48}",
    "Replicate": r"r8_[A-Za-z0-9]{37}",
    "Perplexity": r"pplx-[A-Za-z0-9]{48}",
    "Notion": r"ntn_[A-Za-z0-9]{40,}",
    "Contentful": r"CFPAT-[A-Za-z0-9_\-]{43}",
    "Alibaba Cloud": r"LTAI[A-Za-z0-9]{12,20}",
    "Discord webhook": r"discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_\-]{20,}",
    "Telegram bot": r"(?:bot)?[0-9]{6,12}:[A-Za-z0-9_\-]{30,}",
    "Microsoft Teams webhook": r"[A-Za-z0-9.\-]*(?:webhook\.office\.com|outlook\.office\.com)/webhook[A-Za-z0-9]*/[^\s'\"<>]+",
    "IFTTT webhook": r"maker\.ifttt\.com/(?:[^\s'\"<>]*/)?(?:key|use)/[A-Za-z0-9_\-]{10,}",
}
# A token of TOKEN_FORMATS starts a text or follows a character that cannot be part of it (matched, not looked at).
_OWN_FORMATS = _linear(
    r"(?:^|[^A-Za-z0-9])(?P<token>" + "|".join(f"(?:{pattern})" for pattern in TOKEN_FORMATS.values()) + ")"
)
# A secret access key alone: 40 characters of base64 mixing upper case, lower case and digits (a git commit id is
# lower-case hex), also as a path's part (`data/raw/<key>.csv`); its edges are matched, its mix checked apart.
_AWS_SECRET_KEY = _linear(r"(?:^|[^A-Za-z0-9+=])(?P<token>[A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9+=])")
# Credentials known by what precedes them: an HTTP Authorization scheme's value (with a digit, checked apart, so
# prose such as "Bearer authentication" stays), and the user:password of `curl -u`/`--user`.
_CONTEXT = _linear(
    r"\b(?:Bearer|Basic)\s+(?P<scheme>[A-Za-z0-9_\-.=+/~]{8,})"
    r"|(?:^|\s)(?:-u|--user)(?:\s+|=)['\"]?(?P<user>[^\s:'\"]+:[^\s'\"]+)"
)
# Credentials in a command line, a file format or a URL, by what precedes them (each form's value is its named
# group): a `--password`-like flag's value, `sshpass -p`'s, a `mysql -p<password>`, a `.netrc` password, a signed
# URL's signature (Azure SAS `sig=`, GCS `X-Goog-Signature=`, S3 `X-Amz-Signature=`), a quoted string given to a
# key named `key` (`wandb.login(key="...")`, Kaggle's `"key": "..."`), a JDBC URL's `user/password@`, a `.pgpass`
# line's password (host:port:database:user:password), an HTTP cookie header's value, `HTTPBasicAuth`'s password.
_FLAGGED_GROUPS = ("flag", "sshpass", "mysql", "netrc", "sig", "keyed", "keyed1", "jdbc", "pgpass", "cookie", "basic")
_FLAGGED = _linear(
    r"(?:^|\s)--?[\w-]*(?:passw(?:or)?d|passphrase|token|secret|api-?key)\s+['\"]?(?P<flag>[^\s'\"=:-][^\s'\"]*)"
    r"|\bsshpass\s+-p\s*['\"]?(?P<sshpass>[^\s'\"]+)"
    r"|\bmysql(?:dump|admin)?\b.*?\s-p(?P<mysql>[^\s'\"]+)"
    r"|(?:\blogin\s+\S+\s+|^[\s+\-]*)password\s+(?P<netrc>[^\s=:]\S*)"
    r"|[?&;](?:sig|x-goog-signature|x-amz-signature|signature)=(?P<sig>[^&\s'\"#]+)"
    r"|(?:^|[^\w.])['\"]?key['\"]?\s*[:=]\s*(?:\"(?P<keyed>[^'\"]{8,})\"|'(?P<keyed1>[^'\"]{8,})')"
    r"|\bjdbc:[\w:]+?:@?[^\s/@:'\"]+/(?P<jdbc>[^\s@'\"]+)@"
    r"|(?:^|[\s'\"(\[,=])[\w.\-*]+:(?:[0-9]{1,5}|\*):[\w.\-*]+:[\w.\-*]+:(?P<pgpass>[^\s'\"]+)"
    r"|\b(?:set-)?cookie\s*:\s*(?P<cookie>.+)"
    r"|\bHTTP(?:Basic|Digest|Proxy)Auth\(\s*(?:[\"'][^\"']*[\"']|\w+)\s*,\s*[\"']?(?P<basic>[^\"'\s)]+)",
    ignore_case=True,
)
# A credential's assignment: its name (`key`: SECRET_NAME's words, each ending its name or followed by the
# rest of it) and its value, a quoted string that a delimiter closes (`{"api_key": "x"}, ...`: the delimiter is
# `tail`), or else the rest of the line (`password = "a" + b`).
_ASSIGNMENT = _linear(
    r"(?P<key>[\w.\-]*(?:(?:passw(?:or)?d|passphrase|secret|token|(?:api|private|access|account)[_-]?key|credential)"
    r"s?[\w.\-]*|(?:(?:^|[^a-z])(?:pass|pwd|pw)|auth(?:ori[sz]ation)?)(?:[0-9_.\-][\w.\-]*)?)[\"'\]]*\s*[:=]\s*)"
    r"(?P<value>(?:\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*')(?P<tail>\s*[,;)}\]]|\s*$)|.+$)",
    ignore_case=True,
)
# A URL's user:password@, the password possibly holding an unencoded `/` (`https://bob:pa/ss@host`).
URL_USERINFO = _linear(
    r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)(?:[^\s/@:'\"]*:[^\s@'\"]*|[^\s/@:'\"]+)@", ignore_case=True
)
# Judged word by word with Python's `re`: one character class, matched whole, is linear in the word.
_OPAQUE = re.compile(r"[A-Za-z0-9_\-+/=]{32,}")
_PRIVATE_KEY = _linear(r"-----(?P<edge>BEGIN|END) [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
# A private key's body on the line of its BEGIN marker, up to its END marker or the line's end.
_PRIVATE_KEY_ON_A_LINE = _linear(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(?P<body>.+?)"
    r"(?P<end>-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)"
)
# Lines that end a private key's block whatever it held: a multi-line secret cannot cross a diff's file or hunk header.
_BOUNDARIES = ("diff --git ", "@@ ")
# detect-secrets detectors that judge a line by something other than a token's format.
_NOT_FORMATS = {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector"}
_DELIMITERS = " \t=:\"'"
# What RE2 cannot take in detect-secrets' patterns: a lookaround whose body holds no group (dropped: the pattern
# then matches a little more, which only redacts more), and a bounded repetition over RE2's limit of 1000.
_LOOKAROUND = re.compile(r"\(\?<?[=!][^()]*\)")
_LONG_REPEAT = re.compile(r"\{(\d+),\d{4,}\}")


@cache
def _format_patterns() -> tuple[Any, ...]:
    """The regular expressions of detect-secrets' token-format detectors, loaded once per process.

    Only the patterns are used: detect-secrets' own scan may verify a secret over the network.
    """
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes = get_mapping_from_secret_type_to_class().values()
    patterns = [pattern for cls in classes if cls.__name__ not in _NOT_FORMATS for pattern in cls.denylist]
    return tuple(
        _linear(_LONG_REPEAT.sub(r"{\1,}", _LOOKAROUND.sub("", pattern.pattern)), bool(pattern.flags & re.IGNORECASE))
        for pattern in patterns
    )


def known_tokens(text: str) -> set[str]:
    """The substrings of `text` that have a known token format or follow `Bearer`, `Basic` or `curl -u`."""
    found = {match["token"] for match in _OWN_FORMATS.finditer(text)}
    found.update(match["token"] for match in _AWS_SECRET_KEY.finditer(text) if _mixed(match["token"]))
    for match in _CONTEXT.finditer(text):
        if match["user"] or any(char.isdigit() for char in match["scheme"]):
            found.add(match["user"] or match["scheme"])
    for pattern in _format_patterns():
        if pattern.search(text):  # most lines match no format: one search each, no generator
            # The whole match, not detect-secrets' capture groups (a GitHub token's group is its prefix alone),
            # without the delimiters some patterns include around the token.
            found.update(match.group(0).strip(_DELIMITERS) for match in pattern.finditer(text))
    found.discard("")
    return found


def _mixed(word: str) -> bool:
    """Whether `word` holds an upper-case letter, a lower-case letter and a digit."""
    return any(c.isupper() for c in word) and any(c.islower() for c in word) and any(c.isdigit() for c in word)


def names_secret(name: str) -> bool:
    """Whether a param's or an environment variable's name says it holds a credential (SECRET_WORDS, SECRET_PARTS,
    SECRET_ENDINGS)."""
    words = {word.lower() for word in _NAME_WORDS.findall(name)}
    named = words & SECRET_WORDS
    if named == {"key"} and not words.isdisjoint(SHAPE_WORDS):
        named = set()
    last = _NAME_WORDS.findall(name)[-1:]
    named |= {"pin"} & {word.lower() for word in last}  # `pin`, `user_pin`; not `pin_memory`
    run_together = any(word.endswith(SECRET_ENDINGS) and word not in SECRET_WORDS | NOT_SECRET_WORDS for word in words)
    return bool(named) or run_together or any(part in name.lower() for part in SECRET_PARTS)


def redact_line(line: str) -> str:
    """`line` with credential values, URL user:password and tokens replaced by '<redacted>'; unchanged otherwise.

    A private key's body on its BEGIN marker's line goes, up to its END marker or the line's end."""
    line = _PRIVATE_KEY_ON_A_LINE.sub(lambda m: f"{m['begin']}{REDACTED}{m['end']}", line)
    if SECRET_NAME.search(line):  # a cheap test first: the assignment pattern is the slowest one
        line = _ASSIGNMENT.sub(lambda m: f"{m['key']}{REDACTED}{m['tail'] or ''}", line)
    line = _FLAGGED.sub(_redact_flagged, line)
    return redact_name(line)


def _redact_flagged(match: Any) -> str:
    """The match of `_FLAGGED` with its one value group replaced by '<redacted>'."""
    group = next(name for name in _FLAGGED_GROUPS if match[name] is not None)
    start, end = (index - match.start() for index in _group(match, group))
    return match[0][:start] + REDACTED + match[0][end:]


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """Any text leaving the process (an error line, a log message, a worker's message): each line redacted
    (`redact_lines`), and each of `known` (a credential's value given to the code that wrote the text) taken
    out wherever it appears."""
    for value in sorted(known, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return "\n".join(redact_lines(text.split("\n")))


def redact_printed(text: str) -> str:
    """A line for the terminal (a log message, an `error:` line): a URL's user:password@ removed, then redacted as
    any text leaving the process (`redact_text`)."""
    return redact_text(strip_url_userinfo(text))


def secret_values(tree: dict[str, Any], prefix: str = "") -> set[str]:
    """The values, as text, of the params in `tree` (nested, under the dotted `prefix`) whose names say they hold
    a credential: what an error from the code they were given to must not print."""
    found: set[str] = set()
    for key, value in flatten(tree, prefix).items():
        if (
            names_secret(key)
            and value is not None
            and not isinstance(value, bool)
            and not str(value).startswith("env:")
        ):
            items = value if isinstance(value, list) else [value]
            found.update(text for item in items if len(text := str(item)) >= MIN_KNOWN_CHARS)
    return found


def redact_name(name: str) -> str:
    """A file name, path or URL with its tokens and URL user:password replaced by '<redacted>'.

    The assignment rule is left out: a name that merely says `password` (`password_reset.py`) names code.
    """
    name = URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", name)
    for token in sorted(known_tokens(name), key=len, reverse=True):
        name = name.replace(token, REDACTED)
    return name


def redact_params(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Params (flat, or nested under the dotted `prefix`) with every value that holds a secret replaced by its
    redacted text and the rest as they are, types kept: for the records that copy params beside MLflow's params
    (noise.json's baseline, `prov.model.kwargs`)."""
    found: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            found[key] = redact_params(value, f"{prefix}{key}.")
        else:
            text, why = redact_param(f"{prefix}{key}", value)
            found[key] = value if why is None else text
    return found


def redact_param(key: str, value: Any) -> tuple[str, str | None]:
    """A param's value as text spelled the way YAML and `dvc exp show` spell it (null, true, lists as JSON), with
    secrets taken out, and why it was redacted (None when it was not).

    A param whose key names a credential (`names_secret`: `data.kwargs.kaggle_key`, `data.kwargs.db_pw`,
    `...headers.Authorization`) loses its whole value, a number's included, unless it is true/false, null or
    empty; any other loses its tokens and URL passwords (`postgresql://<redacted>@host/ml`).
    """
    text = param_text(value)
    if isinstance(value, str) and value.startswith("env:"):  # a reference (tracking/config/references.py)
        return text, None
    if value is not None and not isinstance(value, bool) and value not in ("", [], {}) and names_secret(key):
        return REDACTED, "its name says it holds a credential"
    redacted = redact_line(text)
    return (redacted, "its value holds a token or a URL's password") if redacted != text else (text, None)


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


def looks_secret(name: str, value: str) -> bool:
    """A variable whose name says it holds a credential, whose value holds what `redact_line` takes out, or has a
    word that looks like a token.

    A command-line flag (`--xla_..._count=8`) is judged by its value only, so long flag names stay readable.
    """
    if SECRET_NAME.search(name) or names_secret(name) or redact_line(value) != value:
        return True
    words = re.split(r"[\s,;]+", value)
    if SECRET_NAME.search(
        " ".join(word.partition("=")[0] for word in words if "=" in word)
    ):  # one search, not one a word
        return True
    for word in (match[0] for match in _token_like_words().finditer(value)):
        _, assigns, assigned = word.partition("=")
        candidates = [assigned] if word.startswith("-") else [word, assigned] if assigns else [word]
        if any(_token_like(candidate) for candidate in candidates):
            return True
    return False


@cache
def _token_like_words() -> Any:
    """The words of a value that `_token_like` may take, whole: 32 characters or more, or holding a token's prefix
    (its other words are judged without a call each)."""
    prefixes = "|".join(re.escape(prefix) for prefix in TOKEN_PREFIXES)
    return _linear(rf"[^\s,;]{{32,}}|[^\s,;]*(?:{prefixes})[^\s,;]*")


def _token_like(word: str) -> bool:
    """A known token prefix, or a long opaque word of letters and digits that is not a path."""
    opaque = bool(_OPAQUE.fullmatch(word)) and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    return word.startswith(TOKEN_PREFIXES) or (opaque and not word.startswith("/"))


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
