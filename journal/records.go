package journal

import (
	"time"
)

// Owner identifies a supervisor process.
type Owner struct {
	PID       int       `json:"pid"`
	StartTime int64     `json:"start_time"` // process start, ms since the epoch
	BootID    string    `json:"boot_id"`
	Started   time.Time `json:"started"`
}

// Child identifies the child a supervisor believes is running, so that the
// next supervisor can find it after the first one died.
type Child struct {
	Run       uint64    `json:"run"`
	PID       int       `json:"pid"`
	StartTime int64     `json:"start_time"` // process start, ms since the epoch
	PGID      int       `json:"pgid"`       // 0 when it shared the supervisor's group
	Tag       string    `json:"tag"`        // environment entry every process of its tree carries
	BootID    string    `json:"boot_id"`
	Started   time.Time `json:"started"`
}
