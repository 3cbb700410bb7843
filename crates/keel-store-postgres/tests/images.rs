#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Images' bytes go the way events do, against a real PostgreSQL (`KEEL_TEST_DATABASE_URL`;
//! skipped with a note when unset): a writer whose lease was taken over keeps no image,
//! and an image put while the database cannot be reached is tried again.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_llm::Image;
use keel_session::{EventKind, InputSource, SessionErrorKind, SessionStore, UserInput};
use keel_store_postgres::{PgOptions, PgStore};
use keel_testkit::store::record_turn;

fn url() -> Option<String> {
    keel_testkit::prereq::database_url()
}

/// Runs SQL on a connection of its own; the rows it returned or changed.
fn sql(url: &str, query: &str, param: &str) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client.execute(query, &[&param]).await.unwrap()
    })
}

/// A PNG no other test keeps: the 1×1 test image with `tag` after its end.
fn image(tag: &str) -> Image {
    let mut bytes = Image::from_base64(keel_testkit::mcp::PNG_BASE64).unwrap().data.unwrap().to_vec();
    bytes.extend_from_slice(tag.as_bytes());
    Image::from_bytes(bytes).unwrap()
}

fn with_image(image: &Image) -> EventKind {
    EventKind::UserMessage(UserInput {
        text: "look".into(),
        source: InputSource::Steer,
        reason: None,
        images: vec![image.clone()],
    })
}

fn kept(url: &str, image: &Image) -> u64 {
    sql(url, "SELECT 1 FROM keel_images WHERE sha256 = $1", &image.sha256)
}

/// A node that stalled past its lease and was taken over puts no image either: the put
/// checks the lease as a commit does, and fails the writer the same way.
#[test]
fn an_image_put_by_a_writer_whose_lease_was_taken_over_is_refused_like_an_append() {
    let Some(url) = url() else { return };
    let node_a = PgStore::connect(&url).unwrap();
    let node_b = PgStore::connect(&url).unwrap();
    let mut session = node_a.create("/work/image-takeover").unwrap();
    let id = session.id().to_owned();
    record_turn(&mut session, "mine");
    session.sync().unwrap();
    sql(&url, "UPDATE keel_sessions SET lease_expires = now() - interval '1 second' WHERE id = $1", &id);
    let mut theirs = node_b.open(&id).unwrap();
    record_turn(&mut theirs, "the new writer");
    theirs.sync().unwrap();
    let before = node_b.read(&id).unwrap().len();

    // Node A wakes up and attaches an image.
    let late = image(&format!("late {id}"));
    session.append(with_image(&late)).unwrap();
    let err = session.sync().unwrap_err();
    assert_eq!(
        (err.kind, err.message),
        (
            SessionErrorKind::Locked,
            format!(
                "session {id} is being run elsewhere: this node's lease on it expired or was taken over; this writer stopped"
            )
        )
    );
    assert_eq!(kept(&url, &late), 0, "the stale writer's image was kept");
    assert_eq!(node_b.read(&id).unwrap().len(), before, "nothing of node A's is in the log");

    // The writer that holds the lease keeps its images.
    let theirs_image = image(&format!("theirs {id}"));
    theirs.append(with_image(&theirs_image)).unwrap();
    theirs.sync().unwrap();
    assert_eq!(kept(&url, &theirs_image), 1);
    drop(session);
    theirs.close().unwrap();
    node_b.delete(&id).unwrap();
}

/// A TCP proxy to the database that can be cut: while down it closes every connection
/// and refuses new ones (they close at once), as a network outage looks to a client.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (up_in, open_in) = (Arc::clone(&up), Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if !up_in.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                let mut open = open_in.lock().unwrap();
                open.push(client.try_clone().unwrap());
                open.push(server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy { port, up, open }
    }

    fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Copies `from` to `to` until either closes.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// The database cannot be reached for a moment while an image is put: the put is tried
/// again with backoff, as a commit is, and the image and its event are kept.
#[test]
fn an_image_put_while_the_database_is_unreachable_is_tried_again() {
    let Some(url) = url() else { return };
    let config: tokio_postgres::Config = url.parse().unwrap();
    let (host, port) = match (config.get_hosts().first(), config.get_ports().first()) {
        (Some(tokio_postgres::config::Host::Tcp(host)), Some(port)) => (host.clone(), *port),
        _ => {
            eprintln!("skipped: the test database is not reached over TCP");
            return;
        }
    };
    let proxy = Proxy::start(format!("{host}:{port}"));
    let through = url.replacen(&format!("{host}:{port}"), &format!("127.0.0.1:{}", proxy.port), 1);
    assert_ne!(through, url, "{url}");
    let store = PgStore::connect_with(&through, PgOptions::default().with_pool_size(1)).unwrap();
    let mut session = store.create("/work/image-retry").unwrap();
    let id = session.id().to_owned();
    record_turn(&mut session, "before the outage");
    session.sync().unwrap();
    let retries = store.stats().retries;

    proxy.down();
    std::thread::sleep(Duration::from_millis(100));
    let up = Arc::clone(&proxy.up);
    let back = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        up.store(true, Ordering::SeqCst);
    });
    let shot = image(&format!("outage {id}"));
    session.append(with_image(&shot)).unwrap();
    session.sync().unwrap();
    back.join().unwrap();
    assert!(store.stats().retries > retries, "the put was not tried again");
    assert_eq!(kept(&url, &shot), 1);
    let reader = PgStore::connect(&url).unwrap();
    let events = reader.read(&id).unwrap();
    assert_eq!(events.last().unwrap().kind.images(), [shot]);
    session.close().unwrap();
    reader.delete(&id).unwrap();
}
