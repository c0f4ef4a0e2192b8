-- mosaic-bus evidence store, schema mosaic-bus/6.
--
-- Every fact is one row of `ledger` (global write order and broker time)
-- plus one row of the typed table its kind names, with the same `seq`
-- (but a send's `action.allowed`, which its message row carries: see
-- mosaic-bus/5 below).
-- Nothing is ever updated or deleted: the triggers below refuse UPDATE,
-- DELETE and any INSERT that would collide with a stored unique key (so
-- INSERT OR REPLACE cannot delete a row, whether or not
-- recursive_triggers is on). Trigger messages start with `mosaic:` and the
-- store maps them to its error kinds.
--
-- A CHECK names its allowed values as a chain of `=`, never `IN (...)`:
-- SQLite builds an IN list's lookup table anew each time it checks a row,
-- which made the CHECKs most of `PRAGMA quick_check` (run at every open,
-- over every row) and a few microseconds of every insert.
--
-- mosaic-bus/3 drops the guards whose work another rule already does, as
-- measured on `message.send` (bench/README.md, `schema_costs`):
-- - `ledger.at` has no UNIQUE index. Times strictly increase with `seq`
--   (the ledger trigger compares a new row with the row before it, found
--   by `seq`, not with `max(at)` through an index), so none repeats; no
--   query reads the ledger by `at`.
-- - Typed rows no longer REFERENCES ledger(seq). Each typed table's insert
--   trigger finds its ledger row (this `seq`, this table's kind, the same
--   business) in one probe, so a typed row without its ledger row is
--   refused there, and the store's open-time pass matches every typed row
--   to its ledger row, both ways. References between records (a decision,
--   a message, a human input) stay foreign keys, checked at insert and by
--   `PRAGMA foreign_key_check` at open.
--
-- mosaic-bus/4 (refusal counts) adds `refusal_counts` and the kind
-- `refusals.counted`: past the first rows of a window, refusals are
-- counted, one row per window and kind of refusal (docs/operations.md),
-- and the view `refusal_tally` shows every refusal with its count.
-- mosaic-bus/4, the hash chain (begin):
-- - `ledger.hash` is SHA-256(0x01 || the previous row's hash || the
--   encoding of this ledger row and its typed row), one field per stored
--   column, as the store's `chain` module writes and every verifier reads
--   it. The first row's previous hash comes from the random `store_id` in
--   `meta`. The writer extends the chain in the record's transaction; every
--   open recomputes it.
-- mosaic-bus/4, the hash chain (end).
--
-- mosaic-bus/5 (fewer B-trees a send): a `message.send` wrote rows into 6
-- B-trees: the ledger (both records, on one page), `actions_allowed` and
-- its subject index, `messages`, its `id` index and `messages_recipient`
-- (the chain is a column of the ledger; refusal counts are not written by
-- a send). Now the message row carries the send's `action.allowed`: its
-- `allowed` column says it does, and with which grant, and every other
-- column of that record follows from the message (business, sender,
-- action `message.send`, target the recipient role or `human`, decision
-- only for `approved`, subject the recipient role). So a send writes 4
-- B-trees: the ledger, `messages`, its `id` index and `messages_recipient`,
-- each read by a verb (the id by `message.read` and every reference, the
-- recipient index by `message.receive`, `inbox` and the trail). Both
-- records keep their own ledger row, `seq`, time and link of the chain,
-- so the feed's cursor, `head` and every read answer are what they were.
-- Every other `action.allowed` (and one the store cannot derive from its
-- message) is a row of `allowances`; the view `actions_allowed` shows
-- every `action.allowed` record, whichever way it is stored. The chain
-- hashes such a record as that view's row, and the message row with its
-- `allowed` column, so each is covered as it is kept.
--
-- mosaic-bus/6 (the end of a run): a run lives until it ends, and its end
-- is a fact of its own, `session.ended`, a row of `run_ends`: why it ended
-- (`cause`), how its process ended where the host knows (an exit `status`
-- or the `signal` that killed it, never both, agreeing with the cause),
-- and whether the end freed the role the run held (`vacated`), which it
-- does in the same row. A run ends once (`run` is unique). The views
-- `role_holders` and `agents` count an ended run as holding nothing, and
-- `agents` shows each run's end.

