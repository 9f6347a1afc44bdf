// Command peer is the controller-runtime peer of Gantry's convergence
// benchmark: the same two reconcilers as Gantry's fanout and memcached
// plugins, written as a kubebuilder project would write them, so that
// `gantry bench converge` can measure both on the same cluster.
//
// It prints a line `ready` on stderr once its caches have synced, and
// exits 0 on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options are the command line.
type Options struct {
	// Concurrency is MaxConcurrentReconciles of each controller (Gantry's --concurrency).
	Concurrency int
	// Reconcilers are the controllers to run: fanout, memcached or both.
	Reconcilers []string
	// FanoutKind is the kind the fanout reconciler's parents are served as.
	FanoutKind string
	// Namespace restricts every watch to one namespace; empty: all.
	Namespace string
	// MetricsAddr serves /metrics; "0" turns it off.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "0" turns it off.
	ProbeAddr string
	// LeaderElect makes the peer take the Lease before reconciling.
	LeaderElect bool
	// ChildrenPerParent is K, the ConfigMaps of each Fanout.
	ChildrenPerParent int
	// Resync is how long after a successful reconcile a parent is reconciled again.
	Resync time.Duration
	// MemcachedImage is the memcached container image.
	MemcachedImage string
	// LogLevel is debug, info or error.
	LogLevel string
}

func parseOptions(args []string) (Options, error) {
	// --kubeconfig is registered on flag.CommandLine by controller-runtime
	// and read by ctrl.GetConfigOrDie: --kubeconfig, else $KUBECONFIG, else
	// in-cluster, else ~/.kube/config.
	fs := flag.CommandLine
	var o Options
	var reconcilers string
	var resyncSecs int
	fs.IntVar(&o.Concurrency, "concurrency", 16, "reconciles at once, per controller (MaxConcurrentReconciles); Gantry's --concurrency")
	fs.StringVar(&reconcilers, "reconcilers", "fanout,memcached", "controllers to run, comma-separated: fanout, memcached")
	fs.StringVar(&o.FanoutKind, "fanout-kind", DefaultFanoutKind, "kind of the fanout parents in bench.gantry.dev/v1: a CRD with Fanout's schema")
	fs.StringVar(&o.Namespace, "namespace", "", "watch only this namespace (default: all)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", "address of /metrics (plain HTTP); 0 turns it off")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", "0", "address of /healthz and /readyz; 0 turns them off")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "take the Lease controller-runtime-peer.bench.gantry.dev before reconciling")
	fs.IntVar(&o.ChildrenPerParent, "children-per-parent", 3, "ConfigMaps per Fanout (the fanout binding's config.children)")
	fs.IntVar(&resyncSecs, "resync-secs", 300, "seconds after a successful reconcile before a parent is reconciled again (a binding's resyncSeconds)")
	fs.StringVar(&o.MemcachedImage, "memcached-image", DefaultMemcachedImage, "memcached's image (the memcached binding's config.image)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, name := range strings.Split(reconcilers, ",") {
		switch name = strings.TrimSpace(name); name {
		case "fanout", "memcached":
			o.Reconcilers = append(o.Reconcilers, name)
		case "":
		default:
			return o, fmt.Errorf("--reconcilers: unknown reconciler %q (fanout, memcached)", name)
		}
	}
	if len(o.Reconcilers) == 0 {
		return o, errors.New("--reconcilers: name at least one of fanout, memcached")
	}
	if o.FanoutKind == "" {
		return o, errors.New("--fanout-kind must not be empty")
	}
	if o.Concurrency < 1 {
		return o, errors.New("--concurrency must be at least 1")
	}
	if o.ChildrenPerParent < 0 {
		return o, errors.New("--children-per-parent must not be negative")
	}
	if resyncSecs < 1 {
		return o, errors.New("--resync-secs must be at least 1")
	}
	o.Resync = time.Duration(resyncSecs) * time.Second
	return o, nil
}

func (o Options) runs(name string) bool {
	for _, r := range o.Reconcilers {
		if r == name {
			return true
		}
	}
	return false
}

func logger(level string) (logr.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return logr.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	return logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func main() {
	options, err := parseOptions(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(2)
	}
	log, err := logger(options.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(log)
	if err := run(ctrl.SetupSignalHandler(), options, log); err != nil {
		log.Error(err, "peer failed")
		os.Exit(1)
	}
}

// writes counts the API requests the peer sends other than reads, the way
// the bench's layer counts Gantry's: every request whose method is not
// GET, HEAD or OPTIONS, whatever its answer.
var writes atomic.Uint64

// writesMetric exposes writes on /metrics.
var writesMetric = prometheus.NewCounterFunc(prometheus.CounterOpts{
	Name: "gantry_peer_api_writes_total",
	Help: "API requests sent by the peer other than GET, HEAD and OPTIONS.",
}, func() float64 { return float64(writes.Load()) })

// eventWrites counts those of the writes that are about Events.
var eventWrites atomic.Uint64

// eventWritesMetric exposes eventWrites on /metrics.
var eventWritesMetric = prometheus.NewCounterFunc(prometheus.CounterOpts{
	Name: "gantry_peer_api_event_writes_total",
	Help: "Of the API writes, those that wrote Events.",
}, func() float64 { return float64(eventWrites.Load()) })

type countingTransport struct{ next http.RoundTripper }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		writes.Add(1)
		if writesEvents(r.URL.Path) {
			eventWrites.Add(1)
		}
	}
	return t.next.RoundTrip(r)
}

