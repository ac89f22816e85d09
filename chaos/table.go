package chaos

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the report as a table a person reads: one row per
// kill, then the verdict, the failures and how to replay the run.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KILL\tWHEN\tRUN\tSESSION\tTURN\tDECISION\tRESUMED\tCOMPLETED\tSURVIVORS\tVERDICT")
	for _, k := range r.Kills {
		completed := yesNo(k.Completed)
		switch {
		case k.Parked:
			completed = "-"
		case k.KilledAgain && !k.Completed:
			completed = "killed again"
		}
		resumed := yesNo(k.Resumed)
		if k.Parked {
			resumed = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", k.Kill, k.At, k.Run, k.Session, orDash(k.Turn),
			k.Decision, resumed, completed, k.Survivors, k.Verdict())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nruns %d, turns completed %d, missed kills %d, supervise invocations %d, %s\n",
		r.Runs, r.TurnsCompleted, r.Misses, r.Supervisors, r.Elapsed.Round(100_000_000))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, n := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", n)
	}
	if r.OK {
		_, err := fmt.Fprintf(w, "PASS: %d kills at %s, every check held (seed %d)\n", len(r.Kills), r.At, r.Seed)
		return err
	}
	fmt.Fprintf(w, "FAIL: %d failure(s) in %s\n", len(r.Failures), strings.Join(r.FailedChecks, ", "))
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  %s\n", f)
	}
	// The same seed, point and count replay the same choices (the count
	// shapes the plan): the count planned, not the count made before the
	// failure, as the header says.
	fmt.Fprintf(w, "replay: --seed %d --at %s --kills %d\n", r.Seed, r.At, cmp.Or(r.Planned, len(r.Kills), 1))
	if r.Log != "" {
		fmt.Fprintf(w, "log: %s\n", r.Log)
	}
	if r.StateDir != "" {
		_, err := fmt.Fprintf(w, "state dir: %s (supervise status --state-dir %s)\n", r.StateDir, r.StateDir)
		return err
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
