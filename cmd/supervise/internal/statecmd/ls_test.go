package statecmd

import (
	"testing"
	"time"
)

func TestShortDurationAndCount(t *testing.T) {
	for d, want := range map[time.Duration]string{-time.Second: "0s", 45 * time.Second: "45s", 12 * time.Minute: "12m",
		3*time.Hour + 5*time.Minute: "3h05m", 52 * time.Hour: "2d04h"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 12345: "12.3k", 4_500_000: "4.5M", 1_200_000_000: "1.2G", 1 << 62: "5e+18"} {
		if got := shortCount(n); got != want || len(got) > 6 {
			t.Errorf("shortCount(%d) = %q, want %q", n, got, want)
		}
	}
	if got := clip("a\x1b[2Jname-that-is-long", 10); got != "a?[2Jname…" {
		t.Errorf("clip = %q", got)
	}
}
