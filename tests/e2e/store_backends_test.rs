//! The store's contract, run against both backends: a SQLite file and a
//! real PostgreSQL (started by the tests). Same operations, same answers:
//! order, reopening, search ranking, event streams, atomic compaction with
//! a verifying chain, vectors, and the lease that lets one holder at a
//! time drive a session (refusal naming the holder, renewal, expiry,
//! fencing of a holder that lost it, one winner of a race).

use std::sync::Arc;
use std::time::Duration;

use sandcrab::store::chain;
use sandcrab::store::{
    CompactionWrite, NewBlock, NewRecord, PgSettings, PgStore, SessionRecord, SqliteStore, Store,
    StoreError, StoreOptions, StoredEvent, StoredTurn,
};

use crate::pg_cluster;

/// Where one test's store lives.
enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Backend {
    fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().unwrap())
    }

    fn postgres(hint: &str) -> Backend {
        Backend::Postgres(pg_cluster::database(hint))
    }

    fn both(hint: &str) -> [Backend; 2] {
        [Backend::sqlite(), Backend::postgres(hint)]
    }

    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// A new store on it (another holder each time), leases held as
    /// `host` for `ttl`.
    fn open_as(&self, host: &str, ttl: Duration) -> Arc<dyn Store> {
        // Each host its own chain key, as on machines of their own.
        let key = *blake3::hash(host.as_bytes()).as_bytes();
        self.open_keyed(host, ttl, Some(key))
    }

    /// A new store as `host`, sealing with `chain_key` (None: no key).
    fn open_keyed(&self, host: &str, ttl: Duration, chain_key: Option<[u8; 32]>) -> Arc<dyn Store> {
        let options = StoreOptions {
            host: Some(host.into()),
            lease_ttl: ttl,
            chain_key,
        };
        match self {
            Backend::Sqlite(dir) => {
                Arc::new(SqliteStore::open_with(&dir.path().join("s.db"), &options).unwrap())
            }
            Backend::Postgres(url) => Arc::new(pg_store(url, &options).unwrap()),
        }
    }

    fn open(&self) -> Arc<dyn Store> {
        self.open_as("host-a", Duration::from_secs(15))
    }

    /// Make every lease look expired (as if its holder stopped renewing
    /// long ago).
    fn expire_leases(&self) {
        let sql = "UPDATE leases SET expires_ms = 0";
        match self {
            Backend::Sqlite(dir) => {
                let c = rusqlite::Connection::open(dir.path().join("s.db")).unwrap();
                c.execute(sql, []).unwrap();
            }
            Backend::Postgres(url) => {
                let db = url.rsplit('/').next().unwrap();
                pg_cluster::cluster().psql(db, sql);
            }
        }
    }
}

pub fn pg_store(url: &str, options: &StoreOptions) -> Result<PgStore, StoreError> {
    let settings = PgSettings {
        url: url.into(),
        password_env: Some(pg_cluster::PASSWORD_ENV.into()),
        ..PgSettings::default()
    };
    PgStore::open(&settings, options, &|v| {
        (v == pg_cluster::PASSWORD_ENV).then(|| pg_cluster::PASSWORD.to_string())
    })
}

fn session(id: &str, ws: &str) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        workspace: ws.into(),
        provider: "anthropic".into(),
        profile: "anthropic".into(),
        model: "m".into(),
        title: None,
        created_at: "2026-11-24T00:00:00.000Z".into(),
        updated_at: "2026-11-24T00:00:00.000Z".into(),
        state: sandcrab::store::StoredState::Active,
        turns: 0,
        host: String::new(),
    }
}

fn turn(id: &str) -> StoredTurn {
    StoredTurn {
        id: id.into(),
        timestamp: "2026-11-24T00:00:00.000Z".into(),
        kind: "user".into(),
        body: format!("{{\"text\":\"{id}\"}}"),
    }
}

fn ids(turns: Vec<StoredTurn>) -> Vec<String> {
    turns.into_iter().map(|t| t.id).collect()
}

fn block(label: &str, content: &str) -> NewBlock {
    NewBlock {
        label: label.into(),
        content: content.into(),
    }
}

