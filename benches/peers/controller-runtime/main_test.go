package main

import "testing"

func TestEventWritesAreToldFromOtherWrites(t *testing.T) {
	for _, path := range []string{
		"/api/v1/namespaces/apps/events",
		"/api/v1/namespaces/apps/events/web.1",
		"/apis/events.k8s.io/v1/namespaces/apps/events/web.1",
		"/apis/events.k8s.io/v1/events",
	} {
		if !writesEvents(path) {
			t.Errorf("%s: not counted as an Event write", path)
		}
	}
	for _, path := range []string{
		"/api/v1/namespaces/events",
		"/api/v1/namespaces/events/configmaps/web",
		"/api/v1/namespaces/apps/configmaps/events",
		"/apis/apps/v1/namespaces/apps/deployments/events",
		"/apis/bench.gantry.dev/v1/namespaces/apps/events",
	} {
		if writesEvents(path) {
			t.Errorf("%s: counted as an Event write", path)
		}
	}
}
