//! A reference-model test of the browser request machine
//! (`mosaic_domain::browser::BrowserRequests`).
//!
//! A deliberately dumb `HashMap` model predicts, for every random transition
//! (request, claim, result, abort, time advance), the exact reply and the
//! exact effect list; the machine must produce both. Beside that comparison
//! the harness checks the request machine's invariants on its own bookkeeping,
//! so a bug shared by the model and the machine still has to get past them:
//! one `Settle` per accepted request, the first claim wins, a settled request
//! refuses claims, zero recipients refuse at once, a wrong token never
//! settles, and every request ends once time runs out.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use mosaic_domain::browser::{
    BrowserAction, BrowserEffect, BrowserRequests, ClaimReply, ClientInfo, HttpUrl, PaneOutcome,
};
use mosaic_domain::{BrowserRequestId, ClaimToken, ClientId, Refusal, Timestamp};
use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

/// The client pool; requests pick random subsets, claims random members, so
/// non-recipients claim too.
const CLIENTS: u8 = 4;
/// The model's start time, away from the epoch so nothing saturates.
const START_MS: i64 = 1_700_000_000_000;

fn rid(n: u64) -> BrowserRequestId {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&n.to_be_bytes());
    BrowserRequestId::from_random(bytes)
}

fn client(n: u8) -> ClientId {
    ClientId::parse(&format!("c{n}")).unwrap()
}

fn token(n: u64) -> ClaimToken {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&n.to_be_bytes());
    ClaimToken::from_random(bytes)
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(ms).unwrap()
}

fn action(open: bool) -> BrowserAction {
    if open {
        BrowserAction::Open {
            url: HttpUrl::parse("https://example.com/").unwrap(),
            viewport: None,
        }
    } else {
        BrowserAction::Snapshot { selector: None }
    }
}

/// What the pane reports, in the model's terms.
#[derive(Clone, Copy, Debug)]
enum Pane {
    Done(u32),
    Failed,
    TooLarge,
}

impl Pane {
    fn outcome(self) -> PaneOutcome<u32> {
        match self {
            Pane::Done(v) => PaneOutcome::Done(v),
            Pane::Failed => PaneOutcome::Failed,
            Pane::TooLarge => PaneOutcome::TooLarge,
        }
    }

    fn reply(self) -> Result<u32, Refusal> {
        match self {
            Pane::Done(v) => Ok(v),
            Pane::Failed => Err(Refusal::BrowserFailed),
            Pane::TooLarge => Err(Refusal::BrowserResultTooLarge),
        }
    }
}

#[derive(Clone, Debug)]
enum Transition {
    /// An agent asks; `clients` maps client number to `capable`.
    Request {
        id: u64,
        open: bool,
        clients: BTreeMap<u8, bool>,
        timeout_ms: u64,
    },
    Claim {
        id: u64,
        client: u8,
        token: u64,
    },
    Result {
        id: u64,
        token: u64,
        pane: Pane,
    },
    Abort {
        id: u64,
    },
    Advance {
        ms: i64,
    },
}

/// The reply a transition must get.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reply {
    Nothing,
    Request(Result<(), Refusal>),
    Claim(ClaimReply),
    Matched(bool),
    Aborted(bool),
}

#[derive(Clone, Debug)]
struct ModelRequest {
    recipients: Vec<u8>,
    claimant: Option<(u8, u64)>,
    deadline_ms: i64,
}

#[derive(Clone, Debug)]
struct Model {
    now_ms: i64,
    next_id: u64,
    next_token: u64,
    used_ids: Vec<u64>,
    live: HashMap<u64, ModelRequest>,
    /// What the last transition must produce.
    reply: Reply,
    effects: Vec<BrowserEffect<u32>>,
}

impl Model {
    fn cancel_to(request: &ModelRequest) -> Vec<ClientId> {
        match request.claimant {
            Some((c, _)) => vec![client(c)],
            None => request.recipients.iter().map(|&c| client(c)).collect(),
        }
    }

