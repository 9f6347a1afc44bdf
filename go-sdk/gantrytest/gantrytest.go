// Package gantrytest runs a Gantry plugin in service for a Go test, as
// envtest gives a controller-runtime test its API server: [Start] runs
// `gantry plugin serve` on a plugin project (the embedded API server in
// memory, the project's CRDs installed, its binding applied, the operator
// running) and returns once the binding serves, in about a second when the
// component is built. The test then creates a parent and waits for its
// children:
//
//	env := gantrytest.Start(t, ".", nil)
//	if err := env.Create(ctx, &v1.Greeting{...}); err != nil { t.Fatal(err) }
//	var cm corev1.ConfigMap
//	err := env.Eventually(30*time.Second, func() (bool, error) {
//		return env.Get(ctx, "v1", "ConfigMap", "default", "world-greeting", &cm)
//	})
//
// The gantry binary is [Options.Gantry], else $GANTRY, else gantry on PATH.
// The environment's kubeconfig ([Env.Kubeconfig]) serves client-go or
// kubectl as well.
package gantrytest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options say how to start an [Env]; the zero value builds and serves the
// project.
type Options struct {
	// Gantry is the gantry binary (default: $GANTRY, then gantry on PATH).
	Gantry string
	// Plugin is a built component to serve instead of the project's build.
	Plugin string
	// CRDs are CRD files to install instead of the project's.
	CRDs []string
	// Simulate simulates workloads as `gantry dev` does: Pods become Ready.
	Simulate bool
	// Timeout bounds the wait for the binding to serve, the build included
	// (default two minutes).
	Timeout time.Duration
}

// Env is a plugin in service on a fresh embedded API server.
type Env struct {
	// Kubeconfig is the path of the API server's kubeconfig (the admin's).
	Kubeconfig string
	// Server is the API server's URL.
	Server string
	// Namespace is the operator's namespace, where the binding's ConfigMap is.
	Namespace string
	// Binding is the binding's name.
	Binding string
	// SHA256 is the digest of the component in service.
	SHA256 string

	client *http.Client
	token  string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan struct{}
	logDir string
	once   sync.Once

	mu        sync.Mutex
	resources map[string]resource
}

// ErrNotFound is what [Env.Get] returns for an object that does not exist.
var ErrNotFound = errors.New("not found")

// Binary finds the gantry binary: explicit if not empty, else $GANTRY,
// else gantry on PATH.
func Binary(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if env := os.Getenv("GANTRY"); env != "" {
		return env, nil
	}
	path, err := exec.LookPath("gantry")
	if err != nil {
		return "", errors.New("gantrytest: the gantry binary was not found: set GANTRY to its path or put it on PATH (cargo build -p gantry builds it)")
	}
	return path, nil
}

// Start starts the plugin project at dir in service for the test t, and
// stops it when the test ends; it fails the test if it cannot start.
func Start(t testing.TB, dir string, opts *Options) *Env {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	env, err := New(dir, *opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Log(err)
		}
	})
	return env
}

// ready is the line `gantry plugin serve` prints once the binding serves.
type ready struct {
	Ready      bool   `json:"ready"`
	Kubeconfig string `json:"kubeconfig"`
	Server     string `json:"server"`
	Namespace  string `json:"namespace"`
	Binding    string `json:"binding"`
	SHA256     string `json:"sha256"`
}

// New starts the plugin project at dir in service; [Env.Stop] stops it.
func New(dir string, opts Options) (*Env, error) {
	gantry, err := Binary(opts.Gantry)
	if err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	logDir, err := os.MkdirTemp("", "gantrytest-")
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(logDir, "gantry.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := []string{"plugin", "serve", dir, "--until-stdin-closes",
		"--timeout-secs", fmt.Sprint(max(int(timeout.Seconds()), 1))}
	if opts.Plugin != "" {
		args = append(args, "--plugin", opts.Plugin)
	}
	for _, crd := range opts.CRDs {
		args = append(args, "--crd", crd)
	}
	if opts.Simulate {
		args = append(args, "--simulate")
	}
	cmd := exec.Command(gantry, args...)
	cmd.Stderr = log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(logDir)
		return nil, fmt.Errorf("gantrytest: starting %s: %w", gantry, err)
	}
	env := &Env{cmd: cmd, stdin: stdin, done: make(chan struct{}), logDir: logDir}
	lines := make(chan ready, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			var r ready
			if json.Unmarshal(scanner.Bytes(), &r) == nil && r.Ready {
				lines <- r
				break
			}
		}
		// Keep reading, so that the server never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(env.done)
	}()
	select {
	case r := <-lines:
		if err := env.connect(r); err != nil {
			_ = env.Stop()
			return nil, err
		}
		return env, nil
	case <-env.done:
		err := fmt.Errorf("gantrytest: gantry plugin serve %s failed (%s):\n%s", dir, cmd.ProcessState, env.Log())
		_ = env.Stop()
		return nil, err
	case <-time.After(timeout + 10*time.Second):
		err := fmt.Errorf("gantrytest: gantry plugin serve %s was not ready within %s:\n%s", dir, timeout, env.Log())
		_ = env.Stop()
		return nil, err
	}
}

