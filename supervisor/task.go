package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
)

// taskID identifies a task command: its working directory and argv (an
// agent CLI keeps its sessions per project directory, so the same words in
// another directory are another task). Task mode itself is a part of the
// machine's state (machine.TaskConfig, machine.TaskState).
func taskID(dir string, argv []string) string {
	h := sha256.New()
	h.Write([]byte(dir))
	for _, a := range argv {
		h.Write([]byte{0})
		h.Write([]byte(a))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
