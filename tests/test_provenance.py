import os
from pathlib import Path

import pytest
from conftest import REPO
from test_redaction import redact_diff

from tracking.inspect.diff.ranked_groups import group_diffs
from tracking.inspect.diff.runs import RunSnapshot
from tracking.provenance import capture, to_fields, to_tags
from tracking.provenance.environment import gather_environment
from tracking.provenance.hardware import gather_cpu, gather_gpus, parse_cpuinfo, parse_nvidia_smi, query_nvidia_smi
from tracking.redaction import REDACTED, looks_secret, strip_credentials

NVIDIA_SMI = """\
0, NVIDIA H100 80GB HBM3, 550.54.15, 81559, 9.0, GPU-5e3a1c2b-aaaa-bbbb-cccc-0123456789ab
1, Tesla T4, 535.104.05, 15360, 7.5, [N/A]
"""

CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
flags\t\t: fpu sse4_2 avx avx2 fma avx512f
processor\t: 1
model name\t: ignored second core
"""

ARM_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd08
CPU revision\t: 3

processor\t: 1
CPU part\t: 0xd03

Hardware\t: BCM2835
Model\t\t: Raspberry Pi 4 Model B
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
    model, identity, flags = parse_cpuinfo(CPUINFO)
    assert model == "Intel(R) Xeon(R) Platinum 8480+"
    assert identity == "GenuineIntel family 6 model 143 stepping 8"
    assert {"avx2", "fma", "avx512f"} <= flags


def test_parse_cpuinfo_arm_names_the_part_and_the_board_given_last():
    model, identity, flags = parse_cpuinfo(ARM_CPUINFO)
    assert (model, identity) == ("BCM2835", "implementer 0x41 part 0xd08 variant 0x0 revision 3")
    assert "asimd" in flags
    assert parse_cpuinfo("") == (None, None, set())


def amd_epyc(folder: Path, family: int, model: int, l1d: str) -> dict:
    """The CPU record of a VM that calls its CPU `AMD EPYC`, whatever its generation."""
    folder.mkdir()
    (folder / "cpuinfo").write_text(
        f"processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
        "model name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu avx avx2 fma avx512f avx512_vnni avx512_bf16\n"
    )
    for index, (level, kind, size) in enumerate([(1, "Data", l1d), (1, "Instruction", "32K"), (2, "Unified", "1024K")]):
        cache = folder / f"cache/index{index}"
        cache.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (cache / name).write_text(f"{value}\n")
    return gather_cpu(folder / "cpuinfo", folder / "cache")


def test_diff_tells_apart_cpu_generations_that_share_a_model_name_and_instruction_sets(tmp_path):
    """Two VMs' "AMD EPYC" (Zen 4 and Zen 5) trained the same code to other weights; the diff must say why."""
    zen4, zen5 = amd_epyc(tmp_path / "zen4", 25, 17, "32K"), amd_epyc(tmp_path / "zen5", 26, 2, "48K")
    assert zen4["cache"] == {"l1d": "32K", "l1i": "32K", "l2": "1024K"}
    runs = [
        RunSnapshot("0" * 32, "r", "1", "FINISHED", {}, {}, to_fields({"cpu": cpu}), None, "") for cpu in (zen4, zen5)
    ]
    (hardware,) = [group for group in group_diffs(*runs) if group.name == "hardware"]
    assert {change.key: (change.a, change.b) for change in hardware.changes} == {
        "cpu.id": ("AuthenticAMD family 25 model 17 stepping 1", "AuthenticAMD family 26 model 2 stepping 1"),
        "cpu.cache.l1d": ("32K", "48K"),
    }


