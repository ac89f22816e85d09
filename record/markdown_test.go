package record

import "strings"

// Reasons returns the table of reasons a run ends, in order (a copy).
func Reasons() []ReasonRow { return append([]ReasonRow(nil), reasons[:]...) }

// ReasonsMarkdown is the README's reasons table, made from the table.
func ReasonsMarkdown() string {
	var b strings.Builder
	b.WriteString("| reason | what happened | dirty | the turn a suspect | said as | breaker's advice |\n|---|---|---|---|---|---|\n")
	for _, r := range reasons {
		dirty := map[Dirtiness]string{NeverDirty: "no", AlwaysDirty: "yes", DirtyUnlessZero: "when the status is not 0"}[r.Dirty]
		suspect := "no"
		switch {
		case r.Suspect && r.OutsideAdvice != "":
			suspect = "yes, but not for SIGHUP, SIGINT, SIGKILL, SIGTERM"
		case r.Suspect:
			suspect = "yes"
		}
		how := r.How
		if r.Said != "" {
			how = r.Said
		}
		advice := r.Advice
		if advice == "" {
			advice = "(not dirty: never counted)"
		}
		b.WriteString("| `" + string(r.Name) + "` | " + r.Help + " | " + dirty + " | " + suspect + " | " + how + " | " + advice + " |\n")
	}
	return b.String()
}

// ParksMarkdown is the README's table of parks and who lifts them.
func ParksMarkdown() string {
	var b strings.Builder
	b.WriteString("| parked_by | why | who can lift it |\n|---|---|---|\n")
	for _, p := range parks {
		b.WriteString("| `" + p.By + "` | " + p.Why + " | " + p.Lift + " |\n")
	}
	b.WriteString("| anything else (`damaged`: a record that failed its check) | as its reason says | a person (`supervise resume`) |\n")
	return b.String()
}
