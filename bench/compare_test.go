package main

import (
	"strings"
	"testing"
)

func TestRegressions(t *testing.T) {
	rows := []row{
		{what: "heartbeat intake", subject: "supervise, plain WATCHDOG=1", value: "196 k/s"},
		{what: "heartbeat intake", subject: "old, plain WATCHDOG=1", value: "307 k/s"},
		{what: "restart latency", subject: "supervise", value: "2.30 ms median"},
		{what: "restart latency", subject: "old", value: "2.10 ms median"},
		{what: "peak RSS", subject: "supervise", value: "13.0 MiB"},
		{what: "peak RSS", subject: "old", value: "10.0 MiB"},
		{what: "durable markers per second", subject: "supervise, 1 session", value: "1.4 k/s"},
		{what: "durable markers per second", subject: "old, 1 session", value: "980 /s"},
		// 50% more, but 1 µs: below the report's resolution of 0.1 ms.
		{what: "restart breakdown: cgroup ready → fork start", subject: "supervise", value: "0.003 ms median"},
		{what: "restart breakdown: cgroup ready → fork start", subject: "old", value: "0.002 ms median"},
	}
	got := regressions(rows, "supervise", "old")
	if len(got) != 2 || !strings.HasPrefix(got[0], "heartbeat intake, supervise, plain") || !strings.HasPrefix(got[1], "peak RSS, supervise:") {
		t.Errorf("regressions = %q, want the intake (36%% fewer) and the RSS (30%% more) only", got)
	}
}
