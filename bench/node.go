package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

//go:embed node_markers.js
var nodeMarkersJS []byte

// node measures the protocol route for a language without unix datagram
// sockets: a Node.js agent under supervise that runs `supervise notify` per
// marker with child_process.spawnSync (bench/node_markers.js), with the
// barrier (the default: the exit status is its answer) and with
// --barrier=false, beside /bin/true spawned the same way. Skipped, and said
// so, when node is not installed.
func (b *bench) node() error {
	node, err := exec.LookPath("node")
	if err != nil {
		b.note("node: not installed, the Node.js marker rows were skipped")
		return nil
	}
	truth, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	script := filepath.Join(b.work, "node_markers.js")
	if err := os.WriteFile(script, nodeMarkersJS, 0o644); err != nil {
		return err
	}
	for _, sv := range b.svs {
		progress("node markers: %s, %d rounds", sv.name, b.cfg.hooks)
		if err := b.nodeRun(sv, node, script, truth, sv.path, "supervise notify"); err != nil {
			b.add(row{"Node.js marker (`supervise notify` by spawnSync, barrier answer as exit status)", sv.name, "failed", err.Error(), "", "**missed**"})
		}
		// The same script through supervise-notify, which takes the
		// leading word notify too.
		if b.notifyBin != "" && sv.path == b.supervise {
			if err := b.nodeRun(sv, node, script, truth, b.notifyBin, "supervise-notify"); err != nil {
				b.add(row{"Node.js marker (`supervise-notify` by spawnSync, barrier answer as exit status)", sv.name, "failed", err.Error(), "", "**missed**"})
			}
		}
	}
	return nil
}

func (b *bench) nodeRun(sv svBin, node, script, truth, client, label string) error {
	dir := filepath.Join(b.work, sv.name+"-node-"+filepath.Base(client))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, log := filepath.Join(dir, "agent.out"), filepath.Join(dir, "log")
	argv := []string{sv.path, "run", "--state-dir", filepath.Join(dir, "state"), "--", node, script}
	p, err := b.start(argv, baseEnv("BENCH_OUT="+out, "BENCH_SUPERVISE="+client, "BENCH_TRUE_BIN="+truth,
		"BENCH_MARKERS="+strconv.Itoa(b.cfg.hooks)), dir, log)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(time.Duration(b.cfg.hooks)*time.Second + 60*time.Second):
		p.stop(syscall.SIGKILL, 0)
		return fmt.Errorf("the Node agent did not finish; log: %s", tail(log, 5))
	case <-b.ctx.Done():
		p.stop(syscall.SIGKILL, 0)
		return b.ctx.Err()
	}
	if p.err != nil {
		return fmt.Errorf("supervise run: %v; log: %s", p.err, tail(log, 5))
	}
	raw, err := os.ReadFile(out + ".json")
	if err != nil {
		return fmt.Errorf("%v; log: %s", err, tail(log, 5))
	}
	var r struct {
		Barrier   sample `json:"barrier_ns"`
		NoBarrier sample `json:"no_barrier_ns"`
		True      sample `json:"true_ns"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if len(r.Barrier) == 0 {
		return fmt.Errorf("no marker timed")
	}
	truthMed := r.True.sorted().q(0.5)
	for _, v := range []struct {
		what string
		s    sample
	}{
		{"Node.js marker (`" + label + "` by spawnSync, barrier answer as exit status)", r.Barrier},
		{"Node.js marker (`" + label + " --barrier=false` by spawnSync)", r.NoBarrier},
	} {
		v.s = v.s.sorted()
		med := v.s.q(0.5)
		x := float64(med) / float64(max(truthMed, 1))
		detail := fmt.Sprintf("p90 %s, p99 %s, n=%d (phase markers in one turn, interleaved); /bin/true spawned the same way from Node: %s median, so %.2fx /bin/true",
			ms(v.s.q(0.9)), ms(v.s.q(0.99)), len(v.s), ms(truthMed), x)
		b.add(row{v.what, sv.name, ms(med) + " median", detail, "<= 3.5x /bin/true", metMissed(x <= 3.5)})
	}
	return nil
}