    fn end(&mut self, id: u64, refusal: Refusal) {
        let request = self.live.remove(&id).unwrap();
        self.effects.push(BrowserEffect::Settle {
            request: rid(id),
            outcome: Err(refusal),
        });
        self.effects.push(BrowserEffect::Cancel {
            request: rid(id),
            to: Self::cancel_to(&request),
        });
    }
}

struct Reference;

impl ReferenceStateMachine for Reference {
    type State = Model;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model {
            now_ms: START_MS,
            next_id: 0,
            next_token: 0,
            used_ids: Vec::new(),
            live: HashMap::new(),
            reply: Reply::Nothing,
            effects: Vec::new(),
        })
        .boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Transition> {
        // An id is mostly one seen before (live or settled), sometimes a fresh
        // one, so duplicates, late claims and unknown ids all occur.
        let fresh = state.next_id;
        let id: BoxedStrategy<u64> = if state.used_ids.is_empty() {
            Just(fresh).boxed()
        } else {
            prop_oneof![
                3 => prop::sample::select(state.used_ids.clone()),
                1 => Just(fresh),
            ]
            .boxed()
        };
        let new_id = if state.used_ids.is_empty() {
            Just(fresh).boxed()
        } else {
            prop_oneof![
                4 => Just(fresh),
                1 => prop::sample::select(state.used_ids.clone()),
            ]
            .boxed()
        };
        let request = (
            new_id,
            any::<bool>(),
            prop::collection::btree_map(0..CLIENTS, any::<bool>(), 0..=CLIENTS as usize),
            1_000u64..=60_000,
        )
            .prop_map(|(id, open, clients, timeout_ms)| Transition::Request {
                id,
                open,
                clients,
                timeout_ms,
            });
        let token = state.next_token;
        let any_claim = (id.clone(), 0..CLIENTS).prop_map(move |(id, client)| Transition::Claim {
            id,
            client,
            token,
        });
        // Recipients of live requests claim too, so grants, races for an
        // already claimed request and refusals all happen often.
        let mut recipients: Vec<(u64, u8)> = state
            .live
            .iter()
            .flat_map(|(&id, r)| r.recipients.iter().map(move |&c| (id, c)))
            .collect();
        recipients.sort_unstable();
        let claim: BoxedStrategy<Transition> = if recipients.is_empty() {
            any_claim.boxed()
        } else {
            prop_oneof![
                1 => any_claim,
                2 => prop::sample::select(recipients)
                    .prop_map(move |(id, client)| Transition::Claim { id, client, token }),
            ]
            .boxed()
        };
        let pane = prop_oneof![
            3 => any::<u32>().prop_map(Pane::Done),
            1 => Just(Pane::Failed),
            1 => Just(Pane::TooLarge),
        ];
        // Any id with any token ever handed out (mostly wrong ones)...
        let guessed = (id.clone(), 0..=state.next_token, pane.clone())
            .prop_map(|(id, token, pane)| Transition::Result { id, token, pane });
        // ...and, when something is claimed, its claimant's own token.
        let mut claimed: Vec<(u64, u64)> = state
            .live
            .iter()
            .filter_map(|(&id, r)| r.claimant.map(|(_, token)| (id, token)))
            .collect();
        claimed.sort_unstable();
        let result: BoxedStrategy<Transition> = if claimed.is_empty() {
            guessed.boxed()
        } else {
            prop_oneof![
                1 => guessed,
                2 => (prop::sample::select(claimed), pane)
                    .prop_map(|((id, token), pane)| Transition::Result { id, token, pane }),
            ]
            .boxed()
        };
        let abort = id.prop_map(|id| Transition::Abort { id });
        let advance = prop_oneof![Just(0i64), 0i64..=5_000, 5_000i64..=70_000,]
            .prop_map(|ms| Transition::Advance { ms });
        prop_oneof![
            4 => request,
            4 => claim,
            3 => result,
            1 => abort,
            2 => advance,
        ]
        .boxed()
    }

    fn apply(mut state: Model, transition: &Transition) -> Model {
        state.effects.clear();
        state.reply = match transition {
            Transition::Request {
                id,
                open,
                clients,
                timeout_ms,
            } => {
                state.next_id = state.next_id.max(id + 1);
                if !state.used_ids.contains(id) {
                    state.used_ids.push(*id);
                }
                let recipients: Vec<u8> = clients
                    .iter()
                    .filter(|(_, &capable)| *open || capable)
                    .map(|(&c, _)| c)
                    .collect();
                if state.live.contains_key(id) {
                    Reply::Request(Err(Refusal::BadRequest))
                } else if recipients.is_empty() {
                    Reply::Request(Err(Refusal::NoBrowserClient))
                } else {
                    let deadline_ms = state.now_ms + *timeout_ms as i64;
                    state.effects.push(BrowserEffect::Deliver {
                        request: rid(*id),
                        action: action(*open),
                        claim_by: at(deadline_ms),
                        to: recipients.iter().map(|&c| client(c)).collect(),
                    });
                    state.live.insert(
                        *id,
                        ModelRequest {
                            recipients,
                            claimant: None,
                            deadline_ms,
                        },
                    );
                    Reply::Request(Ok(()))
                }
            }
            Transition::Claim {
                id,
                client: c,
                token: t,
            } => {
                state.next_token = state.next_token.max(t + 1);
                match state.live.get_mut(id) {
                    Some(r) if r.claimant.is_none() && r.recipients.contains(c) => {
                        r.claimant = Some((*c, *t));
                        Reply::Claim(ClaimReply::Granted(token(*t)))
                    }
                    Some(_) | None => Reply::Claim(ClaimReply::Refused),
                }
            }
            Transition::Result { id, token: t, pane } => {
                let right = state
                    .live
                    .get(id)
                    .and_then(|r| r.claimant)
                    .is_some_and(|(_, held)| held == *t);
                if right {
                    state.live.remove(id);
                    state.effects.push(BrowserEffect::Settle {
                        request: rid(*id),
                        outcome: pane.reply(),
                    });
                }
                Reply::Matched(right)
            }
            Transition::Abort { id } => {
                let live = state.live.contains_key(id);
                if live {
                    state.end(*id, Refusal::BrowserAborted);
                }
                Reply::Aborted(live)
            }
            Transition::Advance { ms } => {
                state.now_ms += ms;
                let now = state.now_ms;
                let mut expired: Vec<u64> = state
                    .live
                    .iter()
                    .filter(|(_, r)| r.deadline_ms <= now)
                    .map(|(&id, _)| id)
                    .collect();
                expired.sort_by_key(|&id| rid(id));
                for id in expired {
                    state.end(id, Refusal::BrowserTimeout);
                }
                Reply::Nothing
            }
        };
        state
    }
}

