package resume

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestExecArgvNoValueBecomesAnOption: a value that would begin an argv word
// with '-' lands in the resumed agent's argv as an option of its own
// ("codex exec resume --evil", "agent -p -r s1 --dangerously-skip-permissions");
// ExecArgv refuses it, naming the placeholder, unless the template put --
// before it. A '-' the template wrote, or one inside a value, is kept.
func TestExecArgvNoValueBecomesAnOption(t *testing.T) {
	ok := Item{Session: "s1", Turn: "t1", Message: "continue"}
	with := func(f func(*Item)) Item { it := ok; f(&it); return it }
	for _, tc := range []struct {
		name string
		tpl  string
		item Item
		want []string // nil: refused, and the error names refused
		// refused is the placeholder the error must name.
		refused string
	}{
		// Each placeholder beginning a word with '-' is refused.
		{"session", "codex exec resume {session}", with(func(i *Item) { i.Session = "--evil" }), nil, "{session}"},
		{"session -r", "claude -p -r {session} {message}", with(func(i *Item) { i.Session = "-r" }), nil, "{session}"},
		{"session lone dash", "claude -r {session}", with(func(i *Item) { i.Session = "-" }), nil, "{session}"},
		{"message", "claude -p -r {session} {message}", with(func(i *Item) { i.Message = "-x" }), nil, "{message}"},
		{"turn", "gemini -r {session} --turn {turn}", with(func(i *Item) { i.Turn = "--rm" }), nil, "{turn}"},
		{"message with a suffix", "agent {session} {message}-suffix", with(func(i *Item) { i.Message = "-x" }), nil, "{message}"},
		{"after empty values", "agent {session} {turn}{message}", with(func(i *Item) { i.Turn, i.Message = "", "-x" }), nil, "{message}"},
		{"message is --", "agent {session} {message} x", with(func(i *Item) { i.Message = "--" }), nil, "{message}"},
		{"program name", "{message} {session}", with(func(i *Item) { i.Message = "-x" }), nil, "{message}"},
		{"dash-dash that is not a word", "agent --{session} {message}", with(func(i *Item) { i.Message = "-x" }), nil, "{message}"},
		{"dash-dash filled by a value", "agent {session} {turn} {message}", with(func(i *Item) { i.Turn, i.Message = "--", "-x" }), nil, "{turn}"},

		// The same after a -- word of the template are accepted.
		{"session after --", "codex exec resume -- {session}", with(func(i *Item) { i.Session = "--evil" }),
			[]string{"codex", "exec", "resume", "--", "--evil"}, ""},
		{"message after --", "claude -p -r {session} -- {message}", with(func(i *Item) { i.Message = "-x" }),
			[]string{"claude", "-p", "-r", "s1", "--", "-x"}, ""},
		{"turn after --", "gemini -r {session} -- {turn}", with(func(i *Item) { i.Turn = "--rm" }),
			[]string{"gemini", "-r", "s1", "--", "--rm"}, ""},
		{"quoted --", `claude -r {session} '--' {message}`, with(func(i *Item) { i.Message = "--y" }),
			[]string{"claude", "-r", "s1", "--", "--y"}, ""},
		{"suffix after --", "agent {session} -- {message}-suffix", with(func(i *Item) { i.Message = "-x" }),
			[]string{"agent", "s1", "--", "-x-suffix"}, ""},

		// The template's own options are kept, and so are values with '-'
		// anywhere but at the start of their word.
		{"template options", "claude -p -r {session} --verbose {message}", ok,
			[]string{"claude", "-p", "-r", "s1", "--verbose", "continue"}, ""},
		{"value after the template's dash", "agent --id={session} --msg={message} -t{turn}",
			Item{Session: "-s", Turn: "-t", Message: "--m"}, []string{"agent", "--id=-s", "--msg=--m", "-t-t"}, ""},
		{"dash inside", "agent {session} {message} {turn}", Item{Session: "a-b--c", Turn: "t-1", Message: "x --y -z"},
			[]string{"agent", "a-b--c", "x --y -z", "t-1"}, ""},
		{"literal start", "agent {session} x{message}", with(func(i *Item) { i.Message = "-x" }), []string{"agent", "s1", "x-x"}, ""},
		{"empty message", "agent {session} {message}", with(func(i *Item) { i.Message = "" }), []string{"agent", "s1", ""}, ""},
		{"turn unused", "claude -r {session}", with(func(i *Item) { i.Turn = "-t" }), []string{"claude", "-r", "s1"}, ""},
		{"a value never fills again", "agent {session} {message}", with(func(i *Item) { i.Session, i.Message = "{message}", "{turn}" }),
			[]string{"agent", "{message}", "{turn}"}, ""},
	} {
		words, err := ParseTemplate(tc.tpl)
		if err != nil {
			t.Fatalf("%s: %q: %v", tc.name, tc.tpl, err)
		}
		argv, err := ExecArgv(words, tc.item)
		if tc.want == nil {
			if !errors.Is(err, ErrOptionValue) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: %q: argv %q, err %v; want ErrOptionValue naming %s", tc.name, tc.tpl, argv, err, tc.refused)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(argv, tc.want) {
			t.Errorf("%s: %q: argv %q, err %v; want %q", tc.name, tc.tpl, argv, err, tc.want)
		}
	}
}

