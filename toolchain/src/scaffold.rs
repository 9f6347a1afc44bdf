//! `gantry plugin new`: a working plugin project in Rust, JavaScript,
//! Python, C or Go, or a CRD converter in Rust, from the templates in
//! `host/templates/` (embedded in the binary).
//!
//! Every reconcile project has the contract (`wit/gantry.wit`), a sample
//! parent and config (`examples/`), cases for `gantry plugin test`
//! (`tests/*.yaml`), unit tests in the language's own idiom, `test.sh`
//! (both), a `binding.yaml` and a README. The sample plugin greets: a
//! parent with `spec.who` wants a ConfigMap `<name>-greeting`. A converter
//! project has the same shape around `converter.yaml`, a two-version CRD
//! and `gantry convert run --round-trip`.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::Language;
use super::js::{COMPONENTIZE_JS_VERSION, JCO_VERSION};
use super::python::COMPONENTIZE_PY_VERSION;

/// One file of a template: path in the project, contents, executable.
type TemplateFile = (&'static str, &'static str, bool);

const WIT: &str = include_str!("../../wit/gantry.wit");

const COMMON: &[TemplateFile] = &[
    (
        "README.md",
        include_str!("../templates/common/README.md"),
        false,
    ),
    (
        "binding.yaml",
        include_str!("../templates/common/binding.yaml"),
        false,
    ),
    (
        "examples/parent.yaml",
        include_str!("../templates/common/parent.yaml"),
        false,
    ),
    (
        "examples/config.yaml",
        include_str!("../templates/common/config.yaml"),
        false,
    ),
    (
        "tests/greets-world.yaml",
        include_str!("../templates/common/tests/greets-world.yaml"),
        false,
    ),
    (
        "tests/rejects-a-missing-who.yaml",
        include_str!("../templates/common/tests/rejects-a-missing-who.yaml"),
        false,
    ),
    (
        "tests/refuses-an-empty-greeting.yaml",
        include_str!("../templates/common/tests/refuses-an-empty-greeting.yaml"),
        false,
    ),
    ("test.sh", include_str!("../templates/common/test.sh"), true),
    (
        ".gitignore",
        include_str!("../templates/common/gitignore"),
        false,
    ),
    ("wit/gantry.wit", WIT, false),
];

/// The parent kind's CRD, written out (Rust and Go plugins derive theirs).
const CRD: TemplateFile = (
    "crd.yaml",
    include_str!("../templates/common/crd.yaml"),
    false,
);

const RUST: &[TemplateFile] = &[
    (
        "Cargo.toml",
        include_str!("../templates/rust/Cargo.toml"),
        false,
    ),
    (
        "src/lib.rs",
        include_str!("../templates/rust/src/lib.rs"),
        false,
    ),
    (
        "src/bin/crd.rs",
        include_str!("../templates/rust/src/bin/crd.rs"),
        false,
    ),
];

const JS: &[TemplateFile] = &[
    CRD,
    (
        "package.json",
        include_str!("../templates/js/package.json"),
        false,
    ),
    ("app.js", include_str!("../templates/js/app.js"), false),
    (
        "app.test.js",
        include_str!("../templates/js/app.test.js"),
        false,
    ),
];

const PYTHON: &[TemplateFile] = &[
    CRD,
    (
        "pyproject.toml",
        include_str!("../templates/python/pyproject.toml"),
        false,
    ),
    ("app.py", include_str!("../templates/python/app.py"), false),
    (
        "greeting.py",
        include_str!("../templates/python/greeting.py"),
        false,
    ),
    (
        "test_greeting.py",
        include_str!("../templates/python/test_greeting.py"),
        false,
    ),
];

const C: &[TemplateFile] = &[
    CRD,
    ("plugin.c", include_str!("../templates/c/plugin.c"), false),
    (
        "greeting.c",
        include_str!("../templates/c/greeting.c"),
        false,
    ),
    (
        "greeting.h",
        include_str!("../templates/c/greeting.h"),
        false,
    ),
    (
        "tests/greeting_test.c",
        include_str!("../templates/c/tests/greeting_test.c"),
        false,
    ),
    ("Makefile", include_str!("../templates/c/Makefile"), false),
    (
        "json.c",
        include_str!("../../plugins/memcached-c/json.c"),
        false,
    ),
    (
        "json.h",
        include_str!("../../plugins/memcached-c/json.h"),
        false,
    ),
];

