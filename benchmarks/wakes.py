#!/usr/bin/env python3
"""Who puts whom to sleep and who wakes whom, from the scheduler's tracepoints: per thread, the times it slept
(gave up its core to wait) and was preempted, and per pair of threads the wakes, each per payload.

Record a few seconds of a measured benchmark run system-wide, then read the recording:
  perf record -e sched:sched_switch -e sched:sched_wakeup -a -o /tmp/sched.data -- sleep 2
  perf script -i /tmp/sched.data -F comm,tid,event,trace | benchmarks/wakes.py SECONDS PAYLOADS_PER_S
SECONDS is the recording's length, PAYLOADS_PER_S the run's rate (its ROW line). A wake whose waker is thread 0
came from an interrupt on an idle core: a timer that ended a timed sleep, mostly."""
import collections
import re
import sys


def main(seconds, rate):
    names = {"0": "idle/interrupt"}
    slept = collections.Counter()
    preempted = collections.Counter()
    wakes = collections.Counter()
    for line in sys.stdin:
        m = re.match(r"\s*(.+?)\s+(\d+)\s+sched:(sched_switch|sched_wakeup):\s+(.*)", line)
        if not m:
            continue
        comm, tid, event, trace = m.groups()
        names.setdefault(tid, comm)
        if event == "sched_switch":
            state = re.search(r"prev_state=(\S+)", trace).group(1)
            (preempted if state.startswith("R") else slept)[tid] += 1
        else:
            wakee = re.search(r"comm=(.+?) pid=(\d+)", trace)
            names.setdefault(wakee.group(2), wakee.group(1))
            wakes[(tid, wakee.group(2))] += 1
    payloads = seconds * rate

    def per(count):
        return f"{count / seconds:9.0f}/s {count / payloads:7.4f}/payload" if payloads else f"{count / seconds:9.0f}/s"

    print("thread                        slept                          preempted")
    for tid in sorted((set(slept) | set(preempted)) - {"0"}, key=lambda t: -(slept[t] + preempted[t]))[:12]:
        print(f"{names[tid][:16]:16} {tid:>7}  {per(slept[tid])}  {per(preempted[tid])}")
    print("\nwaker -> wakee                                wakes")
    for (waker, wakee), count in wakes.most_common(12):
        pair = f"{names.get(waker, waker)[:16]} {waker} -> {names.get(wakee, wakee)[:16]} {wakee}"
        print(f"{pair:44} {per(count)}")


if __name__ == "__main__":
    main(float(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
