package resume

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/record"
)

// Item is one entry of the resume file (SUPERVISE_RESUME_FILE): a session
// owed a continuation. Field names are a public contract (docs/design.md).
type Item struct {
	Session string `json:"session"`
	Turn    string `json:"turn"`
	Attempt int    `json:"attempt"`
	// InterruptedRun is the run whose death made this resume (0 for a
	// manual one): with Session it names the interruption.
	InterruptedRun uint64 `json:"interrupted_run"`
	Reason         string `json:"reason"`
	Phase          string `json:"phase"`
	Tool           string `json:"tool"`
	// Detail is what the tool was running (a command, a path), if the
	// agent said (X_SUPERVISE_DETAIL).
	Detail string `json:"detail"`
	Prompt string `json:"prompt"`
	// Message is the continuation to send as a hidden turn.
	Message string `json:"message"`
	// Effects are the keys of the side effects the interrupted turn
	// declared done (X_SUPERVISE_EFFECT), in order: the resuming agent
	// skips them. Always a list, empty when none was declared.
	Effects []string `json:"effects"`
}

// Items returns the resume file entries of the pending sessions, oldest
// interruption first.
func Items(pending []record.Session) []Item {
	sort.Slice(pending, func(i, j int) bool {
		a, b := pending[i].Resume, pending[j].Resume
		if a.Since.Equal(b.Since) {
			return pending[i].ID < pending[j].ID
		}
		return a.Since.Before(b.Since)
	})
	items := make([]Item, 0, len(pending))
	for _, s := range pending {
		items = append(items, Item{Session: s.ID, Turn: s.Turn, Attempt: s.Resume.Attempt,
			InterruptedRun: s.Resume.Interrupted, Reason: s.Resume.Reason,
			Phase: s.Phase, Tool: s.Tool, Detail: s.Detail, Prompt: s.Prompt, Message: s.Resume.Message,
			Effects: append([]string{}, s.Effects...)})
	}
	return items
}

// ReadFile reads the resume file at path, as an agent does with
// $SUPERVISE_RESUME_FILE. An empty path or a missing file means nothing is
// owed: no items and no error.
func ReadFile(path string) ([]Item, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var items []Item
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, fmt.Errorf("resume file %s: %w", path, err)
	}
	return items, nil
}

// WriteFile writes items as the resume file at path, atomically (a reader
// sees the old file or the new one, never half of one), mode 0600.
// It never writes through a symbolic link planted at path or at its
// temporary name (statedir.WriteFile).
func WriteFile(path string, items []Item) error {
	b, err := json.MarshalIndent(items, "", "  ")
	if err != nil {
		return err
	}
	return statedir.WriteFile(filepath.Dir(path), filepath.Base(path), append(b, '\n'))
}

// ErrTemplate reports an unusable --resume-exec template.
var ErrTemplate = errors.New("bad --resume-exec template")