/// The machine under test plus the harness's own bookkeeping, kept apart
/// from the model so that the invariants are checked twice.
struct Harness {
    machine: BrowserRequests<u32>,
    now_ms: i64,
    /// Accepted requests without a `Settle` yet.
    open: HashSet<u64>,
    /// Open requests that have been granted, with the winning token.
    granted: HashMap<u64, u64>,
    /// Ids whose last accepted request has settled.
    settled: HashSet<u64>,
    accepted: usize,
    settles: usize,
}

impl Harness {
    fn drain(&mut self) -> Vec<BrowserEffect<u32>> {
        let effects: Vec<_> = std::iter::from_fn(|| self.machine.poll_effect()).collect();
        for effect in &effects {
            match effect {
                BrowserEffect::Settle { request, .. } => {
                    let id = self.open.iter().copied().find(|&id| rid(id) == *request);
                    let id = id.unwrap_or_else(|| {
                        panic!("Settle for {request}, which is not open: a second Settle?")
                    });
                    self.open.remove(&id);
                    self.granted.remove(&id);
                    self.settled.insert(id);
                    self.settles += 1;
                }
                BrowserEffect::Deliver { .. } | BrowserEffect::Cancel { .. } => {}
            }
        }
        effects
    }
}

struct BrowserMachineTest;

impl StateMachineTest for BrowserMachineTest {
    type SystemUnderTest = Harness;
    type Reference = Reference;

