//go:build !linux && !darwin

package notify

import (
	"errors"
	"fmt"
)

// Listen is only implemented on Linux and macOS.
// Elsewhere it returns an error wrapping errors.ErrUnsupported.
func Listen(cfg Config) (*Server, error) {
	return nil, fmt.Errorf("notify: listen: %w", errors.ErrUnsupported)
}

// Serve is only implemented on Linux and macOS; see Listen.
func (s *Server) Serve(handle func(Message)) error {
	return fmt.Errorf("notify: serve: %w", errors.ErrUnsupported)
}

// Pending always reports false where Serve is unsupported.
func (s *Server) Pending() bool { return false }

// discard has nothing to do where Listen is unsupported.
func (s *Server) discard() {}
