package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// serveFrontend is the Guestbook's web tier: a page on / (HTTP 200) that
// says which Redis hosts the real frontend would use (from the environment
// the Guestbook plugin sets), and 404 elsewhere.
func serveFrontend(ln net.Listener, _ []string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html>\n<title>Guestbook</title>\n<h1>Guestbook</h1>\n"+
			"<p>A stand-in for gb-frontend built by Gantry: redis leader %q, followers %q.</p>\n",
			os.Getenv("REDIS_LEADER_SERVICE_HOST"), os.Getenv("REDIS_FOLLOWER_SERVICE_HOST"))
	})
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return server.Serve(ln)
}
