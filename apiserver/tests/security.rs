//! What a network client may and may not do (docs/security.md, "The embedded API
//! server"): the token, requests from web pages, private files, input limits.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::*;
use gantry_apiserver::{ApiServer, ApiServerArgs, Config, StartError};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn a_default_server_requires_its_generated_token() {
    let s = server().await;
    let a = s.addr();
    let token = s.token().expect("a token by default").to_string();
    assert_ne!(Config::default().token, Config::default().token, "random");
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_status(
        &raw_unauthenticated(a, "GET", cms, &[], b"").await,
        401,
        "Unauthorized",
    );
    // A web page's no-cors fetch: a POST without Content-Type or token.
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"csrf"}}"#;
    let r = raw_unauthenticated(a, "POST", cms, &[], body).await;
    assert_status(&r, 401, "Unauthorized");
    for wrong in ["Bearer nope", "Basic Zm9vOmJhcg==", "Bearer", "bearer "] {
        let r = raw_unauthenticated(a, "GET", cms, &[("Authorization", wrong)], b"").await;
        assert_status(&r, 401, "Unauthorized");
    }
    let bearer = format!("bearer {token}");
    let r = raw_unauthenticated(a, "GET", cms, &[("Authorization", &bearer)], b"").await;
    assert_eq!(r.status, 200, "{}", r.body);
    // As kube's system:public-info-viewer: version and health need no token.
    for path in ["/version", "/healthz", "/livez", "/readyz"] {
        let r = raw_unauthenticated(a, "GET", path, &[], b"").await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    // The kubeconfig and client() carry the token.
    let kc: serde_json::Value = serde_yaml::from_str(&s.kubeconfig_yaml()).unwrap();
    assert_eq!(kc["users"][0]["user"]["token"], token.as_str());
    let api: Api<ConfigMap> = Api::default_namespaced(s.client());
    assert!(
        api.get_opt("csrf").await.unwrap().is_none(),
        "nothing stored"
    );
}

#[test]
fn gantry_apiserver_generates_a_token_unless_given_one() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ApiServerArgs,
    }
    let generated = Cli::parse_from(["gantry-apiserver"]).args.config().token;
    assert!(generated.is_some_and(|t| t.len() >= 32));
    let given = Cli::parse_from(["gantry-apiserver", "--token", "T"])
        .args
        .config();
    assert_eq!(given.token.as_deref(), Some("T"));
}

#[tokio::test]
async fn requests_from_web_pages_are_refused() {
    let s = server().await;
    let a = s.addr();
    let port = a.port();
    let path = "/api/v1/namespaces";
    // DNS rebinding: the page's own name resolves to 127.0.0.1.
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
    ] {
        let r = raw(a, "GET", path, &[("Host", &host)], b"").await;
        assert_status(&r, 403, "Forbidden");
        assert!(
            r.body.contains("requests from web pages are refused"),
            "{}",
            r.body
        );
    }
    // Cross-site: a page elsewhere posting here, token or not.
    for origin in ["https://evil.example", "null"] {
        let r = raw(a, "GET", path, &[("Origin", origin)], b"").await;
        assert_status(&r, 403, "Forbidden");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_string(),
    ] {
        let r = raw(a, "GET", path, &[("Host", &host)], b"").await;
        assert_eq!(r.status, 200, "{host}: {}", r.body);
    }
    let origin = format!("http://localhost:{port}");
    let r = raw(a, "GET", path, &[("Origin", &origin)], b"").await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn no_token_is_refused_beyond_loopback() {
    let config = Config {
        listen: "0.0.0.0:0".parse().unwrap(),
        token: None,
        ..Default::default()
    };
    assert!(matches!(
        ApiServer::start(config).await,
        Err(StartError::NoToken(_))
    ));
}

