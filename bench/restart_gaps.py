#!/usr/bin/env python3
"""Puts each call's long silences down to a restart or to the machine.

    python3 bench/restart_gaps.py GAPS RESTARTS

GAPS is `voice-edge loadgen --gap-log`: one line per silence of 50 ms or more between two echoes,
"END_UNIX_MS GAP_MS CALL". RESTARTS has a line per restart, "STOP_UNIX_MS UP_UNIX_MS [NAME]":
when the restart was asked for and when the relay served again. A silence is the restart's when
it overlaps that window plus 1 s; otherwise it is one the machine gives anyway (a loaded
scheduler, a load generator on the same cores). Prints one line, tab-separated: the longest
silence at a restart (ms, "< 50" if none), how many calls heard one of 100 ms or more there, how
many restarts any call heard at all, and the longest silence elsewhere (ms, "< 50" if none).
Shared by bench/restart/run.sh and bench/compose/restart.sh.
"""
import sys

SLACK_MS = 1000


def main(gaps_path, restarts_path):
    windows = []
    for line in open(restarts_path):
        parts = line.split()
        if len(parts) >= 2:
            windows.append((int(parts[0]), int(parts[1]) + SLACK_MS))
    at_restart, elsewhere, heard = {}, {}, set()
    for line in open(gaps_path):
        end, ms, call = line.split()
        end, ms = int(end), float(ms)
        hits = [i for i, (a, b) in enumerate(windows) if end >= a and end - ms <= b]
        heard.update(hits)
        d = at_restart if hits else elsewhere
        d[call] = max(d.get(call, 0.0), ms)

    def worst(d):
        return f"{max(d.values()):.0f}" if d else "< 50"

    over = sum(1 for v in at_restart.values() if v >= 100)
    print(f"{worst(at_restart)}\t{over}\t{len(heard)}\t{worst(elsewhere)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