// ParseTemplate splits a --resume-exec template into argv words, the way a
// shell splits words (single and double quotes, backslash escapes), but it
// never runs a shell: each word is one argument, and a placeholder inside a
// word is replaced by the value as it is, spaces and all. Placeholders:
// {session} {message} {turn}. {session} is required.
//
// A template whose placeholder begins a word, as {message} does in
// 'claude -p -r {session} {message}', is valid: most agents take the
// message as a positional argument. But ExecArgv refuses to fill such a
// word with a value that begins with '-' unless a word "--" comes before
// it ('claude -p -r {session} -- {message}' never refuses one).
func ParseTemplate(t string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(t[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("%w: unterminated single quote", ErrTemplate)
			}
			cur.WriteString(t[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(t) && t[i] != '"'; i++ {
				if t[i] == '\\' && i+1 < len(t) && strings.IndexByte(`"\$`+"`", t[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(t[i])
			}
			if i >= len(t) {
				return nil, fmt.Errorf("%w: unterminated double quote", ErrTemplate)
			}
			inWord = true
		case c == '\\' && i+1 < len(t):
			i++
			cur.WriteByte(t[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrTemplate)
	}
	for _, w := range words {
		if name := unknownPlaceholder(w, execPlaceholders); name != "" {
			return nil, fmt.Errorf("%w: unknown placeholder %s (the known ones are {session}, {message} and {turn}): the agent would get it as it is", ErrTemplate, name)
		}
	}
	if !strings.Contains(strings.Join(words, " "), "{session}") {
		return nil, fmt.Errorf("%w: it must contain {session}: resume by explicit id, never 'latest' or a picker", ErrTemplate)
	}
	return words, nil
}

// execPlaceholders are the placeholders ExecArgv fills.
var execPlaceholders = []string{"{session}", "{message}", "{turn}"}

// unknownPlaceholder returns the first {name} in word, name of lower-case
// letters and '_', that is not one of known: a typo such as {mesage} would
// reach the agent, and its model, as literal text.
func unknownPlaceholder(word string, known []string) string {
	for i := 0; i < len(word); i++ {
		if word[i] != '{' {
			continue
		}
		j := i + 1
		for j < len(word) && (word[j] >= 'a' && word[j] <= 'z' || word[j] == '_') {
			j++
		}
		if j > i+1 && j < len(word) && word[j] == '}' {
			if name := word[i : j+1]; !slices.Contains(known, name) {
				return name
			}
		}
	}
	return ""
}

// ErrOptionValue reports a value that ExecArgv will not place at the start
// of an argv word: one beginning with '-', which the agent would read as an
// option of its own ("agent -p -r s1 --dangerously-skip-permissions").
var ErrOptionValue = errors.New("a value that begins with '-' is read as an option unless the template puts -- before it")

// placeholder is one value ExecArgv fills in.
type placeholder struct{ name, value string }

// ExecArgv fills a parsed template with item: {session}, {message} and
// {turn} are replaced by its Session, Message and Turn.
//
// No value becomes an option: a word whose filled text begins with '-'
// because of a value (the word starts with a placeholder, or with
// placeholders whose values are empty and then one whose value begins with
// '-') is refused with an error wrapping ErrOptionValue, unless an earlier
// word of the template is exactly "--", after which an agent reads no
// options. The error names the placeholder and quotes the start of its
// value; the message is a value as a whole, so a --resume-message of
// '{prompt}' with a prompt "--dangerously-skip-permissions" is refused as
// {message} (which starts with {prompt}). A '-' the template itself wrote
// is the template's own option and is kept ("-p", "--id={session}"), and
// so is a value with '-' anywhere but at the start of its word. The notify
// parser already refuses session ids that begin with '-'; this check holds
// for every value, and for a journal written before that parser did.
func ExecArgv(template []string, item Item) ([]string, error) {
	values := []placeholder{{"{session}", item.Session}, {"{message}", item.Message}, {"{turn}", item.Turn}}
	argv := make([]string, len(template))
	options := true // until a "--" word of the template
	for i, w := range template {
		text, lead := fillWord(w, values)
		if options && lead != nil && strings.HasPrefix(text, "-") {
			return nil, fmt.Errorf("argument %d would begin with %s %s%s, and %w",
				i, lead.name, excerpt(lead.value), source(*lead, item), ErrOptionValue)
		}
		if w == "--" {
			options = false
		}
		argv[i] = text
	}
	return argv, nil
}

// fillWord replaces each placeholder of word by its value, left to right; a
// value is never scanned again for placeholders. lead is the placeholder
// whose value is the start of the filled text, nil when the text is empty
// or starts with the template's own characters.
func fillWord(word string, values []placeholder) (text string, lead *placeholder) {
	var b strings.Builder
	decided := false
next:
	for i := 0; i < len(word); {
		if word[i] == '{' {
			for j := range values {
				p := &values[j]
				if strings.HasPrefix(word[i:], p.name) {
					if !decided && p.value != "" {
						lead, decided = p, true
					}
					b.WriteString(p.value)
					i += len(p.name)
					continue next
				}
			}
		}
		decided = true
		b.WriteByte(word[i])
		i++
	}
	return b.String(), lead
}

// source names the field of item a message value starts with, when that
// field begins with '-' and so put it there: " (which starts with
// {prompt})". It is "" for any other value, or when none does.
func source(p placeholder, item Item) string {
	if p.name != "{message}" {
		return ""
	}
	for _, f := range []placeholder{{"{prompt}", item.Prompt}, {"{detail}", item.Detail},
		{"{tool}", item.Tool}, {"{session}", item.Session}, {"{turn}", item.Turn}} {
		if strings.HasPrefix(f.value, "-") && strings.HasPrefix(p.value, f.value) {
			return " (which starts with " + f.name + ")"
		}
	}
	return ""
}

// excerptRunes bounds how much of a refused value an error quotes.
const excerptRunes = 40

// excerpt quotes the start of a value for an error: at most excerptRunes
// runes, with "..." after the quote when there was more.
func excerpt(v string) string {
	n := 0
	for i := range v {
		if n == excerptRunes {
			return strconv.Quote(v[:i]) + "..."
		}
		n++
	}
	return strconv.Quote(v)
}