#[tokio::test]
async fn kubeconfig_and_data_are_written_private() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ApiServerArgs,
    }
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, "old").unwrap();
    std::fs::set_permissions(&kc, std::fs::Permissions::from_mode(0o644)).unwrap();
    let data = dir.path().join("new/data");
    let s = server_with(Config {
        data_dir: Some(data.clone()),
        ..Default::default()
    })
    .await;
    s.write_kubeconfig(&kc).unwrap();
    assert_eq!(mode(&kc), 0o600);
    assert_eq!(std::fs::read_to_string(&kc).unwrap(), s.kubeconfig_yaml());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
    assert_eq!(mode(&data), 0o700);
    for file in [
        "gantry.redb",
        "token",
        "tls/tls.key",
        "tls/tls.crt",
        "tls/ca.crt",
        "tls/ca.key",
    ] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    assert_eq!(
        std::fs::read_to_string(data.join("token")).unwrap(),
        s.token().unwrap()
    );
    let ca = s.ca_pem().unwrap().to_string();
    s.shutdown().await;
    // A data file left readable by an older version is narrowed.
    std::fs::set_permissions(
        data.join("gantry.redb"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let s = server_with(Config {
        data_dir: Some(data.clone()),
        ..Default::default()
    })
    .await;
    assert_eq!(mode(&data.join("gantry.redb")), 0o600);
    assert_eq!(
        s.ca_pem(),
        Some(ca.as_str()),
        "the CA is kept across restarts"
    );
    s.shutdown().await;
    // `gantry apiserver --data-dir` uses the kept token again.
    let args = Cli::parse_from(["x", "--data-dir", data.to_str().unwrap()]).args;
    assert_eq!(
        args.config().token.unwrap(),
        std::fs::read_to_string(data.join("token")).unwrap()
    );
}

#[tokio::test]
async fn the_server_speaks_tls_and_the_kubeconfig_trusts_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = server().await;
    assert!(s.url().starts_with("https://127.0.0.1:"), "{}", s.url());
    let kc: serde_json::Value = serde_yaml::from_str(&s.kubeconfig_yaml()).unwrap();
    let cluster = &kc["clusters"][0]["cluster"];
    assert_eq!(cluster["server"], s.url().as_str());
    assert!(cluster["certificate-authority-data"].is_string());
    // Plain HTTP on the TLS port gets no answer.
    let mut tcp = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    tcp.write_all(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![];
    let _ = tcp.read_to_end(&mut buf).await;
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
    // kube-rs through the kubeconfig.
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&s.kubeconfig_yaml()).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    api.list(&kube::api::ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn deeply_nested_bodies_are_refused_before_parsing() {
    let s = server().await;
    let a = s.addr();
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = format!("{cms}/x");
    let rv0 = current_rv(a).await;
    let yaml = format!("x: {}", "[".repeat(100_000));
    let json = format!("{{\"x\":{}", "[".repeat(100_000));
    let cases: Vec<(&str, &str, &str, &str)> = vec![
        ("POST", cms, "application/yaml", &yaml),
        ("PUT", &cm, "application/yaml", &yaml),
        ("PATCH", &cm, "application/apply-patch+yaml", &yaml),
        ("POST", cms, "application/json", &json),
        ("POST", cms, "", &json),
        ("PATCH", &cm, "application/merge-patch+json", &json),
        (
            "PATCH",
            &cm,
            "application/strategic-merge-patch+json",
            &json,
        ),
        ("PATCH", &cm, "application/json-patch+json", &json),
        ("PATCH", &cm, "application/apply-patch+yaml", &json),
    ];
    for (method, path, content_type, body) in cases {
        let headers: Vec<(&str, &str)> = if content_type.is_empty() {
            vec![]
        } else {
            vec![("Content-Type", content_type)]
        };
        let r = raw(a, method, path, &headers, body.as_bytes()).await;
        let st = assert_status(&r, 400, "BadRequest");
        assert!(
            st["message"]
                .as_str()
                .unwrap()
                .contains("exceeded max depth of 128"),
            "{method} {content_type}: {st}"
        );
    }
    assert_eq!(current_rv(a).await, rv0, "nothing written");
}

#[tokio::test]
async fn nesting_within_the_limit_and_brackets_in_text_are_fine() {
    let s = server().await;
    let a = s.addr();
    // Brackets in quoted, plain and block scalars are text, however many.
    let dashboard = format!("[{}0]", "{\"a\":{\"b\":[1]}},".repeat(300));
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: text\ndata:\n  quoted: '{q}'\n  plain: x{q}\n  dash.json: |\n    {dashboard}\n  nested: \"{n}\"\n",
        q = "[[[[{{{{".repeat(40),
        n = "[".repeat(200),
    );
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "application/yaml")],
        yaml.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["data"]["dash.json"], format!("{dashboard}\n"));
}

