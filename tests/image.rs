//! The gantry image without Docker: `scripts/image build` assembles the
//! image with crane and pushes it to a local registry. What is checked comes
//! from the registry's HTTP API (curl) and GNU tar, not from crane: the
//! digest, the config (non-root user, entrypoint), the layer (no shell,
//! root-owned files) and the binary (built for the image's architecture, and
//! it runs from the layer alone). deploy/Dockerfile must describe the same
//! image. By default the image carries the test build's `gantry`
//! (`--binary`, dynamically linked, with its interpreter and libraries in the
//! layer), which costs no build of its own. The static images of the
//! product (musl, an index of amd64 and arm64) cost two more builds of every
//! dependency and are built and checked only with `GANTRY_TEST_MULTIARCH=1`.
//! The offline build (`scripts/image build --tar`) must write the same image,
//! as an OCI layout tar named for containerd's `ctr images import`.

use std::path::{Path, PathBuf};
use std::process::Command;

use gantry_tests::sources::Registry;
use gantry_tests::tools::{build_image, build_image_for, repo_root, run, test_build_binary};
use serde_json::{Value, json};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// GET `http://HOST/v2/PATH` into `out`; the response headers. A manifest
/// is asked for as an OCI manifest or index, or a Docker manifest list.
fn registry_get(host: &str, path: &str, out: &Path) -> String {
    run(Command::new("curl").args([
        "-sS",
        "--fail",
        "-H",
        &format!("Accept: {OCI_MANIFEST}, {OCI_INDEX}, {DOCKER_MANIFEST_LIST}"),
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

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The manifest (or index) tagged `tag` in `HOST/gantry`, into `out`. The
/// registry serves it with the digest `scripts/image` printed (`pinned`),
/// and that digest is the document's own sha256.
fn get_tag(host: &str, tag: &str, pinned: &str, out: &Path) -> Value {
    let headers = registry_get(host, &format!("gantry/manifests/{tag}"), out);
    let served = headers
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("docker-content-digest:")
                .then(|| l.split_once(':').unwrap().1.trim().to_string())
        })
        .expect("Docker-Content-Digest");
    assert_eq!(pinned, format!("{host}/gantry@{served}"));
    assert_eq!(sha256_of(out), served);
    read_json(out)
}

/// A manifest or blob of `HOST/gantry` by digest, into `out`, checked
/// against the digest.
fn get_by_digest(host: &str, kind: &str, digest: &str, out: &Path) {
    registry_get(host, &format!("gantry/{kind}/{digest}"), out);
    assert_eq!(sha256_of(out), digest, "gantry/{kind}/{digest}");
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

/// The machine an ELF file is for (`e_machine`).
fn elf_machine(elf: &[u8]) -> u16 {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    u16::from_le_bytes([elf[0x12], elf[0x13]])
}

/// The ELF machine of an OCI architecture: `EM_X86_64`, `EM_AARCH64`.
fn elf_machine_of(architecture: &str) -> u16 {
    match architecture {
        "amd64" => 62,
        "arm64" => 183,
        other => panic!("no ELF machine known for {other}"),
    }
}

#[test]
fn elf_checks_can_fail() {
    // The checks below must be able to fail: the test binary itself is
    // dynamically linked (glibc), so it has an interpreter, and it is for
    // this machine.
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert!(has_interpreter(&me));
    let here = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no OCI architecture known for {other}"),
    };
    assert_eq!(elf_machine(&me), elf_machine_of(here));
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

/// How the image's `gantry` is linked.
#[derive(Clone, Copy, PartialEq)]
enum Linking {
    /// Static (musl): the layer holds nothing else to run it.
    Static,
    /// Dynamic (the test build): the layer also holds its program
    /// interpreter and the shared libraries it needs.
    Bundled,
}

/// The image with manifest `digest` in `HOST/gantry`, for `linux/ARCH`,
/// fetched and unpacked into `dir`: one layer; a config for the platform,
/// non-root, with the entrypoint and command; a layer of exactly the tree
/// `scripts/image rootfs` makes (and, for a [`Linking::Bundled`] binary,
/// shared libraries), all owned by root, no shell; a binary for the
/// architecture, linked as `linking` says. The config's `config` and the
/// unpacked layer's root.
fn check_image(
    host: &str,
    digest: &str,
    arch: &str,
    linking: Linking,
    dir: &Path,
) -> (Value, PathBuf) {
    let manifest_file = dir.join("manifest.json");
    get_by_digest(host, "manifests", digest, &manifest_file);
    let manifest = read_json(&manifest_file);
    assert_eq!(manifest["mediaType"], OCI_MANIFEST);
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "one layer: {manifest}");

    // The config: the platform, non-root, the entrypoint and command.
    let config_file = dir.join("config.json");
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    get_by_digest(host, "blobs", config_digest, &config_file);
    let config = read_json(&config_file);
    assert_eq!(
        (&config["os"], &config["architecture"]),
        (&json!("linux"), &json!(arch))
    );
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532");
    assert_eq!(c["Entrypoint"], json!(["/usr/local/bin/gantry"]));
    assert_eq!(c["Cmd"], json!(["run"]));
    assert_eq!(c["WorkingDir"], "/");
    assert!(
        c["Env"]
            .as_array()
            .unwrap()
            .contains(&json!("XDG_CACHE_HOME=/tmp/cache")),
        "{c}"
    );

    // The layer: exactly the tree `scripts/image rootfs` makes, all owned by
    // root (as a Dockerfile COPY makes them), and no shell anywhere.
    let layer_file = dir.join("layer.tar.gz");
    get_by_digest(
        host,
        "blobs",
        layers[0]["digest"].as_str().unwrap(),
        &layer_file,
    );
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
    if linking == Linking::Bundled {
        // Beyond the tree: directories and shared objects (ld-linux, libc,
        // libgcc_s, ...) and nothing else.
        let (tree, extra): (Vec<_>, Vec<_>) =
            entries.into_iter().partition(|e| expected.contains(e));
        assert_eq!(tree, expected, "{listing}");
        assert!(
            !extra.is_empty(),
            "a dynamic binary with no libraries: {listing}"
        );
        for (path, mode) in &extra {
            let name = path.rsplit('/').next().unwrap();
            assert!(
                mode.starts_with('d') || (mode.starts_with('-') && name.contains(".so")),
                "{path} ({mode}) is neither a directory nor a shared object: {listing}"
            );
        }
    } else {
        assert_eq!(entries, expected, "no shell, nothing else: {listing}");
    }

    let root = dir.join("rootfs");
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
    let elf = std::fs::read(root.join("usr/local/bin/gantry")).unwrap();
    assert_eq!(elf_machine(&elf), elf_machine_of(arch), "gantry for {arch}");
    assert_eq!(
        has_interpreter(&elf),
        linking == Linking::Bundled,
        "gantry for {arch} is not linked as expected"
    );
    (c.clone(), root)
}

/// `gantry --version` and `gantry run --help` succeed, run from the
/// unpacked layer `root` by `emulator` (`qemu-aarch64`), or natively inside
/// `root` (chroot, as root): the layer alone is enough to run it.
fn check_runs(root: &Path, emulator: Option<&Path>) {
    let binary = root.join("usr/local/bin/gantry");
    let gantry = |args: &[&str]| {
        let mut command = if let Some(emulator) = emulator {
            let mut command = Command::new(emulator);
            command.arg(&binary);
            command
        } else {
            let mut command = Command::new("chroot");
            command.arg(root).arg("/usr/local/bin/gantry");
            command
        };
        run(command.args(args))
    };
    let version = gantry(&["--version"]);
    assert_eq!(
        version.trim(),
        format!("gantry {}", env!("CARGO_PKG_VERSION")),
        "{binary:?}"
    );
    let help = gantry(&["run", "--help"]);
    assert!(help.contains("--leader-elect"), "{help}");
}

/// The first of `names` on PATH.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|p| p.is_file())
}

#[tokio::test]
async fn image_is_built_and_pushed_without_docker() {
    let Some(registry) = Registry::start().await else {
        return;
    };
    let host = &registry.host;
    let pinned = build_image(&format!("{host}/gantry:test"));

    let dir = tempfile::tempdir().unwrap();
    let manifest = get_tag(host, "test", &pinned, &dir.path().join("tagged.json"));
    assert_eq!(manifest["mediaType"], OCI_MANIFEST);
    let digest = pinned.split_once('@').unwrap().1;
    let (_, root) = check_image(host, digest, "amd64", Linking::Bundled, dir.path());
    check_runs(&root, None);

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
    let dockerfile = std::fs::read_to_string(repo_root().join("deploy/Dockerfile")).unwrap();
    assert!(dockerfile.contains("scripts/image rootfs /rootfs \"$binary\""));

    // Offline, from the same binary: the same image as an OCI archive.
    let config_digest = read_json(&dir.path().join("manifest.json"))["config"]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    check_archive(dir.path(), digest, &config_digest);
}

/// `scripts/image build --tar` for the short name `gantry:test`: a tar of an
/// OCI image layout (read with GNU tar and serde, not go-containerregistry)
/// whose one index entry carries the names `ctr images import` reads, the
/// fully qualified name and the tag; its manifest is `pushed_digest`'s
/// (same layer, same config) and its config blob is the pushed config's
/// bytes (in `dir/config.json`, digest `config_digest`).
fn check_archive(dir: &Path, pushed_digest: &str, config_digest: &str) {
    let archive = dir.join("gantry.tar");
    let out = run(Command::new(repo_root().join("scripts/image")).args([
        "build",
        "--binary",
        test_build_binary().to_str().unwrap(),
        "--name",
        "gantry:test",
        "--tar",
        archive.to_str().unwrap(),
    ]));
    let full = "docker.io/library/gantry:test";
    assert_eq!(
        out.lines().last(),
        Some(format!("{full}@{pushed_digest}").as_str())
    );

    let layout = dir.join("layout");
    std::fs::create_dir(&layout).unwrap();
    let listing = run(Command::new("tar")
        .env("TZ", "UTC")
        .args([
            "--list",
            "--verbose",
            "--numeric-owner",
            "--full-time",
            "--file",
        ])
        .arg(&archive));
    for line in listing.lines() {
        assert!(
            line.contains(" 0/0 ") && line.contains(" 1970-01-01 "),
            "{line}"
        );
    }
    run(Command::new("tar")
        .args(["--extract", "--file"])
        .arg(&archive)
        .arg("--directory")
        .arg(&layout));
    assert_eq!(
        read_json(&layout.join("oci-layout")),
        json!({"imageLayoutVersion": "1.0.0"})
    );
    let index = read_json(&layout.join("index.json"));
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1, "{index}");
    let entry = &manifests[0];
    assert_eq!(entry["mediaType"], OCI_MANIFEST);
    assert_eq!(entry["digest"], pushed_digest);
    assert_eq!(
        entry["annotations"],
        json!({
            "io.containerd.image.name": full,
            "org.opencontainers.image.ref.name": "test",
        })
    );
    assert_eq!(
        entry["platform"],
        json!({"os": "linux", "architecture": "amd64"})
    );

    // Every blob is where its digest says; the config is the pushed one.
    let blob = |digest: &str| {
        let path = layout.join("blobs").join(digest.replacen(':', "/", 1));
        assert_eq!(sha256_of(&path), digest);
        path
    };
    let manifest = read_json(&blob(pushed_digest));
    assert_eq!(manifest["config"]["digest"], config_digest);
    assert_eq!(
        std::fs::read(blob(config_digest)).unwrap(),
        std::fs::read(dir.join("config.json")).unwrap()
    );
    for layer in manifest["layers"].as_array().unwrap() {
        blob(layer["digest"].as_str().unwrap());
    }
}

