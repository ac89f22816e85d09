package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/supervise-dev/supervise/record"
)

// fingerprinter computes the agent's fingerprint: the resolved agent binary
// and the --fingerprint files, each by size, mtime and SHA-256. A file is
// hashed again only when its path, size or mtime changed, so the hashing
// happens at most once per boot and once per change of the agent, never on
// every restart.
type fingerprinter struct {
	agent string   // argv[0] as given
	files []string // --fingerprint

	mu    sync.Mutex // held while hashing: the loop and a warm-up take turns
	cache map[string]record.FileFingerprint

	warming sync.WaitGroup
	warmed  atomic.Bool
}

func newFingerprinter(agent string, files []string) *fingerprinter {
	return &fingerprinter{agent: agent, files: files, cache: map[string]record.FileFingerprint{}}
}

// resolveAgent finds the file argv0 runs: looked up in $PATH when it has no
// slash, symlinks followed (an upgrade often just moves a symlink).
func resolveAgent(argv0 string) string {
	p, err := exec.LookPath(argv0)
	if err != nil {
		p = argv0
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	if a, err := filepath.Abs(p); err == nil {
		p = a
	}
	return p
}

// warm hashes in the background, once, so that a park by the breaker
// (which needs the fingerprint before the next launch) finds it cached.
// wait joins it.
func (f *fingerprinter) warm() {
	if f.warmed.Swap(true) {
		return
	}
	f.warming.Go(func() { f.get() })
}

func (f *fingerprinter) wait() { f.warming.Wait() }

// get returns the current fingerprint.
func (f *fingerprinter) get() *record.Fingerprint {
	f.mu.Lock()
	defer f.mu.Unlock()
	paths := append([]string{resolveAgent(f.agent)}, f.files...)
	fp := &record.Fingerprint{}
	sum := sha256.New()
	for _, p := range paths {
		ff := f.file(p)
		fp.Files = append(fp.Files, ff)
		io.WriteString(sum, ff.Path+"\x00"+ff.SHA256+"\x00"+ff.Error+"\n")
	}
	fp.Sum = hex.EncodeToString(sum.Sum(nil))
	return fp
}

// file fingerprints one file, from the cache when its size and mtime are
// unchanged.
func (f *fingerprinter) file(p string) record.FileFingerprint {
	st, err := os.Stat(p)
	if err != nil {
		delete(f.cache, p)
		return record.FileFingerprint{Path: p, Error: "cannot stat: " + errText(err)}
	}
	if c, ok := f.cache[p]; ok && c.Size == st.Size() && c.MTime.Equal(st.ModTime()) && c.Error == "" {
		return c
	}
	ff := record.FileFingerprint{Path: p, Size: st.Size(), MTime: st.ModTime().UTC().Round(0)}
	fh, err := os.Open(p)
	if err != nil {
		ff.Error = "cannot read: " + errText(err)
		return ff
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		ff.Error = "cannot read: " + errText(err)
		return ff
	}
	ff.SHA256 = hex.EncodeToString(h.Sum(nil))
	f.cache[p] = ff
	return ff
}

func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
