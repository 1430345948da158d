"""`mstar_<ns>_stats_<entity>_<nonce>`: an endpoint's latest counters, for `mstar-shm stats` run from any process
(docs/format.md section 13). A line of `key=value` fields for people, then the same as JSON; each snapshot is
written to `<name>.next`, locked as every file of ours, and renamed over the name, so a reader never sees half of
one and a sweep leaves it while we live."""
from __future__ import annotations

import json
import os
import secrets
import time

from . import format as f
from .shm import OwnedFile

_INTERVAL_S = 1.0  # while anything moved; an idle endpoint republishes every 10 s, as the JVM's
_IDLE_INTERVAL_S = 10.0


class StatsFile:
    def __init__(self, directory: str, ns: str, entity: str):
        self.directory = directory
        self.name = f.stats_name(ns, entity, secrets.token_hex(4))
        self._current = None
        self._published = None
        self._published_at = 0.0

    def publish(self, stats: dict, force: bool = False):
        """Writes a snapshot of `stats` when it changed (at most once a second) or every 10 s."""
        now = time.monotonic()
        since = now - self._published_at
        if not force and (since < _INTERVAL_S or (stats == self._published and since < _IDLE_INTERVAL_S)):
            return
        self._published, self._published_at = dict(stats), now
        fields = " ".join(f"{key}={value}" for key, value in stats.items())
        snapshot = json.dumps({"arena": "python", "stats": stats, "segmentMap": []}, separators=(",", ":"))
        following = OwnedFile(self.directory, self.name + ".next", 0)
        try:
            os.pwrite(following.fd, f"arena=python {fields} segmentMap=\n{snapshot}\n".encode(), 0)
            os.rename(following.path, os.path.join(self.directory, self.name))
        except BaseException:
            following.remove()
            raise
        following.path = os.path.join(self.directory, self.name)
        if self._current is not None:
            os.close(self._current.fd)  # its name is the new snapshot's now: this only drops the old inode's lock
        self._current = following

    def drop_after_fork(self):
        if self._current is not None:
            self._current.drop_after_fork()

    def remove(self):
        if self._current is not None:
            self._current.remove()
            self._current = None
