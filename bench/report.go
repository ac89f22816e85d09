package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// report prints the header and the table as markdown.
func (b *bench) report(w io.Writer, command string) {
	var u unix.Utsname
	_ = unix.Uname(&u)
	kernel := unix.ByteSliceToString(u.Release[:])
	fmt.Fprintf(w, "### supervise benchmark, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- command: `%s`\n", command)
	fmt.Fprintf(w, "- machine: %d cores (nproc), %s, Linux %s, %s\n", runtime.NumCPU(), cpuModel(), kernel, runtime.Version())
	fmt.Fprintf(w, "- state-dir filesystem: %s\n", fsOf(b.work))
	fmt.Fprintf(w, "- child in every restart row: %s", b.reporterK)
	if b.gcc != "" {
		fmt.Fprintf(w, "; %s", b.gcc)
	}
	fmt.Fprintf(w, "\n\n")
	fmt.Fprintln(w, "| measurement | subject | result | spread / detail | target | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range b.rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", cell(r.what), cell(r.subject), cell(r.value), cell(r.detail), cell(r.target), cell(r.verdict))
	}
	if len(b.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range b.notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	if b.cfg.alt != "" && len(b.svs) > 1 {
		fmt.Fprintln(w)
		regs := regressions(b.rows, b.svs[0].name, b.cfg.altName)
		if len(regs) == 0 {
			fmt.Fprintf(w, "No row of %s is more than %.0f%% worse than %s's in this run.\n", b.svs[0].name, 100*fallLimit, b.cfg.altName)
		}
		for _, r := range regs {
			fmt.Fprintf(w, "- **more than %.0f%% worse than %s**: %s\n", 100*fallLimit, b.cfg.altName, r)
		}
	}
}

func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// fsOf names the device and filesystem type holding path.
func fsOf(path string) string {
	b, _ := os.ReadFile("/proc/self/mounts")
	best, desc := "", "unknown"
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > len(best) {
			best, desc = mp, fmt.Sprintf("%s (%s) on %s", f[0], f[2], mp)
		}
	}
	return desc
}
