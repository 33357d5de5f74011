"""A file written through `written_whole` appears whole or not at all, and an earlier one stays until replaced."""

from pathlib import Path

import pytest

from tracking.whole_file import written_whole


def test_the_file_appears_when_the_block_ends_and_no_temporary_stays(tmp_path: Path):
    target = tmp_path / "noise.json"
    with written_whole(target) as temporary:
        temporary.write_text("{}")
        assert temporary.parent == tmp_path and not target.exists()
    assert target.read_text() == "{}" and sorted(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("interruption", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_an_interrupted_write_leaves_the_earlier_file_and_nothing_else(tmp_path: Path, interruption: BaseException):
    target = tmp_path / "model.keras"
    target.write_bytes(b"earlier")
    with pytest.raises(type(interruption)), written_whole(target) as temporary:
        temporary.write_bytes(b"half")
        raise interruption
    assert target.read_bytes() == b"earlier" and sorted(tmp_path.iterdir()) == [target]


def test_a_refused_write_is_reported_against_the_file_the_user_knows(tmp_path: Path):
    target = tmp_path / "no-such-folder" / "run.json"
    with pytest.raises(OSError) as raised, written_whole(target):
        pass
    assert raised.value.filename == str(target)
