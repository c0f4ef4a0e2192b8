#!/bin/sh
# The lead of examples/business.json, a scripted stand-in for a real agent:
# it claims its role, waits for dev's decision and approves it, then waits
# for dev's report, acknowledges it, replies to dev and releases its role.
# It never polls: it waits on the change feed (`watch` and `await` in
# lib.sh).
ME=lead
. "${0%/*}/lib.sh"

call role.claim
say "claimed role lead"
watch

decision_routed() {
  call inbox
  case $answer in
    *'"type":"decision"'*) return 0 ;;
    *) return 1 ;;
  esac
}
await "a decision" decision_routed
decision=$(field id)
say "decision $decision from dev: $(field question)"

call decision.resolve "{\"id\":\"$decision\",\"choice\":\"yes\",\"note\":\"Approved: the tests pass.\"}"
say "resolved decision $decision: $(field choice)"

await "dev's report" message_arrived
message=$(field id)
say "received message $message citing decision $(field decision): $(field body)"

call message.read "{\"id\":\"$message\"}"
say "acknowledged message $message"

# Reading a message does not concern its sender in the change feed, so dev
# waits for this reply instead.
call message.send "{\"to\":\"dev\",\"body\":\"Thanks, noted.\",\"in_reply_to\":\"$message\"}"
say "replied to message $message with message $(field id)"

# Done: free the role, so a later `up` on the same data root can claim it.
call role.release
say "released role lead"
