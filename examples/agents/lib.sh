# Shared by the example agents (sourced, not run). POSIX sh; sed only.
#
# `mosaic-bus up` starts each agent with MOSAIC_RUN_ID, MOSAIC_BUS_SOCKET and
# MOSAIC_BUS_CAP_FD set (the capability itself is on that descriptor, never
# in the environment), and writes one line on its standard input once the
# capability is there. Nothing may be called before that line arrives.
set -u
read -r _ready || exit 1

# The test suite (app/tests/up.rs) sets MOSAIC_EXAMPLE_DUMP to check that no
# capability is in an agent's environment, that each agent holds only its
# own capability descriptor, and that the launch was bound with its real pid.
if [ -n "${MOSAIC_EXAMPLE_DUMP:-}" ]; then
  echo "$$" >"$MOSAIC_EXAMPLE_DUMP/$MOSAIC_RUN_ID.pid"
  env >"$MOSAIC_EXAMPLE_DUMP/$MOSAIC_RUN_ID.env"
  ls -l "/proc/$$/fd" >"$MOSAIC_EXAMPLE_DUMP/$MOSAIC_RUN_ID.fds"
fi

say() { printf '%s [%s]: %s\n' "$ME" "$MOSAIC_RUN_ID" "$*"; }
fail() { say "$*" >&2; exit 1; }
nap() { sleep 0.2 2>/dev/null || sleep 1; }

# call VERB [ARGS_JSON]: one request; its answer lands in $answer, and a
# refusal ends the agent.
call() {
  answer=$(mosaic-bus call "$@") || fail "$1 refused: $answer"
}

# field KEY: the string value of the last "KEY" in $answer.
field() {
  printf '%s\n' "$answer" | sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"
}
