package engine

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// COM_STATISTICS, which `mysqladmin status` and the mysql client's `status` send: vitess answers it
// "command handling not implemented yet" (error 1047), and mysqladmin fails. The server's listener hands
// out connections that answer it themselves, as MySQL does, with a one-line status string:
//
//	Uptime: 42  Threads: 2  Questions: 17  Slow queries: 0  Opens: 0  Flush tables: 1  Open tables: 0  Queries per second avg: 0.404
//
// A connection watches the packets its client sends; a command packet (sequence number 0) whose payload
// is the single byte 0x09 never reaches vitess. Everything else passes through unchanged. (Questions
// counts the commands the server received, Threads the open connections.)

const comStatistics = 0x09

type statsListener struct {
	net.Listener
	start     time.Time
	questions atomic.Int64
	threads   atomic.Int64
}

func newStatsListener(ln net.Listener) *statsListener {
	return &statsListener{Listener: ln, start: time.Now()}
}

func (l *statsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.threads.Add(1)
	return &statsConn{Conn: c, l: l}, nil
}

// status is the COM_STATISTICS answer.
func (l *statsListener) status() string {
	up := time.Since(l.start)
	q := l.questions.Load()
	secs := int64(up.Seconds())
	qps := 0.0
	if up > 0 {
		qps = float64(q) / up.Seconds()
	}
	return fmt.Sprintf("Uptime: %d  Threads: %d  Questions: %d  Slow queries: 0  Opens: 0  Flush tables: 1  Open tables: 0  Queries per second avg: %.3f",
		secs, l.threads.Load(), q, qps)
}

// statsConn answers COM_STATISTICS and passes every other byte through.
type statsConn struct {
	net.Conn
	l *statsListener

	wmu    sync.Mutex // the answer and vitess's writes never interleave
	buf    [64 << 10]byte
	out    []byte // bytes for vitess, not yet read
	outBuf []byte
	hdr    []byte // a packet's header (and first payload byte), held back until it is known
	left   int    // payload bytes of the current packet still to pass through
	err    error  // the read error after the bytes before it
	closed atomic.Bool
}

// NetConn lets underlyingConn reach the socket (for the disconnect watch).
func (c *statsConn) NetConn() net.Conn { return c.Conn }

func (c *statsConn) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		n, err := c.Conn.Read(c.buf[:])
		if ferr := c.feed(c.buf[:n]); ferr != nil {
			return 0, ferr
		}
		if err != nil {
			c.err = err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	if len(c.out) == 0 {
		c.out = c.outBuf[:0]
	}
	return n, nil
}

// feed passes b on to vitess, holding back each packet's header until it shows whether the packet is a
// COM_STATISTICS, which it answers instead.
func (c *statsConn) feed(b []byte) error {
	if c.out == nil {
		c.outBuf = make([]byte, 0, len(c.buf))
		c.out = c.outBuf[:0]
	}
	for len(b) > 0 {
		if c.left > 0 {
			k := min(c.left, len(b))
			c.out = append(c.out, b[:k]...)
			c.left -= k
			b = b[k:]
			continue
		}
		need := 4
		if len(c.hdr) >= 4 {
			length := int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
			if length == 1 && c.hdr[3] == 0 {
				need = 5
			}
		}
		if len(c.hdr) < need {
			c.hdr = append(c.hdr, b[0])
			b = b[1:]
			if len(c.hdr) < need {
				continue
			}
		}
		if len(c.hdr) == 4 {
			length := int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
			if length == 1 && c.hdr[3] == 0 {
				continue // one more byte decides
			}
			if c.hdr[3] == 0 {
				c.l.questions.Add(1)
			}
			c.out = append(c.out, c.hdr...)
			c.hdr = c.hdr[:0]
			c.left = length
			continue
		}
		// A one-byte command.
		if c.hdr[4] == comStatistics {
			c.hdr = c.hdr[:0]
			if err := c.answerStatistics(); err != nil {
				return err
			}
			continue
		}
		c.l.questions.Add(1)
		c.out = append(c.out, c.hdr...)
		c.hdr = c.hdr[:0]
	}
	return nil
}

func (c *statsConn) answerStatistics() error {
	s := c.l.status()
	pkt := make([]byte, 4, 4+len(s))
	pkt[0], pkt[1], pkt[2], pkt[3] = byte(len(s)), byte(len(s)>>8), byte(len(s)>>16), 1
	pkt = append(pkt, s...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.Conn.Write(pkt)
	return err
}

func (c *statsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Conn.Write(p)
}

func (c *statsConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.threads.Add(-1)
	}
	return c.Conn.Close()
}
