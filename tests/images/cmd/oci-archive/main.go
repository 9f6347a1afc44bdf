// Command oci-archive writes one image, from a rootfs layer tar and a config,
// as a tar of an OCI image layout that `ctr -n k8s.io images import` names
// as kubelet looks it up. go-containerregistry does the OCI work; this
// program only picks the options and tars the layout deterministically.
//
//	oci-archive -layer ROOTFS.tar -name NAME:TAG -out IMAGE.tar \
//	  [-platform linux/amd64] [-user U] [-workdir D] [-entrypoint ARG]... \
//	  [-cmd ARG]... [-env K=V]... [-label K=V]... [-port 80/tcp]...
//
// It prints NAME@DIGEST: the full name and the manifest's digest.
//
// The image is built as `crane append --oci-empty-base` and `crane mutate`
// build it (scripts/image pushes with those), so the same layer and config
// give the same manifest digest either way.
package main

import (
	"archive/tar"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations containerd's importer reads: the image's full name, and
// the tag alone (the OCI layout's own convention).
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var opts options
	var labels, ports list
	flag.StringVar(&opts.layer, "layer", "", "the rootfs layer (an uncompressed tar)")
	flag.StringVar(&opts.name, "name", "", "the image's name with a tag, e.g. memcached:1.6.26-alpine")
	flag.StringVar(&opts.out, "out", "", "the archive to write")
	flag.StringVar(&opts.platform, "platform", "linux/amd64", "OS/ARCH[/VARIANT]")
	flag.StringVar(&opts.config.User, "user", "", "the user (UID:GID)")
	flag.StringVar(&opts.config.WorkingDir, "workdir", "", "the working directory")
	flag.Var((*list)(&opts.config.Entrypoint), "entrypoint", "an entrypoint argument (repeat for more)")
	flag.Var((*list)(&opts.config.Cmd), "cmd", "a command argument (repeat for more)")
	flag.Var((*list)(&opts.config.Env), "env", "an environment variable K=V (repeat for more)")
	flag.Var(&labels, "label", "a label K=V (repeat for more)")
	flag.Var(&ports, "port", "an exposed port, e.g. 80/tcp (repeat for more)")
	flag.Parse()
	if opts.layer == "" || opts.name == "" || opts.out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			fail(fmt.Errorf("-label %q: want K=V", l))
		}
		if opts.config.Labels == nil {
			opts.config.Labels = map[string]string{}
		}
		opts.config.Labels[k] = v
	}
	for _, p := range ports {
		if opts.config.ExposedPorts == nil {
			opts.config.ExposedPorts = map[string]struct{}{}
		}
		opts.config.ExposedPorts[p] = struct{}{}
	}
	ref, err := write(opts)
	if err != nil {
		fail(err)
	}
	fmt.Println(ref)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "oci-archive:", err)
	os.Exit(1)
}

type options struct {
	layer, name, out, platform string
	config                     v1.Config
}

// write builds the image and writes the archive: the layout in a temporary
// directory, then tarred to opts.out (renamed into place when complete).
// It returns NAME@DIGEST.
func write(opts options) (string, error) {
	full, tag, err := normalize(opts.name)
	if err != nil {
		return "", err
	}
	platform, err := v1.ParsePlatform(opts.platform)
	if err != nil {
		return "", err
	}
	img, err := image(opts.layer, *platform, opts.config)
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(filepath.Dir(opts.out), ".oci-layout-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	err = path.AppendImage(img,
		layout.WithAnnotations(map[string]string{annotationImageName: full, annotationRefName: tag}),
		layout.WithPlatform(*platform))
	if err != nil {
		return "", err
	}
	tmp := opts.out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return full + "@" + digest.String(), os.Rename(tmp, opts.out)
}

// normalize gives the fully qualified name of a reference with a tag, as
// containerd's CRI plugin (and so kubelet) spells it, and the tag:
// `memcached:1.6` is `docker.io/library/memcached:1.6`.
func normalize(ref string) (full, tag string, err error) {
	t, err := name.NewTag(ref)
	if err != nil {
		return "", "", fmt.Errorf("-name %q: %w", ref, err)
	}
	// An implicit :latest is an error: kubelet would pull that, not use ours.
	if !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		return "", "", fmt.Errorf("-name %q: want NAME:TAG", ref)
	}
	registry := t.RegistryStr()
	if registry == name.DefaultRegistry { // go-containerregistry says index.docker.io
		registry = "docker.io"
	}
	return registry + "/" + t.RepositoryStr() + ":" + t.TagStr(), t.TagStr(), nil
}

// image is one layer on an empty OCI base with the config set, as crane
// builds it.
func image(layerFile string, platform v1.Platform, config v1.Config) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	layer, err := tarball.LayerFromFile(layerFile, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Config = config
	cfg.OS, cfg.Architecture, cfg.Variant = platform.OS, platform.Architecture, platform.Variant
	return mutate.ConfigFile(img, cfg)
}

// tarDir writes the tree under dir to out with names relative to dir,
// sorted, owned by root and dated 1970, so the same layout gives the same
// bytes.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		case d.Type().IsRegular():
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			defer src.Close()
			info, err := src.Stat()
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			return err
		default:
			return fmt.Errorf("%s: not a file or directory", path)
		}
	})
	return errors.Join(err, tw.Close(), f.Close())
}