    fn init_test(model: &Model) -> Harness {
        Harness {
            machine: BrowserRequests::new(),
            now_ms: model.now_ms,
            open: HashSet::new(),
            granted: HashMap::new(),
            settled: HashSet::new(),
            accepted: 0,
            settles: 0,
        }
    }

    fn apply(mut h: Harness, model: &Model, transition: Transition) -> Harness {
        let pending_before = h.machine.pending();
        let reply = match transition {
            Transition::Request {
                id,
                open,
                clients,
                timeout_ms,
            } => {
                let infos: Vec<ClientInfo> = clients
                    .iter()
                    .map(|(&c, &capable)| ClientInfo {
                        id: client(c),
                        capable,
                    })
                    .collect();
                let reachable = clients.values().any(|&capable| open || capable);
                let reply = h.machine.handle_request(
                    at(h.now_ms),
                    rid(id),
                    action(open),
                    Duration::from_millis(timeout_ms),
                    &infos,
                );
                match reply {
                    Ok(()) => {
                        assert!(reachable, "accepted with nobody to deliver to");
                        assert!(h.open.insert(id), "accepted a live duplicate id");
                        h.settled.remove(&id);
                        h.accepted += 1;
                    }
                    Err(refusal) => {
                        if !reachable && !h.open.contains(&id) {
                            assert_eq!(refusal, Refusal::NoBrowserClient);
                        }
                        assert_eq!(h.machine.pending(), pending_before, "refusal kept state");
                    }
                }
                Reply::Request(reply)
            }
            Transition::Claim {
                id,
                client: c,
                token: t,
            } => {
                let reply = h.machine.handle_claim(rid(id), &client(c), token(t));
                match &reply {
                    ClaimReply::Granted(granted) => {
                        assert_eq!(*granted, token(t));
                        assert!(h.open.contains(&id), "granted a request that is not open");
                        assert!(!h.settled.contains(&id), "granted a settled request");
                        let first = h.granted.insert(id, t);
                        assert_eq!(first, None, "a second claim won");
                    }
                    ClaimReply::Refused => {}
                }
                Reply::Claim(reply)
            }
            Transition::Result { id, token: t, pane } => {
                let matched = h.machine.handle_result(rid(id), &token(t), pane.outcome());
                if h.granted.get(&id) != Some(&t) {
                    assert!(!matched, "a wrong token settled");
                }
                Reply::Matched(matched)
            }
            Transition::Abort { id } => Reply::Aborted(h.machine.handle_abort(rid(id))),
            Transition::Advance { ms } => {
                h.now_ms += ms;
                h.machine.handle_timeout(at(h.now_ms));
                Reply::Nothing
            }
        };
        let effects = h.drain();
        assert_eq!(reply, model.reply, "reply");
        assert_eq!(effects, model.effects, "effects");
        h
    }

    fn check_invariants(h: &Harness, model: &Model) {
        assert_eq!(h.machine.pending(), model.live.len(), "pending()");
        assert_eq!(
            h.machine.pending(),
            h.open.len(),
            "pending() vs open requests"
        );
        assert_eq!(h.accepted, h.open.len() + h.settles);
        let next = model.live.values().map(|r| r.deadline_ms).min().map(at);
        assert_eq!(h.machine.next_deadline(), next, "next_deadline()");
    }

    fn teardown(mut h: Harness, model: Model) {
        // Once time runs past every deadline (timeouts here are at most 60 s),
        // every accepted request has settled exactly once and nothing remains.
        assert_eq!(h.machine.pending(), model.live.len());
        h.now_ms += 60_001;
        h.machine.handle_timeout(at(h.now_ms));
        h.drain();
        assert_eq!(h.machine.pending(), 0);
        assert_eq!(h.machine.next_deadline(), None);
        assert_eq!(h.accepted, h.settles, "every request settles exactly once");
        assert!(h.open.is_empty());
    }
}

prop_state_machine! {
    #![proptest_config(Config {
        cases: 256,
        // Shrunk failures are printed; no regression file is written into
        // the source tree.
        failure_persistence: None,
        .. Config::default()
    })]

    #[test]
    fn browser_requests_follow_the_reference_model(sequential 1..40 => BrowserMachineTest);
}
