package cliflags

import (
	"flag"
	"strings"
)

// Unknown returns the first flag in args that fs does not define, as
// typed without its dashes or value ("restrat" for --restrat=never), and
// whether there is one. It walks args as the flag package parses them: it
// stops at "--" or the first non-flag argument, and a flag that takes a
// value consumes the next argument unless written NAME=VALUE.
func Unknown(fs *flag.FlagSet, args []string) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			return "", false
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, _, hasValue := strings.Cut(name, "=")
		if name == "h" || name == "help" {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			return name, true
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if !hasValue {
			i++ // its value
		}
	}
	return "", false
}

// Suggest returns the flag of fs nearest to name, the unknown flag a user
// typed ("restrat"), by edit distance: "restart". It returns "" when no
// flag is near enough (Nearest).
func Suggest(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return Nearest(name, names)
}

// Nearest returns the candidate nearest to name by edit distance (case
// aside), or "" when none is near enough to be a likely typo (more than a
// third of the name's letters, and more than two, would have to change)
// or when two are equally near.
func Nearest(name string, candidates []string) string {
	best, bestD, tie := "", 0, false
	for _, c := range candidates {
		d := levenshtein(strings.ToLower(name), c)
		switch {
		case best == "" || d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD:
			tie = true
		}
	}
	if best == "" || tie || (bestD > 2 && bestD > len(name)/3) {
		return ""
	}
	return best
}

// DidYouMean is the line Parse prints after the flag package's error for
// an unknown flag in args: "did you mean --restart?", or "" when there is
// no unknown flag or no flag near it.
func DidYouMean(fs *flag.FlagSet, args []string) string {
	name, ok := Unknown(fs, args)
	if !ok {
		return ""
	}
	if s := Suggest(fs, name); s != "" {
		return "did you mean --" + s + "?"
	}
	return ""
}

// levenshtein is the edit distance between a and b (insertions,
// deletions and substitutions of bytes: flag names are ASCII).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