CREATE TABLE meta (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) STRICT;

-- The canonical form of `at` and the known kinds are checked by the insert
-- trigger, not as CHECKs: the open-time ledger pass verifies both for every
-- row anyway, and a CHECK would have `quick_check` evaluate them again.
CREATE TABLE ledger (
    seq INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    business TEXT,
    -- mosaic-bus/4: the chain link (see the top of this file).
    hash BLOB NOT NULL
) STRICT;

CREATE TABLE launches (
    seq INTEGER PRIMARY KEY,
    business TEXT NOT NULL,
    role TEXT NOT NULL,
    run TEXT NOT NULL,
    harness TEXT NOT NULL CHECK ((harness = 'pi' OR harness = 'claude-code')),
    address TEXT,
    pid INTEGER NOT NULL CHECK (pid > 0),
    start_time INTEGER NOT NULL CHECK (start_time >= 0)
) STRICT;
CREATE INDEX launches_run ON launches(run);
CREATE INDEX launches_role ON launches(business, role);

CREATE TABLE launch_switches (
    seq INTEGER PRIMARY KEY,
    business TEXT NOT NULL,
    state TEXT NOT NULL CHECK ((state = 'off' OR state = 'on'))
) STRICT;

CREATE TABLE decisions (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE CHECK (length(id) = 36),
    business TEXT NOT NULL,
    raiser_role TEXT NOT NULL,
    raiser_run TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    question TEXT NOT NULL,
    options TEXT NOT NULL CHECK (json_valid(options) AND json_type(options) = 'array'),
    recommendation TEXT NOT NULL,
    blocking INTEGER NOT NULL CHECK ((blocking = 0 OR blocking = 1)),
    technical INTEGER NOT NULL CHECK ((technical = 0 OR technical = 1)),
    project TEXT,
    task_ref TEXT CHECK (task_ref GLOB 'vikunja:[1-9]*/[1-9]*'),
    requirement_ref TEXT,
    supersedes TEXT REFERENCES decisions(id),
    approval_choice TEXT NOT NULL,
    class TEXT NOT NULL CHECK ((class = 'within-role' OR class = 'cross-role' OR class = 'gated')),
    -- NULL routes to the human.
    route_role TEXT,
    holder TEXT,
    CHECK (blocking = 0 OR task_ref IS NOT NULL)
) STRICT;
CREATE INDEX decisions_supersedes ON decisions(supersedes) WHERE supersedes IS NOT NULL;
CREATE INDEX decisions_task ON decisions(task_ref) WHERE task_ref IS NOT NULL;

CREATE TABLE decision_events (
    seq INTEGER PRIMARY KEY,
    decision TEXT NOT NULL REFERENCES decisions(id),
    business TEXT NOT NULL,
    event TEXT NOT NULL CHECK ((event = 'resolved' OR event = 'seen' OR event = 'withdrawn' OR
            event = 'superseded')),
    choice TEXT,
    -- Both NULL: the human (or, for `superseded`, nobody).
    by_role TEXT,
    by_run TEXT,
    note TEXT,
    superseded_by TEXT REFERENCES decisions(id),
    CHECK ((event = 'resolved') = (choice IS NOT NULL)),
    CHECK ((event = 'superseded') = (superseded_by IS NOT NULL)),
    CHECK ((by_role IS NULL) = (by_run IS NULL))
) STRICT;
CREATE INDEX decision_events_decision ON decision_events(decision);
CREATE UNIQUE INDEX decision_events_terminal ON decision_events(decision) WHERE event <> 'seen';
CREATE INDEX decision_events_superseded_by ON decision_events(superseded_by) WHERE superseded_by IS NOT NULL;

CREATE TABLE consumptions (
    seq INTEGER PRIMARY KEY,
    decision TEXT NOT NULL UNIQUE REFERENCES decisions(id),
    business TEXT NOT NULL,
    role TEXT NOT NULL,
    run TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT
) STRICT;

