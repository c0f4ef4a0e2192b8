#!/bin/sh
# A Claude Code Stop hook for an agent of mosaic-bus: when the agent is about
# to stop, wait on the broker's change feed from the cursor saved for its
# run instead of stopping at once. When something concerning the agent
# arrives, save the new cursor, keep the agent working and say what arrived
# and which tool to call; when nothing arrives within the wait, let it
# stop. At the first stop of a run there is no saved cursor: take the
# current one, then read the inbox once for what came before it (and keep
# the agent working when it holds anything). When `mosaic-bus up` started the
# agent, it gave the run the feed's cursor at launch (MOSAIC_BUS_SINCE), and
# the first stop waits from there instead: a change between the launch and
# the first stop (a decision the agent raised, resolved before it stopped)
# still wakes it. When `up` starts the program again in the same run, with
# what arrived as its prompt, MOSAIC_BUS_SINCE is the cursor after it: the
# hook waits from the later of it and the saved cursor, so nothing is
# delivered twice. When the first stop finds the inbox holding anything,
# the hook also takes what the feed holds after its cursor, names it, and
# saves the cursor past it: the next stop does not wake the agent again for
# an open decision it was already told of. POSIX sh; besides `mosaic-bus`
# (on PATH, as `mosaic-bus up` sets it) it needs only sed, grep, tr, ls, id,
# mkdir and mv.
#
# The hook protocol, from Claude Code's hooks reference
# (https://code.claude.com/docs/en/hooks, "Stop" and "Stop and SubagentStop
# decision control"):
# - the hook reads one JSON object on stdin: session_id, transcript_path,
#   cwd, permission_mode, hook_event_name ("Stop"), stop_hook_active (true
#   when Claude Code is already continuing as a result of a stop hook) and
#   last_assistant_message;
# - exit 0 with {"decision":"block","reason":"..."} on stdout: "block"
#   prevents Claude from stopping, and the reason tells it how to proceed;
# - exit 0 with nothing on stdout lets it stop; any other exit code but 2 is
#   a non-blocking error: the user sees stderr and Claude stops;
# - the hook is cancelled after its `timeout` (seconds, in settings.json):
#   keep it above MOSAIC_HOOK_WAIT_MS plus the client's 5 s, and with
#   MOSAIC_BUS_IDLE=wait above MOSAIC_HOOK_LIMIT_S.
# stop_hook_active does not matter here: the hook blocks only for changes
# that lie after its saved cursor, and it saves the new cursor before it
# blocks, so no change keeps an agent from stopping twice.
#
# Environment:
#   MOSAIC_RUN_ID         the agent's run (set by `mosaic-bus up`); one saved
#                         cursor per run
#   MOSAIC_BUS_SOCKET     the broker's socket (set by `mosaic-bus up`)
#   MOSAIC_BUS_CAP_FD     the descriptor holding the capability (set by
#                         `mosaic-bus up`), or else
#   MOSAIC_BUS_CAP_FILE   a private 0600 file holding it (set by
#                         `mosaic-bus up` for a harness it starts); both
#                         read by `mosaic-bus call` itself
#   MOSAIC_BUS_SINCE      the feed's cursor when the run was launched (set by
#                         `mosaic-bus up`): where the first stop waits from
#   MOSAIC_HOOK_WAIT_MS   how long one wait for a change lasts (default
#                         60000; the broker clamps it to 1000..120000)
#   MOSAIC_BUS_IDLE       what a stop does when nothing arrives within one
#                         wait: `exit` (the default) lets the agent stop, so
#                         its program ends and `mosaic-bus up` starts it
#                         again when work arrives; `wait` waits again, with
#                         no cap, until something arrives or the hook has
#                         waited MOSAIC_HOOK_LIMIT_S (default 82800), kept
#                         below Claude Code's timeout for the hook: then it
#                         keeps the agent working for one turn, saying so,
#                         and the next stop waits again
#   MOSAIC_HOOK_STATE_DIR the private folder (0700) of the saved cursors
#                         (default ${XDG_STATE_HOME:-$HOME/.local/state}/
#                         mosaic-bus/stop-hook; created when missing)
#
# A failure prints `mosaic-bus stop hook: CODE` on stderr and exits 1, so
# the agent stops: bad-request (bad input or environment), unsafe-path (the
# state folder or a cursor file is not private), storage-unavailable (the
# cursor cannot be saved), integrity-failed (a saved cursor is not a
# number), or the broker's own code (not-holder once the role is released,
# broker-unavailable when the broker is gone, ...).
set -u -f

