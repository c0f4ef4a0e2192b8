#!/bin/sh
# The dev of examples/business.json, a scripted stand-in for a real agent:
# it claims its role, asks the lead to approve a merge (a cross-role
# decision), waits until the decision is resolved, then reports to the lead
# citing it, waits until the lead has read the report, releases its role
# and prints the decision's trail.
ME=dev
. ./agents/lib.sh

call role.claim
say "claimed role dev"

call decision.raise '{"action":"repo.merge","target":"main","question":"May I merge the login fix into main?","options":[{"key":"yes","text":"Merge it"},{"key":"no","text":"Not yet"}],"recommendation":"yes: the tests pass","blocking":false}'
decision=$(field id)
say "raised decision $decision ($(field class), routed to $(field route))"

polls=0
while :; do
  call trail "{\"subject\":\"$decision\"}"
  case $answer in
    *'"kind":"decision.resolved"'*) break ;;
  esac
  polls=$((polls + 1))
  [ "$polls" -le 150 ] || fail "decision $decision was not resolved"
  nap
done
choice=$(field choice)
[ "$choice" = yes ] || fail "decision $decision was resolved: $choice"
say "decision $decision resolved: $choice"

call message.send "{\"to\":\"lead\",\"body\":\"Merging the login fix into main, as you approved.\",\"decision\":\"$decision\"}"
message=$(field id)
say "sent message $message to lead, citing decision $decision"

polls=0
while :; do
  call trail "{\"subject\":\"$message\"}"
  case $answer in
    *'"kind":"message.read"'*) break ;;
  esac
  polls=$((polls + 1))
  [ "$polls" -le 150 ] || fail "message $message was not read"
  nap
done
say "lead read message $message"

# Done: free the role, so a later `up` on the same data root can claim it.
call role.release
say "released role dev"

call trail "{\"subject\":\"$decision\"}"
kinds=$(printf '%s\n' "$answer" | sed 's/"kind":"/\
/g' | sed -n 's/^\([a-z.]*\)".*/\1/p' | tr '\n' ' ')
kinds=${kinds% }
say "trail of decision $decision: $kinds"
say "inspect it while the broker runs (up --stay): mosaic-bus call trail '{\"subject\":\"$decision\"}' --cap-file <readerCap of up's first line> --socket $MOSAIC_BUS_SOCKET"