-- The `action.allowed` records no message carries (mosaic-bus/5).
CREATE TABLE allowances (
    seq INTEGER PRIMARY KEY,
    business TEXT NOT NULL,
    role TEXT NOT NULL,
    run TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    decision TEXT REFERENCES decisions(id),
    subject_kind TEXT CHECK ((subject_kind = 'task' OR subject_kind = 'decision' OR
            subject_kind = 'message' OR subject_kind = 'role')),
    subject TEXT,
    CHECK ((subject_kind IS NULL) = (subject IS NULL))
) STRICT;
CREATE INDEX allowances_decision ON allowances(decision) WHERE decision IS NOT NULL;
CREATE INDEX allowances_subject ON allowances(subject_kind, subject) WHERE subject IS NOT NULL;

CREATE TABLE human_inputs (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE CHECK (length(id) = 36),
    business TEXT NOT NULL,
    verb TEXT NOT NULL,
    subject_kind TEXT CHECK ((subject_kind = 'task' OR subject_kind = 'decision' OR
            subject_kind = 'message' OR subject_kind = 'role')),
    subject TEXT,
    CHECK ((subject_kind IS NULL) = (subject IS NULL))
) STRICT;
CREATE INDEX human_inputs_subject ON human_inputs(subject_kind, subject) WHERE subject IS NOT NULL;

CREATE TABLE messages (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE CHECK (length(id) = 36),
    business TEXT NOT NULL,
    -- Both NULL: sent by the human.
    from_role TEXT,
    from_run TEXT,
    -- NULL: addressed to the human.
    to_role TEXT,
    class TEXT CHECK ((class = 'REQUEST' OR class = 'ASSIGNMENT' OR class = 'REVIEW-REQUEST' OR
            class = 'REVIEW-RESULT' OR class = 'RESULT' OR class = 'INFO' OR class = 'DECISION' OR
            class = 'REACTION')),
    body TEXT NOT NULL,
    in_reply_to TEXT REFERENCES messages(id),
    corrects TEXT REFERENCES messages(id),
    decision TEXT REFERENCES decisions(id),
    request TEXT REFERENCES human_inputs(id),
    -- mosaic-bus/5: NULL, or this row also carries the `action.allowed` at
    -- `seq - 1`, granted within the role (no decision) or by approval of
    -- this message's `decision`.
    allowed TEXT CHECK ((allowed = 'within-role' OR allowed = 'approved')),
    CHECK ((from_role IS NULL) = (from_run IS NULL)),
    CHECK (allowed IS NULL OR from_run IS NOT NULL),
    CHECK (allowed IS NOT 'approved' OR decision IS NOT NULL)
) STRICT;
CREATE INDEX messages_recipient ON messages(business, to_role, seq);
CREATE INDEX messages_in_reply_to ON messages(in_reply_to) WHERE in_reply_to IS NOT NULL;
CREATE INDEX messages_corrects ON messages(corrects) WHERE corrects IS NOT NULL;
CREATE INDEX messages_decision ON messages(decision) WHERE decision IS NOT NULL;

CREATE TABLE deliveries (
    seq INTEGER PRIMARY KEY,
    message TEXT NOT NULL UNIQUE REFERENCES messages(id),
    business TEXT NOT NULL,
    run TEXT NOT NULL
) STRICT;

CREATE TABLE reads (
    seq INTEGER PRIMARY KEY,
    message TEXT NOT NULL UNIQUE REFERENCES deliveries(message),
    business TEXT NOT NULL,
    run TEXT NOT NULL
) STRICT;

CREATE TABLE claims (
    seq INTEGER PRIMARY KEY,
    business TEXT NOT NULL,
    role TEXT NOT NULL,
    run TEXT NOT NULL,
    event TEXT NOT NULL CHECK ((event = 'claimed' OR event = 'released' OR event = 'revoked')),
    decision TEXT REFERENCES decisions(id),
    CHECK ((event = 'revoked') = (decision IS NOT NULL))
) STRICT;
CREATE INDEX claims_role ON claims(business, role, seq);
CREATE INDEX claims_decision ON claims(decision) WHERE decision IS NOT NULL;

