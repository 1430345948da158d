"""The arena's ceiling is bytes, as the JVM's: MAX_SEGMENTS x SEGMENT_MB, dedicated segments (one tensor larger
than a segment) included; an idle dedicated segment gives its bytes back when the ceiling needs them."""
import os

from mstar_transport import format as f
from mstar_transport.arena import Arena

MIB = 1 << 20


def _arena(shm_env):
    return Arena(shm_env["MSTAR_SHM_DIR"], f.namespace("ipc:///tmp/mstar-ceiling", None), "producer",
                 {**shm_env, "MSTAR_SHM_ARENA_SEGMENT_MB": "1", "MSTAR_SHM_ARENA_MAX_SEGMENTS": "2"})


def _committed(shm_env):
    directory = shm_env["MSTAR_SHM_DIR"]
    return sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))


def test_dedicated_segments_count_their_bytes_against_the_ceiling(shm_env):
    arena = _arena(shm_env)
    try:
        first = arena.take(3 * MIB // 2, 0, 1)
        assert first is not None
        assert arena.take(3 * MIB // 2, 0, 2) is None, "a second 1.5 MiB segment would pass the 2 MiB ceiling"
        assert _committed(shm_env) <= 2 * MIB
        arena.free(first, 0, 1)
    finally:
        arena.close()


def test_an_idle_dedicated_segment_gives_its_bytes_back_when_the_ceiling_needs_them(shm_env):
    arena = _arena(shm_env)
    try:
        large = arena.take(3 * MIB // 2, 0, 1)
        arena.free(large, 0, 1)
        small = arena.take(4096, 0, 2)  # needs a 1 MiB segment: 1.5 + 1 MiB pass the ceiling
        assert small is not None and small.segment is not large.segment
        assert large.segment not in arena.segments and not os.path.exists(large.file.path)
        assert _committed(shm_env) <= 2 * MIB
        arena.free(small, 0, 2)
    finally:
        arena.close()
