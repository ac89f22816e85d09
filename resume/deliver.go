package resume

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/journal"
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
}

// Items returns the resume file entries of the pending sessions, oldest
// interruption first.
func Items(pending []journal.Session) []Item {
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
			Phase: s.Phase, Tool: s.Tool, Detail: s.Detail, Prompt: s.Prompt, Message: s.Resume.Message})
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
	if !strings.Contains(strings.Join(words, " "), "{session}") {
		return nil, fmt.Errorf("%w: it must contain {session}: resume by explicit id, never 'latest' or a picker", ErrTemplate)
	}
	return words, nil
}

// ErrUnsafeSession reports a session or turn id that ExecArgv will not place
// in an argv: one beginning with '-', which the agent would read as an
// option ("codex exec resume --evil").
var ErrUnsafeSession = errors.New("id begins with '-': it would be read as an option")

// ExecArgv substitutes item into a parsed template. It refuses (with
// ErrUnsafeSession) a session id, or a turn id the template uses, that
// begins with '-': the notify parser already refuses such session ids, and
// this check holds even for a journal written before it did.
func ExecArgv(template []string, item Item) ([]string, error) {
	if strings.HasPrefix(item.Session, "-") {
		return nil, fmt.Errorf("session %q: %w", item.Session, ErrUnsafeSession)
	}
	if strings.HasPrefix(item.Turn, "-") && strings.Contains(strings.Join(template, " "), "{turn}") {
		return nil, fmt.Errorf("session %q: turn %q: %w", item.Session, item.Turn, ErrUnsafeSession)
	}
	r := strings.NewReplacer("{session}", item.Session, "{message}", item.Message, "{turn}", item.Turn)
	argv := make([]string, len(template))
	for i, w := range template {
		argv[i] = r.Replace(w)
	}
	return argv, nil
}
