# Shared by the example agents (sourced, not run). POSIX sh; sed only.
#
# `mosaic-bus up` starts each agent with MOSAIC_RUN_ID, MOSAIC_BUS_SOCKET and
# MOSAIC_BUS_CAP_FD set (the capability itself is on that descriptor, never
# in the environment), and writes one line on its standard input once the
# capability is there. Nothing may be called before that line arrives.
set -u
read -r _ready || exit 1

# The test suite (app/tests/up/) sets MOSAIC_EXAMPLE_DUMP to check that no
# capability is in an agent's environment, that each agent holds only its
# own capability descriptor, and that the launch was bound with its real pid.
if [ -n "${MOSAIC_EXAMPLE_DUMP:-}" ]; then
  echo "$$" >"$MOSAIC_EXAMPLE_DUMP/$MOSAIC_RUN_ID.pid"
  env >"$MOSAIC_EXAMPLE_DUMP/$MOSAIC_RUN_ID.env"
  ls -l "/proc/$$/fd" >"$MOSAIC_EXAMPLE_DUMP/$MOSAIC_RUN_ID.fds"
fi

say() { printf '%s [%s]: %s\n' "$ME" "$MOSAIC_RUN_ID" "$*"; }
fail() { say "$*" >&2; exit 1; }

# call VERB [ARGS_JSON]: one request; its answer lands in $answer, and a
# refusal ends the agent.
call() {
  answer=$(mosaic-bus call "$@") || fail "$1 refused: $answer"
}

# field KEY: the string value of the last "KEY" in $answer.
field() {
  printf '%s\n' "$answer" | sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"
}

# number KEY: the integer value of the last "KEY" in $answer.
number() {
  printf '%s\n' "$answer" | sed -n "s/.*\"$1\":\\([0-9][0-9]*\\).*/\\1/p"
}

# The change feed replaces polling. `watch` takes the feed's cursor once
# (`changes` without `since`, answered at once); from then on every change
# that concerns this agent lies after $cursor. `await WHAT CHECK [ARGS...]`
# runs the function CHECK, which sets $answer and succeeds once WHAT is
# there: first at once (it may have happened before the cursor was taken),
# then after each answer of `changes` from the cursor, which returns as soon
# as something concerning this agent happened (or after WAIT_MS with
# nothing). The feed holds pointers only, so CHECK reads the content. At
# most WAITS waits: a broken exchange ends instead of hanging.
WAITS=15
WAIT_MS=2000
watch() {
  call changes
  next_cursor
}
next_cursor() {
  cursor=$(number cursor)
  [ -n "$cursor" ] || fail "changes answered no cursor: $answer"
}
await() {
  what=$1
  shift
  waits=0
  until "$@"; do
    waits=$((waits + 1))
    [ "$waits" -le "$WAITS" ] || fail "$what did not arrive after $WAITS waits"
    call changes "{\"since\":$cursor,\"timeoutMs\":$WAIT_MS}"
    next_cursor
  done
}

# message_arrived: takes delivery of this role's next messages, if any.
message_arrived() {
  call message.receive
  case $answer in
    *'"id":"'*) return 0 ;;
    *) return 1 ;;
  esac
}
