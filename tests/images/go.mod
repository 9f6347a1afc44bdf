// Images for a real node, built here because nothing can be pulled: the
// OCI archive writer (oci-archive) and the stand-in servers (standin) that
// take the place of the examples' upstream images. scripts/node-images
// builds them; deploy/README.md ("Images built here") says what each is.
module gantry.dev/tests/images

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
