//! Durability: with --data-dir every acknowledged write survives kill -9.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use common::*;
use serde_json::json;

fn spawn(dir: &std::path::Path) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gantry-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn gantry-apiserver");
    let out = child.stdout.take().unwrap();
    let mut line = String::new();
    let mut reader = BufReader::new(out);
    reader.read_line(&mut line).unwrap();
    // Keep draining stdout so the server never sees a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_start_matches("https://")
        .to_string();
    let addr: SocketAddr = url
        .parse()
        .unwrap_or_else(|_| panic!("address in {line:?}"));
    // The kubeconfig (next to the data) is written before the address is printed.
    let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig")).unwrap();
    remember_kubeconfig(addr, &kubeconfig);
    (child, addr)
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, a) = spawn(dir.path());
    install_widgets(a).await;
    let w = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(
        req(a, "POST", w, Some(&widget("kept", json!({"replicas": 1}))))
            .await
            .status,
        201
    );
    // Writes race with the kill; every acknowledged one must be there afterwards.
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, u64)>::new()));
    let log = acked.clone();
    let token = token_for(a).unwrap();
    let writer = tokio::spawn(async move {
        for i in 0.. {
            let path = "/api/v1/namespaces/default/configmaps";
            let body =
                serde_json::to_vec(&configmap(&format!("cm{i}"), json!({"i": i.to_string()})))
                    .unwrap();
            match raw_or_err(a, &token, path, &body).await {
                Some((201, rv)) => log.lock().unwrap().push((format!("cm{i}"), rv)),
                _ => break,
            }
        }
    });
    // Kill mid-stream, once some writes went through.
    while acked.lock().unwrap().len() < 5 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    writer.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    let max_rv = acked.iter().map(|(_, rv)| *rv).max().unwrap();

    let (mut child2, a2) = spawn(dir.path());
    for (name, rv) in &acked {
        let r = req(
            a2,
            "GET",
            &format!("/api/v1/namespaces/default/configmaps/{name}"),
            None,
        )
        .await;
        assert_eq!(r.status, 200, "{name} lost");
        assert_eq!(r.json()["metadata"]["resourceVersion"], rv.to_string());
    }
    // CRDs and their objects are served again after restart.
    let kept = req(a2, "GET", &format!("{w}/kept"), None).await;
    assert_eq!(kept.status, 200, "{}", kept.body);
    // New resourceVersions continue past the old ones.
    let r = req(
        a2,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("after", json!({}))),
    )
    .await;
    let rv: u64 = r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv > max_rv, "{rv} > {max_rv}");
    // A watch from before the restart is told to re-list (410).
    let r = raw(
        a2,
        "GET",
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}",
            max_rv - 1
        ),
        &[],
        b"",
    )
    .await;
    assert!(r.body.contains("\"code\":410"), "{}", r.body);
    child2.kill().unwrap();
    child2.wait().unwrap();
}

/// POSTs a body; Some((status, resourceVersion)) when a full response arrived.
async fn raw_or_err(a: SocketAddr, token: &str, path: &str, body: &[u8]) -> Option<(u16, u64)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = try_connect(a).await?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {a}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.ok()?;
    s.write_all(body).await.ok()?;
    let mut buf = vec![];
    s.read_to_end(&mut buf).await.ok()?;
    let text = String::from_utf8_lossy(&buf);
    let status: u16 = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split("\r\n\r\n").nth(1)?;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let rv = v["metadata"]["resourceVersion"].as_str()?.parse().ok()?;
    Some((status, rv))
}

#[tokio::test]
async fn sigterm_stops_the_server_cleanly_and_data_stays() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, a) = spawn(dir.path());
    assert_eq!(
        req(
            a,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(&configmap("t", json!({})))
        )
        .await
        .status,
        201
    );
    let kc = std::fs::read_to_string(dir.path().join("kubeconfig"))
        .expect("kubeconfig next to the data");
    assert!(kc.contains(&format!("https://{a}")));
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "clean exit: {status:?}");
    let (mut child2, a2) = spawn(dir.path());
    assert_eq!(
        req(a2, "GET", "/api/v1/namespaces/default/configmaps/t", None)
            .await
            .status,
        200
    );
    child2.kill().unwrap();
    child2.wait().unwrap();
}