CREATE TABLE observations (
    seq INTEGER PRIMARY KEY,
    business TEXT NOT NULL,
    role TEXT NOT NULL,
    run TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL CHECK (json_valid(body)),
    subject_kind TEXT CHECK ((subject_kind = 'task' OR subject_kind = 'decision' OR
            subject_kind = 'message' OR subject_kind = 'role')),
    subject TEXT,
    -- For `task.created`: the human input that requested the task.
    request TEXT REFERENCES human_inputs(id),
    CHECK ((subject_kind IS NULL) = (subject IS NULL)),
    -- Task events are filed under their task; a created task names its request.
    CHECK (kind NOT GLOB 'task.*' OR subject_kind IS 'task'),
    CHECK ((kind = 'task.created') = (request IS NOT NULL))
) STRICT;
CREATE INDEX observations_subject ON observations(subject_kind, subject, seq) WHERE subject IS NOT NULL;

CREATE TABLE refusals (
    seq INTEGER PRIMARY KEY,
    business TEXT,
    role TEXT,
    run TEXT,
    verb TEXT,
    code TEXT NOT NULL
) STRICT;

-- Append-only: no table accepts UPDATE or DELETE.
CREATE TRIGGER meta_no_update BEFORE UPDATE ON meta BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER launches_no_update BEFORE UPDATE ON launches BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER launches_no_delete BEFORE DELETE ON launches BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER launch_switches_no_update BEFORE UPDATE ON launch_switches BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER launch_switches_no_delete BEFORE DELETE ON launch_switches BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER decision_events_no_update BEFORE UPDATE ON decision_events BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER decision_events_no_delete BEFORE DELETE ON decision_events BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER consumptions_no_update BEFORE UPDATE ON consumptions BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER consumptions_no_delete BEFORE DELETE ON consumptions BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER allowances_no_update BEFORE UPDATE ON allowances BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER allowances_no_delete BEFORE DELETE ON allowances BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER human_inputs_no_update BEFORE UPDATE ON human_inputs BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER human_inputs_no_delete BEFORE DELETE ON human_inputs BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER messages_no_delete BEFORE DELETE ON messages BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER deliveries_no_update BEFORE UPDATE ON deliveries BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER deliveries_no_delete BEFORE DELETE ON deliveries BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER reads_no_update BEFORE UPDATE ON reads BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER reads_no_delete BEFORE DELETE ON reads BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER claims_no_update BEFORE UPDATE ON claims BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER claims_no_delete BEFORE DELETE ON claims BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER observations_no_update BEFORE UPDATE ON observations BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER observations_no_delete BEFORE DELETE ON observations BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER refusals_no_update BEFORE UPDATE ON refusals BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER refusals_no_delete BEFORE DELETE ON refusals BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;

-- Insert guards: each ledger row follows the one before (`seq` + 1, a later
-- `at`); a typed row's ledger row exists and names this table's kind and
-- business; stored unique keys are never overwritten (the `seq` guards
-- included: without them INSERT OR REPLACE would replace a row);
-- references exist and stay in their business.
CREATE TRIGGER meta_insert BEFORE INSERT ON meta BEGIN
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM meta WHERE key = NEW.key);
END;
CREATE TRIGGER ledger_insert BEFORE INSERT ON ledger BEGIN
    SELECT RAISE(ABORT, 'mosaic:non-monotonic') WHERE NEW.seq IS NOT (SELECT coalesce(max(seq), 0) + 1 FROM ledger) OR NEW.at <= (SELECT at FROM ledger WHERE seq = NEW.seq - 1);
    SELECT RAISE(ABORT, 'mosaic:malformed')
    WHERE NOT (length(NEW.at) = 24 AND NEW.at >= '1970' AND strftime('%Y-%m-%dT%H:%M:%fZ', NEW.at) IS NEW.at)
       OR NOT (NEW.kind = 'session.launched' OR NEW.kind = 'launch.revoked' OR
            NEW.kind = 'launch.restored' OR NEW.kind = 'role.claimed' OR NEW.kind = 'role.released' OR
            NEW.kind = 'role.revoked' OR NEW.kind = 'decision.raised' OR
            NEW.kind = 'decision.resolved' OR NEW.kind = 'decision.seen' OR
            NEW.kind = 'decision.withdrawn' OR NEW.kind = 'decision.superseded' OR
            NEW.kind = 'approval.consumed' OR NEW.kind = 'action.allowed' OR
            NEW.kind = 'message.sent' OR NEW.kind = 'message.delivered' OR
            NEW.kind = 'message.read' OR NEW.kind = 'human.input' OR
            NEW.kind = 'event.observed' OR NEW.kind = 'request.refused' OR
            NEW.kind = 'refusals.counted' OR NEW.kind = 'session.ended');