// TestExecArgvProbe is issue 21's probe: --resume-message '{prompt}' with
// the prompt --dangerously-skip-permissions launched
// "agent -p -r s1 --dangerously-skip-permissions". The session is parked
// with this error as its reason ("not resumed with --resume-exec: ...").
func TestExecArgvProbe(t *testing.T) {
	const prompt = "--dangerously-skip-permissions"
	item := Item{Session: "s1", Turn: "t1", Prompt: prompt}
	for _, f := range []func(*Item){
		func(i *Item) { i.Message = prompt },                  // --resume-message '{prompt}'
		func(i *Item) { i.Message = prompt + "\n\ncontinue" }, // '{prompt}\n\ncontinue'
	} {
		it := item
		f(&it)
		words, err := ParseTemplate("agent -p -r {session} {message}")
		if err != nil {
			t.Fatal(err)
		}
		argv, err := ExecArgv(words, it)
		if !errors.Is(err, ErrOptionValue) {
			t.Fatalf("message %q: argv %q, err %v; want ErrOptionValue", it.Message, argv, err)
		}
		want := `argument 4 would begin with {message} "--dangerously-skip-permissions` // then the rest, or "..."
		if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "(which starts with {prompt})") {
			t.Errorf("error %q\nwant it to start %q and name {prompt}", err, want)
		}
	}
	words, _ := ParseTemplate("agent -p -r {session} {message}")
	item.Message = prompt
	_, err := ExecArgv(words, item)
	const reason = `not resumed with --resume-exec: argument 4 would begin with {message} "--dangerously-skip-permissions" (which starts with {prompt}), ` +
		`and a value that begins with '-' is read as an option unless the template puts -- before it`
	if got := "not resumed with --resume-exec: " + err.Error(); got != reason {
		t.Errorf("parked reason\n got %s\nwant %s", got, reason)
	}
}

// The error quotes a bounded start of the value, on one line, whatever the
// value holds; a message that does not start with a '-' field names none.
func TestExecArgvErrorExcerpt(t *testing.T) {
	words, _ := ParseTemplate("agent {session} {message}")
	long := "-" + strings.Repeat("é", 100) + "\n" + strings.Repeat("x", 10000)
	_, err := ExecArgv(words, Item{Session: "s1", Prompt: "-other", Message: long})
	if !errors.Is(err, ErrOptionValue) {
		t.Fatalf("err %v", err)
	}
	msg := err.Error()
	want := `argument 2 would begin with {message} "-` + strings.Repeat("é", 39) + `"..., and a value`
	if !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") || strings.Contains(msg, "which starts with") {
		t.Errorf("error %q\nwant it to start %q, one line, no source", msg, want)
	}
	for _, v := range []string{"-\xff\x00", "-" + strings.Repeat("a", 39), "-" + strings.Repeat("a", 40)} {
		_, err := ExecArgv(words, Item{Session: "s1", Message: v})
		if err == nil || strings.Contains(err.Error(), "\x00") || !utf8.ValidString(err.Error()) {
			t.Errorf("value %q: err %q", v, err)
		}
		if cut := len(v) > excerptRunes; cut != strings.Contains(err.Error(), `"...`) {
			t.Errorf("value %q (%d runes): err %q: want ... only after a cut", v, len(v), err)
		}
	}
}

// A template with placeholders before any -- is valid at parse time: most
// agents take the message as a positional argument.
func TestParseTemplateKeepsOptionPositions(t *testing.T) {
	for _, tpl := range []string{"claude -p -r {session} {message}", "{session}", "agent {message}-x {session}"} {
		if _, err := ParseTemplate(tpl); err != nil {
			t.Errorf("%q: %v", tpl, err)
		}
	}
}