/// Measurement, not a check (timings vary): GET /version latency while four
/// 100 KB nested bodies are decoded. `cargo test --test security -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn measure_version_latency_under_nested_bodies() {
    let s = server().await;
    let a = s.addr();
    let yaml = format!("x: {}", "[".repeat(100_000));
    let attacks: Vec<_> = (0..4)
        .map(|_| {
            let body = yaml.clone();
            tokio::spawn(async move {
                let t = std::time::Instant::now();
                let path = "/api/v1/namespaces/default/configmaps";
                let headers = [("Content-Type", "application/yaml")];
                raw(a, "POST", path, &headers, body.as_bytes()).await;
                t.elapsed()
            })
        })
        .collect();
    let mut worst = std::time::Duration::ZERO;
    while !attacks.iter().all(tokio::task::JoinHandle::is_finished) {
        let t = std::time::Instant::now();
        raw(a, "GET", "/version", &[], b"").await;
        worst = worst.max(t.elapsed());
    }
    for t in attacks {
        eprintln!("nested request answered in {:?}", t.await.unwrap());
    }
    eprintln!("worst GET /version: {worst:?}");
}

#[tokio::test]
async fn field_managers_are_validated_as_kube_does() {
    let s = server().await;
    let a = s.addr();
    let cms = "/api/v1/namespaces/default/configmaps";
    let body = serde_json::to_vec(&configmap("fm", serde_json::json!({}))).unwrap();
    let json = [("Content-Type", "application/json")];
    let long = "m".repeat(129);
    let r = raw(
        a,
        "POST",
        &format!("{cms}?fieldManager={long}"),
        &json,
        &body,
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert_eq!(
        st["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
    );
    assert_eq!(
        st["details"]["causes"][0],
        serde_json::json!({"reason": "FieldValueTooLong", "message": "Too long: may not be more than 128 bytes", "field": "fieldManager"})
    );
    let ok = "m".repeat(128);
    let r = raw(a, "POST", &format!("{cms}?fieldManager={ok}"), &json, &body).await;
    assert_eq!(r.status, 201, "{:.300}", r.body);
    let apply = [("Content-Type", "application/apply-patch+yaml")];
    let r = raw(
        a,
        "PATCH",
        &format!("{cms}/fm?fieldManager=a%01b"),
        &apply,
        b"{apiVersion: v1, kind: ConfigMap, metadata: {name: fm}}",
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert_eq!(
        st["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: "a\x01b": invalid character U+0001 (at position 1)"#
    );
    let r = raw(
        a,
        "PUT",
        &format!("{cms}/fm?fieldManager=tab%09"),
        &json,
        &body,
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert!(
        st["message"].as_str().unwrap().starts_with(
            "UpdateOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid value: \"tab\\t\""
        ),
        "{st}"
    );
}

#[tokio::test]
async fn objects_over_etcds_request_limit_are_refused() {
    let s = server().await;
    let a = s.addr();
    let cms = "/api/v1/namespaces/default/configmaps";
    let big = configmap("big", serde_json::json!({"k": "x".repeat(1_600_000)}));
    let r = req(a, "POST", cms, Some(&big)).await;
    assert_eq!(r.status, 500, "{:.300}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "etcdserver: request is too large", "code": 500})
    );
    let fits = configmap("fits", serde_json::json!({"k": "x".repeat(1_400_000)}));
    let r = req(a, "POST", cms, Some(&fits)).await;
    assert_eq!(r.status, 201, "{:.300}", r.body);
    // Growing past the limit by a patch.
    let grow = format!(r#"{{"data":{{"more":"{}"}}}}"#, "y".repeat(300_000));
    let r = raw(
        a,
        "PATCH",
        &format!("{cms}/fits"),
        &[("Content-Type", "application/merge-patch+json")],
        grow.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 500, "{:.300}", r.body);
    assert_eq!(r.json()["message"], "etcdserver: request is too large");
}
