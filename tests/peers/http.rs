//! One plain HTTP/1.1 request to a test peer's control endpoints (std only, no client
//! stack to keep in step with the peers).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// Sends `method path` with a JSON body to 127.0.0.1:`port`; returns the status, the head
/// and the body. `log` is the peer's log, for the panic when the peer does not answer.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
    log: impl Fn() -> String,
) -> (u16, String, String) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the peer");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    // Connection: close, so the response ends at EOF.
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}\nserver log:\n{}", log()));
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no status in {head:?}"));
    (status, head.to_string(), body.to_string())
}
