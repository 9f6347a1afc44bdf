package main

import (
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
)

// failed publishes rerr as a Warning Event on parent and says what the
// workqueue should do: retry with its backoff when a retry may help (the
// error is returned), otherwise reconcile again after resync (or on the
// next change), as Gantry's error policy does.
func failed(recorder events.EventRecorder, parent runtime.Object, rerr *ReconcileError, resync time.Duration) (ctrl.Result, error) {
	recorder.Eventf(parent, nil, corev1.EventTypeWarning, truncate(rerr.Reason, 128), "Reconcile", "%s", truncate(rerr.Error(), 1024))
	if rerr.Retryable {
		return ctrl.Result{}, rerr
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
