package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Package is the import path of the supervise command, which Binary builds
// when it finds no binary.
const Package = "github.com/supervise-dev/supervise/cmd/supervise"

// Binary finds a supervise binary for Run: $SUPERVISE_BIN, else
// `supervise` next to this executable, else one built with `go build`
// from the module this program was built in (so the harness and the
// binary are the same version), else `supervise` in PATH. Call cleanup
// when done with it.
func Binary(ctx context.Context) (path string, cleanup func(), err error) {
	none := func() {}
	if p := os.Getenv("SUPERVISE_BIN"); p != "" {
		return p, none, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "supervise")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, none, nil
		}
	}
	if gobin, err := exec.LookPath("go"); err == nil {
		dir, err := os.MkdirTemp("", "supervise-bin-")
		if err != nil {
			return "", nil, err
		}
		p := filepath.Join(dir, "supervise")
		out, err := exec.CommandContext(ctx, gobin, "build", "-o", p, Package).CombinedOutput()
		if err == nil {
			return p, func() { os.RemoveAll(dir) }, nil
		}
		os.RemoveAll(dir)
		if lp, lerr := exec.LookPath("supervise"); lerr == nil {
			return lp, none, nil
		}
		return "", nil, fmt.Errorf("no supervise binary: set SUPERVISE_BIN or Config.Supervise (go build %s: %v: %s)", Package, err, out)
	}
	if lp, err := exec.LookPath("supervise"); err == nil {
		return lp, none, nil
	}
	return "", nil, fmt.Errorf("no supervise binary: set SUPERVISE_BIN or Config.Supervise, or put supervise in PATH")
}
