//! The change feed's two sources agree: the changes the writer derives as
//! it commits (`Driver::take_changes`, what live waits are woken with) are
//! exactly those read back from the store after the fact
//! (`mosaic_app::runtime::feed::history`, what a wait below the feed's memory and
//! every wait after a restart read), for every watcher, on both stores.

use mosaic_app::runtime::feed::{history, Page};
use mosaic_domain::changes::{Change, Watcher};
use mosaic_domain::{BusinessId, RoleInstance, RunId};
use mosaic_ports::fakes::MemoryStore;
use mosaic_ports::EvidenceStore;
use mosaic_tests::fixture::{acme, policy_a};
use mosaic_tests::sqlite::TempSqlite;
use mosaic_tests::{scenario, Driver, FreshStore, Restart};

/// The scenario's runs (see `scenario::working_day`), and readers of acme
/// and of a business with no evidence.
fn watchers() -> Vec<Watcher> {
    let agent = |role: &str, run: &str| Watcher::Agent {
        business: acme(),
        role: RoleInstance::parse(role).expect("a role"),
        run: RunId::parse(run).expect("a run"),
    };
    vec![
        agent("lead", "l0"),
        agent("dev", "d0"),
        agent("dev", "d1"),
        agent("ops", "o0"),
        Watcher::Reader { business: acme() },
        Watcher::Reader {
            business: BusinessId::parse("globex").expect("a business"),
        },
    ]
}

/// Every change concerning `watcher` after `after`, page by page.
fn read_back<S: EvidenceStore>(store: &S, watcher: &Watcher, mut after: u64) -> Vec<(u64, Change)> {
    let head = store.head().expect("the head");
    let mut all = Vec::new();
    loop {
        let Page { cursor, changes } = history(store, watcher, after, head).expect("history");
        assert!(cursor >= after, "a cursor went back");
        let done = changes.is_empty() && cursor >= head;
        all.extend(changes);
        if done {
            return all;
        }
        after = cursor;
    }
}

fn agree<S: FreshStore>() {
    let mut driver = Driver::open(policy_a(), S::fresh()).expect("opens");
    let (start, _) = driver.take_changes();
    assert_eq!(start, 0);
    scenario::working_day(&mut driver, &mut 1_000);
    let (head, live) = driver.take_changes();
    assert_eq!(
        head,
        driver.store().head().expect("the head"),
        "the writer counts as the store does"
    );
    assert!(
        live.windows(2).all(|w| w[0].0 < w[1].0),
        "positions increase"
    );
    let mut heard = 0;
    for watcher in watchers() {
        let expected: Vec<_> = live
            .iter()
            .filter(|(_, c)| watcher.concerns(c))
            .cloned()
            .collect();
        heard += expected.len();
        assert_eq!(
            read_back(driver.store(), &watcher, 0),
            expected,
            "{watcher:?}"
        );
        // From the middle of the history, exactly the rest.
        if let Some((middle, _)) = expected.get(expected.len() / 2) {
            let rest: Vec<_> = expected
                .iter()
                .filter(|(seq, _)| seq > middle)
                .cloned()
                .collect();
            assert_eq!(
                read_back(driver.store(), &watcher, *middle),
                rest,
                "{watcher:?}"
            );
        }
    }
    assert!(
        heard >= 20,
        "the scenario concerns its watchers often: {heard}"
    );
    // After a restart, positions and changes are the same.
    let driver = driver.restart(policy_a()).expect("restarts");
    assert_eq!(driver.head(), head);
    for watcher in watchers() {
        let expected: Vec<_> = live
            .iter()
            .filter(|(_, c)| watcher.concerns(c))
            .cloned()
            .collect();
        assert_eq!(
            read_back(driver.store(), &watcher, 0),
            expected,
            "{watcher:?} after a restart"
        );
    }
}

#[test]
fn live_changes_equal_the_stores_history_in_memory() {
    agree::<MemoryStore>();
}

#[test]
fn live_changes_equal_the_stores_history_in_sqlite() {
    agree::<TempSqlite>();
}
