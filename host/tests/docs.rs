//! The documentation is checked like code: the generated reference pages
//! match the code they describe, the shell snippets marked runnable run,
//! and the book builds (`mdbook build docs`) with every relative link and
//! anchor resolving.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The first line of a `sh` code block that this test runs.
const RUNNABLE: &str = "# runnable: checked by host/tests/docs.rs";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Compare a generated page with the committed one; with
/// `GANTRY_UPDATE_DOCS=1`, write it instead.
fn same_as_committed(page: &str, generated: &str, command: &str) -> Option<String> {
    let path = repo().join("docs/reference").join(page);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == generated {
        return None;
    }
    if std::env::var_os("GANTRY_UPDATE_DOCS").is_some() {
        std::fs::write(&path, generated).unwrap();
        return None;
    }
    let line = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .map_or_else(
            || committed.lines().count().min(generated.lines().count()) + 1,
            |i| i + 1,
        );
    Some(format!(
        "docs/reference/{page} differs from what `gantry {command}` prints (from line {line}); update it with\n  \
         cargo run -q -p gantry -- {command} > docs/reference/{page}\n\
         or GANTRY_UPDATE_DOCS=1 cargo test -p gantry --test docs reference"
    ))
}

#[test]
fn reference_pages_match_the_code() {
    let stale: Vec<String> = [
        same_as_committed("cli.md", &gantry::cli::docs::cli_reference(), "docs cli"),
        same_as_committed(
            "limits.md",
            &gantry::cli::docs::limits_reference(),
            "docs limits",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(stale.is_empty(), "{}", stale.join("\n\n"));
}

/// The Markdown files a reader meets: the README, CONTRIBUTING and
/// ARCHITECTURE, and the book's sources.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "book") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = repo();
    let mut files: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"]
        .iter()
        .map(|f| root.join(f))
        .filter(|p| p.exists())
        .collect();
    walk(&root.join("docs"), &mut files);
    files.sort();
    files
}

/// The `sh` code blocks of `text` whose first line is [`RUNNABLE`], with
/// the line each starts on.
fn runnable_snippets(text: &str) -> Vec<(usize, String)> {
    let mut snippets = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((number, line)) = lines.next() {
        if line.trim_start().starts_with("```sh") {
            let body: Vec<&str> = lines
                .by_ref()
                .map(|(_, l)| l)
                .take_while(|l| !l.trim_start().starts_with("```"))
                .collect();
            if body.first().is_some_and(|l| l.trim() == RUNNABLE) {
                snippets.push((number + 1, body[1..].join("\n")));
            }
        }
    }
    snippets
}

#[test]
fn runnable_snippets_run() {
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gantry"), bin.path().join("gantry")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    let mut failures = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, script) in runnable_snippets(&text) {
            let work = tempfile::tempdir().unwrap();
            let started = Instant::now();
            let output = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &script])
                .current_dir(work.path())
                .env("PATH", &path)
                .output()
                .unwrap();
            ran += 1;
            let place = format!(
                "{}:{line}",
                file.strip_prefix(repo()).unwrap_or(&file).display()
            );
            eprintln!("{place}: {:?}", started.elapsed());
            if !output.status.success() {
                failures.push(format!(
                    "{place} failed ({}):\n{script}\n--- stdout\n{}--- stderr\n{}",
                    output.status,
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
    }
    assert!(ran >= 3, "only {ran} runnable snippets found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The `mdbook` binary: on `PATH`, or where `cargo install` puts it.
fn mdbook() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("mdbook"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        candidates.push(PathBuf::from(home).join("bin/mdbook"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".cargo/bin/mdbook"));
    }
    candidates.into_iter().find(|p| p.is_file())
}

/// The values of `attribute="..."` in an HTML page.
fn attributes<'a>(html: &'a str, attribute: &str) -> Vec<&'a str> {
    let needle = format!(" {attribute}=\"");
    html.match_indices(&needle)
        .filter_map(|(i, _)| {
            let rest = &html[i + needle.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

fn unescape(link: &str) -> String {
    let link = link.replace("&amp;", "&");
    let bytes = link.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(byte) = u8::from_str_radix(&link[i + 1..i + 3], 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn the_book_builds_and_its_links_resolve() {
    let mdbook = mdbook().expect(
        "mdbook is not installed: `cargo install mdbook --locked` (scripts/test installs it)",
    );
    // Built where `mdbook build docs` puts it (docs/book, ignored by git):
    // the sources are docs/ itself, and mdbook copies everything there but
    // its own build directory into the book.
    let book = repo().join("docs/book");
    let started = Instant::now();
    let build = Command::new(&mdbook)
        .arg("build")
        .arg(repo().join("docs"))
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "mdbook build docs failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(
        !stderr.contains("WARN") && !stderr.contains("ERROR"),
        "mdbook build docs warned:\n{stderr}"
    );
    assert!(started.elapsed() < Duration::from_mins(2));

    let mut pages: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut todo = vec![book.clone()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "html") {
                pages.insert(path.clone(), std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    assert!(pages.len() > 10, "only {} pages built", pages.len());
    let ids: BTreeMap<PathBuf, BTreeSet<&str>> = pages
        .iter()
        .map(|(path, html)| {
            (
                path.canonicalize().unwrap(),
                attributes(html, "id").into_iter().collect(),
            )
        })
        .collect();
    let mut broken = BTreeSet::new();
    for (page, html) in &pages {
        let links = attributes(html, "href")
            .into_iter()
            .chain(attributes(html, "src"));
        for link in links {
            let link = unescape(link);
            if link.is_empty()
                || link.contains("://")
                || link.starts_with('/')
                || link.starts_with("mailto:")
                || link.starts_with("javascript:")
                || link.starts_with("data:")
            {
                continue;
            }
            let (target, fragment) = match link.split_once('#') {
                Some((t, f)) => (t, Some(f)),
                None => (link.as_str(), None),
            };
            let target = target.split('?').next().unwrap_or_default();
            let mut file = if target.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(target)
            };
            if file.is_dir() {
                file = file.join("index.html");
            }
            let shown = page.strip_prefix(&book).unwrap_or(page).display();
            if !file.exists() {
                broken.insert(format!("{shown}: {link} (no such file)"));
                continue;
            }
            if let Some(fragment) = fragment.filter(|f| !f.is_empty())
                && let Some(known) = ids.get(&file.canonicalize().unwrap())
                && !known.contains(fragment)
            {
                broken.insert(format!("{shown}: {link} (no such anchor)"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links in the book:\n{}",
        broken.into_iter().collect::<Vec<_>>().join("\n")
    );
}
