//! A server that runs out of file descriptors must not take a live client's port.
//!
//! The monitor judges a port's holder by `kill(pid, 0)` and `/proc/PID/stat`; with no descriptor
//! left, the stat file cannot be opened, and that must read as "alive, start unknown", never as
//! "gone". Its own test binary: the descriptor limit is process-wide, and no other test may run
//! beside it while every descriptor is taken.

use std::fs::File;
use std::time::{Duration, Instant};

use ferry_demo::{Demo, DemoService};
use ferry_shm::{ClientConfig, ServerConfig, ShmClient, ShmServer};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

#[test]
fn a_server_out_of_descriptors_keeps_a_live_clients_port() {
    let path = format!("/dev/shm/ferry-test-fds-{}", std::process::id());
    let config = ServerConfig {
        ports: 32,
        reclaim_interval: Duration::from_millis(2),
        ..ServerConfig::default()
    };
    let server = ShmServer::start(&path, config, Demo::server(DemoService)).unwrap();
    // A sticky handle keeps its port between calls: idle, held by this live process.
    let client = ShmClient::attach(
        &path,
        ClientConfig::default().service::<Demo>().sticky(true),
    )
    .unwrap();
    let demo = Demo::client(&client);
    assert_eq!(demo.echo(1).unwrap().id, 1);
    let port = client.held_port().expect("a sticky handle keeps its port");
    let (holder, generation) = server.port_owner(port);
    assert_eq!(holder, std::process::id());

    // Take every descriptor this process may open, under a lowered limit, and hold them for many
    // of the monitor's intervals.
    let old = getrlimit(Resource::Nofile);
    let taken = {
        let open_now = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(open_now + 16),
                maximum: old.maximum,
            },
        )
        .unwrap();
        let mut taken = Vec::new();
        loop {
            match File::open("/dev/null") {
                Ok(f) => taken.push(f),
                Err(e) => {
                    assert_eq!(
                        e.raw_os_error(),
                        Some(rustix::io::Errno::MFILE.raw_os_error())
                    );
                    break taken;
                }
            }
        }
    };
    // The monitor cannot read /proc now (checked: nor can we).
    assert!(std::fs::read_to_string("/proc/self/stat").is_err());
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(taken);
    setrlimit(Resource::Nofile, old).unwrap();

    assert_eq!(
        server.port_owner(port),
        (holder, generation),
        "the port of a live client was taken while the server could not look at it"
    );
    assert_eq!(server.stats().reclaimed, 0);
    assert_eq!(demo.echo(2).unwrap().id, 2);
    assert_eq!(client.held_port(), Some(port));
    drop(client);
    assert!(server.shutdown(Duration::from_secs(10)).drained);
}