// connect reads the kubeconfig (JSON) the server wrote.
func (e *Env) connect(r ready) error {
	e.Kubeconfig, e.Server, e.Namespace, e.Binding, e.SHA256 = r.Kubeconfig, r.Server, r.Namespace, r.Binding, r.SHA256
	text, err := os.ReadFile(r.Kubeconfig)
	if err != nil {
		return err
	}
	var config struct {
		Clusters []struct {
			Cluster struct {
				CA string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Token string `json:"token"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := json.Unmarshal(text, &config); err != nil || len(config.Clusters) == 0 {
		return fmt.Errorf("gantrytest: reading the kubeconfig %s: %v", r.Kubeconfig, err)
	}
	roots := x509.NewCertPool()
	if ca, err := base64.StdEncoding.DecodeString(config.Clusters[0].Cluster.CA); err != nil || !roots.AppendCertsFromPEM(ca) {
		return fmt.Errorf("gantrytest: the kubeconfig %s has no CA certificate", r.Kubeconfig)
	}
	if len(config.Users) > 0 {
		e.token = config.Users[0].User.Token
	}
	e.client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}
	return nil
}

// Stop stops the server (closing its standard input; killing it after
// five seconds) and removes what it left.
func (e *Env) Stop() error {
	var err error
	e.once.Do(func() {
		_ = e.stdin.Close()
		select {
		case <-e.done:
		case <-time.After(5 * time.Second):
			err = e.cmd.Process.Kill()
			<-e.done
		}
		_ = os.RemoveAll(e.logDir)
	})
	return err
}

// Log is what the server and the operator logged so far.
func (e *Env) Log() string {
	text, _ := os.ReadFile(filepath.Join(e.logDir, "gantry.log"))
	return string(text)
}

// Do sends one request to the API server: method, path (such as
// "/api/v1/namespaces/default/configmaps") and a JSON body or nil. It
// returns the status code and the body.
func (e *Env) Do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.Server+path, reader)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return resp.StatusCode, answer, err
}

// resource is what discovery says of a kind.
type resource struct {
	name       string
	namespaced bool
}

// path is the collection of apiVersion/kind in namespace (or the object
// name in it, when name is not empty).
func (e *Env) path(ctx context.Context, apiVersion, kind, namespace, name string) (string, error) {
	key := apiVersion + "/" + kind
	e.mu.Lock()
	found, ok := e.resources[key]
	e.mu.Unlock()
	base := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		base = "/api/" + apiVersion
	}
	if !ok {
		status, body, err := e.Do(ctx, http.MethodGet, base, nil)
		if err != nil {
			return "", err
		}
		if status != http.StatusOK {
			return "", fmt.Errorf("gantrytest: %s is not served (%d)", apiVersion, status)
		}
		var list struct {
			Resources []struct {
				Name       string `json:"name"`
				Kind       string `json:"kind"`
				Namespaced bool   `json:"namespaced"`
			} `json:"resources"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return "", err
		}
		for _, r := range list.Resources {
			if r.Kind == kind && !strings.Contains(r.Name, "/") {
				found, ok = resource{r.Name, r.Namespaced}, true
			}
		}
		if !ok {
			return "", fmt.Errorf("gantrytest: %s has no kind %s", apiVersion, kind)
		}
		e.mu.Lock()
		if e.resources == nil {
			e.resources = map[string]resource{}
		}
		e.resources[key] = found
		e.mu.Unlock()
	}
	path := base
	if found.namespaced {
		if namespace == "" {
			namespace = "default"
		}
		path += "/namespaces/" + namespace
	}
	path += "/" + found.name
	if name != "" {
		path += "/" + name
	}
	return path, nil
}

// Create creates obj: any object that encodes to JSON with apiVersion,
// kind and metadata (a k8s.io/api type with its TypeMeta set, your own
// kind's type, or a map). Its namespace defaults to "default".
func (e *Env) Create(ctx context.Context, obj any) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &head); err != nil || head.APIVersion == "" || head.Kind == "" {
		return fmt.Errorf("gantrytest: an object to create needs apiVersion and kind: %s", body)
	}
	path, err := e.path(ctx, head.APIVersion, head.Kind, head.Metadata.Namespace, "")
	if err != nil {
		return err
	}
	status, answer, err := e.Do(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return fmt.Errorf("gantrytest: creating %s %s: %d %s", head.APIVersion, head.Kind, status, answer)
	}
	return nil
}

// Get reads the object apiVersion/kind namespace/name into into (any type
// encoding/json decodes it into); it returns [ErrNotFound] when there is
// none.
func (e *Env) Get(ctx context.Context, apiVersion, kind, namespace, name string, into any) error {
	path, err := e.path(ctx, apiVersion, kind, namespace, name)
	if err != nil {
		return err
	}
	status, body, err := e.Do(ctx, http.MethodGet, path, nil)
	switch {
	case err != nil:
		return err
	case status == http.StatusNotFound:
		return ErrNotFound
	case status != http.StatusOK:
		return fmt.Errorf("gantrytest: reading %s %s %s/%s: %d %s", apiVersion, kind, namespace, name, status, body)
	}
	return json.Unmarshal(body, into)
}

// Eventually calls check every 100 ms until it returns true with no
// error, or an error other than [ErrNotFound] (which means: not yet), for
// at most timeout.
func (e *Env) Eventually(timeout time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if done && err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gantrytest: not done within %s (last: %v)", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
