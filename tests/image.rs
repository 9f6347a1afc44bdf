//! The gantry image without Docker: `scripts/image build` builds the static
//! binary, assembles the image with crane and pushes it to a local
//! registry. What is checked comes from the registry's HTTP API (curl) and
//! GNU tar, not from crane: the digest, the config (non-root user,
//! entrypoint), the layer (no shell, root-owned files) and the binary
//! (static, and it runs). deploy/Dockerfile must describe the same image.

use std::path::Path;
use std::process::Command;

use gantry_tests::sources::Registry;
use gantry_tests::tools::{build_image, repo_root, run};
use serde_json::{Value, json};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// GET `http://HOST/v2/PATH` into `out`; the response headers.
fn registry_get(host: &str, path: &str, out: &Path) -> String {
    run(Command::new("curl").args([
        "-sS",
        "--fail",
        "-H",
        &format!("Accept: {OCI_MANIFEST}"),
        "-D",
        "-",
        "-o",
        out.to_str().unwrap(),
        &format!("http://{host}/v2/{path}"),
    ]))
}

fn sha256_of(path: &Path) -> String {
    let out = run(Command::new("sha256sum").arg(path));
    format!("sha256:{}", out.split_whitespace().next().unwrap())
}

/// Whether an ELF file asks for a program interpreter (`PT_INTERP`): every
/// dynamically linked executable does, a static one does not.
fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not a 64-bit ELF file");
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([elf[at], elf[at + 1]]));
    let phoff = usize::try_from(u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap())).unwrap();
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3 // PT_INTERP
    })
}

#[test]
fn elf_interpreter_is_detected() {
    // The check below must be able to fail: the test binary itself is
    // dynamically linked (glibc), so it has an interpreter.
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert!(has_interpreter(&me));
}

/// The final stage of deploy/Dockerfile: its instructions after the last
/// FROM, comments dropped.
fn dockerfile_final_stage() -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("deploy/Dockerfile")).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let last_from = lines.iter().rposition(|l| l.starts_with("FROM ")).unwrap();
    lines[last_from..].to_vec()
}

#[tokio::test]
async fn image_is_built_and_pushed_without_docker() {
    let Some(registry) = Registry::start().await else {
        return;
    };
    let host = &registry.host;
    let pinned = build_image(&format!("{host}/gantry:test"));

    // The digest printed is the one the registry serves for the tag, and
    // the manifest's own sha256.
    let dir = tempfile::tempdir().unwrap();
    let manifest_file = dir.path().join("manifest.json");
    let headers = registry_get(host, "gantry/manifests/test", &manifest_file);
    let served = headers
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("docker-content-digest:")
                .then(|| l.split_once(':').unwrap().1.trim().to_string())
        })
        .expect("Docker-Content-Digest");
    assert_eq!(pinned, format!("{host}/gantry@{served}"));
    assert_eq!(sha256_of(&manifest_file), served);

    let manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_file).unwrap()).unwrap();
    assert_eq!(manifest["mediaType"], OCI_MANIFEST);
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "one layer: {manifest}");

    // The config: non-root, the entrypoint and command, the platform.
    let config_file = dir.path().join("config.json");
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    registry_get(host, &format!("gantry/blobs/{config_digest}"), &config_file);
    assert_eq!(sha256_of(&config_file), config_digest);
    let config: Value = serde_json::from_slice(&std::fs::read(&config_file).unwrap()).unwrap();
    assert_eq!(
        (&config["os"], &config["architecture"]),
        (&json!("linux"), &json!("amd64"))
    );
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532");
    assert_eq!(c["Entrypoint"], json!(["/usr/local/bin/gantry"]));
    assert_eq!(c["Cmd"], json!(["run"]));
    assert!(
        c["Env"]
            .as_array()
            .unwrap()
            .contains(&json!("XDG_CACHE_HOME=/tmp/cache")),
        "{c}"
    );

    // The layer: exactly the tree `scripts/image rootfs` makes, all owned by
    // root (as a Dockerfile COPY makes them), and no shell anywhere.
    let layer_file = dir.path().join("layer.tar.gz");
    let layer_digest = layers[0]["digest"].as_str().unwrap();
    registry_get(host, &format!("gantry/blobs/{layer_digest}"), &layer_file);
    assert_eq!(sha256_of(&layer_file), layer_digest);
    let listing = run(Command::new("tar")
        .args(["--list", "--verbose", "--numeric-owner", "--gzip", "--file"])
        .arg(&layer_file));
    let mut entries = vec![];
    for line in listing.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (mode, owner, path) = (fields[0], fields[1], *fields.last().unwrap());
        assert_eq!(owner, "0/0", "{line}");
        entries.push((path.trim_end_matches('/').to_string(), mode.to_string()));
    }
    let expected = [
        ("etc", "drwxr-xr-x"),
        ("etc/group", "-rw-r--r--"),
        ("etc/passwd", "-rw-r--r--"),
        ("etc/ssl", "drwxr-xr-x"),
        ("etc/ssl/certs", "drwxr-xr-x"),
        ("etc/ssl/certs/ca-certificates.crt", "-rw-r--r--"),
        ("tmp", "drwxrwxrwt"),
        ("usr", "drwxr-xr-x"),
        ("usr/local", "drwxr-xr-x"),
        ("usr/local/bin", "drwxr-xr-x"),
        ("usr/local/bin/gantry", "-rwxr-xr-x"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(p, m)| ((*p).to_string(), (*m).to_string()))
        .collect();
    assert_eq!(entries, expected, "no shell, nothing else: {listing}");

    let root = dir.path().join("rootfs");
    std::fs::create_dir(&root).unwrap();
    run(Command::new("tar")
        .args(["--extract", "--gzip", "--file"])
        .arg(&layer_file)
        .arg("--directory")
        .arg(&root));
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    assert!(
        passwd.contains("nonroot:x:65532:65532:") && !passwd.contains("/bin/sh"),
        "{passwd}"
    );
    let binary = root.join("usr/local/bin/gantry");
    assert!(
        !has_interpreter(&std::fs::read(&binary).unwrap()),
        "gantry is not static"
    );
    // A static binary runs anywhere on this architecture, without libc.
    let help = run(Command::new(&binary).arg("run").arg("--help"));
    assert!(help.contains("--leader-elect"), "{help}");

    // deploy/Dockerfile's final stage is this image: the same tree (from
    // `scripts/image rootfs`, copied whole) and the same config.
    assert_eq!(
        dockerfile_final_stage(),
        [
            "FROM scratch",
            "COPY --from=build /rootfs/ /",
            "USER 65532:65532",
            "WORKDIR /",
            "ENV XDG_CACHE_HOME=/tmp/cache",
            r#"ENTRYPOINT ["/usr/local/bin/gantry"]"#,
            r#"CMD ["run"]"#,
        ]
    );
    assert_eq!(c["WorkingDir"], "/");
    let dockerfile = std::fs::read_to_string(repo_root().join("deploy/Dockerfile")).unwrap();
    assert!(dockerfile.contains("scripts/image rootfs /rootfs \"$binary\""));
}
