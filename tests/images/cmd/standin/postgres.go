package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"os"
	"time"
)

// postgresListen is where postgres listens: `-h ADDR` (all addresses, as
// the upstream image configures it) and `-p PORT` (PGPORT, else 5432).
func postgresListen(args []string) string {
	port := os.Getenv("PGPORT")
	if port == "" {
		port = "5432"
	}
	return net.JoinHostPort(flagValue(args, "", "-h"), flagValue(args, port, "-p"))
}

// Startup packet codes of the PostgreSQL wire protocol.
const (
	pgProtocol3     = 3<<16 | 0
	pgSSLRequest    = 80877103
	pgGSSENCRequest = 80877104
)

// servePostgres answers the start of the wire protocol: no to SSL and GSS
// encryption, and to a startup message an ErrorResponse saying that this
// server runs no SQL. That is enough for pg_isready and clients to see a
// server that is up (only SQLSTATE 57P03 would mean "not yet").
func servePostgres(ln net.Listener, _ []string) error {
	return accept(ln, func(conn net.Conn) {
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		r := bufio.NewReader(conn)
		for {
			var header [8]byte
			if _, err := io.ReadFull(r, header[:]); err != nil {
				return
			}
			size := binary.BigEndian.Uint32(header[:4])
			if size < 8 || size > 10000 {
				return
			}
			if _, err := r.Discard(int(size) - 8); err != nil {
				return
			}
			switch binary.BigEndian.Uint32(header[4:]) {
			case pgSSLRequest, pgGSSENCRequest:
				conn.Write([]byte{'N'})
			case pgProtocol3:
				conn.Write(postgresError("0A000", "this is a stand-in for PostgreSQL "+version("postgres")+" built by Gantry: it runs no SQL"))
				return
			default:
				return
			}
		}
	})
}

// postgresError is an ErrorResponse message (FATAL, SQLSTATE code).
func postgresError(code, message string) []byte {
	var body []byte
	for _, f := range [][2]string{{"S", "FATAL"}, {"V", "FATAL"}, {"C", code}, {"M", message}} {
		body = append(append(append(body, f[0]...), f[1]...), 0)
	}
	body = append(body, 0)
	msg := []byte{'E', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[1:], uint32(len(body)+4))
	return append(msg, body...)
}
