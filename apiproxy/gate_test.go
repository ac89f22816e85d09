package apiproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// dialMany opens n connections to the proxy's port that send nothing.
func dialMany(t *testing.T, p *Proxy, n int) []net.Conn {
	t.Helper()
	host, _, _ := strings.Cut(strings.TrimPrefix(p.URL(Anthropic), "http://"), "/")
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	return conns
}

// isOpen reports whether the proxy still holds c open: a read waits
// (nothing comes) rather than ending.
func isOpen(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// countOpen counts the connections of cs the proxy still holds open.
func countOpen(cs []net.Conn) int {
	var wg sync.WaitGroup
	var n atomic.Int64
	for _, c := range cs {
		wg.Go(func() {
			if isOpen(c) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

// closedByProxy waits until the proxy closed c (a read ends with EOF or
// a reset), and returns what c read.
func closedByProxy(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	b, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the proxy did not close the connection in %v (read %q)", wait, b)
	}
	return string(b)
}

// agentCall is the agent's model call on a connection of its own.
func agentCall(t *testing.T, p *Proxy) {
	t.Helper()
	c := &http.Client{Timeout: wait, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	req, _ := http.NewRequest(http.MethodPost, p.URL(Anthropic)+"/v1/messages", strings.NewReader(string(claudeRequest(true))))
	req.Header.Set("X-Claude-Code-Session-Id", "s1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("the agent's call failed: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the agent's call: %s", resp.Status)
	}
}

// TestStrangersCostNothing (issue 46 B6): another local user, without the
// secret, holds 300 idle connections to the proxy's port (it served 256
// at a time, each for up to 30 s before its headers: the agent's call
// waited in the kernel's queue and timed out). Now, with a first-bytes
// deadline of an hour so that none of them is closed for its silence,
// the agent's call succeeds while all 300 stay open; connections whose
// first bytes differ from the secret prefix, sent slowly, byte by byte,
// are answered 404 as soon as a byte differs, and closed; and 600
// more silent ones fill the gate, which closes the oldest to make room:
// the agent's call succeeds again.
func TestStrangersCostNothing(t *testing.T) {
	api := mockapi.Anthropic(nil)
	defer api.Close()
	p, _ := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{PrefixTimeout: time.Hour})
	_, path, _ := strings.Cut(strings.TrimPrefix(p.URL(Anthropic), "http://"), "/")
	secret, _, _ := strings.Cut(path, "/")
	idle := dialMany(t, p, 300)
	// Slow strangers: each sends a request line byte by byte, that begins
	// like the agent's and then differs: the proxy reads no further.
	wrong := []string{"POST /" + secret[:8] + "x", "GET /x", "POST /" + strings.ToUpper(secret), "\x16\x03\x01", "post /",
		"ABCDEFGHIJKLMNOPQ /" + secret + "/", " /" + secret + "/"}
	slow := dialMany(t, p, len(wrong))
	for i, c := range slow {
		for j := range len(wrong[i]) {
			// The proxy may close it once a byte differed: an error here
			// is no failure, the answer read below says.
			if _, err := c.Write([]byte{wrong[i][j]}); err != nil {
				break
			}
		}
		c.(*net.TCPConn).CloseWrite()
	}
	// And strangers that send it all at once.
	whole := dialMany(t, p, 2)
	for i, c := range whole {
		io.WriteString(c, wrong[len(wrong)-2+i])
		c.(*net.TCPConn).CloseWrite()
	}
	slow, wrong = append(slow, whole...), append(wrong, wrong[len(wrong)-2:]...)
	// A stranger that sent a true beginning and then holds: it waits at
	// the gate, as the silent ones do.
	holding := dialMany(t, p, 1)[0]
	io.WriteString(holding, "POST /"+secret[:8])

	agentCall(t, p)
	if open := countOpen(idle); open != len(idle) || !isOpen(holding) {
		t.Errorf("%d of %d silent connections open, holding open %v: the agent must have succeeded while they all held",
			open, len(idle), isOpen(holding))
	}
	for i, c := range slow {
		if got := closedByProxy(t, c); !strings.HasPrefix(got, "HTTP/1.1 404 ") {
			t.Errorf("%q: answered %q, want a 404", wrong[i], got)
		}
	}
	if n := len(api.Requests()); n != 1 {
		t.Errorf("%d requests upstream, want the agent's one", n)
	}

	// 600 more: the gate holds maxAtGate, closing the oldest for the new.
	more := dialMany(t, p, 600)
	agentCall(t, p)
	if closed := len(idle) + len(more) - countOpen(append(idle, more...)); closed < len(idle)+len(more)-maxAtGate {
		t.Errorf("%d of %d silent connections closed, want at least %d (the gate holds %d)",
			closed, len(idle)+len(more), len(idle)+len(more)-maxAtGate, maxAtGate)
	}
}

// TestStrangerDeadline: a connection that does not send the secret
// prefix within PrefixTimeout is closed without an answer; one that
// sends its request in pieces, the prefix within the deadline, is served.
func TestStrangerDeadline(t *testing.T) {
	api := mockapi.Anthropic(nil)
	defer api.Close()
	p, _ := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{PrefixTimeout: 200 * time.Millisecond})
	for _, c := range dialMany(t, p, 10) {
		if got := closedByProxy(t, c); got != "" {
			t.Errorf("a silent connection was answered %q", got)
		}
	}
	// The agent's request, split: first the request line, then the rest.
	host, path, _ := strings.Cut(strings.TrimPrefix(p.URL(Anthropic), "http://"), "/")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := string(claudeRequest(false))
	io.WriteString(c, "POST /"+path+"/v1/messages HTTP/1.1\r\n")
	io.WriteString(c, "Host: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body)
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the agent's split request: %v %v", resp, err)
	}
}
