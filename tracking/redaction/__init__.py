"""The one home of what counts as a secret, and of how it is taken out of what a run records.

Four kinds of secret are recognised, wherever the product captures or prints text (the snapshot's file names,
environment variables, params, URLs, the data source's name, error lines), by one rule for a param or a variable
(`why_secret`: its name, its value's form, or both):
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
- a random token in a credential's position: a name holding `headers`, `session`, `connection`, `sig`, ...
  (`POSITION_WORDS`) refuses a value with a word of a random token's form (`random_word`: long, high in entropy,
  switching case and digits often), though no format matches; elsewhere the run's own digests keep that form.
A team's code named "package.module:function" is no assignment, though its module's name says `secret`.
Text is judged line by line (`rules`), tokens by their format (`formats`), names by their words (`words`), values
with their names (`values`); every pattern that reads text from outside runs on RE2, in time linear in the line,
and the tokens found are taken out in one pass (`onepass`), in time linear in the text whatever their number.
"""

from tracking.redaction.formats import TOKEN_FORMATS, TOKEN_PREFIXES, known_tokens, random_word
from tracking.redaction.onepass import REDACTED, replace_all
from tracking.redaction.rules import (
    URL_USERINFO,
    redact_line,
    redact_lines,
    redact_name,
    redact_printed,
    redact_text,
    strip_credentials,
    strip_url_userinfo,
    was_redacted,
)
from tracking.redaction.values import (
    MIN_KNOWN_CHARS,
    looks_secret,
    redact_param,
    redact_params,
    secret_values,
    why_secret,
)
from tracking.redaction.words import POSITION_WORDS, SECRET_NAME, names_secret

__all__ = [
    "MIN_KNOWN_CHARS",
    "POSITION_WORDS",
    "REDACTED",
    "SECRET_NAME",
    "TOKEN_FORMATS",
    "TOKEN_PREFIXES",
    "URL_USERINFO",
    "known_tokens",
    "looks_secret",
    "names_secret",
    "random_word",
    "redact_line",
    "redact_lines",
    "redact_name",
    "redact_param",
    "redact_params",
    "redact_printed",
    "redact_text",
    "replace_all",
    "secret_values",
    "strip_credentials",
    "strip_url_userinfo",
    "was_redacted",
    "why_secret",
]
