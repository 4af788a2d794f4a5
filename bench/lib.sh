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

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
