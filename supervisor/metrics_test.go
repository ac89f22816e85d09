package supervisor

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// The exposition parses with Prometheus's own text parser (a test-only
// dependency: the binary does not link it), every family has HELP and the
// right TYPE, and the loop's counters and snapshot show in it.
func TestMetricsExposition(t *testing.T) {
	s := newTestSupervisor(t)
	s.perform([]machine.Effect{machine.Count{Metric: "restart"}, machine.Count{Metric: "death", Label: "signal"},
		machine.Count{Metric: "death", Label: "signal"}, machine.Count{Metric: "death", Label: "watchdog"}})
	s.m.Sessions["a"] = &record.Session{ID: "a", State: record.InTurn}
	odd := "p\"1\\x\ny" // a session id is any printable text: its label value is escaped
	s.m.Sessions[odd] = &record.Session{ID: odd, State: record.Parked, ParkedBy: record.ParkedByBreaker}
	s.publish()

	var b bytes.Buffer
	s.WriteMetrics(&b)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, b.String())
	}
	for name := range metricHelp {
		if name == "supervise_heartbeat_age_seconds" || name == "supervise_notify_dropped_total" {
			continue // only while a child runs / once something was dropped
		}
		f, ok := fams[name]
		if !ok {
			t.Errorf("family %s missing\n%s", name, b.String())
			continue
		}
		if f.GetHelp() != metricHelp[name] {
			t.Errorf("%s: help %q", name, f.GetHelp())
		}
	}
	if ps := fams["supervise_session_parked"].GetMetric(); len(ps) != 1 {
		t.Errorf("supervise_session_parked: %d series, want 1", len(ps))
	} else {
		labels := map[string]string{}
		for _, l := range ps[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["session"] != odd || labels["parked_by"] != record.ParkedByBreaker || labels["name"] != s.cfg.Name {
			t.Errorf("supervise_session_parked labels %q, want session %q parked by the breaker of %q", labels, odd, s.cfg.Name)
		}
	}
	value := func(name, label, want string) float64 {
		for _, m := range fams[name].GetMetric() {
			if label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == want) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("%s{%s=%q} missing", name, label, want)
		return 0
	}
	if v := value("supervise_restarts_total", "", ""); v != 1 {
		t.Errorf("restarts = %v, want 1", v)
	}
	if v := value("supervise_dirty_deaths_total", "reason", "signal"); v != 2 {
		t.Errorf("deaths{signal} = %v, want 2", v)
	}
	if v := value("supervise_sessions", "state", "in_turn"); v != 1 {
		t.Errorf("sessions{in_turn} = %v, want 1", v)
	}
	if typ := fams["supervise_dirty_deaths_total"].GetType().String(); typ != "COUNTER" {
		t.Errorf("deaths type %s", typ)
	}
	if typ := fams["supervise_child_up"].GetType().String(); typ != "GAUGE" {
		t.Errorf("child_up type %s", typ)
	}
}
