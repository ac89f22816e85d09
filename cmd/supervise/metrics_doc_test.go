package main

import (
	"os"
	"strings"
	"testing"
)

// TestMetricsAddrDocumentedAsLoopback: /metrics and /healthz have no
// authentication, so the examples bind loopback and the help and README say
// why (issue 12, finding 6).
func TestMetricsAddrDocumentedAsLoopback(t *testing.T) {
	_, out, _ := call(t, "run", "-h")
	i := strings.Index(out, "-metrics-addr")
	if i < 0 {
		t.Fatal("run -h lacks --metrics-addr")
	}
	help := out[i:]
	if j := strings.Index(help[1:], "\n  -"); j >= 0 {
		help = help[:j+1]
	}
	for _, want := range []string{"127.0.0.1:9090", "no authentication"} {
		if !strings.Contains(help, want) {
			t.Errorf("--metrics-addr help lacks %q:\n%s", want, help)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	r := string(readme)
	if strings.Contains(r, "`--metrics-addr :9090`") {
		t.Error("README's example binds every interface (:9090); show 127.0.0.1:9090")
	}
	for _, want := range []string{"--metrics-addr 127.0.0.1:9090", "without authentication"} {
		if !strings.Contains(r, want) {
			t.Errorf("README lacks %q", want)
		}
	}
}
