package notify

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/supervise-dev/supervise/marker"
)

// BenchmarkServeHeartbeats measures datagrams per second through a real
// socket: senders write WATCHDOG=1 on connected sockets as fast as the
// server drains its queue.
func BenchmarkServeHeartbeats(b *testing.B) {
	for _, senders := range []int{1, 2} {
		for _, payload := range []string{"WATCHDOG=1", "WATCHDOG=1\nX_SUPERVISE_SESSION=0196b4a4-6f0e-7cc0-a2c5-3f6d2c8e9b10"} {
			name := fmt.Sprintf("senders=%d/", senders)
			if len(payload) > 10 {
				name += "session"
			} else {
				name += "plain"
			}
			b.Run(name, func(b *testing.B) {
				n := b.N
				done := make(chan struct{})
				got := 0
				s := serve(b, Config{}, func(m marker.Message) {
					if got++; got == n {
						close(done)
					}
				})
				conns := make([]*net.UnixConn, senders)
				for i := range conns {
					conns[i] = dial(b, s)
				}
				msg := []byte(payload)
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for i, c := range conns {
					count := n / senders
					if i == 0 {
						count += n % senders
					}
					wg.Go(func() {
						for range count {
							if _, err := c.Write(msg); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				<-done
				b.StopTimer()
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
				if d := s.Stats().Dropped.Total(); d != 0 {
					b.Errorf("%d datagrams dropped", d)
				}
			})
		}
	}
}

// BenchmarkBarrierRoundTrip measures Client.Barrier against a handler that
// closes the fd at once: new socket, pipe, SCM_RIGHTS, close, EOF.
func BenchmarkBarrierRoundTrip(b *testing.B) {
	s := serve(b, Config{}, func(m marker.Message) {
		if m.Fd != nil {
			Ack(m.Fd)
		}
	})
	c := &Client{Socket: s.Path()}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Barrier(ctx, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientHeartbeat measures one Client.Heartbeat, which opens a
// new socket per message.
func BenchmarkClientHeartbeat(b *testing.B) {
	s := serve(b, Config{}, func(marker.Message) {})
	c := &Client{Socket: s.Path()}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Heartbeat(ctx, "s1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAckPipe is the answer to one barrier whose fd is a pipe, the
// common case (the client's own pipe): the fd's type checked, the byte
// written without blocking, the fd closed; by an Answerer, as supervise
// answers (Ack alone makes and closes its relay pipe each time).
func BenchmarkAckPipe(b *testing.B) {
	var a Answerer
	defer a.Close()
	b.ReportAllocs()
	buf := make([]byte, 1)
	b.StopTimer()
	for range b.N {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := a.Ack(w); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := r.Read(buf); err != nil || buf[0] != AckByte {
			b.Fatal(err)
		}
		r.Close()
	}
}