const GO: &[TemplateFile] = &[
    ("main.go", include_str!("../templates/go/main.go"), false),
    (
        "api/v1/greeting_types.go",
        include_str!("../templates/go/api/v1/greeting_types.go"),
        false,
    ),
    (
        "main_test.go",
        include_str!("../templates/go/main_test.go"),
        false,
    ),
    // memcached-go's module file and sums: the SDK and k8s.io versions
    // this tree is tested with (the module line and SDK path are replaced).
    (
        "go.mod",
        include_str!("../../plugins/memcached-go/go.mod"),
        false,
    ),
    (
        "go.sum",
        include_str!("../../plugins/memcached-go/go.sum"),
        false,
    ),
];

/// A CRD converter in Rust (Greeting v1alpha1 ↔ v1).
const CONVERTER: &[TemplateFile] = &[
    (
        "README.md",
        include_str!("../templates/converter/README.md"),
        false,
    ),
    (
        "Cargo.toml",
        include_str!("../templates/converter/Cargo.toml"),
        false,
    ),
    (
        "src/lib.rs",
        include_str!("../templates/converter/src/lib.rs"),
        false,
    ),
    (
        "converter.yaml",
        include_str!("../templates/converter/converter.yaml"),
        false,
    ),
    (
        "crd.yaml",
        include_str!("../templates/converter/crd.yaml"),
        false,
    ),
    (
        "examples/objects.yaml",
        include_str!("../templates/converter/examples/objects.yaml"),
        false,
    ),
    (
        "expected.yaml",
        include_str!("../templates/converter/expected.yaml"),
        false,
    ),
    (
        "test.sh",
        include_str!("../templates/converter/test.sh"),
        true,
    ),
    (
        ".gitignore",
        include_str!("../templates/common/gitignore"),
        false,
    ),
    ("wit/gantry.wit", WIT, false),
];

const RUST_NOTES: &str = "
## Rust notes

`gantry-sdk` comes by path from the Gantry source tree this project was made
with (`Cargo.toml`); point it elsewhere if you move that tree. `cargo test`
runs the plugin natively; `gantry plugin build .` builds the component for
`wasm32-wasip2` (the `[profile.release]` here keeps it small). The SDK
embeds the contract: `wit/gantry.wit` is here to read.
";

const JS_NOTES: &str = "
## JavaScript notes

One ES module (`main` in `package.json`), built by componentize-js and jco at
the versions pinned in `devDependencies`; Gantry installs them once into
`~/.cache/gantry/toolchains/js/`. Needs Node.js 20+ and npm. No runtime
`dependencies`: bundle them into the module first. The component embeds
SpiderMonkey: about 12 MB, too large for a ConfigMap, so bind it from an OCI
registry or a URL. `record` fields are camelCase (`conditionType`), enums
are lowercase strings (`'true'`), `option`s are `undefined`, and a thrown
object `{reason, message, retryable}` is the `plugin-error`. `app.js`
imports nothing, so `node --test` (`npm test`) runs `app.test.js` on it
natively.
";

const PYTHON_NOTES: &str = "
## Python notes

`app.py` is built by componentize-py at the version pinned in
`pyproject.toml`; Gantry installs it once into a private venv under
`~/.cache/gantry/toolchains/python/`. Needs Python 3.11+. `wit_world` is
generated from `wit/gantry.wit` at build time. Pure-Python dependencies
can sit beside `app.py`. The component embeds CPython: about 18 MB, too
large for a ConfigMap, so bind it from an OCI registry or a URL. Raise
`Err(PluginError(message, reason, retryable))` to fail a reconcile. The
logic is in `greeting.py`, free of the generated bindings, so that
`python3 -m unittest` tests it natively (`test_greeting.py`).
";

const C_NOTES: &str = "
## C notes