#[test]
fn turns_recordings_and_chains_come_back_in_order_after_reopening() {
    for b in Backend::both("order") {
        {
            let store = b.open();
            store.create_session(&session("s1", "/w")).unwrap();
            store.append_turns("s1", &[turn("a"), turn("b")]).unwrap();
            let rec = NewRecord {
                kind: "response".into(),
                body: "{\"text\":\"hello\"}".into(),
            };
            store.append("s1", &[turn("c")], &[rec]).unwrap();
            store.update_session("s1", Some("the title"), None).unwrap();
        }
        let store = b.open();
        assert_eq!(
            ids(store.turns("s1").unwrap()),
            ["a", "b", "c"],
            "{}",
            b.name()
        );
        let s = store.session("s1").unwrap().unwrap();
        assert_eq!((s.turns, s.title.as_deref()), (3, Some("the title")));
        assert_eq!(s.host, "host-a", "{}", b.name());
        let records = store.records("s1").unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].body, "{\"text\":\"hello\"}");
        assert_eq!(store.recording_size("s1").unwrap(), 16);
        let links = store.chain("s1").unwrap();
        chain::verify(
            &links,
            &store.turns("s1").unwrap(),
            &records,
            Some("the title"),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", b.name()));
        assert!(matches!(
            store.append_turns("nope", &[turn("x")]),
            Err(StoreError::UnknownSession(_)) | Err(StoreError::Sql(_))
        ));
    }
}

/// A host seals every chain head it writes with its chain key; written on
/// by a host without that key (someone who holds the database, not the
/// key), the chain still verifies link by link but no longer ends at the
/// seal, and the sealing host says so. Another host's seal is named, not
/// taken for its own.
#[test]
fn a_chain_written_on_without_the_key_no_longer_ends_at_its_seal() {
    use sandcrab::store::chain::SealCheck;
    for b in Backend::both("seal") {
        let here = b.open();
        here.create_session(&session("s1", "/w")).unwrap();
        here.append_turns("s1", &[turn("a"), turn("b")]).unwrap();
        let head = |store: &Arc<dyn Store>| {
            chain::verify(
                &store.chain("s1").unwrap(),
                &store.turns("s1").unwrap(),
                &[],
                None,
            )
            .unwrap()
            .head
        };
        let sealer = here.sealer().expect("a keyed store").clone();
        let check = |store: &Arc<dyn Store>| {
            sealer.check("s1", &head(store), store.seal("s1").unwrap().as_ref())
        };
        assert_eq!(check(&here), SealCheck::Sealed, "{}", b.name());
        // Written on with no key: the chain goes on past the seal.
        let keyless = b.open_keyed("host-a", Duration::from_secs(15), None);
        keyless.append_turns("s1", &[turn("c")]).unwrap();
        assert!(
            matches!(check(&keyless), SealCheck::Moved { .. }),
            "{}: {:?}",
            b.name(),
            check(&keyless)
        );
        // The host writes again: sealed at the new head.
        here.append_turns("s1", &[turn("d")]).unwrap();
        assert_eq!(check(&here), SealCheck::Sealed);
        // Another host, another key: its seal is named, not taken for
        // this host's.
        let there = b.open_as("host-b", Duration::from_secs(15));
        there.append_turns("s1", &[turn("e")]).unwrap();
        assert_eq!(
            check(&here),
            SealCheck::OtherHost {
                host: "host-b".into()
            },
            "{}",
            b.name()
        );
    }
}

#[test]
fn sessions_are_listed_per_workspace_and_deleted_whole() {
    for b in Backend::both("list") {
        let store = b.open();
        store.create_session(&session("s1", "/a")).unwrap();
        store.create_session(&session("s2", "/b")).unwrap();
        store.append_turns("s1", &[turn("t1")]).unwrap();
        store.add_block("s1", &block("l", "c")).unwrap();
        assert_eq!(store.sessions(Some("/a")).unwrap().len(), 1);
        assert_eq!(store.sessions(None).unwrap().len(), 2);
        // Most recently updated first.
        assert_eq!(store.sessions(None).unwrap()[0].id, "s1", "{}", b.name());
        assert!(store.delete_session("s1").unwrap());
        assert!(store.turns("s1").unwrap().is_empty());
        assert!(store.archival("s1", "").unwrap().is_empty());
        assert!(!store.delete_session("s1").unwrap());
    }
}

