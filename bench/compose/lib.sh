# Shared by bench/compose/load.sh and bench/compose/restart.sh (sourced, not run): checks Docker,
# picks the compose command, and sets what the stack needs to answer this host's load generator.
#
#   compose_bench_env      sets COMPOSE (an array), ADVERTISE, and exports VOICE_EDGE_ADVERTISE,
#                          RUST_LOG and VOICE_EDGE_ADMIN_TOKEN; exits if Docker is not running
compose_bench_env() {
  docker info >/dev/null 2>&1 || { echo "Docker is not running (tests/compose/run.sh starts it)" >&2; exit 1; }
  if docker compose version >/dev/null 2>&1; then COMPOSE=(docker compose); else COMPOSE=(docker-compose); fi
  # This host's address towards the outside: Docker NATs it to the relay like any client's.
  ADVERTISE="${ADVERTISE:-$(ip -4 route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p')}"
  [ -n "$ADVERTISE" ] || { echo "no IPv4 address to advertise: pass --advertise" >&2; exit 1; }
  export VOICE_EDGE_ADVERTISE="$ADVERTISE" RUST_LOG=warn
  export VOICE_EDGE_ADMIN_TOKEN="${VOICE_EDGE_ADMIN_TOKEN:-bench-$$}"
}
