// Package metrics records plugin metrics through the host's `metrics`
// import. They appear on the operator's /metrics as
// gantry_plugin_metric_<name>, with the labels binding and digest added:
//
//	metrics.CounterAdd("backups_deleted", metrics.Labels{{"outcome", "done"}}, 1)
//	// gantry_plugin_metric_backups_deleted_total{binding="…",digest="…",outcome="done"} 1
//
// Names and label names are Prometheus names ([a-zA-Z_][a-zA-Z0-9_]*, at
// most 64 characters; a counter's _total is added by the host); at most 8
// labels, not binding, digest, le, quantile or starting with __, values of
// at most 128 bytes. The host caps a binding's distinct series (200); a
// sample that breaks a rule or passes the cap is dropped and counted in
// gantry_plugin_metrics_dropped_total, and the plugin is not told. Shadow
// runs record nothing. Natively (go test) samples are discarded.
//
// Only reconcile plugins may record metrics: a policy or converter that
// uses this package does not build.
package metrics

// Labels are label names and values, in order.
type Labels [][2]string

// CounterAdd adds value (finite, >= 0) to counter name.
func CounterAdd(name string, labels Labels, value float64) {
	record(counter, name, labels, value)
}

// GaugeSet sets gauge name to value (finite).
func GaugeSet(name string, labels Labels, value float64) {
	record(gauge, name, labels, value)
}

// HistogramObserve observes value (finite) in histogram name, with
// Prometheus' default buckets (5 ms .. 10 s).
func HistogramObserve(name string, labels Labels, value float64) {
	record(histogram, name, labels, value)
}

// kind is which of the import's functions records a sample.
type kind uint8

const (
	counter kind = iota
	gauge
	histogram
)