def test_no_cache_folder_is_no_caches(tmp_path):
    assert gather_cpu(tmp_path / "no-cpuinfo", tmp_path / "no-cache")["cache"] == {}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://alice:s3cret@github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("https://ghp_abcdef123456@github.com/org/repo.git?token=x", "https://github.com/org/repo.git"),
        ("ssh://git:pw@host:2222/repo.git", "ssh://host:2222/repo.git"),
        ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
        ("https://gitlab.com/g/r.git#glpat-abcdefghij0123456789", "https://gitlab.com/g/r.git"),
        ("https://bob:pa/ss1word@git.example.com/r.git", "https://git.example.com/r.git"),
        ("ssh://git@host.example.com:2222/r.git", "ssh://host.example.com:2222/r.git"),
        ("/srv/git/repo.git", "/srv/git/repo.git"),
        ("sqlite:////work/project/mlflow.db", "sqlite:////work/project/mlflow.db"),
        ("sqlite:///mlflow.db", "sqlite:///mlflow.db"),
        ("file:///tmp/mlruns", "file:///tmp/mlruns"),
        ("postgresql://user:pw@db.example.com:5432/mlflow?sslmode=require", "postgresql://db.example.com:5432/mlflow"),
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
        "TF_CPP_HUB_TOKEN": "hub",
        "TF_XLA_OPAQUE": "Zk3J9a0b1c2d3e4f5g6h7i8j9k0lmnopqrstu",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "PYTHONHASHSEED": "7",
        "CUDA_HOME": "/usr/local/cuda-12.4",
    }
    kept = gather_environment(env)
    assert set(kept) == {
        "TF_ENABLE_ONEDNN_OPTS",
        "TF_CPP_HUB_TOKEN",
        "TF_XLA_OPAQUE",
        "CUDA_VISIBLE_DEVICES",
        "PYTHONHASHSEED",
        "CUDA_HOME",
    }
    assert kept["TF_CPP_HUB_TOKEN"] == REDACTED and kept["TF_XLA_OPAQUE"] == REDACTED
    assert kept["CUDA_VISIBLE_DEVICES"] == "0,1" and kept["CUDA_HOME"] == "/usr/local/cuda-12.4"
    assert looks_secret("TF_X", "ghp_short")


def test_environment_values_are_judged_word_by_word():
    env = {
        "TF_XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "TF_CPP_ARGS": "--verbose --api-key=abc",
        "TF_GPU_HEADER": "Bearer ghp_0123456789abcdef",
        "KERAS_MIRROR": "https://bob:pw123@models.example.com/x",
        "KMP_AFFINITY": "granularity=fine,compact,1,0",
    }
    kept = gather_environment(env)
    assert kept["TF_XLA_FLAGS"] == env["TF_XLA_FLAGS"] and kept["KMP_AFFINITY"] == env["KMP_AFFINITY"]
    assert kept["TF_CPP_ARGS"] == REDACTED and kept["TF_GPU_HEADER"] == REDACTED
    assert kept["KERAS_MIRROR"] == "https://models.example.com/x"


def test_tags_are_prefixed_scalars_without_bulky_fields():
    record = {
        "git": {"commit": "abc", "changed_files": [{"path": "a.py", "added": 1, "deleted": 0}], "dirty": True},
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


def test_a_run_is_tagged_with_its_searchable_essentials_and_the_record_keeps_the_rest(tmp_path):
    """Issue 50: 150 `prov.*` tags stood above the verdict on a narrow run page. A real record's tags are the few
    dozen fields SEARCHABLE names (seeds, backend, versions, device, code, data, model); every field, those and the
    rest (environment, OS, CPU flags, each code file's hash), is still named the same way for diff and rerun."""
    record = capture(REPO, {"base": 42, "init": 7}, {"effective": {"backend": "tensorflow", "op_determinism": True}})
    record["dvc"]["deps"] = {"train": {"data/prepared": "0b2d.dir", "pipelines/train.py": "1470"}}
    tags, fields = to_tags(record), to_fields(record)
    assert 15 <= len(tags) <= 40, sorted(tags)
    assert tags.items() <= fields.items() and len(fields) > len(tags) + 20
    for name in ("seeds.init", "determinism.effective.backend", "software.versions.keras", "cpu.id", "git.commit"):
        assert f"prov.{name}" in tags
    assert tags["prov.dvc.deps.train.data/prepared"] == "0b2d.dir"  # the data's hash, which rerun checks
    left = {name for name in fields if name not in tags}
    assert "prov.dvc.deps.train.pipelines/train.py" in left and "prov.os.system" in left
    assert any(name.startswith("prov.environment.") for name in left)
    assert all(name not in left for name in fields if name.startswith("prov.seeds."))