END;
CREATE TRIGGER launches_insert BEFORE INSERT ON launches BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'session.launched' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM launches WHERE seq = NEW.seq);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM launches WHERE run = NEW.run AND (business, role, harness, address, pid, start_time) IS NOT (NEW.business, NEW.role, NEW.harness, NEW.address, NEW.pid, NEW.start_time));
END;
CREATE TRIGGER launch_switches_insert BEFORE INSERT ON launch_switches BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = CASE NEW.state WHEN 'off' THEN 'launch.revoked' ELSE 'launch.restored' END AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM launch_switches WHERE seq = NEW.seq);
END;
CREATE TRIGGER decisions_insert BEFORE INSERT ON decisions BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'decision.raised' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM decisions WHERE seq = NEW.seq) OR EXISTS (SELECT 1 FROM decisions WHERE id = NEW.id);
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.supersedes IS NOT NULL AND NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.supersedes);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.supersedes IS NOT NULL AND (SELECT business FROM decisions WHERE id = NEW.supersedes) IS NOT NEW.business;
END;
CREATE TRIGGER decision_events_insert BEFORE INSERT ON decision_events BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'decision.' || NEW.event AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM decision_events WHERE seq = NEW.seq) OR (NEW.event <> 'seen' AND EXISTS (SELECT 1 FROM decision_events WHERE decision = NEW.decision AND event <> 'seen'));
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.decision);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE (SELECT business FROM decisions WHERE id = NEW.decision) IS NOT NEW.business;
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.superseded_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.superseded_by);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.superseded_by IS NOT NULL AND (SELECT business FROM decisions WHERE id = NEW.superseded_by) IS NOT NEW.business;
END;
CREATE TRIGGER consumptions_insert BEFORE INSERT ON consumptions BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'approval.consumed' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM consumptions WHERE seq = NEW.seq) OR EXISTS (SELECT 1 FROM consumptions WHERE decision = NEW.decision);
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.decision);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE (SELECT business FROM decisions WHERE id = NEW.decision) IS NOT NEW.business;
END;
CREATE TRIGGER allowances_insert BEFORE INSERT ON allowances BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'action.allowed' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM allowances WHERE seq = NEW.seq) OR EXISTS (SELECT 1 FROM messages WHERE seq = NEW.seq + 1 AND allowed IS NOT NULL);
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.decision IS NOT NULL AND NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.decision);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.decision IS NOT NULL AND (SELECT business FROM decisions WHERE id = NEW.decision) IS NOT NEW.business;
END;
CREATE TRIGGER human_inputs_insert BEFORE INSERT ON human_inputs BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'human.input' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM human_inputs WHERE seq = NEW.seq) OR EXISTS (SELECT 1 FROM human_inputs WHERE id = NEW.id);
END;
CREATE TRIGGER messages_insert BEFORE INSERT ON messages BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'message.sent' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM messages WHERE seq = NEW.seq) OR EXISTS (SELECT 1 FROM messages WHERE id = NEW.id);
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NEW.allowed IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq - 1 AND kind = 'action.allowed' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE NEW.allowed IS NOT NULL AND EXISTS (SELECT 1 FROM allowances WHERE seq = NEW.seq - 1);
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.in_reply_to IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages WHERE id = NEW.in_reply_to);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.in_reply_to IS NOT NULL AND (SELECT business FROM messages WHERE id = NEW.in_reply_to) IS NOT NEW.business;
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.corrects IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages WHERE id = NEW.corrects);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.corrects IS NOT NULL AND (SELECT business FROM messages WHERE id = NEW.corrects) IS NOT NEW.business;
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.decision IS NOT NULL AND NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.decision);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.decision IS NOT NULL AND (SELECT business FROM decisions WHERE id = NEW.decision) IS NOT NEW.business;
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.request IS NOT NULL AND NOT EXISTS (SELECT 1 FROM human_inputs WHERE id = NEW.request);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.request IS NOT NULL AND (SELECT business FROM human_inputs WHERE id = NEW.request) IS NOT NEW.business;
END;
CREATE TRIGGER deliveries_insert BEFORE INSERT ON deliveries BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'message.delivered' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM deliveries WHERE seq = NEW.seq) OR EXISTS (SELECT 1 FROM deliveries WHERE message = NEW.message);
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NOT EXISTS (SELECT 1 FROM messages WHERE id = NEW.message);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE (SELECT business FROM messages WHERE id = NEW.message) IS NOT NEW.business;
END;
CREATE TRIGGER reads_insert BEFORE INSERT ON reads BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'message.read' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM reads WHERE seq = NEW.seq) OR EXISTS (SELECT 1 FROM reads WHERE message = NEW.message);
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NOT EXISTS (SELECT 1 FROM deliveries WHERE message = NEW.message AND run = NEW.run);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE (SELECT business FROM deliveries WHERE message = NEW.message) IS NOT NEW.business;
END;
CREATE TRIGGER claims_insert BEFORE INSERT ON claims BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'role.' || NEW.event AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM claims WHERE seq = NEW.seq);
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.decision IS NOT NULL AND NOT EXISTS (SELECT 1 FROM decisions WHERE id = NEW.decision);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.decision IS NOT NULL AND (SELECT business FROM decisions WHERE id = NEW.decision) IS NOT NEW.business;
END;
CREATE TRIGGER observations_insert BEFORE INSERT ON observations BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'event.observed' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM observations WHERE seq = NEW.seq);
    SELECT RAISE(ABORT, 'mosaic:dangling') WHERE NEW.request IS NOT NULL AND NOT EXISTS (SELECT 1 FROM human_inputs WHERE id = NEW.request);
    SELECT RAISE(ABORT, 'mosaic:cross-business') WHERE NEW.request IS NOT NULL AND (SELECT business FROM human_inputs WHERE id = NEW.request) IS NOT NEW.business;
