package apiproxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/apiproxy"
)

// The proxy's documented memory ceiling (docs/proxy.md), measured as a
// real process's peak RSS (VmHWM): a proxy served by this test binary as
// a child, attacked from the parent.
const rssCeiling = 200 << 20

// sseFlood is the size of the stream of the sse-flood attack.
const sseFlood = 600 << 20

// TestMemoryCeiling: 30 connections each holding a body of 32 MiB minus
// one byte, stalled before its last byte, with no upstream at all (issue
// 31's R3: 1265 MiB before the shared budget); then a flood of requests
// with fresh session ids, each opening a turn; then an upstream that
// streams 600 MB of data lines with no blank line to end an event (R4:
// 323-381 MiB before the bound was checked before the append). The
// child's peak RSS stays under rssCeiling.
func TestMemoryCeiling(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: sends up to 1 GB over loopback")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory: the ceiling is measured without it")
	}
	for _, attack := range []string{"stalled-bodies", "session-flood", "sse-flood", "header-flood"} {
		t.Run(attack, func(t *testing.T) {
			child := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$", "-test.v")
			child.Env = append(os.Environ(), "APIPROXY_MEMORY_CHILD="+attack)
			stdout, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdin, err := child.StdinPipe() // the child ends when it closes
			if err != nil {
				t.Fatal(err)
			}
			child.Stderr = os.Stderr
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close()
				child.Wait()
			}()
			sc := bufio.NewScanner(stdout)
			var base string
			for sc.Scan() {
				if u, ok := strings.CutPrefix(sc.Text(), "BASE "); ok {
					base = u
					break
				}
			}
			go io.Copy(io.Discard, stdout)
			if base == "" {
				t.Fatal("the child gave no base URL")
			}
			before := vm(t, child.Process.Pid, "VmRSS")
			switch attack {
			case "stalled-bodies":
				stallBodies(t, base)
			case "session-flood":
				sessionFlood(t, base)
			case "header-flood":
				headerFlood(t, base)
			case "sse-flood":
				req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(`{"stream":true,"tools":[{"name":"Bash"}]}`))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n < sseFlood {
					t.Fatalf("%d bytes of the stream passed, want %d", n, sseFlood)
				}
			}
			peak := vm(t, child.Process.Pid, "VmHWM")
			t.Logf("summary memory %s: RSS %d MiB before, peak %d MiB under the attack (ceiling %d MiB)",
				attack, before>>20, peak>>20, rssCeiling>>20)
			if peak >= rssCeiling {
				t.Errorf("peak RSS %d MiB, over the ceiling of %d MiB", peak>>20, rssCeiling>>20)
			}
		})
	}
}

// stallBodies opens 30 connections, each announcing a body of 32 MiB - 1
// bytes and sending all of it but the last byte, and returns once every
// write ended (the proxy took the bytes or closed the connection). The
// connections stay open until the test ends.
func stallBodies(t *testing.T, base string) {
	host, path, _ := strings.Cut(strings.TrimPrefix(base, "http://"), "/")
	const size = 32<<20 - 1
	body := make([]byte, size-1)
	var wg sync.WaitGroup
	for range 30 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(c, "POST /%s/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, size)
			c.Write(body) // an error: the proxy closed it (forwarded unread, no upstream)
		}()
	}
	wg.Wait()
}

// headerFlood opens 2000 connections, each sending 60 KiB of one
// request's headers without the blank line that ends them, and returns
// once every write ended. The connections stay open until the test ends.
func headerFlood(t *testing.T, base string) {
	host, path, _ := strings.Cut(strings.TrimPrefix(base, "http://"), "/")
	hdr := fmt.Sprintf("POST /%s/v1/messages HTTP/1.1\r\nHost: x\r\n", path)
	for i := 0; len(hdr) < 60<<10; i++ {
		hdr += fmt.Sprintf("X-Flood-%d: %s\r\n", i, strings.Repeat("h", 200))
	}
	var wg sync.WaitGroup
	for range 2000 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Write([]byte(hdr))
		}()
	}
	wg.Wait()
}

// sessionFlood sends 20000 main requests, each with a fresh session id,
// from 8 clients at once.
func sessionFlood(t *testing.T, base string) {
	body := `{"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"x"}]}`
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2500 {
				req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(body))
				req.Header.Set("X-Claude-Code-Session-Id", fmt.Sprintf("flood-%d-%d", w, i))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
}

// vm reads one field of /proc/PID/status, in bytes.
func vm(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestMemoryChild is the child of TestMemoryCeiling: a proxy whose
// Anthropic upstream is nothing (stalled-bodies: a closed port) or a
// quick stand-in (session-flood), serving until its stdin closes.
func TestMemoryChild(t *testing.T) {
	attack := os.Getenv("APIPROXY_MEMORY_CHILD")
	if attack == "" {
		t.Skip("the child of TestMemoryCeiling")
	}
	upstream := "http://127.0.0.1:1"
	if attack == "session-flood" {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n"+
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":30}}\n\n"+
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		}))
		defer up.Close()
		upstream = up.URL
	}
	if attack == "sse-flood" {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			line := []byte("data:x\n")
			chunk := []byte(strings.Repeat(string(line), 1<<17))
			for sent := 0; sent < sseFlood; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}))
		defer up.Close()
		upstream = up.URL
	}
	events := make(chan apiproxy.Event, 1024)
	go func() {
		for range events { // the supervisor's loop, taking events as they come
		}
	}()
	p, err := apiproxy.Start(apiproxy.Config{
		Env: func(k string) string {
			if k == "ANTHROPIC_BASE_URL" {
				return upstream
			}
			return ""
		},
		Sink: func(e apiproxy.Event) {
			select {
			case events <- e:
			default:
			}
		},
		StreamStall: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fmt.Printf("BASE %s\n", p.URL(apiproxy.Anthropic))
	io.Copy(io.Discard, os.Stdin)
}
