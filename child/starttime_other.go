//go:build !linux

package child

import (
	"context"

	"github.com/shirou/gopsutil/v4/process"
)

func init() { process.EnableBootTimeCache(true) }

// startTime asks gopsutil for the start time of pid (milliseconds since
// the epoch).
func startTime(pid int) (int64, error) {
	p, err := process.NewProcessWithContext(context.Background(), int32(pid))
	if err != nil {
		return 0, ErrGone
	}
	t, err := p.CreateTimeWithContext(context.Background())
	if err != nil {
		return 0, ErrGone
	}
	return t, nil
}
