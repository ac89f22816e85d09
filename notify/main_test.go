package notify

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
)

// helperEnv names the helper command a re-executed test binary runs
// instead of the tests (os/exec's helper-process pattern).
const helperEnv = "NOTIFY_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	os.Exit(m.Run())
}

// helper runs one helper command and returns the exit code.
func helper(name string) int {
	switch name {
	case "closed-after-stdin":
		// Wait for the parent to learn our pid, report a session closed,
		// and exit when stdin closes.
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c, err := FromEnv()
		if err == nil {
			err = c.Closed(context.Background(), "helper")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// Stay alive until the parent has seen the datagram handled: a
		// sender that is gone by then is dropped (SO_PASSPIDFD).
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "beat-mark-exit":
		// Send a heartbeat, then a marker, and exit at once: the parent
		// reads them only after this process was reaped.
		c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: os.Getenv("NOTIFY_SOCKET"), Net: "unixgram"})
		if err == nil {
			_, err = c.Write([]byte("WATCHDOG=1"))
		}
		if err == nil {
			_, err = c.Write([]byte("X_SUPERVISE_EVENT=closed\nX_SUPERVISE_SESSION=gone"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
	return 2
}
