package runflags

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestLogDestFileRotates(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	d := NewLogDest(&stderr)
	d.Write([]byte("before\n"))
	if err := d.ToFile(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, LogFile)
	if d.Path() != path {
		t.Errorf("Path = %q, want %q", d.Path(), path)
	}
	rec := []byte(strings.Repeat("x", 1023) + "\n")
	for i := 0; i < logFileMax/len(rec)+10; i++ {
		if _, err := d.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	d.Write([]byte("after\n"))
	if got := stderr.String(); got != "before\nafter\n" {
		t.Errorf("stderr got %q: want only what was written before ToFile and after Close", got)
	}
	cur, err1 := os.Stat(path)
	old, err2 := os.Stat(path + ".1")
	if err1 != nil || err2 != nil {
		t.Fatalf("want %s and its rotated .1: %v %v", LogFile, err1, err2)
	}
	if old.Size() > logFileMax || cur.Size() > logFileMax || old.Size()+cur.Size() != int64((logFileMax/len(rec)+10)*len(rec)) {
		t.Errorf("sizes %d + %d: want each at most %d and every record kept", old.Size(), cur.Size(), logFileMax)
	}
	for _, fi := range []os.FileInfo{cur, old} {
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", fi.Name(), fi.Mode().Perm())
		}
	}
}

func TestLogDestRefusesLinksAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, nil, 0o644)
	if err := os.Symlink(target, filepath.Join(dir, LogFile)); err != nil {
		t.Fatal(err)
	}
	d := NewLogDest(&bytes.Buffer{})
	if err := d.ToFile(dir); err == nil {
		t.Error("ToFile followed a symlink planted as the log file")
	}
	d.Write([]byte("x\n"))
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("the symlink's target got %q", b)
	}
	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, LogFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.ToFile(fifoDir); err == nil { // and never blocks opening it
		t.Error("ToFile took a FIFO for the log file")
	}
}

func TestLogDestTightensMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LogFile)
	os.WriteFile(path, []byte("old\n"), 0o644)
	os.Chmod(path, 0o644)
	d := NewLogDest(&bytes.Buffer{})
	if err := d.ToFile(dir); err != nil {
		t.Fatal(err)
	}
	d.Write([]byte("new\n"))
	d.Close()
	fi, _ := os.Stat(path)
	b, _ := os.ReadFile(path)
	if fi.Mode().Perm() != 0o600 || string(b) != "old\nnew\n" {
		t.Errorf("mode %v content %q: want 0600, appended", fi.Mode().Perm(), b)
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) || IsTerminal(&bytes.Buffer{}) {
		t.Error("a file or a buffer taken for a terminal")
	}
}
