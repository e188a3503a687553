//! The etcd store against a real etcd server (Debian's `etcd-server`, installed by
//! `scripts/test`), started on free 127.0.0.1 ports in a temporary directory.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_meta::{BrokerInfo, EtcdLink, EtcdStore, MetaError};

struct Etcd {
    child: Child,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_etcd() -> Etcd {
    start_etcd_with(&[])
}

fn start_etcd_with(args: &[&str]) -> Etcd {
    let dir = tempfile::tempdir().unwrap();
    let (client, peer) = (free_port(), free_port());
    let endpoint = format!("127.0.0.1:{client}");
    let child = Command::new(std::env::var("SLUICE_ETCD_BIN").unwrap_or_else(|_| "etcd".into()))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--listen-client-urls")
        .arg(format!("http://{endpoint}"))
        .arg("--advertise-client-urls")
        .arg(format!("http://{endpoint}"))
        .arg("--listen-peer-urls")
        .arg(format!("http://127.0.0.1:{peer}"))
        .arg("--initial-advertise-peer-urls")
        .arg(format!("http://127.0.0.1:{peer}"))
        .arg("--initial-cluster")
        .arg(format!("default=http://127.0.0.1:{peer}"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcd must be installed (scripts/test installs Debian's etcd-server)");
    let etcd = Etcd {
        child,
        endpoint,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = sluice_meta::etcd::Etcd::connect(&link(&[&etcd.endpoint], 1)).unwrap();
        if c.get("/probe").is_ok() {
            return etcd;
        }
        assert!(Instant::now() < deadline, "etcd did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn link(endpoints: &[&str], timeout_s: u64) -> EtcdLink {
    EtcdLink::plain(endpoints, Duration::from_secs(timeout_s)).unwrap()
}

fn store(etcd: &Etcd, node: i32) -> EtcdStore {
    EtcdStore::open(&link(&[&etcd.endpoint], 2), "/test", node, || {
        "cluster-a".into()
    })
    .unwrap()
}

fn info(port: u16) -> BrokerInfo {
    BrokerInfo {
        partitions_max: None,
        reads: false,
        direct: Vec::new(),
        node_id: 0,
        host: "127.0.0.1".into(),
        port,
        listeners: Vec::new(),
        rack: None,
        console: None,
        lease: 0,
    }
}

#[test]
fn topics_membership_ownership_and_fencing() {
    let etcd = start_etcd();
    let a = store(&etcd, 1);
    let b = EtcdStore::open(
        &link(&["127.0.0.1:1", &etcd.endpoint], 2),
        "/test/",
        2,
        || "another".into(),
    )
    .unwrap();
    // One cluster id, whoever asked first; a dead endpoint in the list is skipped.
    assert_eq!(b.cluster_id(), "cluster-a");

    a.register(Duration::from_secs(10), &info(9001)).unwrap();
    b.register(Duration::from_secs(10), &info(9002)).unwrap();
    assert_eq!(a.keep_alive().unwrap(), sluice_meta::Renewal::Alive);
    let v = a.refresh().unwrap();
    assert_eq!(v.brokers.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(v.brokers[&2].port, 9002);

    // One controller at a time.
    let ctrl = a.campaign().unwrap().expect("first campaign wins");
    assert_eq!(b.campaign().unwrap(), None);

    let mut configs = BTreeMap::new();
    configs.insert("retention.ms".to_string(), "1000".to_string());
    let t = a
        .create_topic("orders", 2, configs.clone(), &[1, 2], None, &[])
        .unwrap();
    assert_eq!(t.owners, vec![1, 2]);
    assert!(matches!(
        b.create_topic("orders", 1, BTreeMap::new(), &[2], None, &[]),
        Err(MetaError::TopicExists(_))
    ));
    let seen = b.refresh().unwrap().owners[&("orders".to_string(), 1)];
    assert_eq!(seen.owner.node, 2);
    // Only the assigned broker acquires, and only from the record it saw.
    assert!(a.acquire("orders", 1, seen).unwrap().is_none());
    let held = b.acquire("orders", 1, seen).unwrap().unwrap();
    assert_eq!(held.owner.epoch, 1);
    assert!(b.acquire("orders", 1, seen).unwrap().is_none());
    assert!(b
        .confirm(&[("orders".into(), 1, held.mod_revision)])
        .unwrap());

    // The controller moves the partition: the old owner's confirmation fails from then on.
    assert!(a.assign(ctrl, &[("orders".into(), 1, held, 1)]).unwrap());
    assert!(!b
        .confirm(&[("orders".into(), 1, held.mod_revision)])
        .unwrap());
    // A stale controller revision cannot assign.
    let now = a.refresh().unwrap().owners[&("orders".to_string(), 1)];
    assert!(!a
        .assign(ctrl + 1_000_000, &[("orders".into(), 1, now, 2)])
        .unwrap());

    // A planned move: the controller asks the live owner to move partition 0 to broker 2,
    // the owner hands it over with its recovery point, and broker 2 acquires it.
    let held0 = {
        let seen0 = a.refresh().unwrap().owners[&("orders".to_string(), 0)];
        let held_a = a.acquire("orders", 0, seen0).unwrap().unwrap();
        assert!(a.assign(ctrl, &[("orders".into(), 0, held_a, 2)]).unwrap());
        let asked = b.refresh().unwrap().owners[&("orders".to_string(), 0)];
        assert_eq!((asked.owner.node, asked.owner.to), (1, Some(2)));
        // Not yet broker 2's to take, and not handed over from a record that changed.
        assert!(b.acquire("orders", 0, asked).unwrap().is_none());
        assert!(!a.hand_over("orders", 0, held_a, 2, 42).unwrap());
        assert!(a.hand_over("orders", 0, asked, 2, 42).unwrap());
        let seen0 = b.refresh().unwrap().owners[&("orders".to_string(), 0)];
        assert_eq!(
            (seen0.owner.node, seen0.owner.from, seen0.owner.to),
            (2, Some(1), None)
        );
        let held0 = b.acquire("orders", 0, seen0).unwrap().unwrap();
        assert_eq!(held0.owner.epoch, held_a.owner.epoch + 1);
        assert_eq!(held0.owner.recovery_point, 42);
        assert_eq!(held0.owner.from, None);
        held0
    };
    // A replacement process with node id 2 fences the old one's registration.
    let b2 = store(&etcd, 2);
    b2.register(Duration::from_secs(10), &info(9003)).unwrap();
    assert!(!b
        .confirm(&[("orders".into(), 0, held0.mod_revision)])
        .unwrap());
    assert!(b2
        .confirm(&[("orders".into(), 0, held0.mod_revision)])
        .unwrap());

    // Partitions, configs, deletion.
    let t = a.add_partitions("orders", 3, &[2]).unwrap();
    assert_eq!(t.partitions(), 3);
    assert_eq!(t.owners[2], 2);
    configs.insert("cleanup.policy".into(), "delete".into());
    assert_eq!(
        a.set_topic_configs("orders", configs.clone())
            .unwrap()
            .configs,
        configs
    );
    a.delete_topic("orders").unwrap();
    let v = b.refresh().unwrap();
    assert!(v.topics.is_empty() && v.owners.is_empty());

    // Producer ids never repeat across brokers.
    let mut ids: Vec<i64> = (0..5).map(|_| a.next_producer_id().unwrap()).collect();
    ids.extend((0..5).map(|_| b.next_producer_id().unwrap()));
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len());

    // Leaving removes the registration and the controller key with it.
    a.deregister().unwrap();
    let v = b.refresh().unwrap();
    assert!(!v.brokers.contains_key(&1));
    assert_eq!(v.controller, None);
}

#[test]
fn a_watch_reports_changes_until_cancelled() {
    let etcd = start_etcd();
    let a = store(&etcd, 1);
    let watch = a.watcher();
    let cancel = std::sync::Arc::new(sluice_meta::etcd::WatchCancel::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn({
        let (watch, cancel) = (watch.clone(), cancel.clone());
        move || watch.run(&cancel, || tx.send(()).unwrap())
    });
    // Once when in place, then once per change under the prefix.
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    a.register(Duration::from_secs(10), &info(9001)).unwrap();
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    cancel.cancel();
    watcher.join().unwrap().unwrap();
    // A cancelled watch does not start again.
    assert!(watch
        .run(&cancel, || panic!("watched after cancel"))
        .is_ok());
}

/// The first broker records its log dirs' directory ids as the cluster's volume; a broker
/// with the same set (in any order) joins, one with another set (a bare mount point, where a
/// fresh meta.properties was just written) is refused with both sets named.
#[test]
fn the_first_broker_records_the_volume_and_others_must_match() {
    let etcd = start_etcd();
    let a = store(&etcd, 1);
    a.check_volume(&["dirB".into(), "dirA".into()]).unwrap();
    a.check_volume(&["dirA".into(), "dirB".into()]).unwrap();
    let b = store(&etcd, 2);
    b.check_volume(&["dirA".into(), "dirB".into()]).unwrap();
    let err = b
        .check_volume(&["dirA".into(), "fresh".into()])
        .unwrap_err();
    assert!(matches!(err, MetaError::WrongVolume(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("dirA,fresh") && text.contains("dirA,dirB"),
        "{text}"
    );
}

#[test]
fn a_deleted_topic_names_its_owners_until_they_let_go() {
    let etcd = start_etcd();
    let a = store(&etcd, 1);
    let b = store(&etcd, 2);
    a.register(Duration::from_secs(10), &info(9001)).unwrap();
    b.register(Duration::from_secs(10), &info(9002)).unwrap();
    let t = a
        .create_topic("gone", 3, BTreeMap::new(), &[1, 2, -1], None, &[])
        .unwrap();
    let seen = b.refresh().unwrap().owners[&("gone".to_string(), 1)];
    let held = b.acquire("gone", 1, seen).unwrap().unwrap();
    assert!(b
        .record_progress(
            "gone",
            sluice_meta::cluster::Progress {
                partition: 1,
                held,
                recovery_point: 10,
                segment: 0,
                sealed: None,
                snapshot: None,
                volume: None,
            },
            false,
        )
        .unwrap()
        .is_some());
    a.delete_topic("gone").unwrap();
    let v = b.refresh().unwrap();
    assert!(v.topics.is_empty() && v.owners.is_empty());
    let d = v.deleted[&t.id].clone();
    assert_eq!(d.topic, "gone");
    // The partition nobody was assigned is the deleting broker's (1) to remove.
    assert_eq!(d.owners, vec![1, 2, 1]);

    // The name can be taken again at once, by a topic of another id.
    let again = a
        .create_topic("gone", 1, BTreeMap::new(), &[2], None, &[])
        .unwrap();
    assert_ne!(again.id, t.id);
    assert_eq!(b.topic_id("gone").unwrap(), Some(again.id));
    assert_eq!(b.topic_id("never").unwrap(), None);

    // Each broker lets go of its own entries, from the record as it saw it.
    assert!(a.let_go_of_deleted(t.id, &d).unwrap());
    assert!(!b.let_go_of_deleted(t.id, &d).unwrap());
    let d = b.refresh().unwrap().deleted[&t.id].clone();
    assert_eq!(d.owners, vec![-1, 2, -1]);
    assert!(b.let_go_of_deleted(t.id, &d).unwrap());
    assert!(!b.refresh().unwrap().deleted.contains_key(&t.id));
    // A topic deleted before any broker was assigned (imported, not placed yet) names the
    // deleting broker: its directories may be there.
    let none = a
        .create_topic("unowned", 1, BTreeMap::new(), &[-1], None, &[])
        .unwrap();
    a.delete_topic("unowned").unwrap();
    assert_eq!(a.refresh().unwrap().deleted[&none.id].owners, vec![1]);
}

#[test]
fn a_departed_brokers_entries_are_taken_over_only_while_it_is_gone() {
    let etcd = start_etcd();
    let a = store(&etcd, 1);
    let b = store(&etcd, 2);
    a.register(Duration::from_secs(10), &info(9001)).unwrap();
    let b_lease = b.register(Duration::from_secs(10), &info(9002)).unwrap();
    let t = a
        .create_topic("gone", 2, BTreeMap::new(), &[1, 2], None, &[])
        .unwrap();
    a.delete_topic("gone").unwrap();
    let d = a.refresh().unwrap().deleted[&t.id].clone();
    // Broker 2 is registered: its entry is its own.
    assert!(!a.take_over_deleted(t.id, &d, &[2]).unwrap());
    assert_eq!(a.deleted_topic(t.id).unwrap().unwrap().owners, vec![1, 2]);
    // Its process is gone: its lease revoked (twice is no error), its entry taken over.
    let v = a.refresh().unwrap();
    assert_eq!(v.brokers[&2].lease, b_lease);
    a.revoke_lease_of(2, b_lease).unwrap();
    a.revoke_lease_of(2, b_lease).unwrap();
    let v = a.refresh().unwrap();
    assert!(!v.brokers.contains_key(&2));
    // Not from a stale record.
    let mut stale = d.clone();
    stale.mod_revision -= 1;
    assert!(!a.take_over_deleted(t.id, &stale, &[2]).unwrap());
    assert!(a.take_over_deleted(t.id, &d, &[2]).unwrap());
    let now = b.deleted_topic(t.id).unwrap().unwrap();
    assert_eq!(now.owners, vec![1, 1]);
    // Broker 2 back (a new lease): the record it reads names it no more.
    b.register(Duration::from_secs(10), &info(9002)).unwrap();
    assert!(!b.deleted_topic(t.id).unwrap().unwrap().owners.contains(&2));
    // The taker lets go of both, which removes the record.
    assert!(a.let_go_of_deleted(t.id, &now).unwrap());
    assert_eq!(a.deleted_topic(t.id).unwrap(), None);
}

#[test]
fn a_prefix_compare_sees_any_later_change_under_it() {
    use sluice_meta::etcd::{Compare, Op};
    let etcd = start_etcd();
    let c = sluice_meta::etcd::Etcd::connect(&link(&[&etcd.endpoint], 2)).unwrap();
    let put = |k: &str| Op::Put {
        key: k.into(),
        value: b"x".to_vec(),
        lease: 0,
    };
    // Nothing under the prefix: holds.
    assert!(c
        .txn(&[Compare::PrefixModBelow("/p/".into(), 1)], &[], &[])
        .unwrap());
    c.txn(&[], &[put("/p/a")], &[]).unwrap();
    let rev = c.txn_at(&[], &[put("/p/b")], &[]).unwrap().unwrap();
    assert!(c
        .txn(&[Compare::PrefixModBelow("/p/".into(), rev + 1)], &[], &[])
        .unwrap());
    assert!(!c
        .txn(&[Compare::PrefixModBelow("/p/".into(), rev)], &[], &[])
        .unwrap());
    // A key beside the prefix does not count.
    c.txn(&[], &[put("/q")], &[]).unwrap();
    assert!(c
        .txn(&[Compare::PrefixModBelow("/p/".into(), rev + 1)], &[], &[])
        .unwrap());
}

/// One POST to etcd's JSON gateway as a bare HTTP/1.1 exchange (what `etcdctl user add`,
/// `role grant-permission` and `auth enable` do), for setting up authentication.
fn post(endpoint: &str, path: &str, body: serde_json::Value, token: Option<&str>) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(endpoint).unwrap();
    let body = body.to_string();
    let auth = token.map_or(String::new(), |t| format!("Authorization: {t}\r\n"));
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
    answer
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// etcd with authentication on and simple tokens that expire after a second unused: a user
/// `sluice` whose role may read and write `/auth/`, and `outsider`, who may touch nothing.
fn start_etcd_with_auth() -> Etcd {
    use serde_json::json;
    let etcd = start_etcd_with(&["--auth-token-ttl", "1"]);
    let e = etcd.endpoint.as_str();
    post(
        e,
        "/v3/auth/user/add",
        json!({"name": "root", "password": "root-pw"}),
        None,
    );
    post(
        e,
        "/v3/auth/user/grant",
        json!({"user": "root", "role": "root"}),
        None,
    );
    post(e, "/v3/auth/role/add", json!({"name": "rw"}), None);
    post(
        e,
        "/v3/auth/role/grant",
        json!({"name": "rw", "perm": {"permType": "READWRITE", "key": b64("/auth/"), "range_end": b64("/auth0")}}),
        None,
    );
    for (user, password) in [("sluice", "sluice-pw"), ("outsider", "outsider-pw")] {
        post(
            e,
            "/v3/auth/user/add",
            json!({"name": user, "password": password}),
            None,
        );
    }
    post(
        e,
        "/v3/auth/user/grant",
        json!({"user": "sluice", "role": "rw"}),
        None,
    );
    post(e, "/v3/auth/enable", json!({}), None);
    etcd
}

fn login_link(etcd: &Etcd, user: &str, password: &str) -> EtcdLink {
    EtcdLink {
        login: Some(sluice_config::EtcdLogin {
            username: user.into(),
            password: password.into(),
        }),
        ..link(&[&etcd.endpoint], 2)
    }
}

/// A token etcd no longer takes (here: expired after a second unused) is renewed, and the
/// request sent once more: for requests, a watch (which etcd creates and cancels at once
/// when the token is not valid) and lease keep-alives.
#[test]
fn expired_auth_tokens_are_renewed() {
    use sluice_meta::etcd::{Etcd as Client, Op, WatchCancel};
    let etcd = start_etcd_with_auth();
    let c = Client::connect(&login_link(&etcd, "sluice", "sluice-pw")).unwrap();
    let put = |k: &str| Op::Put {
        key: k.into(),
        value: b"x".to_vec(),
        lease: 0,
    };
    assert!(c.txn(&[], &[put("/auth/a")], &[]).unwrap());
    let lease = c.lease_grant(30).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(c.get("/auth/a").unwrap().unwrap().value, b"x");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(c.lease_keep_alive(lease).unwrap() > 0);
    std::thread::sleep(Duration::from_millis(2500));

    let cancel = std::sync::Arc::new(WatchCancel::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn({
        let (c, cancel) = (c.clone(), cancel.clone());
        move || c.watch_prefix("/auth/", &cancel, |_| tx.send(()).unwrap())
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // The watch outlives its token.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(c.txn(&[], &[put("/auth/b")], &[]).unwrap());
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    cancel.cancel();
    watcher.join().unwrap().unwrap();
}

/// What etcd refuses for good is `Refused`, in words naming the settings.
#[test]
fn refused_credentials_and_permissions_say_so() {
    use sluice_meta::etcd::{Etcd as Client, EtcdError, WatchCancel};
    let etcd = start_etcd_with_auth();
    let refusal = |link: &EtcdLink| match Client::connect(link).unwrap().get("/auth/a") {
        Err(EtcdError::Refused(reason)) => reason,
        other => panic!("{other:?}"),
    };
    let r = refusal(&login_link(&etcd, "sluice", "wrong"));
    assert!(r.contains("refused the user name or password"), "{r}");
    assert!(!r.contains("wrong"), "{r}");
    let r = refusal(&link(&[&etcd.endpoint], 2));
    assert!(r.contains("set sluice.cluster.etcd.username"), "{r}");
    let r = refusal(&login_link(&etcd, "outsider", "outsider-pw"));
    assert!(r.contains("outsider may not read and write"), "{r}");
    // A watch etcd refuses ends with the refusal instead of reporting nothing forever.
    let c = Client::connect(&login_link(&etcd, "outsider", "outsider-pw")).unwrap();
    match c.watch_prefix("/auth/", &WatchCancel::default(), |_| {}) {
        Err(EtcdError::Refused(r)) => assert!(r.contains("may not read and write"), "{r}"),
        other => panic!("{other:?}"),
    }
}

/// A TCP proxy in front of etcd whose watch connections (a `POST /v3/watch`) can be made to go
/// silent: from `silence()` on, what etcd sends on them is dropped, without closing them, as
/// a NAT or firewall that forgot an idle connection, or an etcd member cut off from its
/// peers, does. Every other connection passes as before.
struct Proxy {
    endpoint: String,
    silent: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    fn start(upstream: &str) -> Proxy {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        let silent = Arc::new(AtomicBool::new(false));
        let upstream = upstream.to_string();
        let flag = silent.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = std::net::TcpStream::connect(&upstream) else {
                    continue;
                };
                let watch = Arc::new(AtomicBool::new(false));
                // Client to etcd: passes; a watch request marks the connection.
                let (mut from, mut to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let marks = watch.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match from.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if buf[..n].windows(9).any(|w| w == b"/v3/watch") {
                            marks.store(true, Ordering::Release);
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
                // etcd to client: dropped on a watch connection once silent.
                let (mut from, mut to) = (server, client);
                let flag = flag.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match from.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if watch.load(Ordering::Acquire) && flag.load(Ordering::Acquire) {
                            continue;
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Proxy { endpoint, silent }
    }

    fn silence(&self) {
        self.silent
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Found by an adversary on a5134e6, since fixed (beats: `EtcdStore::refresh_current`).
/// Claim: "a broker cut off from etcd gets an error from
/// refresh_current as it did from a full read, so it does not act on a stale view"). The
/// one-key linearizable read proves etcd answers, not that the watch still reports: a watch
/// connection that goes silent (no FIN, no RST: a NAT or firewall dropping an idle
/// long-lived connection, an etcd member partitioned from its peers, which keeps the
/// stream open) never errors, `Views` stays `synced`, and every round returns the view of
/// the moment it went silent while etcd answers every read. Before a6bd335 each round (200
/// ms) read everything; now a change (a topic created, a partition assigned to this broker,
/// a broker gone, which the controller acts on) waits for the full read,
/// sluice.cluster.full.read.interval.ms (60 s), and after it the view is "synced" again and
/// stale again for the next 60 s. The watch asks for no progress notifications
/// (etcd.rs watch_prefix: no "progress_notify"), so nothing can tell a quiet watch from a
/// dead one.
#[test]
fn a_round_sees_a_change_within_a_few_polls_when_the_watch_connection_goes_silent() {
    let etcd = start_etcd();
    let proxy = Proxy::start(&etcd.endpoint);
    let a = EtcdStore::open(&link(&[&proxy.endpoint], 2), "/test", 1, || {
        "cluster-a".into()
    })
    .unwrap();
    let b = store(&etcd, 2);
    // The cluster thread's watch (watch_loop), feeding a's view.
    let watch = a.watcher();
    let cancel = std::sync::Arc::new(sluice_meta::etcd::WatchCancel::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn({
        let (watch, cancel) = (watch.clone(), cancel.clone());
        move || {
            watch.run(&cancel, || {
                let _ = tx.send(());
            })
        }
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // A full read under the watch: the base later rounds apply the watch's reports to.
    a.refresh().unwrap();
    let seen = |name: &str| {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            // One round of the cluster thread (every 200 ms, full reads 60 s apart).
            let v = a
                .refresh_current(false, Duration::from_secs(1))
                .expect("etcd answers every read");
            if v.topics.contains_key(name) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(v.revision);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // The watch works: another broker's topic is seen at the next rounds.
    b.create_topic("before", 1, BTreeMap::new(), &[1], None, &[])
        .unwrap();
    assert_eq!(seen("before"), Ok(()), "the watch reports changes");
    // The watch connection goes silent; etcd still answers.
    proxy.silence();
    b.create_topic("after", 1, BTreeMap::new(), &[1], None, &[])
        .unwrap();
    let outcome = seen("after");
    cancel.cancel();
    let _ = watcher.join();
    assert_eq!(
        outcome,
        Ok(()),
        "5 s (25 rounds) after topic 'after' was created (assigned to broker 1), with etcd answering every one-key read, broker 1's rounds still act on a view without it (Err: the view's revision)"
    );
}

/// As above, for what the controller acts on: a broker that left (its key deleted) stays in
/// the view of a broker whose watch went silent, so its partitions are not given to others
/// until the next full read (sluice.cluster.full.read.interval.ms, 60 s) instead of the
/// next round.
#[test]
fn a_broker_that_left_is_gone_from_the_view_within_a_few_polls_when_the_watch_connection_goes_silent(
) {
    let etcd = start_etcd();
    let proxy = Proxy::start(&etcd.endpoint);
    let a = EtcdStore::open(&link(&[&proxy.endpoint], 2), "/test", 1, || {
        "cluster-a".into()
    })
    .unwrap();
    let b = store(&etcd, 2);
    a.register(Duration::from_secs(10), &info(9001)).unwrap();
    b.register(Duration::from_secs(10), &info(9002)).unwrap();
    let watch = a.watcher();
    let cancel = std::sync::Arc::new(sluice_meta::etcd::WatchCancel::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn({
        let (watch, cancel) = (watch.clone(), cancel.clone());
        move || {
            watch.run(&cancel, || {
                let _ = tx.send(());
            })
        }
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    a.refresh().unwrap();
    assert!(a
        .refresh_current(false, Duration::from_secs(1))
        .unwrap()
        .brokers
        .contains_key(&2));
    proxy.silence();
    b.deregister().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let listed = loop {
        let v = a
            .refresh_current(false, Duration::from_secs(1))
            .expect("etcd answers every read");
        if !v.brokers.contains_key(&2) || Instant::now() >= deadline {
            break v.brokers.keys().copied().collect::<Vec<_>>();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    cancel.cancel();
    let _ = watcher.join();
    assert_eq!(
        listed,
        vec![1],
        "5 s (25 rounds) after broker 2 left, with etcd answering every one-key read, broker 1's rounds still list it"
    );
}

/// Found by an adversary on a97f352, since fixed; claim C4 ("the beat costs little and breaks
/// nothing"). `EtcdStore::refresh_current` writes the beat with `self.beat()?`
/// (crates/meta/src/cluster.rs, the `WatchHealth::Quiet` arm): when the write fails the
/// round gets an error although etcd answered both the one-key read before it and would
/// answer the full read after it. etcd refuses writes and answers reads when its space
/// quota is exceeded (the NOSPACE alarm, a common operational state until an operator
/// compacts and defragments), and a quiet watch is exactly what a cluster that cannot
/// write looks like: so every round of every broker whose watch has been quiet for
/// `silence` fails ("reading the cluster's records failed") and skips `reconcile` and
/// `control` (crates/broker/src/cluster.rs cluster_loop, `match read { Ok(view) => ..,
/// Err(e) => warn }`), where before a97f352 it read and went on. The same for any
/// transient write failure (a timed-out txn, a leader change).
#[test]
fn a_round_reads_while_etcd_refuses_writes_but_answers_reads() {
    let etcd = start_etcd();
    let a = store(&etcd, 1);
    let watch = a.watcher();
    let cancel = std::sync::Arc::new(sluice_meta::etcd::WatchCancel::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn({
        let (watch, cancel) = (watch.clone(), cancel.clone());
        move || {
            watch.run(&cancel, || {
                let _ = tx.send(());
            })
        }
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    a.refresh().unwrap();
    // etcd's space quota is exceeded: the NOSPACE alarm (as etcd raises it itself).
    let answer = post(
        &etcd.endpoint,
        "/v3/kv/range",
        serde_json::json!({"key": b64("/probe")}),
        None,
    );
    let body: serde_json::Value =
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let member = body["header"]["member_id"].as_str().unwrap().to_string();
    post(
        &etcd.endpoint,
        "/v3/maintenance/alarm",
        serde_json::json!({"action": "ACTIVATE", "memberID": member, "alarm": "NOSPACE"}),
        None,
    );
    // etcd answers reads: a full read works.
    a.refresh()
        .expect("etcd answers reads under the NOSPACE alarm");
    let silence = Duration::from_millis(300);
    std::thread::sleep(silence);
    let round = a.refresh_current(false, silence);
    let full = a.refresh();
    cancel.cancel();
    let _ = watcher.join();
    assert!(full.is_ok(), "{full:?}");
    assert!(
        round.is_ok(),
        "etcd answers every read (a full read just now: {}), yet the round fails because the beat could not be written: {:?}",
        full.is_ok(),
        round.err()
    );
}

/// A broker's bytes-in load names the registration it was published under: after a restart
/// with the same node id (the old process's lease not expired yet, so its load is still
/// there), the controller's view names the new registration, and the old load does not
/// describe it (load.rs, `parts`). Found by an adversary on c0cb672: the old process's load
/// moved partitions with no traffic.
#[test]
fn a_load_names_the_registration_it_was_published_under() {
    let etcd = start_etcd();
    let old = store(&etcd, 1);
    let lease = old.register(Duration::from_secs(30), &info(9001)).unwrap();
    let load = sluice_meta::load::BrokerLoad {
        bytes_in: 7,
        steady: true,
        ..Default::default()
    };
    old.publish_load(&load).unwrap();
    let seen = old.loads().unwrap();
    assert_eq!(seen[&1].lease, lease);
    assert_eq!(old.refresh().unwrap().brokers[&1].lease, lease);
    // The same node id starts again; the old process's lease is still alive.
    let new = store(&etcd, 1);
    let again = new.register(Duration::from_secs(30), &info(9001)).unwrap();
    assert_ne!(again, lease);
    let view = new.refresh().unwrap();
    assert_eq!(view.brokers[&1].lease, again);
    let seen = new.loads().unwrap();
    assert_eq!(seen[&1].bytes_in, 7, "the old load is still there");
    assert_ne!(seen[&1].lease, view.brokers[&1].lease);
    // Once the new process publishes, its load names its registration.
    new.publish_load(&load).unwrap();
    assert_eq!(new.loads().unwrap()[&1].lease, again);
}
