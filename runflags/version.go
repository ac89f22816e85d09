package runflags

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
)

// stamp is the version a packager sets at link time when the build records
// neither a module version nor a VCS revision (a tarball without .git, or
// GOFLAGS=-buildvcs=false):
//
//	go build -ldflags "-X github.com/supervise-dev/supervise/runflags.stamp=v1.2.3" ./cmd/supervise
//
// It is the one package-level variable here, written only by the linker
// and never at run time.
var stamp string

// Version is supervise's version as the build recorded it (`supervise
// --version`), never a bare "devel":
//   - the main module's version (vX.Y.Z from `go install ...@vX.Y.Z`, or the
//     pseudo-version Go stamps from the VCS when built in a checkout);
//   - else "devel" followed by the VCS revision, marked +dirty for
//     uncommitted changes, when the build recorded one;
//   - else the link-time stamp (-ldflags -X ...runflags.stamp=VERSION);
//   - else "devel sha256:" and the first 12 hex digits of the executable's
//     SHA-256, which tells two unstamped builds apart, with a note that the
//     build is unstamped.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = &debug.BuildInfo{}
	}
	if v := version(info, stamp); v != "" {
		return v
	}
	return "devel " + selfHash() + " (unstamped build: no module version, VCS revision or -ldflags -X stamp)"
}

// version is the version info and stamp give, "" when they give none.
func version(info *debug.BuildInfo, stamp string) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return stamp
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return "devel " + rev
}

// selfHash is "sha256:" and the first 12 hex digits of this executable's
// SHA-256, or "sha256:unknown" when it cannot be read.
func selfHash() string {
	exe, err := os.Executable()
	if err != nil {
		return "sha256:unknown"
	}
	f, err := os.Open(exe)
	if err != nil {
		return "sha256:unknown"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "sha256:unknown"
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:12]
}
