package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary runs as a stand-in when STANDIN_TEST_ARGS is set (its
// arguments, space-separated): each test starts a real process, so the
// signal handling and the exit code are the program's own.
func TestMain(m *testing.M) {
	if args := os.Getenv("STANDIN_TEST_ARGS"); args != "" {
		os.Args = append([]string{"standin"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// standin runs `standin ARGS` with env added and waits for its log line;
// the address it listens on. At the end of the test it gets SIGTERM and
// must exit 0, promptly, saying so.
func standin(t *testing.T, args string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{"STANDIN_TEST_ARGS=" + args}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	if !lines.Scan() {
		cmd.Process.Kill()
		t.Fatalf("%s: no log line", args)
	}
	first := lines.Text()
	m := regexp.MustCompile(`^\S+ \(gantry stand-in\): listening on (127\.0\.0\.1:\d+)$`).FindStringSubmatch(first)
	if m == nil {
		cmd.Process.Kill()
		t.Fatalf("%s: first log line %q", args, first)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(stderr)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: on SIGTERM: %v (%s)", args, err, rest)
			}
			if !strings.Contains(string(rest), "terminated: exiting") {
				t.Errorf("%s: log after SIGTERM: %q", args, rest)
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			t.Errorf("%s: still running 5 s after SIGTERM", args)
		}
	})
	return m[1]
}

// exchange sends request on a new connection to addr and reads until the
// answer ends with end (or the connection closes).
func exchange(t *testing.T, addr, request, end string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for !strings.HasSuffix(string(got), end) {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
	}
	return string(got)
}

func TestMemcached(t *testing.T) {
	// Its own flags, as a Pod would give them (-l, -p), beside the example's.
	addr := standin(t, "memcached --memory-limit=64 -o modern -v -l 127.0.0.1 -p 0", "MEMCACHED_VERSION=1.6.26")
	if got := exchange(t, addr, "version\r\n", "\r\n"); got != "VERSION 1.6.26-gantry-stand-in\r\n" {
		t.Errorf("version: %q", got)
	}
	got := exchange(t, addr, "set greeting 5 0 5\r\nhello\r\nget greeting missing\r\n", "END\r\n")
	if got != "STORED\r\nVALUE greeting 5 5\r\nhello\r\nEND\r\n" {
		t.Errorf("set, get: %q", got)
	}
	stats := exchange(t, addr, "stats\r\n", "END\r\n")
	for _, want := range []string{"STAT curr_items 1\r\n", "STAT get_hits 1\r\n", "STAT get_misses 1\r\n", "STAT version 1.6.26-gantry-stand-in\r\n"} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats lacks %q: %q", want, stats)
		}
	}
	if got := exchange(t, addr, "flush_all\r\n", "\r\n"); got != "ERROR\r\n" {
		t.Errorf("an unknown command: %q", got)
	}
}

func TestRedisLeader(t *testing.T) {
	addr := standin(t, "redis-server --bind 127.0.0.1 --port 0", "REDIS_VERSION=6.0.5")
	// A client's RESP array, then an inline command as `nc` sends it.
	if got := exchange(t, addr, "*1\r\n$4\r\nPING\r\n", "\r\n"); got != "+PONG\r\n" {
		t.Errorf("PING: %q", got)
	}
	if got := exchange(t, addr, "PING\r\n", "\r\n"); got != "+PONG\r\n" {
		t.Errorf("inline PING: %q", got)
	}
	got := exchange(t, addr, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nQUIT\r\n", "+OK\r\n$2\r\nv1\r\n+OK\r\n")
	if got != "+OK\r\n$2\r\nv1\r\n+OK\r\n" {
		t.Errorf("SET, GET, QUIT: %q", got)
	}
	if info := exchange(t, addr, "INFO\r\n", "connected_slaves:0\r\n\r\n"); !strings.Contains(info, "redis_version:6.0.5-gantry-stand-in\r\n") || !strings.Contains(info, "role:master\r\n") {
		t.Errorf("INFO: %q", info)
	}
	if got := exchange(t, addr, "FLUSHALL\r\n", "\r\n"); got != "-ERR unknown command 'FLUSHALL'\r\n" {
		t.Errorf("an unknown command: %q", got)
	}
}

func TestRedisFollower(t *testing.T) {
	addr := standin(t, "gb-redis-follower", "STANDIN_LISTEN=127.0.0.1:0",
		"GET_HOSTS_FROM=env", "REDIS_LEADER_SERVICE_HOST=gb-redis-leader")
	if got := exchange(t, addr, "PING\r\n", "\r\n"); got != "+PONG\r\n" {
		t.Errorf("PING: %q", got)
	}
	if info := exchange(t, addr, "INFO replication\r\n", "master_link_status:down\r\n\r\n"); !strings.Contains(info, "role:slave\r\nmaster_host:gb-redis-leader\r\nmaster_port:6379\r\n") {
		t.Errorf("INFO: %q", info)
	}
	if got := exchange(t, addr, "SET k v\r\n", "\r\n"); !strings.HasPrefix(got, "-READONLY ") {
		t.Errorf("SET on a replica: %q", got)
	}
}

func TestFrontend(t *testing.T) {
	addr := standin(t, "gb-frontend", "STANDIN_LISTEN=127.0.0.1:0", "REDIS_LEADER_SERVICE_HOST=gb-redis-leader")
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, `redis leader "gb-redis-leader"`) {
		t.Errorf("GET /: %d %q", code, body)
	}
	if code, _ := get("/missing"); code != 404 {
		t.Errorf("GET /missing: %d", code)
	}
}

func TestPostgres(t *testing.T) {
	addr := standin(t, "postgres -h 127.0.0.1 -p 0", "PG_MAJOR=16")
	// What libpq sends first (sslmode=prefer): an SSLRequest; the answer N
	// means no TLS. Then a protocol 3.0 startup message.
	packet := func(code uint32, body string) string {
		b := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(8+len(body))), code)
		return string(b) + body
	}
	startup := packet(3<<16, "user\x00postgres\x00\x00")
	got := exchange(t, addr, packet(80877103, "")+startup, "\x00\x00")
	if !strings.HasPrefix(got, "NE") || !strings.Contains(got, "C0A000\x00") ||
		!strings.Contains(got, "PostgreSQL 16-gantry-stand-in") {
		t.Errorf("SSLRequest, startup: %q", got)
	}
}

func TestDefaults(t *testing.T) {
	for _, c := range []struct {
		argv []string
		name string
		addr string
	}{
		{[]string{"/usr/local/bin/memcached", "--memory-limit=64", "-o", "modern", "-v"}, "memcached", ":11211"},
		{[]string{"memcached", "--port=11311"}, "memcached", ":11311"},
		{[]string{"/usr/local/bin/redis-server"}, "redis-server", ":6379"},
		{[]string{"/usr/local/bin/postgres"}, "postgres", ":5432"},
		{[]string{"standin", "postgres", "-p", "5433"}, "postgres", ":5433"},
	} {
		name, args := command(c.argv)
		if addr := servers[name].listen(args); name != c.name || addr != c.addr {
			t.Errorf("%v: %s on %s, want %s on %s", c.argv, name, addr, c.name, c.addr)
		}
	}
	t.Setenv("PGPORT", "6543")
	if addr := postgresListen(nil); addr != ":6543" {
		t.Errorf("PGPORT=6543: %s", addr)
	}
	if got := fmt.Sprint(servers["gb-frontend"].listen(nil)); got != ":80" {
		t.Errorf("gb-frontend: %s", got)
	}
}
