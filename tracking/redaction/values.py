"""Values judged with their names: a param's, an environment variable's, and the credentials a team's code was given."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from tracking.redaction.formats import TOKEN_PREFIXES, linear, random_word
from tracking.redaction.onepass import REDACTED
from tracking.redaction.rules import redact_line, redact_name
from tracking.redaction.words import POSITION_WORDS, SECRET_NAME, name_words, names_secret
from tracking.yaml_text import flatten, param_text

MIN_KNOWN_CHARS = 4  # a credential's value shorter than this is not searched for in text: it would match anywhere
# Judged word by word with Python's `re`: one character class, matched whole, is linear in the word.
_OPAQUE = re.compile(r"[A-Za-z0-9_\-+/=]{32,}")
# Names whose value is a credential when it reads `user:password` (`login: svc:pw`), and names of W&B, whose API key
# is 40 hex digits (a commit id's form, so judged with its name only).
PAIR_WORDS = frozenset({"login", "user", "username", "userinfo", "basic", "account"})
WANDB_WORDS = frozenset({"wandb", "wb", "weightsandbiases"})
_USER_PASSWORD = re.compile(r"[^\s:/@]+:\S+")
_HEX40 = re.compile(r"[0-9a-f]{40}")
VALUE_HOLDS = "its value holds a credential (a token, a password or key in a URL, a header, a signature)"
# The words of a value, as a token's characters run: split at anything else (spaces, quotes, `=`, `;`, `:`, `,`).
_NOT_TOKEN_CHARS = re.compile(r"[^A-Za-z0-9_\-+/.~]+")


def why_secret(key: str, value: Any) -> str | None:
    """Why the param or variable `key` holding `value` holds a credential, or None: the one rule for params,
    environment variables and names. By its key (a token in it; its words: `db_pw`, `bearer`), by its value's
    form (a token, a URL's password or key, a cookie header: what `redact_line` takes out), or by both (`user:pw`
    under `login`, 40 hex digits under a W&B name). A reference (`env:NAME`), null, true/false or empty holds none.
    """
    if redact_name(key) != key:
        return "the key itself holds a token"
    if value is None or isinstance(value, bool) or value in ("", [], {}):
        return None
    text = param_text(value)
    if isinstance(value, str) and value.startswith("env:"):
        return None
    if names_secret(key):
        return "its name says it holds a credential"
    words = name_words(key)
    if words & PAIR_WORDS and _USER_PASSWORD.fullmatch(text):
        return "its value is a user:password pair"
    if words & WANDB_WORDS and _HEX40.fullmatch(text):
        return "its value has the form of a W&B API key"
    if redact_line(text) != text:  # a team's code `team_secrets_loader:load` is no assignment (`rules`)
        return VALUE_HOLDS
    position = sorted(words & POSITION_WORDS)
    if position and any(random_word(word) for word in _NOT_TOKEN_CHARS.split(text)):
        return f"its value has a random token's form under `{position[0]}`, a credential's position"
    return None


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
    if redacted != text:
        return redacted, "its value holds a token or a URL's password"
    why = why_secret(key, value)
    return (REDACTED, why) if why else (text, None)


def looks_secret(name: str, value: str) -> bool:
    """A variable whose name says it holds a credential, whose value holds what `redact_line` takes out, or has a
    word that looks like a token.

    A command-line flag (`--xla_..._count=8`) is judged by its value only, so long flag names stay readable.
    """
    if SECRET_NAME.search(name) or why_secret(name, value) or redact_line(value) != value:
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
    return linear(rf"[^\s,;]{{32,}}|[^\s,;]*(?:{prefixes})[^\s,;]*")


def _token_like(word: str) -> bool:
    """A known token prefix, or a long opaque word of letters and digits that is not a path."""
    opaque = bool(_OPAQUE.fullmatch(word)) and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    return word.startswith(TOKEN_PREFIXES) or (opaque and not word.startswith("/"))
