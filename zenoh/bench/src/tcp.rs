//! The floor: a TCP ping-pong of the same payload (a 4-byte length and the bytes, written in one
//! piece each way, TCP_NODELAY), a thread per connection on the server.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

/// Starts the echo server on `ip`; its address.
pub fn serve(ip: &str) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind((ip, 0))?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = echo_all(stream);
            });
        }
    });
    Ok(addr)
}

/// Echoes each message of `stream` until it closes.
fn echo_all(mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut message = Vec::new();
    loop {
        let mut len = [0u8; 4];
        stream.read_exact(&mut len)?;
        message.clear();
        message.extend_from_slice(&len);
        message.resize(4 + u32::from_le_bytes(len) as usize, 0);
        stream.read_exact(&mut message[4..])?;
        stream.write_all(&message)?;
    }
}

/// One connection to the echo server.
pub struct Client {
    stream: TcpStream,
    message: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> io::Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        // A server that stops answering fails the call, as the other peers' deadlines do.
        stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        Ok(Client {
            stream,
            message: Vec::new(),
        })
    }

    /// `payload` there and back; the length that came back.
    pub fn echo(&mut self, payload: &[u8]) -> io::Result<usize> {
        self.message.clear();
        self.message
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.message.extend_from_slice(payload);
        self.stream.write_all(&self.message)?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        self.message.resize(u32::from_le_bytes(len) as usize, 0);
        self.stream.read_exact(&mut self.message)?;
        Ok(self.message.len())
    }
}
