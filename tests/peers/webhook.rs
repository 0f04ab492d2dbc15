//! A webhook receiver on 127.0.0.1 for `--notify` (std only): it records each POSTed
//! JSON body, answers the first `failures` requests 503 (a chat service having a bad
//! moment) and the rest 204, and keeps connections alive as an HTTP/1.1 client expects.
//! [`Webhook::black_hole`] accepts connections and never answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::Value;

#[derive(Default)]
struct Seen {
    bodies: Vec<Value>,
    requests: usize,
}

/// A running receiver; it stops with the test process.
pub struct Webhook {
    pub url: String,
    seen: Arc<Mutex<Seen>>,
}

impl Webhook {
    /// A receiver that fails its first `failures` requests.
    pub fn start(failures: usize) -> Webhook {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the webhook");
        let url = format!(
            "http://{}/hook",
            listener.local_addr().expect("its address")
        );
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = shared.clone();
                thread::spawn(move || serve(stream, &seen, failures));
            }
        });
        Webhook { url, seen }
    }

    /// A URL that takes connections and never answers.
    #[allow(dead_code)]
    pub fn black_hole() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the black hole");
        let url = format!(
            "http://{}/hook",
            listener.local_addr().expect("its address")
        );
        thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                held.push(stream);
            }
        });
        url
    }

    /// The bodies accepted (answered 204), in arrival order.
    pub fn bodies(&self) -> Vec<Value> {
        self.seen.lock().expect("webhook lock").bodies.clone()
    }

    /// Every request, the failed ones included.
    #[allow(dead_code)]
    pub fn requests(&self) -> usize {
        self.seen.lock().expect("webhook lock").requests
    }
}

fn serve(stream: TcpStream, seen: &Mutex<Seen>, failures: usize) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut out = stream;
    loop {
        let mut length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if first {
                assert!(line.starts_with("POST /hook "), "not a POST: {line}");
                first = false;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().expect("a length");
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let fail = {
            let mut s = seen.lock().expect("webhook lock");
            s.requests += 1;
            let fail = s.requests <= failures;
            if !fail {
                s.bodies
                    .push(serde_json::from_slice(&body).expect("a JSON body"));
            }
            fail
        };
        let answer = if fail {
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
        } else {
            "HTTP/1.1 204 No Content\r\n\r\n"
        };
        if out.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}