END;
CREATE TRIGGER refusals_insert BEFORE INSERT ON refusals BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'request.refused' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM refusals WHERE seq = NEW.seq);
END;

-- mosaic-bus/4, refusal counts: begin.
-- `count` more refusals like the row's (business, agent, verb, code), in
-- the window that began at `since`, past the window's rows of their own.
CREATE TABLE refusal_counts (
    seq INTEGER PRIMARY KEY,
    business TEXT,
    role TEXT,
    run TEXT,
    verb TEXT,
    code TEXT NOT NULL,
    since TEXT NOT NULL,
    count INTEGER NOT NULL CHECK (count > 0)
) STRICT;
CREATE TRIGGER refusal_counts_no_update BEFORE UPDATE ON refusal_counts BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER refusal_counts_no_delete BEFORE DELETE ON refusal_counts BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER refusal_counts_insert BEFORE INSERT ON refusal_counts BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'refusals.counted' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT (length(NEW.since) = 24 AND strftime('%Y-%m-%dT%H:%M:%fZ', NEW.since) IS NEW.since);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM refusal_counts WHERE seq = NEW.seq);
END;

-- Every refusal with how many it stands for: 1 for a row of its own, the
-- count for a window's count; `at` is when it was written, `since` the
-- time of the first refusal it stands for.
CREATE VIEW refusal_tally AS
SELECT r.seq, l.at, l.at AS since, r.business, r.role, r.run, r.verb, r.code, 1 AS count
FROM refusals r JOIN ledger l ON l.seq = r.seq
UNION ALL
SELECT c.seq, l.at, c.since, c.business, c.role, c.run, c.verb, c.code, c.count
FROM refusal_counts c JOIN ledger l ON l.seq = c.seq;
-- mosaic-bus/4, refusal counts: end.

