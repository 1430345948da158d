import os
import pathlib
import re
import shutil
import tempfile

import pytest

SPEC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "format.md"
_GOLDEN = re.compile(r"<!-- golden: ([a-z-]+) -->\s*```[a-z]*\n(.*?)```", re.DOTALL)


def golden_blocks():
    return {m.group(1): m.group(2).strip() for m in _GOLDEN.finditer(SPEC.read_text())}


def golden_bytes(name):
    lines = [line.split("#")[0] for line in golden_blocks()[name].splitlines()]
    return bytes.fromhex("".join(lines).replace(" ", ""))


def golden_values(name):
    out = {}
    for line in golden_blocks()[name].splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


@pytest.fixture
def spec():
    return golden_blocks()


@pytest.fixture
def shm_env():
    """A private directory under /dev/shm for one test, checked empty at its end: nothing may be left behind."""
    directory = tempfile.mkdtemp(prefix="mstar-pytest-", dir="/dev/shm")
    env = {"MSTAR_SHM_DIR": directory, "MSTAR_SHM_ARENA_SEGMENT_MB": "4", "MSTAR_SHM_ARENA_FULL_TIMEOUT_S": "0.2"}
    yield env
    left = os.listdir(directory)
    shutil.rmtree(directory)
    assert left == [], f"files left behind: {left}"