// writesEvents reports whether a request to path is about Events (core v1
// or events.k8s.io/v1), as Gantry's counting layer tells them.
func writesEvents(path string) bool {
	rest, ok := strings.CutPrefix(path, "/api/v1/")
	if !ok {
		if rest, ok = strings.CutPrefix(path, "/apis/events.k8s.io/v1/"); !ok {
			return false
		}
	}
	if inNamespace, ok := strings.CutPrefix(rest, "namespaces/"); ok {
		if _, after, found := strings.Cut(inNamespace, "/"); found {
			rest = after
		}
	}
	return rest == "events" || strings.HasPrefix(rest, "events/")
}

func run(ctx context.Context, options Options, log logr.Logger) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := AddToScheme(scheme, options.FanoutKind); err != nil {
		return err
	}

	config := ctrl.GetConfigOrDie()
	// No client-side rate limit, as Gantry's kube-rs client has none: a
	// negative QPS turns client-go's token bucket off (controller-runtime
	// v0.25 already defaults to that; this makes it explicit, and
	// overrides a kubeconfig that sets one).
	config.QPS = -1
	config.Burst = 0
	config.RateLimiter = nil
	config.Wrap(func(next http.RoundTripper) http.RoundTripper { return countingTransport{next} })
	ctrlmetrics.Registry.MustRegister(writesMetric, eventWritesMetric)

	// The child caches hold only the peer's children, as Gantry's child
	// watches are label-filtered: a cluster's other ConfigMaps and
	// Deployments are neither listed nor watched.
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{PeerLabel: PeerLabelValue})}
	cacheOptions := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}:  ours,
		&appsv1.Deployment{}: ours,
	}}
	if options.Namespace != "" {
		cacheOptions.DefaultNamespaces = map[string]cache.Config{options.Namespace: {}}
	}
	leaderNamespace := options.Namespace
	if leaderNamespace == "" {
		leaderNamespace = "default"
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOptions,
		Metrics:                 metricsserver.Options{BindAddress: options.MetricsAddr},
		HealthProbeBindAddress:  options.ProbeAddr,
		LeaderElection:          options.LeaderElect,
		LeaderElectionID:        "controller-runtime-peer.bench.gantry.dev",
		LeaderElectionNamespace: leaderNamespace,
		// Give up the Lease at once on SIGTERM, as `gantry run` does.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	var watched []client.Object
	if options.runs("fanout") {
		r := &FanoutReconciler{
			Client:            mgr.GetClient(),
			Reader:            mgr.GetAPIReader(),
			Recorder:          mgr.GetEventRecorder("controller-runtime-peer"),
			ChildrenPerParent: options.ChildrenPerParent,
			Resync:            options.Resync,
			GVK:               FanoutGroupVersion.WithKind(options.FanoutKind),
		}
		if err := r.SetupWithManager(ctx, mgr, options.Concurrency); err != nil {
			return fmt.Errorf("setting up fanout: %w", err)
		}
		watched = append(watched, &Fanout{}, &corev1.ConfigMap{})
	}
	if options.runs("memcached") {
		r := &MemcachedReconciler{
			Client:   mgr.GetClient(),
			Reader:   mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("controller-runtime-peer"),
			Image:    options.MemcachedImage,
			Resync:   options.Resync,
		}
		if err := r.SetupWithManager(ctx, mgr, options.Concurrency); err != nil {
			return fmt.Errorf("setting up memcached: %w", err)
		}
		watched = append(watched, &Memcached{}, &appsv1.Deployment{})
	}

	ready := &readyReporter{cache: mgr.GetCache(), objects: watched}
	if err := mgr.Add(ready); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", ready.check); err != nil {
		return err
	}

	log.Info("starting", "reconcilers", options.Reconcilers, "fanoutKind", options.FanoutKind, "concurrency", options.Concurrency,
		"childrenPerParent", options.ChildrenPerParent, "resync", options.Resync, "namespace", options.Namespace)
	err = mgr.Start(ctx)
	log.Info("stopped", "writes", writes.Load())
	return err
}

// readyReporter prints `ready` on stderr once the informers of every
// watched kind have synced: from then on the controllers see every parent
// and child, including those created before the peer started.
type readyReporter struct {
	cache   cache.Cache
	objects []client.Object
	ready   atomic.Bool
}

// Start waits for the informers, then prints the line.
func (r *readyReporter) Start(ctx context.Context) error {
	for _, obj := range r.objects {
		// The same shared informers the controllers' watches use.
		if _, err := r.cache.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	if !r.cache.WaitForCacheSync(ctx) {
		// Stopped before the caches synced.
		return nil
	}
	r.ready.Store(true)
	fmt.Fprintln(os.Stderr, "ready")
	return nil
}

// NeedLeaderElection is false: a follower's caches are ready too.
func (r *readyReporter) NeedLeaderElection() bool { return false }

func (r *readyReporter) check(*http.Request) error {
	if !r.ready.Load() {
		return errors.New("caches not synced yet")
	}
	return nil
}