/// `--platform linux/amd64,linux/arm64`: the tag is an index of one image per
/// platform, each checked as above, the same but for the architecture; the
/// arm64 binary runs under qemu-aarch64 where it is installed.
#[tokio::test]
async fn multi_arch_image_is_an_index_of_amd64_and_arm64() {
    if std::env::var("GANTRY_TEST_MULTIARCH").as_deref() != Ok("1") {
        eprintln!(
            "SKIPPED: the multi-arch image needs a cross build of gantry for arm64 \
             (16 CPU-minutes cold); GANTRY_TEST_MULTIARCH=1 runs it"
        );
        return;
    }
    let Some(registry) = Registry::start().await else {
        return;
    };
    let host = &registry.host;
    let pinned = build_image_for(
        &format!("{host}/gantry:multi"),
        &["linux/amd64", "linux/arm64"],
    );

    let dir = tempfile::tempdir().unwrap();
    let index = get_tag(host, "multi", &pinned, &dir.path().join("index.json"));
    let media_type = index["mediaType"].as_str().unwrap_or_default();
    assert!(
        [OCI_INDEX, DOCKER_MANIFEST_LIST].contains(&media_type),
        "not an index: {index}"
    );
    let manifests = index["manifests"].as_array().unwrap();
    let platforms: Vec<(&str, &str)> = manifests
        .iter()
        .map(|m| {
            let p = &m["platform"];
            (
                p["os"].as_str().unwrap(),
                p["architecture"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        platforms,
        [("linux", "amd64"), ("linux", "arm64")],
        "{index}"
    );

    let mut configs = vec![];
    for (manifest, (_, arch)) in manifests.iter().zip(&platforms) {
        let arch_dir = dir.path().join(arch);
        std::fs::create_dir(&arch_dir).unwrap();
        let digest = manifest["digest"].as_str().unwrap();
        let (config, root) = check_image(host, digest, arch, Linking::Static, &arch_dir);
        if *arch == "amd64" {
            check_runs(&root, None);
        } else if let Some(qemu) = on_path(&["qemu-aarch64", "qemu-aarch64-static"]) {
            check_runs(&root, Some(&qemu));
        } else {
            eprintln!(
                "qemu-aarch64 is not installed (Debian: qemu-user): the arm64 binary is checked as an ELF file only"
            );
        }
        configs.push(config);
    }
    // User, entrypoint, command, environment, labels: all the same.
    assert_eq!(configs[0], configs[1]);
}
