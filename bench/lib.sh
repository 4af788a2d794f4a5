# Shared by bench/load/run.sh and bench/admission/run.sh (sourced, not run).

# As root (and unless --host-netns), re-runs the calling script inside a network namespace of its
# own, with only its loopback, and exits with its status. The host's loopback carries whatever
# firewall state the host has: with Docker's NAT rules loaded every loopback datagram also goes
# through conntrack, which cost 1,000 calls ~8 points of loss; the namespace measures the
# software without it. The script sees --inside-netns among its arguments.
#   run_in_own_netns NAME "$0" "$@"
run_in_own_netns() {
  local name="$1" script="$2"; shift 2
  if [[ " $* " != *" --host-netns "* && " $* " != *" --inside-netns "* && $(id -u) == 0 ]] \
    && command -v ip >/dev/null; then
    local ns="voice-edge-$name-$$"
    ip netns add "$ns"
    trap "ip netns del '$ns' 2>/dev/null || true" EXIT
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" bash "$script" --inside-netns "$@"
    exit $?
  fi
}

# A free loopback port the kernel picks: TCP, or UDP with `free_port udp`.
free_port() {
  python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM if sys.argv[1:]==["udp"] else socket.SOCK_STREAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' "$@"
}

# A scratch directory ($WORK) and the servers a script starts ($PIDS, append to it): on exit
# the servers get SIGTERM (SIGKILL 5 s later), a failed run shows the tail of each $WORK/*.log,
# and the directory goes.
#   bench_workdir NAME
bench_workdir() {
  WORK="$(mktemp -d "/tmp/ve-bench-$1.XXXXXX")"
  PIDS=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
bench_cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [[ $rc -ne 0 ]]; then
    for f in "$WORK"/*.log; do [[ -f "$f" ]] && { echo "--- tail of $f" >&2; tail -n 30 "$f" >&2; }; done
  fi
  rm -rf "$WORK"
  exit $rc
}
