package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// memcachedListen is where memcached listens: `-l/--listen ADDR` (all
// addresses by default) and `-p/--port PORT` (11211), as the real one.
func memcachedListen(args []string) string {
	return net.JoinHostPort(flagValue(args, "", "-l", "--listen"), flagValue(args, "11211", "-p", "--port"))
}

// memcachedCache is the stand-in's cache: memcached's text protocol for
// version, stats, get, set, delete and quit, over a map (no expiry, no
// memory limit).
type memcachedCache struct {
	mu           sync.Mutex
	items        map[string]memcachedItem
	started      time.Time
	conns        atomic.Int64
	gets, hits   atomic.Int64
	sets, misses atomic.Int64
}

type memcachedItem struct {
	flags string
	data  []byte
}

func serveMemcached(ln net.Listener, _ []string) error {
	c := &memcachedCache{items: map[string]memcachedItem{}, started: time.Now()}
	return accept(ln, c.handle)
}

func (c *memcachedCache) handle(conn net.Conn) {
	c.conns.Add(1)
	defer c.conns.Add(-1)
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			fmt.Fprint(w, "ERROR\r\n")
		} else if quit := c.command(fields, r, w); quit {
			return
		}
		if w.Flush() != nil {
			return
		}
	}
}

// command answers one command line; true when the client is done.
func (c *memcachedCache) command(fields []string, r *bufio.Reader, w *bufio.Writer) bool {
	switch fields[0] {
	case "version":
		fmt.Fprintf(w, "VERSION %s\r\n", version("memcached"))
	case "stats":
		c.mu.Lock()
		items := len(c.items)
		c.mu.Unlock()
		for _, s := range [][2]any{
			{"pid", os.Getpid()}, {"uptime", int(time.Since(c.started).Seconds())},
			{"time", time.Now().Unix()}, {"version", version("memcached")},
			{"curr_connections", c.conns.Load()}, {"curr_items", items},
			{"cmd_get", c.gets.Load()}, {"cmd_set", c.sets.Load()},
			{"get_hits", c.hits.Load()}, {"get_misses", c.misses.Load()},
		} {
			fmt.Fprintf(w, "STAT %s %v\r\n", s[0], s[1])
		}
		fmt.Fprint(w, "END\r\n")
	case "get", "gets":
		c.mu.Lock()
		for _, key := range fields[1:] {
			c.gets.Add(1)
			if it, ok := c.items[key]; ok {
				c.hits.Add(1)
				fmt.Fprintf(w, "VALUE %s %s %d\r\n%s\r\n", key, it.flags, len(it.data), it.data)
			} else {
				c.misses.Add(1)
			}
		}
		c.mu.Unlock()
		fmt.Fprint(w, "END\r\n")
	case "set":
		// set KEY FLAGS EXPTIME BYTES [noreply], then BYTES of data and \r\n.
		size, err := strconv.Atoi(field(fields, 4))
		if len(fields) < 5 || err != nil || size < 0 || size > 1<<20 {
			fmt.Fprint(w, "CLIENT_ERROR bad command line format\r\n")
			return false
		}
		data := make([]byte, size+2)
		if _, err := io.ReadFull(r, data); err != nil {
			return true
		}
		c.mu.Lock()
		c.items[fields[1]] = memcachedItem{flags: fields[2], data: data[:size]}
		c.mu.Unlock()
		c.sets.Add(1)
		if field(fields, 5) != "noreply" {
			fmt.Fprint(w, "STORED\r\n")
		}
	case "delete":
		c.mu.Lock()
		_, ok := c.items[field(fields, 1)]
		delete(c.items, field(fields, 1))
		c.mu.Unlock()
		if ok {
			fmt.Fprint(w, "DELETED\r\n")
		} else {
			fmt.Fprint(w, "NOT_FOUND\r\n")
		}
	case "quit":
		return true
	default:
		fmt.Fprint(w, "ERROR\r\n")
	}
	return false
}

// field is fields[i], or "" past the end.
func field(fields []string, i int) string {
	if i < len(fields) {
		return fields[i]
	}
	return ""
}
