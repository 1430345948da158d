"""JVM to Python and Python to JVM on the arena, beside the JVM pair and what a Python user would pick instead
(multiprocessing.shared_memory with a pipe for the descriptors, and a local socket), in the same run: 3
interleaved runs per cell, the median and the spread. Every consumer sums every word of each tensor; every
producer writes only its sequence number into each (claim, write, post), so the figures compare transports, not
fills. Run from the repository root after `mvn test-compile` (it makes target/test-classpath.txt itself):

    target/python-venv/bin/python python/benchmarks/cross_language.py [seconds per cell] [sizes...]
"""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from multiprocessing import shared_memory

import numpy as np

JAVA = os.environ.get("JAVA", "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java")
PYTHON = sys.executable
DEPLOYMENT = "ipc:///tmp/mstar-cross-bench"
WINDOW = 64


def classpath() -> str:
    path = "target/test-classpath.txt"
    if not os.path.exists(path):
        subprocess.run(["mvn", "-q", "-o", "dependency:build-classpath", "-Dmdep.includeScope=test",
                        f"-Dmdep.outputFile={path}"], check=True)
    return "target/test-classes:target/classes:" + open(path).read().strip()


def jvm(cp, env, *args):
    return subprocess.Popen([JAVA, "--enable-native-access=ALL-UNNAMED", "--add-exports",
                             "java.base/jdk.internal.misc=ALL-UNNAMED", "-cp", cp,
                             "io.mstar.transport.crossprocess.PythonPeer", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.PIPE, text=True)  # stdin: its parent watch


def python(env, *args):
    return subprocess.Popen([PYTHON, "-m", "mstar_transport.worker", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def wait_ready(process):
    for line in process.stdout:
        if line.startswith("READY"):
            return
    raise RuntimeError("a worker exited before READY")


def result(process) -> dict:
    out = process.stdout.read()
    process.wait(120)
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return dict(part.split("=", 1) for part in line[7:].split())
    raise RuntimeError("no RESULT:\n" + out)


def arena_pair(producer_kind, consumer_kind, size, seconds, cp):
    directory = tempfile.mkdtemp(prefix="mstar-bench-", dir="/dev/shm")
    env = dict(os.environ, MSTAR_SHM_DIR=directory, MSTAR_SHM_ARENA="1", MSTAR_SHM_ARENA_SEGMENT_MB="256")
    try:
        consumer = (jvm(cp, env, "drain", DEPLOYMENT, "consumer") if consumer_kind == "jvm"
                    else python(env, "drain", DEPLOYMENT, "consumer"))
        wait_ready(consumer)
        args = ("blast", DEPLOYMENT, "producer", "consumer", str(size), str(seconds))
        producer = jvm(cp, env, *args) if producer_kind == "jvm" else python(env, *args)
        rate = result(producer)
        result(consumer)
        return float(rate["perSecond"])
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _shm_consumer(name, size, requests, acks):
    block = shared_memory.SharedMemory(name=name)
    try:
        words = np.ndarray((WINDOW, size // 8), dtype=np.uint64, buffer=block.buf)
        while True:
            slot = struct.unpack("<i", requests.recv_bytes())[0]
            if slot < 0:
                break
            int(words[slot].sum(dtype=np.uint64))
            acks.send_bytes(struct.pack("<i", slot))
        del words
    finally:
        block.close()


def shm_pipe(size, seconds):
    """multiprocessing.shared_memory for the bytes (a ring of WINDOW slots), pipes for the slot and its ACK."""
    block = shared_memory.SharedMemory(create=True, size=WINDOW * size)
    requests_out, requests_in = mp.Pipe()
    acks_out, acks_in = mp.Pipe()
    consumer = mp.Process(target=_shm_consumer, args=(block.name, size, requests_out, acks_in))
    consumer.start()
    try:
        words = np.ndarray((WINDOW, size // 8), dtype=np.uint64, buffer=block.buf)
        free = list(range(WINDOW))
        sent = 0
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            while not free or acks_out.poll():
                free.append(struct.unpack("<i", acks_out.recv_bytes())[0])
            slot = free.pop()
            words[slot, 0] = sent
            requests_in.send_bytes(struct.pack("<i", slot))
            sent += 1
        while len(free) < WINDOW:
            free.append(struct.unpack("<i", acks_out.recv_bytes())[0])
        elapsed = time.monotonic() - start
        requests_in.send_bytes(struct.pack("<i", -1))
        consumer.join()
        del words
        return sent / elapsed
    finally:
        block.close()
        block.unlink()


def _socket_consumer(sock, size, producers_end):
    producers_end.close()  # forked with it: the producer's close must reach this end as EOF
    buffer = bytearray(size)
    view = memoryview(buffer)
    words = np.frombuffer(buffer, dtype=np.uint64)
    while True:
        got = 0
        while got < size:
            n = sock.recv_into(view[got:])
            if n == 0:
                return
            got += n
        int(words.sum(dtype=np.uint64))
        sock.sendall(b"a")


def local_socket(size, seconds):
    """A Unix stream socket carrying every byte, one ACK byte back per tensor, WINDOW in flight."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    consumer = mp.Process(target=_socket_consumer, args=(theirs, size, mine))
    consumer.start()
    theirs.close()
    payload = np.zeros(size // 8, dtype=np.uint64)
    sent = acked = 0
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        while sent - acked >= WINDOW:
            acked += len(mine.recv(WINDOW))
        payload[0] = sent
        mine.sendall(payload)
        sent += 1
    while acked < sent:
        acked += len(mine.recv(WINDOW))
    elapsed = time.monotonic() - start
    mine.close()
    consumer.join()
    return sent / elapsed


def main(argv):
    seconds = float(argv[0]) if argv else 3.0
    sizes = [int(s) for s in argv[1:]] or [4096, 1 << 20, 16 << 20]
    cp = classpath()
    cells = {
        "JVM -> Python": lambda size: arena_pair("jvm", "python", size, seconds, cp),
        "JVM -> JVM": lambda size: arena_pair("jvm", "jvm", size, seconds, cp),
        "Python -> JVM": lambda size: arena_pair("python", "jvm", size, seconds, cp),
        "Python -> Python": lambda size: arena_pair("python", "python", size, seconds, cp),
        "shared_memory + pipe": lambda size: shm_pipe(size, seconds),
        "local socket": lambda size: local_socket(size, seconds),
    }
    rates = {(name, size): [] for name in cells for size in sizes}
    for run in range(3):  # interleaved: every cell once per run
        for size in sizes:
            for name, cell in cells.items():
                rates[(name, size)].append(cell(size))
                print(f"run {run + 1} {name:22s} {size:>9d} B: {rates[(name, size)][-1]:12.0f} tensors/s",
                      flush=True)
    print("\n| transport | size | tensors/s (median) | GB/s | spread (min..max tensors/s) | vs JVM -> JVM |"
          " vs shared_memory + pipe |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for size in sizes:
        pair = statistics.median(rates[("JVM -> JVM", size)])
        baseline = statistics.median(rates[("shared_memory + pipe", size)])
        for name in cells:
            r = rates[(name, size)]
            m = statistics.median(r)
            print(f"| {name} | {size} | {m:.0f} | {m * size / 1e9:.2f} | {min(r):.0f}..{max(r):.0f} |"
                  f" {m / pair:.2f} | {m / baseline:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
