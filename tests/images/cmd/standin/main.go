// Command standin takes the place of the examples' upstream servers on a
// node that cannot pull images: memcached, redis-server (the Guestbook's
// leader and, as gb-redis-follower, its followers), gb-frontend (the
// Guestbook's web tier) and postgres. Each listens where the real server
// does, speaks a small honest subset of its protocol, logs a line when it
// starts and exits 0 on SIGTERM.
//
// The program picks its server from the name it is run as (as busybox does),
// so an image holds it at /usr/local/bin/memcached and a Pod's `command:
// [memcached, ...]` runs it; `standin SERVER [ARGS]` runs one by name.
// STANDIN_LISTEN=HOST:PORT overrides where any of them listens (the tests
// use 127.0.0.1:0); the log line says the address it got.
package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// server is one stand-in: it serves ln until ln is closed.
type server func(ln net.Listener, args []string) error

// servers by the name they are run as, with their default port (from the
// server's arguments: each reads the flags its real server has).
var servers = map[string]struct {
	listen func(args []string) string
	serve  server
}{
	"memcached":         {memcachedListen, serveMemcached},
	"redis-server":      {redisListen, serveRedis},
	"gb-redis-follower": {func([]string) string { return ":6379" }, serveFollower},
	"gb-frontend":       {func([]string) string { return ":80" }, serveFrontend},
	"postgres":          {postgresListen, servePostgres},
}

func main() {
	log.SetFlags(0)
	name, args := command(os.Args)
	s, ok := servers[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: standin memcached|redis-server|gb-redis-follower|gb-frontend|postgres [ARGS]")
		os.Exit(2)
	}
	log.SetPrefix(name + " (gantry stand-in): ")
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-V") {
		fmt.Println(version(name))
		return
	}
	if err := run(s.listen(args), func(ln net.Listener) error { return s.serve(ln, args) }); err != nil {
		log.Fatal(err)
	}
}

// command is the server's name and arguments: from the program's own name,
// or from its first argument when run as `standin`.
func command(argv []string) (string, []string) {
	name := filepath.Base(argv[0])
	if _, ok := servers[name]; ok || len(argv) < 2 {
		return name, argv[1:]
	}
	return argv[1], argv[2:]
}

// run listens on addr (or STANDIN_LISTEN) and serves until SIGTERM or
// SIGINT, then returns nil: kubelet stops a container with SIGTERM, and a
// server that exits 0 then is one that stopped cleanly.
func run(addr string, serve func(net.Listener) error) error {
	if env := os.Getenv("STANDIN_LISTEN"); env != "" {
		addr = env
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	log.Printf("listening on %s", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- serve(ln) }()
	select {
	case sig := <-signals:
		log.Printf("%v: exiting", sig)
		ln.Close()
		return nil
	case err := <-served:
		return err
	}
}

// accept calls handle for each connection in its own goroutine until ln is
// closed.
func accept(ln net.Listener, handle func(net.Conn)) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer conn.Close()
			handle(conn)
		}()
	}
}

// version is what the image says the real server's version is (each image
// sets the variable its upstream image sets), marked as a stand-in.
func version(name string) string {
	v := ""
	switch name {
	case "memcached":
		v = os.Getenv("MEMCACHED_VERSION")
	case "redis-server", "gb-redis-follower":
		v = os.Getenv("REDIS_VERSION")
	case "postgres":
		v = os.Getenv("PG_MAJOR")
	}
	if v == "" {
		v = "0"
	}
	return v + "-gantry-stand-in"
}

// flagValue is the value of a flag given as `-f VALUE`, `--flag VALUE` or
// `--flag=VALUE` (any of names), the last one given; or fallback.
func flagValue(args []string, fallback string, names ...string) string {
	v := fallback
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				v = args[i+1]
			} else if len(a) > len(n)+1 && a[:len(n)+1] == n+"=" {
				v = a[len(n)+1:]
			}
		}
	}
	return v
}