-- mosaic-bus/6, the ends of runs: begin.
CREATE TABLE run_ends (
    seq INTEGER PRIMARY KEY,
    business TEXT NOT NULL,
    role TEXT NOT NULL,
    run TEXT NOT NULL UNIQUE,
    cause TEXT NOT NULL CHECK ((cause = 'exited' OR cause = 'failed' OR cause = 'human' OR
            cause = 'revoked' OR cause = 'budget' OR cause = 'process-gone')),
    status INTEGER CHECK (status IS NULL OR (status >= 0 AND status <= 255)),
    signal INTEGER CHECK (signal IS NULL OR (signal >= 1 AND signal <= 64)),
    vacated INTEGER NOT NULL CHECK ((vacated = 0 OR vacated = 1)),
    CHECK (status IS NULL OR signal IS NULL),
    -- `exited` is status 0 (or unknown) and no signal; `failed` is never
    -- status 0.
    CHECK (cause <> 'exited' OR (signal IS NULL AND coalesce(status, 0) = 0)),
    CHECK (cause <> 'failed' OR status IS NOT 0)
) STRICT;
CREATE TRIGGER run_ends_no_update BEFORE UPDATE ON run_ends BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER run_ends_no_delete BEFORE DELETE ON run_ends BEGIN SELECT RAISE(ABORT, 'mosaic:append-only'); END;
CREATE TRIGGER run_ends_insert BEFORE INSERT ON run_ends BEGIN
    SELECT RAISE(ABORT, 'mosaic:malformed') WHERE NOT EXISTS (SELECT 1 FROM ledger WHERE seq = NEW.seq AND kind = 'session.ended' AND business IS NEW.business);
    SELECT RAISE(ABORT, 'mosaic:duplicate') WHERE EXISTS (SELECT 1 FROM run_ends WHERE seq = NEW.seq) OR EXISTS (SELECT 1 FROM run_ends WHERE run = NEW.run);
END;
-- mosaic-bus/6, the ends of runs: end.

-- mosaic-bus/5: every `action.allowed` record, a row of `allowances` or
-- carried by the message after it, with the columns the record has either
-- way. The chain hashes a carried record as this row.
CREATE VIEW actions_allowed AS
SELECT seq, business, role, run, action, target, decision, subject_kind, subject
FROM allowances
UNION ALL
SELECT seq - 1, business, from_role, from_run, 'message.send', coalesce(to_role, 'human'),
       CASE allowed WHEN 'approved' THEN decision END,
       CASE WHEN to_role IS NOT NULL THEN 'role' END, to_role
FROM messages
WHERE allowed IS NOT NULL;

-- Projections. Each reads only stored rows; none is a source of truth.

-- The run holding each role: its newest claim event is a claim, and the
-- run has not ended (an end frees the role it held).
CREATE VIEW role_holders AS
SELECT c.business, c.role, c.run, c.seq
FROM claims c
WHERE c.event = 'claimed'
  AND c.seq = (SELECT max(seq) FROM claims WHERE business = c.business AND role = c.role)
  AND NOT EXISTS (SELECT 1 FROM run_ends e WHERE e.run = c.run);

-- Every bound run with its newest launch record, whether it holds or was
-- revoked from its role, and its end (all NULL while it lives).
CREATE VIEW agents AS
SELECT l.business, l.role, l.run, l.harness, l.address, l.pid, l.start_time,
       (SELECT at FROM ledger WHERE seq = l.seq) AS launched_at,
       EXISTS (SELECT 1 FROM role_holders h
               WHERE h.business = l.business AND h.role = l.role AND h.run = l.run) AS holding,
       EXISTS (SELECT 1 FROM claims c
               WHERE c.business = l.business AND c.role = l.role AND c.run = l.run
                 AND c.event = 'revoked') AS revoked,
       (SELECT at FROM ledger WHERE seq = e.seq) AS ended_at,
       e.cause AS end_cause, e.status AS end_status, e.signal AS end_signal