#[test]
fn search_ranks_like_bm25_on_both_and_ignores_query_syntax() {
    for b in Backend::both("search") {
        let store = b.open();
        for (label, content) in [
            ("a", "the deploy script uses rsync"),
            ("b", "rsync rsync rsync to the staging host"),
            ("c", "nothing relevant here"),
            ("d", "the the the the the the"),
        ] {
            store.add_block("s", &block(label, content)).unwrap();
        }
        store
            .add_block("other", &block("e", "rsync elsewhere"))
            .unwrap();
        let labels = |q: &str, conv: Option<&str>| -> Vec<String> {
            store
                .search(conv, q, 10)
                .unwrap()
                .into_iter()
                .map(|b| b.label)
                .collect()
        };
        assert_eq!(
            labels("rsync \"AND( NEAR ' & | !", Some("s")),
            ["b", "a"],
            "{}",
            b.name()
        );
        // The rare word outweighs the common one.
        assert_eq!(labels("the deploy", Some("s"))[0], "a", "{}", b.name());
        assert_eq!(labels("RSYNC", None).len(), 3, "{}", b.name());
        assert!(labels("  ()  ", None).is_empty());
        assert_eq!(store.search(Some("s"), "rsync", 1).unwrap().len(), 1);
    }
}

#[test]
fn event_streams_keep_order_and_never_overwrite() {
    for b in Backend::both("events") {
        let store = b.open();
        let e = |id: u64, text: &str| StoredEvent {
            id,
            event: "agent:message-chunk".into(),
            data: format!("{{\"t\":\"{text}\"}}"),
        };
        store
            .append_events("a", &[e(1, "x"), e(2, "x"), e(3, "x")])
            .unwrap();
        store.append_events("b", &[e(1, "x")]).unwrap();
        // Another writer's event with a taken id does not replace it.
        store.append_events("a", &[e(2, "other")]).unwrap();
        assert_eq!(store.last_event_id("a").unwrap(), 3);
        assert_eq!(store.last_event_id("none").unwrap(), 0);
        let after: Vec<(u64, String)> = store
            .events_after("a", 1, 10)
            .unwrap()
            .into_iter()
            .map(|e| (e.id, e.data))
            .collect();
        assert_eq!(after[0], (2, "{\"t\":\"x\"}".to_string()), "{}", b.name());
        assert_eq!(after.len(), 2);
        assert_eq!(store.events_after("a", 0, 2).unwrap().len(), 2);
    }
}

#[test]
fn a_compaction_is_all_or_nothing_and_signed_in_the_chain() {
    for b in Backend::both("compact") {
        let store = b.open();
        store.create_session(&session("s1", "/w")).unwrap();
        store
            .append_turns("s1", &[turn("a"), turn("b"), turn("c")])
            .unwrap();
        let old = store.add_block("s1", &block("old", "x")).unwrap();
        store
            .compact(
                "s1",
                &CompactionWrite {
                    delete_turns: vec!["a".into(), "b".into()],
                    add_blocks: vec![block("new", "y")],
                    delete_blocks: vec![old],
                },
            )
            .unwrap();
        assert_eq!(ids(store.turns("s1").unwrap()), ["c"], "{}", b.name());
        let labels: Vec<String> = store
            .archival("s1", "")
            .unwrap()
            .into_iter()
            .map(|b| b.label)
            .collect();
        assert_eq!(labels, ["new"]);
        let links = store.chain("s1").unwrap();
        assert_eq!(links.last().unwrap().kind, "compaction");
        chain::verify(&links, &store.turns("s1").unwrap(), &[], None)
            .unwrap_or_else(|e| panic!("{}: {e}", b.name()));
        // A compaction naming a turn of a session that does not exist
        // writes nothing.
        let before = store.archival("s1", "").unwrap().len();
        let _ = store.compact(
            "ghost",
            &CompactionWrite {
                delete_turns: vec!["c".into()],
                add_blocks: vec![block("x", "y")],
                delete_blocks: vec![],
            },
        );
        assert_eq!(ids(store.turns("s1").unwrap()), ["c"]);
        assert_eq!(store.archival("s1", "").unwrap().len(), before);
    }
}

