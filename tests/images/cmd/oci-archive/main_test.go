package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func TestNormalize(t *testing.T) {
	for ref, want := range map[string]string{
		"memcached:1.6.26-alpine":         "docker.io/library/memcached:1.6.26-alpine",
		"docker.io/redis:6.0.5":           "docker.io/library/redis:6.0.5",
		"index.docker.io/bitnami/redis:7": "docker.io/bitnami/redis:7",
		"registry.k8s.io/pause:3.10.2":    "registry.k8s.io/pause:3.10.2",
		"127.0.0.1:5000/team/app:v1":      "127.0.0.1:5000/team/app:v1",
		"us-docker.pkg.dev/a/b/c/gb-x:v5": "us-docker.pkg.dev/a/b/c/gb-x:v5",
	} {
		full, tag, err := normalize(ref)
		if err != nil || full != want || tag != want[len(want)-len(tag):] {
			t.Errorf("normalize(%q) = %q, %q, %v; want %q", ref, full, tag, err, want)
		}
	}
	// kubelet never looks up an image by a name without a tag here: the
	// Pods name one, and :latest would be pulled whatever is imported.
	for _, ref := range []string{"memcached", "memcached@sha256:" + string(bytes.Repeat([]byte("a"), 64)), "Bad:tag"} {
		if full, _, err := normalize(ref); err == nil {
			t.Errorf("normalize(%q) = %q, want an error", ref, full)
		}
	}
}

// The archive is an OCI layout whose one image carries the names and the
// config, and the same input gives the same bytes.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	layer := filepath.Join(dir, "layer.tar")
	writeTar(t, layer, map[string]string{"hello": "world"})
	opts := options{layer: layer, name: "memcached:1.6.26-alpine", platform: "linux/amd64",
		config: v1.Config{User: "11211:11211", Entrypoint: []string{"/usr/local/bin/memcached"}}}

	opts.out = filepath.Join(dir, "a.tar")
	ref, err := write(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.out = filepath.Join(dir, "b.tar")
	if again, err := write(opts); err != nil || again != ref {
		t.Fatalf("second write: %q, %v; first %q", again, err, ref)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.tar"))
	b, _ := os.ReadFile(filepath.Join(dir, "b.tar"))
	if !bytes.Equal(a, b) {
		t.Error("two archives of the same image differ")
	}

	unpacked := filepath.Join(dir, "layout")
	untar(t, a, unpacked)
	index, err := layout.ImageIndexFromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 {
		t.Fatalf("%d manifests", len(manifest.Manifests))
	}
	desc := manifest.Manifests[0]
	wantAnnotations := map[string]string{
		"io.containerd.image.name":          "docker.io/library/memcached:1.6.26-alpine",
		"org.opencontainers.image.ref.name": "1.6.26-alpine",
	}
	if !reflect.DeepEqual(desc.Annotations, wantAnnotations) || desc.Platform.String() != "linux/amd64" {
		t.Errorf("index entry: %+v", desc)
	}
	if want := "docker.io/library/memcached:1.6.26-alpine@" + desc.Digest.String(); ref != want {
		t.Errorf("printed %q, want %q", ref, want)
	}
	img, err := index.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Config, opts.config) || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("config: %+v", cfg)
	}
	if m, _ := img.MediaType(); m != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s", m)
	}
}

func writeTar(t *testing.T, path string, files map[string]string) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))})
		io.WriteString(tw, body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func untar(t *testing.T, archive []byte, dir string) {
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.ModTime.Unix() != 0 || hdr.Uid != 0 {
			t.Errorf("%s: mtime %v, uid %d", hdr.Name, hdr.ModTime, hdr.Uid)
		}
		path := filepath.Join(dir, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			os.MkdirAll(path, 0o755)
			continue
		}
		body, _ := io.ReadAll(tr)
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