FROM launches l LEFT JOIN run_ends e ON e.run = l.run
WHERE l.seq = (SELECT max(seq) FROM launches WHERE run = l.run);

-- Decisions with no resolution, withdrawal or supersession yet.
CREATE VIEW open_decisions AS
SELECT d.*
FROM decisions d
WHERE NOT EXISTS (SELECT 1 FROM decision_events e WHERE e.decision = d.id AND e.event <> 'seen');

-- What each recipient (a role, or NULL for the human) has to look at: open
-- decisions routed to it, with the authorization context a resolver must be
-- shown, and messages to it that were not acknowledged.
CREATE VIEW inbox AS
SELECT d.business, d.route_role AS recipient, 'decision' AS item, d.id, d.seq,
       d.action, d.target, d.approval_choice
FROM open_decisions d
UNION ALL
SELECT m.business, m.to_role, 'message', m.id, m.seq, NULL, NULL, NULL
FROM messages m
WHERE NOT EXISTS (SELECT 1 FROM reads r WHERE r.message = m.id);

-- The newest task event per task, tombstones (`task.deleted`) included.
CREATE VIEW task_current AS
SELECT o.business, o.subject AS task_ref, o.kind, o.body, o.kind = 'task.deleted' AS tombstone,
       o.seq, (SELECT at FROM ledger WHERE seq = o.seq) AS at
FROM observations o
WHERE o.subject_kind = 'task' AND o.kind GLOB 'task.*'
  AND o.seq = (SELECT max(seq) FROM observations
               WHERE business = o.business AND subject_kind = 'task' AND subject = o.subject
                 AND kind GLOB 'task.*');

-- One row per subject a record names; a subject's trail is its rows in seq
-- order. Mirrors `Evidence::concerns` in mosaic-domain.
CREATE VIEW trail AS
SELECT seq, business, 'role' AS subject_kind, role AS subject FROM launches
UNION ALL SELECT seq, business, 'role', role FROM claims
UNION ALL SELECT seq, business, 'decision', decision FROM claims WHERE decision IS NOT NULL
UNION ALL SELECT seq, business, 'role', role FROM run_ends
UNION ALL SELECT seq, business, 'decision', id FROM decisions
UNION ALL SELECT seq, business, 'decision', supersedes FROM decisions WHERE supersedes IS NOT NULL
UNION ALL SELECT seq, business, 'task', task_ref FROM decisions WHERE task_ref IS NOT NULL
UNION ALL SELECT seq, business, 'decision', decision FROM decision_events
UNION ALL SELECT seq, business, 'decision', superseded_by FROM decision_events WHERE superseded_by IS NOT NULL
UNION ALL SELECT seq, business, 'decision', decision FROM consumptions
UNION ALL SELECT seq, business, 'decision', decision FROM allowances WHERE decision IS NOT NULL
UNION ALL SELECT seq, business, subject_kind, subject FROM allowances WHERE subject IS NOT NULL
UNION ALL SELECT seq - 1, business, 'decision', decision FROM messages WHERE allowed = 'approved'
UNION ALL SELECT seq - 1, business, 'role', to_role FROM messages WHERE allowed IS NOT NULL AND to_role IS NOT NULL
UNION ALL SELECT seq, business, 'message', id FROM messages
UNION ALL SELECT seq, business, 'message', in_reply_to FROM messages WHERE in_reply_to IS NOT NULL
UNION ALL SELECT seq, business, 'message', corrects FROM messages WHERE corrects IS NOT NULL
UNION ALL SELECT seq, business, 'decision', decision FROM messages WHERE decision IS NOT NULL
UNION ALL SELECT seq, business, 'message', message FROM deliveries
UNION ALL SELECT seq, business, 'message', message FROM reads
UNION ALL SELECT seq, business, subject_kind, subject FROM human_inputs WHERE subject IS NOT NULL
UNION ALL SELECT seq, business, subject_kind, subject FROM observations WHERE subject IS NOT NULL;
