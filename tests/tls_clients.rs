//! The known pitfall of mixing kube-rs and the AWS SDK: both use rustls 0.23, and if the two
//! enable different crypto providers (ring vs aws-lc-rs) rustls cannot pick a process
//! default and panics when the first TLS client is built. Building and using both clients
//! in one process must give ordinary connection errors, never a panic.

use std::net::TcpListener;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_sdk_ec2::config::{Credentials, Region};

/// A local port with nothing listening: connections are refused at once.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    let port = l.local_addr().expect("local addr").port();
    drop(l);
    port
}

#[tokio::test]
async fn kube_and_aws_clients_work_side_by_side() {
    let port = closed_port();

    let config = kube::Config::new(
        format!("https://127.0.0.1:{port}")
            .parse()
            .expect("a valid URL"),
    );
    let kube = kube::Client::try_from(config).expect("the kube client builds its TLS connector");
    let kube_err = kube
        .apiserver_version()
        .await
        .expect_err("nothing listens there");
    assert!(!kube_err.to_string().is_empty());

    let aws = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("https://127.0.0.1:{port}"))
        .credentials_provider(Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            None,
            None,
            "test",
        ))
        .retry_config(RetryConfig::disabled())
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&aws);
    let aws_err = ec2
        .describe_regions()
        .send()
        .await
        .expect_err("nothing listens there");
    // A dispatch (connection) failure, not a service error: the TLS client was built.
    assert!(
        format!("{aws_err:?}").contains("DispatchFailure"),
        "unexpected error: {aws_err:?}"
    );
}
