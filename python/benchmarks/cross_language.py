"""JVM to Python and Python to JVM on the arena, beside the JVM pair and what a Python user would pick instead
(multiprocessing.shared_memory with a pipe for the descriptors, a local socket, a torch.multiprocessing.Queue
carrying torch tensors and a multiprocessing.Pipe carrying the bytes), in the same run: --runs interleaved runs per
cell (3 by default), the median and the spread. Every producer writes only its sequence number into each tensor
(claim, write, post), so the figures compare transports, not fills. What a consumer reads is --touch: `all` (the
default) sums every word of each tensor; `one` reads only its first word, so that at small sizes the transport, not
the read, is measured. --touch applies to every consumer: the JVM's (PythonPeer drain), the arena's Python one
(through a drain in this file) and each Python peer's. The summary gives, per size, JVM -> Python and Python -> JVM
against the JVM pair and against each Python peer, as the median of the per-run ratios (cells of the same run).
Run from the repository root after `mvn test-compile` (it makes target/test-classpath.txt itself):

    target/python-venv/bin/python python/benchmarks/cross_language.py [seconds per cell] [sizes...]
        [--touch all|one] [--runs N]

The torch cell needs torch importable from that interpreter (it is left out, and says so, where it is not); its
tensors are shared by torch's sharing strategy (file_descriptor on Linux, unless changed).
"""
from __future__ import annotations

import argparse
import importlib.util
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
DRAIN = "--python-drain"  # this file run as the arena's Python consumer: DRAIN ENDPOINT ENTITY TOUCH


def read(words: np.ndarray, touch: str) -> int:
    """What every Python consumer does with a tensor's uint64 words: all of them summed, or the first one read."""
    return int(words[0]) if touch == "one" else int(words.sum(dtype=np.uint64))


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