#[test]
fn vectors_are_kept_per_model_and_found_by_cursor() {
    for b in Backend::both("vectors") {
        let store = b.open();
        let one = store.add_block("c", &block("1", "first")).unwrap();
        let two = store.add_block("c", &block("2", "second")).unwrap();
        let v: Vec<u8> = [1.0f32, 0.0, 0.5]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        store.set_embedding(one, "m", 3, &v).unwrap();
        let missing: Vec<i64> = store
            .unembedded(Some("c"), "m", 3, 0, 10)
            .unwrap()
            .iter()
            .map(|b| b.id)
            .collect();
        assert_eq!(missing, [two], "{}", b.name());
        // Another model's vector does not count.
        assert_eq!(
            store
                .unembedded(Some("c"), "other", 3, 0, 10)
                .unwrap()
                .len(),
            2
        );
        assert!(store.unembedded(None, "m", 3, two, 10).unwrap().is_empty());
        let got = store.embeddings("c", "m", 3).unwrap();
        assert_eq!(got, vec![(one, v.clone())], "{}", b.name());
        assert_eq!(store.archival_blocks(&[two, 999_999]).unwrap().len(), 1);
    }
}

#[test]
fn a_session_has_one_driver_and_a_holder_that_lost_it_cannot_write() {
    for b in Backend::both("lease") {
        let a = b.open_as("host-a", Duration::from_secs(15));
        let other = b.open_as("host-b", Duration::from_secs(15));
        a.create_session(&session("s1", "/w")).unwrap();
        a.acquire_lease("s1").unwrap();
        // Taken again by the same holder: fine.
        a.acquire_lease("s1").unwrap();
        let err = other.acquire_lease("s1").unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, StoreError::Leased { .. }) && text.contains("host-a"),
            "{}: {text}",
            b.name()
        );
        assert!(other.append_turns("s1", &[turn("x")]).is_err());
        let listed = other.leases().unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].binds() && listed[0].host == "host-a");

        // Host a stops renewing and its lease runs out: b takes over, and
        // a's writes are refused from then on.
        b.expire_leases();
        other.acquire_lease("s1").unwrap();
        other.append_turns("s1", &[turn("by-b")]).unwrap();
        let err = a.append_turns("s1", &[turn("by-a")]).unwrap_err();
        assert!(err.to_string().contains("host-b"), "{}: {err}", b.name());
        assert_eq!(ids(a.turns("s1").unwrap()), ["by-b"]);

        // b ends and gives the lease back: a, woken up with its stale view
        // of the history, still may not write (it lost the lease; nobody
        // else holding it now does not make it a's again).
        other.release_lease("s1").unwrap();
        other.release_lease("s1").unwrap();
        let err = a.append_turns("s1", &[turn("stale")]).unwrap_err();
        assert!(
            matches!(err, StoreError::LeaseLost { .. }),
            "{}: {err}",
            b.name()
        );
        assert_eq!(ids(a.turns("s1").unwrap()), ["by-b"]);
        // A host that never took it (an operator's command) is not fenced.
        let third = b.open_as("host-c", Duration::from_secs(15));
        third.append_turns("s1", &[turn("by-c")]).unwrap();
        // Taken again, a writes again (after reading the history anew).
        a.acquire_lease("s1").unwrap();
        a.append_turns("s1", &[turn("by-a")]).unwrap();
    }
}

#[test]
fn a_held_lease_is_renewed_and_an_unrenewed_one_expires() {
    for b in Backend::both("renew") {
        let ttl = Duration::from_millis(1500);
        let a = b.open_as("host-a", ttl);
        a.create_session(&session("s1", "/w")).unwrap();
        a.acquire_lease("s1").unwrap();
        std::thread::sleep(ttl * 2);
        let other = b.open_as("host-b", ttl);
        assert!(
            other.acquire_lease("s1").is_err(),
            "{}: renewal kept the lease",
            b.name()
        );
        // The store is dropped without letting go (as a frozen host): its
        // lease is free once it expires.
        drop(a);
        let started = std::time::Instant::now();
        while other.acquire_lease("s1").is_err() {
            assert!(started.elapsed() < ttl * 3, "{}: never expired", b.name());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn of_hosts_taking_one_session_at_once_exactly_one_wins() {
    for b in Backend::both("race") {
        b.open().create_session(&session("s1", "/w")).unwrap();
        let stores: Vec<Arc<dyn Store>> = (0..6)
            .map(|i| b.open_as(&format!("host-{i}"), Duration::from_secs(15)))
            .collect();
        let barrier = Arc::new(std::sync::Barrier::new(stores.len()));
        let handles: Vec<_> = stores
            .iter()
            .map(|s| {
                let (s, barrier) = (s.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    s.acquire_lease("s1")
                })
            })
            .collect();
        let results: Vec<Result<(), StoreError>> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "{}: {results:?}", b.name());
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(matches!(r, StoreError::Leased { .. }), "{}: {r}", b.name());
        }
    }
}