Built with clang's wasm32 target and wasi-libc (Debian: `apt-get install
clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32`); the bindings
(`reconciler.h`) are generated at build time by wit-bindgen's C generator,
which Gantry `cargo install`s once into `~/.cache/gantry/toolchains/c/`, and
`wasm-component-ld` from Rust's `wasm32-wasip2` target makes the component.
Every `.c` file here (not under `tests/`) is compiled. `json.c` is a small
JSON reader and writer; each call runs in a fresh instance, so nothing needs
freeing. The logic is in `greeting.c`, apart from the bindings, so that
`make test` compiles it natively and runs `tests/greeting_test.c`.
";

const GO_NOTES: &str = "
## Go notes

Built with the standard Go toolchain (`GOOS=wasip1 GOARCH=wasm go build
-buildmode=c-shared`, Go pinned to the version Gantry names through
`GOTOOLCHAIN`), then made a component by Gantry itself (wit-component and the
WASI preview 1 reactor adapter). The Go SDK (`gantry.dev/go-sdk`) comes from
the Gantry source tree this project was made with, through the `replace` in
`go.mod`; point it elsewhere if you move that tree. Register your reconciler
in an `init` function: `main` never runs in the component. `go test ./...`
runs the logic natively (`./test.sh` runs it first). The component is about
16 MB (the Go runtime and the k8s.io types): bind it from an OCI registry or a
URL, not inline.
";

/// Whether `name` can name a plugin: a DNS label (it becomes the binding's
/// name), not starting with a digit (it becomes a package name).
pub fn valid_name(name: &str) -> bool {
    gantry_kube::names::is_dns1123_label(name)
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
}

/// Where `gantry-sdk` is in this source tree, if it is there.
pub fn default_sdk_path() -> Option<PathBuf> {
    let path = super::source_workspace_root().join("guest-sdk");
    path.join("Cargo.toml").is_file().then_some(path)
}

/// Where the Go SDK is in this source tree, if it is there.
pub fn default_go_sdk_path() -> Option<PathBuf> {
    let path = super::source_workspace_root().join("go-sdk");
    path.join("go.mod").is_file().then_some(path)
}

/// Write a new `language` plugin project `name` into `dir` (which must be
/// missing or empty). `sdk`: the SDK directory for Rust and Go projects
/// (default: this source tree's). Returns the files written.
pub fn new_plugin(
    language: Language,
    name: &str,
    dir: &Path,
    sdk: Option<&Path>,
) -> anyhow::Result<Vec<PathBuf>> {
    check_target(name, dir)?;
    let (files, lang, notes) = match language {
        Language::Rust => (RUST, "Rust", RUST_NOTES),
        Language::JavaScript => (JS, "JavaScript", JS_NOTES),
        Language::Python => (PYTHON, "Python", PYTHON_NOTES),
        Language::C => (C, "C", C_NOTES),
        Language::Go => (GO, "Go", GO_NOTES),
    };
    let sdk = match language {
        Language::Rust => rust_sdk(sdk)?,
        Language::Go => match sdk {
            Some(sdk) => sdk
                .canonicalize()
                .with_context(|| format!("the Go SDK at {}", sdk.display()))?,
            None => default_go_sdk_path().context(
                "the Gantry source tree is not where this gantry was built; pass --sdk PATH/TO/go-sdk",
            )?,
        },
        _ => PathBuf::new(),
    };
    let sdk = sdk.to_string_lossy().replace('\\', "/");
    let lang_test = format!("# The logic, natively.\n{}\n", unit_test_command(language));
    let fill = |text: &str| {
        text.replace("module gantry.dev/plugins/memcached-go", "module __NAME__")
            .replace("../../go-sdk", &sdk)
            .replace("__LANG_TEST__", &lang_test)
            .replace("__CRATE__", &name.replace('-', "_"))
            .replace("__NAME__", name)
            .replace("__LANG_NOTES__", notes)
            .replace("__LANG__", lang)
            .replace("__SDK_PATH__", &sdk)
            .replace("__COMPONENTIZE_JS__", COMPONENTIZE_JS_VERSION)
            .replace("__JCO__", JCO_VERSION)
            .replace("__COMPONENTIZE_PY__", COMPONENTIZE_PY_VERSION)
    };
    write_files(dir, COMMON.iter().chain(files), fill)
}

/// The command that runs a `language` project's own unit tests, natively.
pub fn unit_test_command(language: Language) -> &'static str {
    match language {
        Language::Rust => "cargo test --quiet",
        Language::JavaScript => "node --test",
        Language::Python => "python3 -m unittest --quiet",
        Language::C => "make --silent test",
        Language::Go => "go test ./...",
    }
}

/// Write a new CRD converter project `name` (Rust) into `dir` (which must
/// be missing or empty). `sdk`: the `gantry-sdk` directory (default: this
/// source tree's). Returns the files written.
pub fn new_converter(name: &str, dir: &Path, sdk: Option<&Path>) -> anyhow::Result<Vec<PathBuf>> {
    check_target(name, dir)?;
    let sdk = rust_sdk(sdk)?.to_string_lossy().replace('\\', "/");
    let fill = |text: &str| text.replace("__NAME__", name).replace("__SDK_PATH__", &sdk);
    write_files(dir, CONVERTER.iter(), fill)
}

/// Refuse a name that cannot name a plugin and a directory that is not
/// missing or empty.
fn check_target(name: &str, dir: &Path) -> anyhow::Result<()> {
    if !valid_name(name) {
        bail!(
            "{name:?} cannot name a plugin: use lowercase letters, digits and '-', starting with a letter (at most 63)"
        );
    }
    if dir.exists()
        && dir
            .read_dir()
            .with_context(|| format!("reading {}", dir.display()))?
            .next()
            .is_some()
    {
        bail!("{} exists and is not empty", dir.display());
    }
    Ok(())
}

/// The `gantry-sdk` directory a Rust project depends on: `sdk`, else this
/// source tree's.
fn rust_sdk(sdk: Option<&Path>) -> anyhow::Result<PathBuf> {
    match sdk {
        Some(sdk) => sdk
            .canonicalize()
            .with_context(|| format!("gantry-sdk at {}", sdk.display())),
        None => default_sdk_path().context(
            "the Gantry source tree is not where this gantry was built; pass --sdk PATH/TO/guest-sdk",
        ),
    }
}

/// Write each template file into `dir`, its text through `fill`.
fn write_files<'a>(
    dir: &Path,
    files: impl Iterator<Item = &'a TemplateFile>,
    fill: impl Fn(&str) -> String,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (path, text, executable) in files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, fill(text))
            .with_context(|| format!("writing {}", target.display()))?;
        if *executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))?;
        }
        written.push(target);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commented_http_capability_is_a_valid_grant_once_uncommented() {
        let template = include_str!("../templates/common/binding.yaml");
        let (plain, commented) = template.split_once("# capabilities:").unwrap();
        let uncommented: Vec<&str> = commented
            .lines()
            .map(|line| line.strip_prefix("# ").unwrap_or(line))
            .collect();
        let uncommented = format!("capabilities:{}\n", uncommented.join("\n"));
        let plain =
            gantry_operator::controller::spec::parse_spec(&plain.replace("__NAME__", "x")).unwrap();
        assert_eq!(plain.capabilities.http, None, "off by default");
        let granted = gantry_operator::controller::spec::parse_spec(&format!(
            "{}{uncommented}",
            template
                .split_once("# capabilities:")
                .unwrap()
                .0
                .replace("__NAME__", "x")
        ))
        .unwrap();
        let http = granted.capabilities.http.unwrap();
        assert_eq!(http.allow.len(), 2);
        assert_eq!(http.secret_headers[0].header, "Authorization");
    }

    #[test]
    fn writes_a_project_per_language_and_refuses_bad_names_and_full_dirs() {
        let root = tempfile::tempdir().unwrap();
        for (language, marker) in [
            (Language::Rust, "Cargo.toml"),
            (Language::JavaScript, "package.json"),
            (Language::Python, "app.py"),
            (Language::C, "plugin.c"),
            (Language::Go, "go.mod"),
        ] {
            let dir = root.path().join(format!("{language:?}"));
            let files = new_plugin(language, "hello", &dir, None).unwrap();
            assert!(files.contains(&dir.join(marker)));
            assert_eq!(super::super::detect(&dir).unwrap(), language);
            for file in &files {
                let text = std::fs::read_to_string(file).unwrap();
                for placeholder in [
                    "__NAME__",
                    "__LANG",
                    "__SDK_PATH__",
                    "__COMPONENTIZE",
                    "__JCO__",
                ] {
                    assert!(
                        !text.contains(placeholder),
                        "{} has {placeholder}",
                        file.display()
                    );
                }
            }
            assert!(
                new_plugin(language, "hello", &dir, None).is_err(),
                "not empty"
            );
        }
        let converter = root.path().join("converter");
        let files = new_converter("hello", &converter, None).unwrap();
        for marker in ["converter.yaml", "crd.yaml", "Cargo.toml", "test.sh"] {
            assert!(files.contains(&converter.join(marker)), "{marker}");
        }
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for placeholder in ["__NAME__", "__SDK_PATH__"] {
                assert!(!text.contains(placeholder), "{}", file.display());
            }
        }
        let spec = gantry_operator::conversion::spec::parse_spec(
            &std::fs::read_to_string(converter.join("converter.yaml")).unwrap(),
        )
        .unwrap();
        assert_eq!(spec.crd, "greetings.example.com");
        assert!(
            new_converter("hello", &converter, None).is_err(),
            "not empty"
        );
        let go_mod = std::fs::read_to_string(root.path().join("Go/go.mod")).unwrap();
        assert!(go_mod.starts_with("module hello\n"), "{go_mod}");
        assert!(go_mod.contains("gantry.dev/go-sdk => /"), "{go_mod}");
        let test = std::fs::read_to_string(root.path().join("Go/test.sh")).unwrap();
        assert!(test.contains("go test ./..."), "{test}");
        let cargo = std::fs::read_to_string(root.path().join("Rust/Cargo.toml")).unwrap();
        assert!(cargo.contains("guest-sdk"), "{cargo}");
        for bad in ["Hello", "1hello", "hello_world", ""] {
            assert!(new_plugin(Language::Rust, bad, &root.path().join("x"), None).is_err());
        }
    }
}
