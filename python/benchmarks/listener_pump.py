"""The README's producer, with and without a listener, into a Python consumer (`worker drain`) or any other that takes
the same arguments (a JVM's: `java ... io.mstar.transport.crossprocess.PythonPeer`): 4 KiB tensors in a window of 64;
when the window is full the producer with a listener pumps outcomes with receive(handler, 0.05), the one without
waits in await_outcomes(1, 0.05). Prints tensors/s for each and their ratio.

    python benchmarks/listener_pump.py [seconds [consumer command ...]]
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from mstar_transport import Endpoint, Listener

DEPLOYMENT = "ipc:///tmp/mstar-listener-pump"
SIZE = 4096
WINDOW = 64


class Count(Listener):
    def __init__(self):
        self.told = 0

    def delivered(self, request_id, msb, lsb):
        self.told += 1

    def failed(self, request_id, msb, lsb, failure, detail):
        raise AssertionError(f"{request_id}: {failure}: {detail}")


def run(env, seconds, with_listener, consumer_command):
    # stdin a pipe kept open: a JVM worker takes its stdin closing for its parent gone
    consumer = subprocess.Popen(consumer_command + ["drain", DEPLOYMENT, "consumer"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    for line in consumer.stdout:  # a JVM may log first
        if line.strip() == "READY":
            break
    else:
        raise RuntimeError(f"the consumer exited before READY: {consumer_command}")
    listener = Count() if with_listener else None
    payload = np.zeros(SIZE, np.uint8)
    with Endpoint.open(DEPLOYMENT, "producer", listener=listener, env=env) as ep:
        sent = 0
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            while ep.in_flight_count() >= WINDOW:
                if with_listener:
                    ep.receive(lambda t: None, timeout=0.05)
                else:
                    ep.await_outcomes(1, 0.05)
            ep.post("consumer", "t", payload)
            sent += 1
        ep.await_outcomes(WINDOW, 10)
        elapsed = time.monotonic() - start
        ep.post("consumer", "end", payload[:8])
        ep.await_outcomes(1, 10)
    consumer.wait(30)
    return sent / elapsed


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    consumer_command = sys.argv[2:] or [sys.executable, "-m", "mstar_transport.worker"]
    directory = tempfile.mkdtemp(prefix="mstar-bench-", dir="/dev/shm")
    try:
        env = {"MSTAR_SHM_DIR": directory}
        without = run(env, seconds, False, consumer_command)
        with_ = run(env, seconds, True, consumer_command)
        print(f"RESULT without_listener={without:.0f}/s with_listener={with_:.0f}/s ratio={with_ / without:.2f}")
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
