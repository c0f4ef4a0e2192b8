#!/bin/sh
# The dev of examples/business.json, a scripted stand-in for a real agent:
# it claims its role, asks the lead to approve a merge (a cross-role
# decision), waits until the decision is resolved, then reports to the lead
# citing it, waits for the lead's reply and acknowledges it, releases its
# role and prints the decision's trail. It never polls: it waits on the
# change feed (`watch` and `await` in lib.sh).
ME=dev
. ./agents/lib.sh

call role.claim
say "claimed role dev"
watch

call decision.raise '{"action":"repo.merge","target":"main","question":"May I merge the login fix into main?","options":[{"key":"yes","text":"Merge it"},{"key":"no","text":"Not yet"}],"recommendation":"yes: the tests pass","blocking":false}'
decision=$(field id)
say "raised decision $decision ($(field class), routed to $(field route))"

decision_resolved() {
  call trail "{\"subject\":\"$decision\"}"
  case $answer in
    *'"kind":"decision.resolved"'*) return 0 ;;
    *) return 1 ;;
  esac
}
await "the resolution of decision $decision" decision_resolved
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

# Done: free the role, so a later `up` on the same data root can claim it.
call role.release
say "released role dev"

call trail "{\"subject\":\"$decision\"}"
kinds=$(printf '%s\n' "$answer" | sed 's/"kind":"/\
/g' | sed -n 's/^\([a-z.]*\)".*/\1/p' | tr '\n' ' ')
kinds=${kinds% }
say "trail of decision $decision: $kinds"
say "inspect it while the broker runs (up --stay): mosaic-bus call trail '{\"subject\":\"$decision\"}' --cap-file <readerCap of up's first line> --socket $MOSAIC_BUS_SOCKET"