#[test]
fn a_history_copies_from_sqlite_to_postgres_verified_and_only_once() {
    let from = Backend::sqlite();
    let to = Backend::postgres("copy");
    let source = from.open();
    for id in ["s1", "s2"] {
        source.create_session(&session(id, "/w")).unwrap();
        source
            .append_turns(id, &[turn(&format!("{id}-a")), turn(&format!("{id}-b"))])
            .unwrap();
        source.update_session(id, Some(id), None).unwrap();
    }
    source
        .compact(
            "s1",
            &CompactionWrite {
                delete_turns: vec!["s1-a".into()],
                add_blocks: vec![block("summary", "rsync to staging")],
                delete_blocks: vec![],
            },
        )
        .unwrap();
    let dest = to.open();
    let report =
        sandcrab::store::copy::copy(source.as_ref(), dest.as_ref(), &mut |_, _| {}).unwrap();
    assert_eq!(report.copied.len(), 2);
    for id in ["s1", "s2"] {
        let links = dest.chain(id).unwrap();
        chain::verify(
            &links,
            &dest.turns(id).unwrap(),
            &dest.records(id).unwrap(),
            Some(id),
        )
        .unwrap();
        assert_eq!(links, source.chain(id).unwrap());
    }
    assert_eq!(ids(dest.turns("s1").unwrap()), ["s1-b"]);
    assert_eq!(dest.search(Some("s1"), "staging", 5).unwrap().len(), 1);
    let again =
        sandcrab::store::copy::copy(source.as_ref(), dest.as_ref(), &mut |_, _| {}).unwrap();
    assert_eq!((again.copied.len(), again.present.len()), (0, 2));
}

#[test]
fn hosts_migrating_one_new_database_at_once_all_succeed() {
    let url = pg_cluster::database("migrate");
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                let options = StoreOptions {
                    host: Some(format!("h{i}")),
                    ..StoreOptions::default()
                };
                pg_store(&url, &options).map(|s| s.describe().1)
            })
        })
        .collect();
    for h in handles {
        let version = h.join().unwrap().unwrap();
        assert_eq!(
            version as usize,
            sandcrab::store::postgres_migrations(),
            "every host brought it to the latest schema"
        );
    }
}

#[test]
fn a_wrong_password_or_a_missing_server_is_a_clear_error() {
    let url = pg_cluster::database("auth");
    let settings = PgSettings {
        url: url.clone(),
        password_env: Some("PW".into()),
        ..PgSettings::default()
    };
    let err = PgStore::open(&settings, &StoreOptions::default(), &|_| {
        Some("wrong".into())
    })
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(!err.contains("wrong"), "the password is never shown: {err}");
    let nobody = PgSettings {
        url: "postgres://u@127.0.0.1:1/db".into(),
        ..PgSettings::default()
    };
    let err = PgStore::open(&nobody, &StoreOptions::default(), &|_| None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("127.0.0.1:1") || err.contains("onnect"),
        "{err}"
    );
}

/// The agent calls the store from async code (a turn is made durable
/// before the model is asked). Many calls inside one task, without the
/// task ever yielding, must all complete: the store may not depend on the
/// caller's runtime budget (tokio's cooperative budget once made such a
/// caller spin forever after ~100 PostgreSQL calls).
#[test]
fn many_store_calls_from_one_async_task_all_complete() {
    for b in Backend::both("budget") {
        let store = b.open();
        store.create_session(&session("s1", "/a")).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        let name = b.name();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                for i in 0..500 {
                    store.append_turns("s1", &[turn(&format!("t{i}"))]).unwrap();
                    assert_eq!(store.turns("s1").unwrap().len(), i + 1);
                }
            });
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("{name}: the store stopped answering inside a task"));
    }
}