def python_drain(env, endpoint, entity, touch):
    """The arena's Python consumer: the worker's drain (every word summed) for `all`, this file's for `one`."""
    if touch == "all":
        return python(env, "drain", endpoint, entity)
    return subprocess.Popen([PYTHON, os.path.abspath(__file__), DRAIN, endpoint, entity, touch], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def drain(endpoint: str, entity: str, touch: str) -> int:
    """The worker's drain with --touch: reads each tensor in place (see `read`) until one named "end"."""
    from mstar_transport.endpoint import Endpoint

    state = {"sum": 0, "tensors": 0, "done": False}

    def handle(tensor):
        if tensor.request_id == "end":
            state["done"] = True
            return
        state["sum"] += read(tensor.array[:8].view(np.uint64) if touch == "one" else tensor.array.view(np.uint64),
                             touch)
        state["tensors"] += 1

    with Endpoint.open(endpoint, entity) as ep:
        print("READY", flush=True)
        while not state["done"]:
            ep.receive(handle, timeout=0.5, limit=256)
    print(f"RESULT tensors={state['tensors']} touch={touch}", flush=True)
    return 0


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


def arena_pair(producer_kind, consumer_kind, size, seconds, cp, touch):
    directory = tempfile.mkdtemp(prefix="mstar-bench-", dir="/dev/shm")
    env = dict(os.environ, MSTAR_SHM_DIR=directory, MSTAR_SHM_ARENA="1", MSTAR_SHM_ARENA_SEGMENT_MB="256")
    try:
        consumer = (jvm(cp, env, "drain", DEPLOYMENT, "consumer", touch) if consumer_kind == "jvm"
                    else python_drain(env, DEPLOYMENT, "consumer", touch))
        wait_ready(consumer)
        args = ("blast", DEPLOYMENT, "producer", "consumer", str(size), str(seconds))
        producer = jvm(cp, env, *args) if producer_kind == "jvm" else python(env, *args)
        rate = result(producer)
        result(consumer)
        return float(rate["perSecond"])
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _shm_consumer(name, size, requests, acks, touch):
    block = shared_memory.SharedMemory(name=name)
    try:
        words = np.ndarray((WINDOW, size // 8), dtype=np.uint64, buffer=block.buf)
        while True:
            slot = struct.unpack("<i", requests.recv_bytes())[0]
            if slot < 0:
                break
            read(words[slot], touch)
            acks.send_bytes(struct.pack("<i", slot))
        del words
    finally:
        block.close()


def shm_pipe(size, seconds, touch):
    """multiprocessing.shared_memory for the bytes (a ring of WINDOW slots), pipes for the slot and its ACK."""
    block = shared_memory.SharedMemory(create=True, size=WINDOW * size)
    requests_out, requests_in = mp.Pipe()
    acks_out, acks_in = mp.Pipe()
    consumer = mp.Process(target=_shm_consumer, args=(block.name, size, requests_out, acks_in, touch))
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


def _torch_consumer(queue, acks, touch):
    while True:
        item = queue.get()
        if item is None:
            break
        slot, tensor = item
        read(tensor.numpy().view(np.uint64), touch)
        del item, tensor  # no reference left to the slot's storage before it is ACKed (and rewritten)
        acks.send_bytes(struct.pack("<i", slot))


def torch_queue(size, seconds, touch):
    """A torch.multiprocessing.Queue carrying (slot, tensor): a ring of WINDOW torch tensors moved to shared memory
    once (share_memory_()) and sent again as their slots come back, torch's sharing strategy passing each one's
    memory, a pipe for the slot's ACK (the shared_memory peer's window and ACKs)."""
    import torch
    import torch.multiprocessing as tmp

    ring = [torch.zeros(size // 8, dtype=torch.int64).share_memory_() for _ in range(WINDOW)]
    words = [t.numpy() for t in ring]  # the producer's writes, as numpy's (the same memory)
    queue = tmp.Queue()
    acks_out, acks_in = mp.Pipe()
    consumer = tmp.Process(target=_torch_consumer, args=(queue, acks_in, touch))
    consumer.start()
    try:
        free = list(range(WINDOW))
        sent = 0
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            while not free or acks_out.poll():
                free.append(struct.unpack("<i", acks_out.recv_bytes())[0])
            slot = free.pop()
            words[slot][0] = sent
            queue.put((slot, ring[slot]))
            sent += 1
        while len(free) < WINDOW:
            free.append(struct.unpack("<i", acks_out.recv_bytes())[0])
        elapsed = time.monotonic() - start
        queue.put(None)
        consumer.join()
        return sent / elapsed
    finally:
        queue.close()
        queue.join_thread()
        if consumer.is_alive():
            consumer.terminate()
            consumer.join()


def _pipe_consumer(conn, size, touch, producers_end):
    producers_end.close()  # forked with it: the producer's close must reach this end as EOF
    buffer = bytearray(size)
    words = np.frombuffer(buffer, dtype=np.uint64)
    while True:
        try:
            conn.recv_bytes_into(buffer)
        except EOFError:
            return
        read(words, touch)
        conn.send_bytes(b"a")


def mp_pipe(size, seconds, touch):
    """A multiprocessing.Pipe() carrying every byte (send_bytes, recv_bytes_into a buffer kept), one ACK message back
    per tensor on the same (duplex) pipe, WINDOW in flight (the local socket's window and ACKs)."""
    mine, theirs = mp.Pipe()
    consumer = mp.Process(target=_pipe_consumer, args=(theirs, size, touch, mine))
    consumer.start()
    theirs.close()
    payload = np.zeros(size // 8, dtype=np.uint64)
    sent = acked = 0
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        while sent - acked >= WINDOW:
            mine.recv_bytes()
            acked += 1
        payload[0] = sent
        mine.send_bytes(payload)
        sent += 1
    while acked < sent:
        mine.recv_bytes()
        acked += 1
    elapsed = time.monotonic() - start
    mine.close()
    consumer.join()
    return sent / elapsed


def _socket_consumer(sock, size, producers_end, touch):
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
        read(words, touch)
        sock.sendall(b"a")


def local_socket(size, seconds, touch):
    """A Unix stream socket carrying every byte, one ACK byte back per tensor, WINDOW in flight."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    consumer = mp.Process(target=_socket_consumer, args=(theirs, size, mine, touch))
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


def arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seconds", nargs="?", type=float, default=3.0, help="seconds per cell (3)")
    parser.add_argument("sizes", nargs="*", type=int, help="tensor sizes in bytes, multiples of 8 "
                        "(4096 1048576 16777216)")
    parser.add_argument("--touch", choices=("all", "one"), default="all",
                        help="what each consumer reads: every word summed (all) or the first word (one)")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs: every cell once per run (3)")
    args = parser.parse_args(argv)
    args.sizes = args.sizes or [4096, 1 << 20, 16 << 20]
    if any(size < 8 or size % 8 for size in args.sizes):
        parser.error("sizes must be positive multiples of 8")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main(argv):
    if argv[:1] == [DRAIN]:
        return drain(argv[1], argv[2], argv[3])
    args = arguments(argv)
    seconds, sizes, touch = args.seconds, args.sizes, args.touch
    cp = classpath()
    cells = {
        "JVM -> Python": lambda size: arena_pair("jvm", "python", size, seconds, cp, touch),
        "JVM -> JVM": lambda size: arena_pair("jvm", "jvm", size, seconds, cp, touch),
        "Python -> JVM": lambda size: arena_pair("python", "jvm", size, seconds, cp, touch),
        "Python -> Python": lambda size: arena_pair("python", "python", size, seconds, cp, touch),
        "shared_memory + pipe": lambda size: shm_pipe(size, seconds, touch),
        "local socket": lambda size: local_socket(size, seconds, touch),
    }
    if importlib.util.find_spec("torch") is not None:
        cells["torch mp.Queue"] = lambda size: torch_queue(size, seconds, touch)
    else:
        print(f"torch is not importable from {PYTHON}: the torch mp.Queue cell is left out", flush=True)
    cells["mp Pipe"] = lambda size: mp_pipe(size, seconds, touch)
    print(f"touch={touch}: consumers {'read the first word of' if touch == 'one' else 'sum every word of'} each tensor",
          flush=True)
    rates = {(name, size): [] for name in cells for size in sizes}
    for run in range(args.runs):  # interleaved: every cell once per run
        for size in sizes:
            for name, cell in cells.items():
                rates[(name, size)].append(cell(size))
                print(f"run {run + 1} {name:22s} {size:>9d} B: {rates[(name, size)][-1]:12.0f} tensors/s",
                      flush=True)
    print(f"\ntouch={touch}, {args.runs} interleaved runs of {seconds:g} s per cell")
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
    references = ["JVM -> JVM"] + [name for name in cells if name not in
                                   ("JVM -> Python", "JVM -> JVM", "Python -> JVM", "Python -> Python")]
    print("\nCross-language tensors/s over each reference's, run by run (cells of the same run): the median of the "
          "per-run ratios (min..max)\n")
    print("| cell | size | " + " | ".join(f"vs {name}" for name in references) + " |")
    print("|---|---:|" + "---:|" * len(references))
    for size in sizes:
        for name in ("JVM -> Python", "Python -> JVM"):
            columns = []
            for reference in references:
                ratios = [a / b for a, b in zip(rates[(name, size)], rates[(reference, size)])]
                columns.append(f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})")
            print(f"| {name} | {size} | " + " | ".join(columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
