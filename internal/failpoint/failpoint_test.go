package failpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	for _, name := range []string{EnvWedge, EnvCommitDelay, EnvVerifyInline, EnvActorFail} {
		t.Setenv(name, "")
	}
	if p := FromEnv(); p != (Points{}) {
		t.Errorf("unset: %+v, want all off", p)
	}
	t.Setenv(EnvWedge, "/w")
	t.Setenv(EnvCommitDelay, "3ms")
	t.Setenv(EnvVerifyInline, "0")
	t.Setenv(EnvActorFail, "/a")
	want := Points{Wedge: "/w", CommitDelay: 3 * time.Millisecond, VerifyInline: 0, HasVerifyInline: true, ActorFail: "/a"}
	if p := FromEnv(); p != want {
		t.Errorf("set: %+v, want %+v", p, want)
	}
	t.Setenv(EnvCommitDelay, "-1s")
	t.Setenv(EnvVerifyInline, "lots")
	if p := FromEnv(); p.CommitDelay != 0 || p.HasVerifyInline {
		t.Errorf("invalid values: %+v, want off", p)
	}
}

func TestFailActor(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fail")
	p := Points{ActorFail: file}
	stop := make(chan struct{})
	close(stop)
	if err := p.FailActor(stop); err != nil {
		t.Errorf("interrupted: %v, want nil", err)
	}
	os.WriteFile(file, nil, 0o600)
	if err := p.FailActor(make(chan struct{})); !errors.Is(err, ErrActor) {
		t.Errorf("file present: %v, want ErrActor", err)
	}
}