refuse() {
  printf 'mosaic-bus stop hook: %s\n' "$1" >&2
  exit 1
}

input=$(tr '\n' ' ')
event=$(printf '%s\n' "$input" |
  sed -n 's/.*"hook_event_name"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
[ "$event" = Stop ] || refuse bad-request

run=${MOSAIC_RUN_ID:-}
case $run in
  '' | *[!A-Za-z0-9._-]* | .*) refuse bad-request ;;
esac
wait_ms=${MOSAIC_HOOK_WAIT_MS:-60000}
case $wait_ms in
  '' | *[!0-9]* | 0?*) refuse bad-request ;;
esac
since_launch=${MOSAIC_BUS_SINCE:-}
case $since_launch in
  *[!0-9]* | 0?*) refuse bad-request ;;
esac
idle=${MOSAIC_BUS_IDLE:-exit}
case $idle in
  exit | wait) ;;
  *) refuse bad-request ;;
esac
limit_s=${MOSAIC_HOOK_LIMIT_S:-82800}
case $limit_s in
  '' | *[!0-9]* | 0?*) refuse bad-request ;;
esac

# call VERB [ARGS_JSON]: one request; its answer lands in $answer, and a
# refusal ends the hook with its code.
call() {
  answer=$(mosaic-bus call "$@") || {
    code=$(printf '%s\n' "$answer" | sed -n 's/.*"error":"\([a-z-]*\)".*/\1/p')
    refuse "${code:-broker-unavailable}"
  }
}

# private KIND PATH: PATH is ours, not a symlink, and only ours to read and
# write (KIND d: a folder, -: a regular file).
me=$(id -u)
private() {
  [ ! -h "$2" ] || refuse unsafe-path
  # shellcheck disable=SC2012 # ls -n is the POSIX way to read mode and uid
  set -- "$1" $(ls -ldn "$2")
  case $1:$2 in
    d:drwx------ | d:drwx------. | -:-rw------- | -:-rw-------.) ;;
    *) refuse unsafe-path ;;
  esac
  [ "$4" = "$me" ] || refuse unsafe-path
}

umask 077
dir=${MOSAIC_HOOK_STATE_DIR:-${XDG_STATE_HOME:-${HOME:-/nonexistent}/.local/state}/mosaic-bus/stop-hook}
[ -d "$dir" ] || mkdir -p "$dir" || refuse storage-unavailable
private d "$dir"
file=$dir/$run.cursor

save() {
  printf '%s\n' "$1" >"$dir/.$run.cursor.new" &&
    mv -f "$dir/.$run.cursor.new" "$file" || refuse storage-unavailable
}

# cursor: the integer "cursor" of $answer.
cursor() {
  printf '%s\n' "$answer" | sed -n 's/.*"cursor":\([0-9][0-9]*\).*/\1/p'
}

# count TEXT: how many times TEXT occurs in $answer.
count() {
  printf '%s\n' "$answer" | sed "s/$1/\\
@/g" | grep -c '^@'
}

# block REASON: keep the agent working, telling it REASON.
block() {
  set -- "$(printf '%s\n' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"
  printf '{"decision":"block","reason":"%s"}\n' "$1"
  exit 0
}

