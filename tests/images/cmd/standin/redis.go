package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// redisListen is where redis-server listens: `--bind ADDR` (all addresses
// by default) and `--port PORT` (6379), as the real one.
func redisListen(args []string) string {
	return net.JoinHostPort(flagValue(args, "", "--bind"), flagValue(args, "6379", "--port"))
}

// redisStore is the stand-in's keyspace: RESP (and inline) commands PING,
// ECHO, INFO, GET, SET and QUIT over a map. A replica (`--replicaof HOST
// PORT`) says whose replica it is in INFO but does not replicate, and
// refuses writes as a real replica does.
type redisStore struct {
	mu      sync.Mutex
	keys    map[string]string
	replica string // HOST PORT of the leader; "" for a leader
}

func serveRedis(ln net.Listener, args []string) error {
	s := &redisStore{keys: map[string]string{}}
	for i, a := range args {
		if (a == "--replicaof" || a == "--slaveof") && i+2 < len(args) {
			s.replica = args[i+1] + " " + args[i+2]
			log.Printf("replica of %s (the stand-in does not replicate)", s.replica)
		}
	}
	return accept(ln, s.handle)
}

// serveFollower is the Guestbook's gb-redis-follower: its run.sh starts
// `redis-server --replicaof $REDIS_LEADER_SERVICE_HOST 6379` when
// GET_HOSTS_FROM=env, and replicates from host redis-leader otherwise.
func serveFollower(ln net.Listener, args []string) error {
	leader := "redis-leader"
	if os.Getenv("GET_HOSTS_FROM") == "env" {
		leader = os.Getenv("REDIS_LEADER_SERVICE_HOST")
	}
	return serveRedis(ln, append([]string{"--replicaof", leader, "6379"}, args...))
}

func (s *redisStore) handle(conn net.Conn) {
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	for {
		args, err := readRedisCommand(r)
		if err != nil {
			return
		}
		if len(args) == 0 {
			continue
		}
		quit := s.command(args, w)
		if w.Flush() != nil || quit {
			return
		}
	}
}

// readRedisCommand reads a RESP array of bulk strings (what clients send)
// or an inline command (what `nc` sends).
func readRedisCommand(r *bufio.Reader) ([]string, error) {
	line, err := redisLine(r)
	if err != nil || !strings.HasPrefix(line, "*") {
		return strings.Fields(line), err
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n > 1024 {
		return nil, fmt.Errorf("bad array header %q", line)
	}
	args := make([]string, n)
	for i := range args {
		header, err := redisLine(r)
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimPrefix(header, "$"))
		if !strings.HasPrefix(header, "$") || err != nil || size < 0 || size > 1<<20 {
			return nil, fmt.Errorf("bad bulk header %q", header)
		}
		data := make([]byte, size+2)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, err
		}
		args[i] = string(data[:size])
	}
	return args, nil
}

func redisLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// command answers one command; true when the client is done.
func (s *redisStore) command(args []string, w *bufio.Writer) bool {
	bulk := func(v string) { fmt.Fprintf(w, "$%d\r\n%s\r\n", len(v), v) }
	name := strings.ToUpper(args[0])
	switch {
	case name == "PING" && len(args) == 1:
		fmt.Fprint(w, "+PONG\r\n")
	case name == "PING" && len(args) == 2, name == "ECHO" && len(args) == 2:
		bulk(args[1])
	case name == "INFO":
		info := "# Server\r\nredis_version:" + version("redis-server") + "\r\n# Replication\r\n"
		if s.replica == "" {
			info += "role:master\r\nconnected_slaves:0\r\n"
		} else {
			host, port, _ := strings.Cut(s.replica, " ")
			info += "role:slave\r\nmaster_host:" + host + "\r\nmaster_port:" + port + "\r\nmaster_link_status:down\r\n"
		}
		bulk(info)
	case name == "GET" && len(args) == 2:
		s.mu.Lock()
		v, ok := s.keys[args[1]]
		s.mu.Unlock()
		if ok {
			bulk(v)
		} else {
			fmt.Fprint(w, "$-1\r\n")
		}
	case name == "SET" && len(args) == 3 && s.replica != "":
		fmt.Fprint(w, "-READONLY You can't write against a read only replica.\r\n")
	case name == "SET" && len(args) == 3:
		s.mu.Lock()
		s.keys[args[1]] = args[2]
		s.mu.Unlock()
		fmt.Fprint(w, "+OK\r\n")
	case name == "QUIT":
		fmt.Fprint(w, "+OK\r\n")
		return true
	case name == "PING", name == "ECHO", name == "GET", name == "SET":
		fmt.Fprintf(w, "-ERR wrong number of arguments for '%s' command\r\n", strings.ToLower(name))
	default:
		fmt.Fprintf(w, "-ERR unknown command '%s'\r\n", args[0])
	}
	return false
}
