"""Names that say they hold a credential: a param's, an environment variable's, an assignment's in text."""

from __future__ import annotations

import re

from tracking.redaction.formats import linear

# "auth" alone or as "authorization", not "author" or "authoritative"; "pass", "pwd" and "pw" as words of a name
# (`db_pass`, `MYSQL_PWD`, `db_pw`), not inside one (`bypass`, `compass`); the letter around is matched, not looked at.
SECRET_NAME = linear(
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
        "bearer",
        "jwt",
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
# Credential positions: a name holding one of these words may hold a credential or an ordinary value (a header map's
# `Content-Type`, a connection's host), so its value is refused only when it has a random token's form
# (`values.random_word`: long, high in entropy, switching case and digits often), where SECRET_WORDS refuse any value.
POSITION_WORDS = frozenset(
    {
        "header",
        "headers",
        "cookies",
        "session",
        "sessions",
        "connection",
        "connections",
        "conn",
        "connstr",
        "signature",
        "sig",
        "sas",
        "hmac",
        "oauth",
        "oauth2",
        "webhook",
        "license",
        "licence",
        "cert",
        "certificate",
        "login",
    }
)
# A `key` beside one of these words names a tensor's width, not a credential: Keras's MultiHeadAttention takes
# `key_dim`, and a transformer's builder passes it on (`model.kwargs.key_dim`); redacting it would make every such
# run impossible to re-create with `tracking rerun`.
SHAPE_WORDS = frozenset({"dim", "dims", "size", "shape", "axis", "axes"})
# Linear: `[A-Z]+` gives back at most one letter to its lookahead.
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_words(name: str) -> set[str]:
    """The words of a param's or a variable's name, lower case: split at `.`, `_`, `-` and lower-to-upper case."""
    return {word.lower() for word in _NAME_WORDS.findall(name)}


def names_secret(name: str) -> bool:
    """Whether a param's or an environment variable's name says it holds a credential (SECRET_WORDS, SECRET_PARTS,
    SECRET_ENDINGS)."""
    words = name_words(name)
    named = words & SECRET_WORDS
    if named == {"key"} and not words.isdisjoint(SHAPE_WORDS):
        named = set()
    last = _NAME_WORDS.findall(name)[-1:]
    named |= {"pin"} & {word.lower() for word in last}  # `pin`, `user_pin`; not `pin_memory`
    run_together = any(word.endswith(SECRET_ENDINGS) and word not in SECRET_WORDS | NOT_SECRET_WORDS for word in words)
    return bool(named) or run_together or any(part in name.lower() for part in SECRET_PARTS)
