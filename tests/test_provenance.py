import os

import pytest

from tracking.provenance import to_tags
from tracking.provenance.environment import gather_environment
from tracking.provenance.git import redact_diff
from tracking.provenance.hardware import gather_gpus, parse_cpuinfo, parse_nvidia_smi, query_nvidia_smi
from tracking.provenance.redaction import REDACTED, looks_secret, strip_credentials

NVIDIA_SMI = """\
0, NVIDIA H100 80GB HBM3, 550.54.15, 81559, 9.0, GPU-5e3a1c2b-aaaa-bbbb-cccc-0123456789ab
1, Tesla T4, 535.104.05, 15360, 7.5, [N/A]
"""

CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx avx2 fma avx512f
processor\t: 1
model name\t: ignored second core
"""


def test_parse_nvidia_smi_rows():
    gpus = parse_nvidia_smi(NVIDIA_SMI)
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "driver": "550.54.15",
        "memory_mib": 81559,
        "compute_capability": "9.0",
        "uuid": "GPU-5e3a1c2b-aaaa-bbbb-cccc-0123456789ab",
    }
    assert gpus[1]["uuid"] is None and gpus[1]["compute_capability"] == "7.5"
    assert parse_nvidia_smi("") == []
    assert parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the driver") == []


def test_missing_nvidia_smi_is_no_gpu():
    assert query_nvidia_smi("nvidia-smi-that-does-not-exist") == []


def test_fake_nvidia_smi_on_path_is_parsed(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVIDIA_SMI}EOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert [gpu["name"] for gpu in query_nvidia_smi()] == ["NVIDIA H100 80GB HBM3", "Tesla T4"]


def test_this_machine_says_plainly_it_has_no_gpu():
    record = gather_gpus()
    if record["count"]:
        pytest.skip("a GPU is present here")
    assert record["devices"] == [] and record["note"].startswith("no GPU")


def test_parse_cpuinfo_first_processor():
    model, flags = parse_cpuinfo(CPUINFO)
    assert model == "Intel(R) Xeon(R) Platinum 8480+"
    assert {"avx2", "fma", "avx512f"} <= flags


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://alice:s3cret@github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("https://ghp_abcdef123456@github.com/org/repo.git?token=x", "https://github.com/org/repo.git"),
        ("ssh://git:pw@host:2222/repo.git", "ssh://host:2222/repo.git"),
        ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
        ("/srv/git/repo.git", "/srv/git/repo.git"),
    ],
)
def test_strip_credentials(url, expected):
    assert strip_credentials(url) == expected


def test_redact_diff_keeps_name_drops_value():
    diff = '--- a/c.py\n+++ b/c.py\n+password = "hunter2"\n+API_KEY: abc123\n+rate = 0.1\n context token = "kept"\n'
    redacted = redact_diff(diff)
    assert "hunter2" not in redacted and "abc123" not in redacted
    assert f"+password = {REDACTED}" in redacted and "+rate = 0.1" in redacted
    assert f" context token = {REDACTED}" in redacted, "a committed secret in a context line leaves with the diff too"


def test_redact_diff_urls_tokens_and_subscripts():
    diff = (
        "diff --git a/deploy/app.py b/deploy/app.py\n--- a/deploy/app.py\n+++ b/deploy/app.py\n"
        '+DATABASE_URL = "postgresql://admin:dbpw@db.internal/app"\n+git = "https://ghp_tok@github.com/o/r.git"\n'
        '+headers = {"Authorization": "Bearer ghp_0123456789abcdefghijKLMN"}\n+aws = "AKIAABCDEFGHIJKLMNOP"\n'
        '+os.environ["API_TOKEN"] = "envtok"\n+url = "https://example.com/docs"\n'
    )
    redacted = redact_diff(diff)
    for secret in ("dbpw", "admin", "ghp_tok", "ghp_0123456789", "AKIAABCDEFGHIJKLMNOP", "envtok"):
        assert secret not in redacted
    assert f"postgresql://{REDACTED}@db.internal/app" in redacted and 'url = "https://example.com/docs"' in redacted
    assert redacted.splitlines()[:3] == diff.splitlines()[:3]


def test_environment_is_allow_listed_and_redacted():
    env = {
        "AWS_SECRET_ACCESS_KEY": "x" * 40,
        "HOME": "/root",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "TF_HUB_TOKEN": "hub",
        "TF_OPAQUE": "Zk3J9a0b1c2d3e4f5g6h7i8j9k0lmnopqrstu",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "PYTHONHASHSEED": "7",
        "CUDA_HOME": "/usr/local/cuda-12.4",
    }
    kept = gather_environment(env)
    assert set(kept) == {
        "TF_ENABLE_ONEDNN_OPTS",
        "TF_HUB_TOKEN",
        "TF_OPAQUE",
        "CUDA_VISIBLE_DEVICES",
        "PYTHONHASHSEED",
        "CUDA_HOME",
    }
    assert kept["TF_HUB_TOKEN"] == REDACTED and kept["TF_OPAQUE"] == REDACTED
    assert kept["CUDA_VISIBLE_DEVICES"] == "0,1" and kept["CUDA_HOME"] == "/usr/local/cuda-12.4"
    assert looks_secret("TF_X", "ghp_short")


def test_environment_values_are_judged_word_by_word():
    env = {
        "TF_XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "TF_ARGS": "--verbose --api-key=abc",
        "TF_HEADER": "Bearer ghp_0123456789abcdef",
        "KERAS_MIRROR": "https://bob:pw123@models.example.com/x",
        "KMP_AFFINITY": "granularity=fine,compact,1,0",
    }
    kept = gather_environment(env)
    assert kept["TF_XLA_FLAGS"] == env["TF_XLA_FLAGS"] and kept["KMP_AFFINITY"] == env["KMP_AFFINITY"]
    assert kept["TF_ARGS"] == REDACTED and kept["TF_HEADER"] == REDACTED
    assert kept["KERAS_MIRROR"] == "https://models.example.com/x"


def test_tags_are_prefixed_scalars_without_bulky_fields():
    record = {
        "git": {"commit": "abc", "diff": "big", "dirty": True},
        "gpu": {"devices": [{"name": "T4"}]},
        "seeds": {"base": 1},
        "dvc": {"experiment": None},
    }
    assert to_tags(record) == {
        "prov.git.commit": "abc",
        "prov.git.dirty": "true",
        "prov.gpu.devices.0.name": "T4",
        "prov.seeds.base": "1",
        "prov.dvc.experiment": "",
    }
