#!/bin/sh
# The dev of examples/business.json, a scripted stand-in for a real agent:
# it claims its role, asks the lead to approve a merge (a cross-role
# decision), waits until the decision is resolved, then reports to the lead
# citing it, waits for the lead's reply and acknowledges it. Then it asks
# to publish the fix, a gated decision only the human can answer: when a
# human sits at up's console (MOSAIC_CONSOLE=1, `up --console`) it waits for
# the answer and acts on it; otherwise it leaves the decision for the human
# and says how to answer it. It releases its role and prints the decisions'
# trails. It never polls: it waits on the change feed (`watch` and `await`
# in lib.sh).
ME=dev
. "${0%/*}/lib.sh"

call role.claim
say "claimed role dev"
watch

call decision.raise '{"action":"repo.merge","target":"main","question":"May I merge the login fix into main?","options":[{"key":"yes","text":"Merge it"},{"key":"no","text":"Not yet"}],"recommendation":"yes: the tests pass","blocking":false}'
decision=$(field id)
say "raised decision $decision ($(field class), routed to $(field route))"

# decision_closed ID: its trail (in $answer) once it is resolved or withdrawn.
decision_closed() {
  call trail "{\"subject\":\"$1\"}"
  case $answer in
    *'"kind":"decision.resolved"'* | *'"kind":"decision.withdrawn"'*) return 0 ;;
    *) return 1 ;;
  esac
}
await "the resolution of decision $decision" decision_closed "$decision"
choice=$(field choice)
[ "$choice" = yes ] || fail "decision $decision was resolved: $choice"
say "decision $decision resolved: $choice"

call message.send "{\"to\":\"lead\",\"body\":\"Merging the login fix into main, as you approved.\",\"decision\":\"$decision\"}"
message=$(field id)
say "sent message $message to lead, citing decision $decision"

await "the lead's reply" message_arrived
reply=$(field id)
[ "$(field in_reply_to)" = "$message" ] || fail "message $reply does not reply to $message"
say "received reply $reply from $(field from): $(field body)"

call message.read "{\"id\":\"$reply\"}"
say "acknowledged reply $reply"

# Publishing is gated: no role may decide it, the decision goes to the human.
call decision.raise '{"action":"release.publish","target":"login-fix","question":"May I publish the login fix?","options":[{"key":"yes","text":"Publish it"},{"key":"no","text":"Not now"}],"recommendation":"yes: merged, and the tests pass","blocking":false}'
release=$(field id)
say "asked the human: decision $release ($(field class), routed to $(field route))"
if [ "${MOSAIC_CONSOLE:-}" = 1 ]; then
  # The human sits at up's console; give them up to an hour.
  WAITS=60
  WAIT_MS=60000
  await "the human's answer to decision $release" decision_closed "$release"
  case $answer in
    *'"kind":"decision.resolved"'*) outcome=$(field choice) ;;
    *) outcome=withdrawn ;;
  esac
  if [ "$outcome" = yes ]; then
    say "the human approved decision $release: publishing the login fix"
    call message.send "{\"to\":\"human\",\"body\":\"Published the login fix, as you approved.\",\"decision\":\"$release\"}"
    say "sent message $(field id) to the human, citing decision $release"
  else
    say "the human answered decision $release with $outcome: not publishing"
  fi
else
  say "left decision $release for the human: nobody is at a console (answer it from mosaic-bus up --console, or while up --stay serves with mosaic-bus console --socket $MOSAIC_BUS_SOCKET --business acme)"
fi

# Done: free the role, so a later `up` on the same data root can claim it.
call role.release
say "released role dev"

for d in "$decision" "$release"; do
  call trail "{\"subject\":\"$d\"}"
  kinds=$(printf '%s\n' "$answer" | sed 's/"kind":"/\
/g' | sed -n 's/^\([a-z.]*\)".*/\1/p' | tr '\n' ' ')
  say "trail of decision $d: ${kinds% }"
done
say "inspect it while the broker runs (up --stay or --console): mosaic-bus call trail '{\"subject\":\"$decision\"}' --cap-file <readerCap of up's first line> --socket $MOSAIC_BUS_SOCKET"
