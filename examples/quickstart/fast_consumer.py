"""The fast path's consumer in Python: the JVM FastProducer's tensors, read in place (a read-only numpy view of the
producer's slot, no copy); the endpoint ACKs each when the handler returns."""
import sys

from mstar_transport import Endpoint

count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
seen = [0, 0]  # tensors, tensors whose bytes differ from their first byte


def handle(tensor):
    data = tensor.array.view("uint8")
    seen[1] += int(data[0] != data[-1])
    seen[0] += 1


with Endpoint.open("fast-pipeline", "consumer") as endpoint:  # MSTAR_SHM_* from the environment, as the JVM's
    while seen[0] < count and endpoint.receive(handle, timeout=30, limit=256) > 0:
        pass
print(f"python consumer: received={seen[0]} torn={seen[1]}")
sys.exit(0 if seen == [count, 0] else 1)