# arrivals: one line per change of $answer, its kind and the id it points
# at (a message, a decision, a role or a task), whatever the order of its
# keys.
arrivals() {
  printf '%s\n' "$answer" | tr '{}' '\n\n' | sed -n '
/"kind":"/!d
s/"message":"/"id":"/
s/"decision":"/"id":"/
s/"role":"/"id":"/
s/"task":"/"id":"/
t keyed
:keyed
s/.*"kind":"\([^"]*\)".*"id":"\([^"]*\)".*/\1 \2/p
t
s/.*"id":"\([^"]*\)".*"kind":"\([^"]*\)".*/\2 \1/p
t
s/.*"kind":"\([^"]*\)".*/\1/p
'
}

# listed: $arrived on one line.
listed() {
  printf '%s\n' "$arrived" | tr '\n' ';' | sed 's/;$//; s/;/; /g'
}

if [ -e "$file" ] || [ -h "$file" ]; then
  private - "$file"
  since=$(sed -n '1p' "$file")
  case $since in
    '' | *[!0-9]* | 0?*) refuse integrity-failed ;;
  esac
  # Started again in the same run, with what came up to the launch's
  # cursor as its prompt: wait from there.
  if [ -n "$since_launch" ] && [ "$since_launch" -gt "$since" ]; then
    since=$since_launch
    save "$since"
  fi
else
  # No saved cursor yet: the launch's, or else the current one; then read
  # the inbox once, for what came before it.
  if [ -n "$since_launch" ]; then
    since=$since_launch
  else
    call changes
    since=$(cursor)
    [ -n "$since" ] || refuse bad-request
  fi
  save "$since"
  call inbox
  decisions=$(count '"type":"decision"')
  messages=$(count '"type":"message"')
  if [ "$decisions" -gt 0 ] || [ "$messages" -gt 0 ]; then
    # What the inbox holds may also lie after the cursor: taken now (the
    # feed answers at once when it holds anything), named, and the cursor
    # saved past it, so the next stop does not wake the agent for it again.
    call changes "{\"since\":$since,\"timeoutMs\":1000}"
    next=$(cursor)
    [ -n "$next" ] || refuse bad-request
    save "$next"
    arrived=$(arrivals)
    also=''
    [ -z "$arrived" ] || also=" The feed also holds: $(listed)."
    block "mosaic-bus: the inbox of run $run holds $decisions open decision(s) and $messages unread message(s).$also Call the mosaic-bus tools: inbox lists them; message_receive takes delivery of new messages (then message_read each one); then carry on. When you stop again, this hook waits for more."
  fi
fi

# One wait, or with MOSAIC_BUS_IDLE=wait as many as it takes: each below
# the broker's clamp, all of them below the hook's own timeout.
waited=0
while :; do
  call changes "{\"since\":$since,\"timeoutMs\":$wait_ms}"
  next=$(cursor)
  [ -n "$next" ] || refuse bad-request
  save "$next"
  since=$next
  arrived=$(arrivals)
  [ -z "$arrived" ] || break
  [ "$idle" = wait ] || exit 0
  waited=$((waited + wait_ms / 1000 + 1))
  if [ "$waited" -ge "$limit_s" ]; then
    block "mosaic-bus: nothing arrived for run $run in $limit_s s. Stop again, and this hook waits for more."
  fi
done

list=$(listed)
kinds=$(printf '%s\n' "$arrived" | sed 's/ .*//')
tools=''
hint() {
  case $tools in
    *"$1"*) ;;
    *) tools="$tools $1" ;;
  esac
}
for kind in $kinds; do
  case $kind in
    message.sent) hint 'message_receive takes delivery of your new messages (then message_read each one);' ;;
    decision.raised | decision.superseded) hint 'inbox lists the open decisions routed to you;' ;;
    decision.*) hint 'trail with the decision id as subject shows what happened to it;' ;;
    role.*) hint 'trail with your role as subject shows who holds it now;' ;;
    *) hint 'inbox shows what is open for you;' ;;
  esac
done
block "mosaic-bus: work arrived for run $run: $list. Call the mosaic-bus tools:$tools then carry on. When you stop again, this hook waits for more."
