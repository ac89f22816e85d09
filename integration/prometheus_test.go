package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The rules shipped in examples/prometheus, checked and tested by
// Prometheus's own tools, and a real Prometheus scraping a real supervise.

const promExamples = "../examples/prometheus"

// needProm returns the path of tool (promtool, prometheus), skipping the
// test when it is missing, or failing it under CI=true, where .ci/run
// installs Debian's prometheus package.
func needProm(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		msg := tool + " not found: install Debian's prometheus package (apt-get install prometheus; .ci/run does) to check and test examples/prometheus"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// metricsAddr starts waiting for supervise's "serving /metrics" log line
// and returns the address it names.
func metricsAddr(t *testing.T, p *proc) string {
	t.Helper()
	re := regexp.MustCompile(`msg="serving /metrics and /healthz" addr=(\S+)`)
	var addr string
	waitFor(t, 30*time.Second, "supervise to serve /metrics", func() bool {
		if m := re.FindStringSubmatch(p.stderr()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}

// promtool check rules and promtool test rules pass on every rule file and
// its tests; promtool check metrics passes on a real supervise's /metrics
// (names, help, types, units as Prometheus wants them).
func TestPrometheusRulesAndMetrics(t *testing.T) {
	promtool := needProm(t, "promtool")
	rules, _ := filepath.Glob(filepath.Join(promExamples, "*.rules.yml"))
	tests, _ := filepath.Glob(filepath.Join(promExamples, "*.rules.test.yml"))
	var plain []string
	for _, r := range rules {
		if !strings.HasSuffix(r, ".test.yml") {
			plain = append(plain, r)
		}
	}
	if len(plain) < 2 || len(tests) != len(plain) {
		t.Fatalf("rule files %v, tests %v: want each rule file tested", plain, tests)
	}
	for _, args := range [][]string{append([]string{"check", "rules"}, plain...), append([]string{"test", "rules"}, tests...)} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		} else {
			t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
		}
	}

	e := newEnv(t)
	p := e.run("--metrics-addr", "127.0.0.1:0")
	addr := metricsAddr(t, p)
	e.waitEvent(1, "start")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := httpGet(ctx, "http://"+addr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s\non:\n%s", err, out, body)
	}
	// Every series the rules use is there.
	for _, name := range []string{"supervise_sessions{state=\"parked\"}", "supervise_crashloop_guard_open", "supervise_restarts_total",
		"supervise_journal_commit_errors_total", "supervise_loop_last_tick_age_seconds", "supervise_api_proxy_events_dropped_total",
		"supervise_model_tokens_total{kind=\"input\"}", "supervise_sessions_parked_total{by=\"breaker\"}",
		"supervise_sessions_parked_total{by=\"budget\"}", "supervise_rate_limit_longest_wait_seconds",
		"supervise_acks_unsent_total", "supervise_open_sessions_refused_total",
		"supervise_api_proxy_upstream_errors_total{class=\"5xx\"}", "supervise_info{name="} {
		if !strings.Contains(string(body), "\n"+name+" ") && !strings.Contains(string(body), "\n"+name+`"`) {
			t.Errorf("/metrics lacks %s:\n%s", name, body)
		}
	}
	p.signal(syscall.SIGTERM)
	p.wait(30 * time.Second)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A real Prometheus, on loopback with its storage in a temp dir, scrapes a
// running supervise with examples/prometheus/supervise.rules.yml loaded:
// SuperviseSessionParked fires once a session is parked, and not before.
func TestPrometheusParkedAlertFires(t *testing.T) {
	promBin := needProm(t, "prometheus")
	rules, err := filepath.Abs(filepath.Join(promExamples, "supervise.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	// Two agents: parker's run 1 begins a turn and dies dirty in it (with
	// --resume-limit 0 its session is parked at once); quiet's stays
	// mid-turn. Later runs wait to be told.
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; listen", "TESTAGENT_SCRIPT=listen")
	p := e.run("--name", "parker", "--state-dir", e.stateDir, "--metrics-addr", "127.0.0.1:0", "--resume-limit", "0", "--backoff-initial", "10ms")
	addr := metricsAddr(t, p)
	e.waitEvent(1, "barrier-ok")
	quiet := newEnv(t)
	quiet.set("TESTAGENT_SCRIPT=turn-begin q1 t1; barrier; listen")
	qp := quiet.run("--name", "quiet", "--state-dir", quiet.stateDir, "--metrics-addr", "127.0.0.1:0")
	qaddr := metricsAddr(t, qp)
	quiet.waitEvent(1, "barrier-ok")

	// The example's shape: the targets in a file Prometheus rereads.
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: supervise
    file_sd_configs:
      - files: [targets.yml]
        refresh_interval: 1s
`, rules)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "targets.yml"), []byte(fmt.Sprintf("- targets: [%q, %q]\n", addr, qaddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	var prom *exec.Cmd
	var web string
	// A port free a moment ago may be taken by the time Prometheus binds
	// it: try a few.
	for try := 0; ; try++ {
		web = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		promLog := &promOutput{}
		prom = exec.Command(promBin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+web, "--log.level=warn")
		prom.Stdout, prom.Stderr = promLog, promLog
		prom.Dir = dir
		if err := prom.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- prom.Wait() }()
		ready := false
		deadline := time.Now().Add(2 * time.Minute)
		for !ready && time.Now().Before(deadline) {
			select {
			case err := <-exited:
				deadline = time.Time{} // exited: try another port
				t.Logf("prometheus exited: %v\n%s", err, promLog.String())
			case <-time.After(100 * time.Millisecond):
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := httpGet(ctx, "http://"+web+"/-/ready")
				cancel()
				ready = err == nil
			}
		}
		if ready {
			t.Cleanup(func() {
				prom.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(30 * time.Second):
					prom.Process.Kill()
					<-exited
				}
			})
			break
		}
		prom.Process.Kill()
		if try == 4 {
			t.Fatalf("prometheus did not become ready:\n%s", promLog.String())
		}
	}

	type alert struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
		Value  string            `json:"value"`
	}
	alerts := func() []alert {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err := httpGet(ctx, "http://"+web+"/api/v1/alerts")
		if err != nil {
			t.Logf("alerts: %v", err)
			return nil
		}
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Alerts []alert `json:"alerts"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Status != "success" {
			t.Fatalf("alerts: %v\n%s", err, b)
		}
		return r.Data.Alerts
	}
	parked := func() *alert {
		for _, a := range alerts() {
			if a.Labels["alertname"] == "SuperviseSessionParked" {
				return &a
			}
		}
		return nil
	}
	// Before the park: scraped, evaluated, and quiet. Wait until
	// Prometheus has the target's series (a rule has had data to judge).
	waitFor(t, 2*time.Minute, "prometheus to scrape supervise", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err := httpGet(ctx, "http://"+web+"/api/v1/query?query=supervise_info")
		return err == nil && strings.Contains(string(b), `"name":"parker"`) && strings.Contains(string(b), `"name":"quiet"`)
	})
	if a := parked(); a != nil {
		t.Fatalf("SuperviseSessionParked before any park: %+v", a)
	}

	// The park: run 1 dies dirty mid-turn.
	e.post("exit 1")
	e.waitEvent(2, "start")
	if st := e.status(); len(st.Sessions) != 1 || st.Sessions[0].State != "parked" {
		t.Fatalf("after run 1's death: sessions %+v, want s1 parked", st.Sessions)
	}
	var fired *alert
	waitFor(t, 3*time.Minute, "SuperviseSessionParked to fire", func() bool {
		fired = parked()
		return fired != nil && fired.State == "firing"
	})
	if fired.Labels["job"] != "supervise" || fired.Labels["instance"] != addr || fired.Labels["severity"] != "warning" ||
		fired.Labels["name"] != "parker" || fired.Labels["session"] != "s1" || fired.Labels["state_dir"] != e.stateDir {
		t.Errorf("alert labels %v; want job supervise, instance %s, severity warning, name parker, session s1, state_dir %s",
			fired.Labels, addr, e.stateDir)
	}
	for _, a := range alerts() {
		if a.Labels["alertname"] == "SuperviseSessionParked" && a.Labels["name"] != "parker" {
			t.Errorf("an alert for an agent with no park: %+v", a)
		}
	}
	t.Logf("SuperviseSessionParked: %+v", *fired)
	p.signal(syscall.SIGTERM)
	p.wait(30 * time.Second)
	qp.signal(syscall.SIGTERM)
	qp.wait(30 * time.Second)
}

// promOutput collects a child's stdout and stderr (one writer for both:
// exec then calls Write from one goroutine at a time) for the test to
// read while the child runs.
type promOutput struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *promOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *promOutput) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
