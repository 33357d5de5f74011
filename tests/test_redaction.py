"""The one set of redaction rules: every token format it promises is taken out of a diff and of an environment
value, ordinary code passes unchanged, and a private key block leaves no line of its body."""

from __future__ import annotations

import subprocess

import pytest
from conftest import REPO

from tracking.provenance.environment import gather_environment
from tracking.provenance.git import redact_diff
from tracking.provenance.redaction import REDACTED, SECRET_NAME, redact_lines, strip_url_userinfo

# One of each format: the prefixes detect-secrets lacks, and a sample of the detectors it maintains.
TOKENS = {
    "github classic": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "github short": "ghp_0123456789abcdefghijKLMN",
    "github fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "gitlab": "glpat-abcdefghij0123456789",
    "hugging face": "hf_abcdefghijklmnopqrstuvwxyz012345",
    "api key sk-": "sk-proj-abcdefghijklmnop0123456789",
    "aws access key": "AKIAABCDEFGHIJKLMNOP",
    "slack": "xoxb-123456789012-abcdefghijkl",
    "slack webhook": "https://hooks.slack.com/services/T01234567/B01234567/abcdefghijklmnopqrstuvwx",
    "stripe": "sk_live_" + "a1B2c3D4e5F6g7H8i9J0k1L2",
    "sendgrid": "SG." + "a" * 22 + "." + "b" * 43,
    "pypi": "pypi-AgEIcHlwaS5vcmc" + "x" * 70,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "telegram": "123456789:" + "A" * 35,
}


@pytest.mark.parametrize("token", TOKENS.values(), ids=TOKENS.keys())
def test_every_token_format_leaves_neither_a_diff_nor_an_environment_value(token: str):
    diff = f'--- a/app.py\n+++ b/app.py\n+client = connect("{token}")\n call({token})\n'
    redacted = redact_diff(diff)
    assert token not in redacted and redacted.count(REDACTED) == 2, redacted
    assert redacted.splitlines()[:2] == diff.splitlines()[:2], "file headers stay as git wrote them"
    assert gather_environment({"TF_HEADER": f"Bearer {token}"}) == {"TF_HEADER": REDACTED}


def test_a_private_key_block_is_redacted_line_by_line_keeping_the_diff_markers():
    lines = ["+KEY = '''", "+-----BEGIN RSA PRIVATE KEY-----", "+MIIEpAIBAAKCAQEA0Z3VS5JJcds3", " Zm9vYmFyYmF6\r"]
    lines += ["+-----END RSA PRIVATE KEY-----", "+'''", "+rate = 0.1"]
    redacted = list(redact_lines(lines))
    assert redacted[2:4] == [f"+{REDACTED}", f" {REDACTED}\r"]
    assert redacted[0] == lines[0] and redacted[-2:] == lines[-2:], "the block ends at its END line"
    assert "MIIE" not in "".join(redacted)


def test_the_projects_own_code_changes_only_where_a_credential_is_named():
    """No false positives from the token formats on ordinary code: of every line of the library, stages and
    benches, only those naming a secret-looking name (`page_token = ...`, redacted on purpose) change."""
    files = subprocess.run(
        ["git", "ls-files", "tracking", "pipelines", "bench"], cwd=REPO, capture_output=True, text=True
    )
    lines = [line for name in files.stdout.split() for line in (REPO / name).read_text().split("\n")]
    changed = [before for before, after in zip(lines, redact_lines(lines), strict=True) if before != after]
    assert changed, "the assignment rule is exercised"
    assert [line for line in changed if not SECRET_NAME.search(line)] == []


def test_names_that_merely_contain_auth_are_not_credentials():
    assert list(redact_lines(['author = "Ada"', "authoritative: True", 'authorization = "Basic x"'])) == [
        'author = "Ada"',
        "authoritative: True",
        f"authorization = {REDACTED}",
    ]


def test_url_userinfo_is_removed_from_environment_values():
    assert strip_url_userinfo("https://bob:pw123@models.example.com/x https://ok.example.com") == (
        "https://models.example.com/x https://ok.example.com"
    )


def test_terraform_variables_are_not_tensorflow_ones_and_a_dvc_commit_is_not_a_token():
    env = {
        "TF_VAR_db_password": "plain-words",
        "TF_TOKEN_app_terraform_io": "x",
        "TF_CLI_CONFIG_FILE": "/root/.terraformrc",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "DVC_EXP_BASELINE_REV": "b118c72ce8a0d7c0ad1e6a8b7c46d0f5b3e2a1c9",
        "DVC_EXP_NAME": "ghp_" + "a1" * 18,
    }
    assert gather_environment(env) == {
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "DVC_EXP_BASELINE_REV": env["DVC_EXP_BASELINE_REV"],
        "DVC_EXP_NAME": REDACTED,
    }
