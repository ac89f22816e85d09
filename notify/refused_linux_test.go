package notify

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/marker"
)

// TestBarrierAnswersRefused is issue 12 finding 2 at the socket: a datagram
// the server refuses (a 257-byte session id, a session id beginning with
// '-', a malformed line) makes the same sender's next barrier carry
// Refused, which a supervisor answers with Nack, and Client.Barrier returns
// ErrBarrierRefused; the barrier after that is clean again.
func TestBarrierAnswersRefused(t *testing.T) {
	t.Parallel()
	s := serve(t, Config{}, func(m marker.Message) {
		if m.Fd == nil {
			return
		}
		if m.Refused {
			Nack(m.Fd)
		} else {
			Ack(m.Fd)
		}
	})
	ctx := context.Background()
	c := &Client{Socket: s.Path()}
	defer c.Close()
	for name, bad := range map[string]string{
		"257-byte session": "X_SUPERVISE_SESSION=" + strings.Repeat("s", MaxIDLen+1) + "\nX_SUPERVISE_EVENT=turn-begin",
		"dash session":     "X_SUPERVISE_SESSION=--evil\nX_SUPERVISE_EVENT=turn-begin",
		"malformed":        "X_SUPERVISE_SESSION=s\nno equals sign",
		"unknown event":    "X_SUPERVISE_SESSION=s\nX_SUPERVISE_EVENT=explode",
	} {
		if err := c.Notify(ctx, bad); err != nil {
			t.Fatal(err)
		}
		if err := c.Barrier(ctx, 0); !errors.Is(err, ErrBarrierRefused) {
			t.Errorf("%s: barrier returned %v, want ErrBarrierRefused", name, err)
		}
		if err := c.Barrier(ctx, 0); err != nil {
			t.Errorf("%s: the next barrier returned %v, want nil", name, err)
		}
	}
}
