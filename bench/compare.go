package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// fallLimit is how much worse than the -alt binary (the previous release)
// a row may be before the report calls it out.
const fallLimit = 0.20

// timeResolution is the smallest difference of two times the report calls
// out: the restart breakdown's steps of a few µs (a hand-off, nothing) vary
// by more than 20% from run to run and say nothing at this resolution.
const timeResolution = 0.1 // ms

// regressions compares every row of the supervise under test (subject base,
// or "base, ...") with the same measurement of the -alt binary (subject
// alt, or "alt, ...") and returns a line for each that is more than
// fallLimit worse. Rates are better higher, everything else (latency,
// memory, CPU) lower. Rows whose values do not parse are skipped.
func regressions(rows []row, base, alt string) []string {
	var out []string
	for _, r := range rows {
		rest, ok := subjectOf(r.subject, base)
		if !ok {
			continue
		}
		for _, a := range rows {
			if a.what != r.what {
				continue
			}
			if ar, ok := subjectOf(a.subject, alt); !ok || ar != rest {
				continue
			}
			v, ok1 := quantity(r.value)
			w, ok2 := quantity(a.value)
			if !ok1 || !ok2 || v <= 0 || w <= 0 {
				continue
			}
			if isRate(r.value) {
				if fall := 1 - v/w; fall > fallLimit {
					out = append(out, fmt.Sprintf("%s, %s: %s against %s for %s (%.0f%% lower)", r.what, r.subject, r.value, a.value, a.subject, 100*fall))
				}
			} else if isTime(r.value) && v-w < timeResolution {
				continue
			} else if grew := v/w - 1; grew > fallLimit {
				out = append(out, fmt.Sprintf("%s, %s: %s against %s for %s (%.0f%% higher)", r.what, r.subject, r.value, a.value, a.subject, 100*grew))
			}
		}
	}
	return out
}

// subjectOf reports whether subject is name or "name, rest", and returns
// rest.
func subjectOf(subject, name string) (string, bool) {
	if subject == name {
		return "", true
	}
	rest, ok := strings.CutPrefix(subject, name+", ")
	return rest, ok
}

// quantity reads the number at the start of a value cell ("196 k/s",
// "2.34 ms median", "10.7 MiB") in the cell's base unit.
func quantity(v string) (float64, bool) {
	f := strings.Fields(v)
	if len(f) < 2 {
		return 0, false
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(x) {
		return 0, false
	}
	switch f[1] {
	case "M/s":
		x *= 1e6
	case "k/s":
		x *= 1e3
	case "µs":
		x /= 1e3
	case "s":
		x *= 1e3
	}
	return x, true
}

func isRate(v string) bool { return strings.Contains(v, "/s") }

// isTime reports whether a value cell is a time (its unit ms, µs or s).
func isTime(v string) bool {
	f := strings.Fields(v)
	return len(f) >= 2 && (f[1] == "ms" || f[1] == "µs" || f[1] == "s")
}
