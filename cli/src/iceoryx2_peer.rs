//! The sweep's sizes through iceoryx2's request-response, for `ferry bench` to set beside
//! ferry's own (built with the `iceoryx2` feature): a request of N bytes (a `[u8]` slice the
//! client loans and fills), the server reading its length only and answering with it as a
//! `u64`, both sides polling without a pause, as ferry's worker and client do.

use std::time::{Duration, Instant};

use iceoryx2::prelude::*;

use crate::Res;

/// The service of a benchmark run: its name, unique to the process that starts it.
pub fn service_name(parent: u32) -> String {
    format!("ferry-bench/iceoryx2/{parent}")
}

fn node() -> Res<Node<ipc::Service>> {
    Ok(NodeBuilder::new()
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<ipc::Service>()?)
}

type Service =
    iceoryx2::service::port_factory::request_response::PortFactory<ipc::Service, [u8], (), u64, ()>;

/// Service `name`, made by whichever of the server and the client comes first: the other one,
/// started at the same moment, may find it half made, and tries again for a few seconds.
fn open(node: &Node<ipc::Service>, name: &str) -> Res<Service> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match node
            .service_builder(&name.try_into()?)
            .request_response::<[u8], u64>()
            .open_or_create()
        {
            Ok(service) => return Ok(service),
            Err(e) if Instant::now() > deadline => return Err(e.into()),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Serves requests on service `name` until the process is stopped (the benchmark kills it).
pub fn serve(name: &str) -> Res<()> {
    let node = node()?;
    let service = open(&node, name)?;
    let server = service.server_builder().create()?;
    loop {
        while let Some(request) = server.receive()? {
            request.send_copy(request.payload().len() as u64)?;
        }
        std::hint::spin_loop();
    }
}

/// Times calls of each of `sizes` (a size and the calls of one timed run) on service `name`,
/// `runs` runs after one that warms up, and prints a line per size: `ICEORYX2 SIZE MEDIAN MIN
/// MAX` (ns a call, over the runs).
pub fn sweep(name: &str, sizes: &[(usize, u64)], runs: usize) -> Res<()> {
    let node = node()?;
    let service = open(&node, name)?;
    let max = sizes.iter().map(|&(n, _)| n).max().unwrap_or(1).max(1);
    let client = service
        .client_builder()
        .initial_max_slice_len(max)
        .create()?;
    // A request sent before the server's port is there reaches nobody and is never answered:
    // wait for it (started at the same moment as this client), then for one answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    while service.dynamic_config().number_of_servers() == 0 {
        if Instant::now() > deadline {
            return Err("no iceoryx2 server came up within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut times: Vec<Vec<f64>> = sizes.iter().map(|_| Vec::new()).collect();
    for run in 0..=runs {
        for (&(n, trips), times) in sizes.iter().zip(&mut times) {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
            let t = Instant::now();
            for _ in 0..trips {
                let request = client.loan_slice_uninit(n)?.write_from_slice(&data);
                let pending = request.send()?;
                let sent = Instant::now();
                let mut polls = 0u32;
                let answer = loop {
                    if let Some(response) = pending.receive()? {
                        break *response;
                    }
                    // Every 1024 polls, not on each: whether the server left or is late.
                    polls = polls.wrapping_add(1);
                    if polls.is_multiple_of(1024)
                        && (pending.number_of_server_connections() == 0
                            || sent.elapsed() > Duration::from_secs(10))
                    {
                        return Err("an iceoryx2 request was not answered within 10 s".into());
                    }
                    std::hint::spin_loop();
                };
                if answer != n as u64 {
                    return Err("a wrong reply from the iceoryx2 server".into());
                }
            }
            if run > 0 {
                times.push(t.elapsed().as_nanos() as f64 / trips as f64);
            }
        }
    }
    for (&(n, _), mut t) in sizes.iter().zip(times) {
        t.sort_by(f64::total_cmp);
        let (median, min, max) = (t[t.len() / 2], t[0], t[t.len() - 1]);
        println!("ICEORYX2 {n} {median} {min} {max}");
    }
    Ok(())
}
