#!/bin/sh
# The lead of examples/business.json, a scripted stand-in for a real agent:
# it claims its role, waits for dev's decision and approves it, then waits
# for dev's report, acknowledges it and releases its role.
ME=lead
. ./agents/lib.sh

call role.claim
say "claimed role lead"

decision=''
polls=0
while [ -z "$decision" ]; do
  polls=$((polls + 1))
  [ "$polls" -le 150 ] || fail "no decision arrived"
  call inbox
  case $answer in
    *'"type":"decision"'*) decision=$(field id) ;;
    *) nap ;;
  esac
done
say "decision $decision from dev: $(field question)"

call decision.resolve "{\"id\":\"$decision\",\"choice\":\"yes\",\"note\":\"Approved: the tests pass.\"}"
say "resolved decision $decision: $(field choice)"

message=''
polls=0
while [ -z "$message" ]; do
  polls=$((polls + 1))
  [ "$polls" -le 150 ] || fail "no message arrived"
  call message.receive
  case $answer in
    *'"id":"'*) message=$(field id) ;;
    *) nap ;;
  esac
done
say "received message $message citing decision $(field decision): $(field body)"

call message.read "{\"id\":\"$message\"}"
say "acknowledged message $message"

# Done: free the role, so a later `up` on the same data root can claim it.
call role.release
say "released role lead"
