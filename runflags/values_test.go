package runflags

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"": 0, "1024": 1024, "64M": 64 << 20, "2G": 2 << 30,
		"512MiB": 512 << 20, "1.5g": 3 << 29, "10kb": 10 << 10, "100B": 100, "1K": 1024, "1Ki": 1024,
		"1KiB": 1024, "1KB": 1024, "3m": 3 << 20, "2Gi": 2 << 30, "1T": 1 << 40, " 8M ": 8 << 20,
		"0.5K": 512, "1.25M": 1310720, "8589934591G": (1<<33 - 1) << 30,
		"9223372036854775807": 1<<63 - 1} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"lots", "-1M", "0", "0M", "0.0G", "1X", "NaN", "nan", "Inf", "+Inf", "-Inf",
		"infinity", "1e30", "1e3", "1E3M", "0x10", "99999999999999999999", "9223372036854775808",
		"8589934592G", "8388608T", "1.5", "0.1K", "1.", ".5G", "1..5G", "1.5.5G", "+1M", "1 000", "1i",
		"1iB", "K", "B", "MiB", "1MM", "1_000", "1,5G", "１M"} {
		if v, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) = %d, accepted", bad, v)
		}
	}
}

// Under systemd (stderr is the stream JOURNAL_STREAM names) log lines carry
// no timestamp of their own; elsewhere they do; --log-format json works.
func TestLoggerUnderJournal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	unix.Fstat(int(f.Fd()), &st)
	read := func() string { b, _ := os.ReadFile(f.Name()); f.Truncate(0); f.Seek(0, 0); return string(b) }

	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	for _, format := range []string{"text", "json"} {
		log, err := newLogger("info", format, f)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("child started", "pid", 42)
		if out := read(); strings.Contains(out, "time") || !strings.Contains(out, "child started") {
			t.Errorf("%s under the journal: %q", format, out)
		}
	}
	t.Setenv("JOURNAL_STREAM", "1:2")
	log, _ := newLogger("info", "json", f)
	log.Info("child started")
	if out := read(); !strings.Contains(out, `"time"`) || !strings.HasPrefix(out, "{") {
		t.Errorf("json elsewhere: %q", out)
	}
}

// checkAddr accepts what net.Listen("tcp") takes as a port to listen on.
func TestCheckAddr(t *testing.T) {
	for _, addr := range []string{"", ":9090", "127.0.0.1:0", "[::1]:9090", "localhost:9090", "0.0.0.0:http"} {
		if err := checkAddr(addr); err != nil {
			t.Errorf("checkAddr(%q) = %v, want nil", addr, err)
		}
	}
	for _, addr := range []string{"nope", "9090", "127.0.0.1", ":", "[::1]", ":-1", ":65536", "a:b:c"} {
		if err := checkAddr(addr); err == nil {
			t.Errorf("checkAddr(%q) = nil, want an error", addr)
		}
	}
}

// The version: the main module's, else devel and the VCS revision.
func TestVersion(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		main     string
		settings []debug.BuildSetting
		stamp    string
		want     string
	}{
		{main: "v1.2.3", settings: vcs("vcs.revision", "0123456789abcdef0123"), stamp: "v9", want: "v1.2.3"},
		{main: "v0.0.0-20261201120000-0123456789ab+dirty", want: "v0.0.0-20261201120000-0123456789ab+dirty"},
		{main: "(devel)", settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.modified", "false"), want: "devel 0123456789ab"},
		{main: "(devel)", settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"), want: "devel 0123456789ab+dirty"},
		{main: "", settings: vcs("vcs.revision", "abc"), want: "devel abc"},
		// -buildvcs=false: the link-time stamp, else nothing (Version then
		// names the executable's hash).
		{main: "(devel)", stamp: "v1.4.0-deb1", want: "v1.4.0-deb1"},
		{main: "(devel)", want: ""},
	} {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/supervise-dev/supervise", Version: c.main}, Settings: c.settings}
		if got := version(info, c.stamp); got != c.want {
			t.Errorf("version(%q, %v, %q) = %q, want %q", c.main, c.settings, c.stamp, got, c.want)
		}
	}
	if v := Version(); v == "" || v == "devel" {
		t.Errorf("Version() = %q", v)
	}
}
