"""Tokens known by their format: the detectors of detect-secrets and the formats it lacks, run on RE2.

Every pattern that reads text from outside runs on RE2 (`google-re2`), in time linear in the line: no lookaround,
no back-reference; what RE2 cannot say (a token's mix of cases) is checked in Python on the few candidates it finds.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache
from itertools import pairwise
from typing import Any


def linear(pattern: str, ignore_case: bool = False) -> Any:
    """`pattern` compiled by RE2, which matches in time linear in the text (no lookaround, no back-reference):
    every pattern here runs on text from outside, where a backtracking one could take minutes on one line."""
    import re2

    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    options.max_mem = 64 << 20  # the DFA's memory: the formats' alternation stays on the fast path
    return re2.compile(pattern, options)


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
    "xAI": r"xai-[A-Za-z0-9_\-]{20,}",
    "Pinecone": r"pcsk_[A-Za-z0-9_\-]{20,}",
    "LangSmith": r"lsv2_(?:pt|sk)_[A-Za-z0-9_]{20,}",
    "Tencent Cloud": r"AKID[A-Za-z0-9]{13,40}",
    "Google OAuth refresh token": r"1//0[A-Za-z0-9_\-]{20,}",
    "Cloudflare origin CA key": r"v1\.0-[a-f0-9]{24}-[a-f0-9]{100,}",
    "Azure DevOps": r"[A-Za-z0-9]{52}AZDO[A-Za-z0-9]{4,}",
    "AWS session token": r"(?:FwoGZXIvYXdzE|IQoJb3JpZ2luX2Vj)[A-Za-z0-9/+=]{20,}",
    "Neptune": r"eyJhcGlfYWRkcmVzcyI6[A-Za-z0-9+/=]{20,}",
}
# Formats too plain to tell from a digest or a long identifier alone, taken only when they hold 4 or more each of upper
# case, lower case and digits (random 40 characters do): an Okta API token (`00` and 40 more), a Cloudflare API token.
_MIXED_FORMATS = linear(r"(?:^|[^A-Za-z0-9_\-])(?P<token>00[A-Za-z0-9_\-]{40}|[A-Za-z0-9_\-]{40})(?:$|[^A-Za-z0-9_\-])")
# A credential's value written into a name after the word that names it (`customers_password_Hunter2x9Q.npz`,
# `token-Ab3dEf9h`): taken when it mixes upper case, lower case and digits, so `password_reset.py` stays.
_NAMED_VALUE = linear(
    r"(?:passw(?:or)?d|passwd|pwd|secret|token|api[_-]?key|apikey)[_\-=.]+(?P<token>[A-Za-z0-9+/=]{8,})",
    ignore_case=True,
)
# An Azure DevOps token of the older form: 52 characters of lower-case base32, taken only whole and with 4 or more
# digits (random 52 do; a long lower-case word or a run of one letter, as `xxxx...`, does not).
_BASE32_52 = linear(r"(?:^|[^A-Za-z0-9])(?P<token>[a-z2-7]{52})(?:$|[^A-Za-z0-9])")
# A token of TOKEN_FORMATS starts a text or follows a character that cannot be part of it (matched, not looked at).
_OWN_FORMATS = linear(
    r"(?:^|[^A-Za-z0-9])(?P<token>" + "|".join(f"(?:{pattern})" for pattern in TOKEN_FORMATS.values()) + ")"
)
# A secret access key alone: 40 characters of base64 mixing upper case, lower case and digits (a git commit id is
# lower-case hex), also as a path's part (`data/raw/<key>.csv`); its edges are matched, its mix checked apart.
_AWS_SECRET_KEY = linear(r"(?:^|[^A-Za-z0-9+=])(?P<token>[A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9+=])")
# Credentials known by what precedes them: an HTTP Authorization scheme's value (with a digit, checked apart, so
# prose such as "Bearer authentication" stays), and the user:password of `curl -u`/`--user`.
_CONTEXT = linear(
    r"\b(?:Bearer|Basic)\s+(?P<scheme>[A-Za-z0-9_\-.=+/~]{8,})"
    r"|(?:^|\s)(?:-u|--user)(?:\s+|=)['\"]?(?P<user>[^\s:'\"]+:[^\s'\"]+)"
)
# A random token's form, measured on 2,000 random strings per alphabet and length (docs/guarantees.md, "A random
# token in a credential's position"): at least RANDOM_MIN_CHARS characters, Shannon entropy of RANDOM_MIN_BITS or
# more per character, and a switch between upper case, lower case and digits at RANDOM_MIN_SWITCHES or more of its
# letters and digits. Random base62 of 16 characters switches at 0.60 (1st percentile 0.33); names people write
# switch seldom (`gemma2_instruct_2b_en` 0.24, `runs/2024/exp12/model` 0.24, `dense_block_v2` 0.08). Hex, whose
# 16 letters and digits switch less (0.47, 1st percentile 0.13 at 16 characters), is taken on its entropy alone
# (1st percentile 2.73 at 16 characters).
RANDOM_MIN_CHARS = 16
RANDOM_MIN_BITS = 3.0
RANDOM_MIN_SWITCHES = 0.3
HEX_MIN_BITS = 2.5
_HEX = re.compile(r"[0-9a-fA-F]+")  # one character class matched whole: linear in the word
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
        linear(_LONG_REPEAT.sub(r"{\1,}", _LOOKAROUND.sub("", pattern.pattern)), bool(pattern.flags & re.IGNORECASE))
        for pattern in patterns
    )


def known_tokens(text: str) -> set[str]:
    """The substrings of `text` that have a known token format or follow `Bearer`, `Basic` or `curl -u`."""
    found = {match["token"] for match in _OWN_FORMATS.finditer(text)}
    found.update(match["token"] for match in _AWS_SECRET_KEY.finditer(text) if _mixed(match["token"]))
    found.update(match["token"] for match in _MIXED_FORMATS.finditer(text) if _mixed(match["token"], 4))
    found.update(match["token"] for match in _BASE32_52.finditer(text) if sum(c.isdigit() for c in match["token"]) >= 4)
    found.update(match["token"] for match in _NAMED_VALUE.finditer(text) if _mixed(match["token"]))
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


def _mixed(word: str, each: int = 1) -> bool:
    """Whether `word` holds at least `each` upper-case letters, `each` lower-case letters and `each` digits."""
    counts = (sum(c.isupper() for c in word), sum(c.islower() for c in word), sum(c.isdigit() for c in word))
    return min(counts) >= each


def random_word(word: str) -> bool:
    """Whether `word` has a random token's form: long, high in entropy, switching often between upper case, lower
    case and digits (RANDOM_MIN_*). Judged only in a credential's position (`words.POSITION_WORDS`): the run's own
    digests and ids have this form too, and are taken everywhere else."""
    if len(word) < RANDOM_MIN_CHARS:
        return False
    counts = Counter(word)
    bits = -sum(count / len(word) * math.log2(count / len(word)) for count in counts.values())
    if _HEX.fullmatch(word):
        return bits >= HEX_MIN_BITS and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    kinds = [_kind(char) for char in word if char.isascii() and char.isalnum()]
    switches = sum(a != b for a, b in pairwise(kinds)) / max(1, len(kinds) - 1)
    return bits >= RANDOM_MIN_BITS and switches >= RANDOM_MIN_SWITCHES


def _kind(char: str) -> int:
    """0 for a digit, 1 for a lower-case letter, 2 for an upper-case one."""
    return 0 if char.isdigit() else 1 if char.islower() else 2
