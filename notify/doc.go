// Package notify is the supervisor's notify socket: sd_notify datagrams in,
// typed messages out, and the Client agents use to send them.
//
// # Wire format
//
// One unix datagram (SOCK_DGRAM) per message, at most MaxDatagram (4096)
// bytes of UTF-8: newline-separated KEY=VALUE assignments, trailing newline
// optional, blank lines ignored, one trailing NUL tolerated. A datagram is
// rejected whole if it is empty, longer than MaxDatagram (the server never
// parses a truncated prefix), contains a NUL byte, is not valid UTF-8, or
// has a line without '=' or with an empty key. "\r" is part of a value, so
// CRLF lines never match the values below.
//
// Standard keys honoured: READY=1, STOPPING=1, WATCHDOG=1, WATCHDOG=trigger,
// STATUS=<line>, WATCHDOG_USEC=<usec>, EXTEND_TIMEOUT_USEC=<usec> and
// BARRIER=1. Other values of these keys are ignored (READY=0, a STATUS with
// control characters, a timeout that is not a decimal in 1..MaxUSec). When a
// standard key repeats, the last usable value wins. Unknown keys are
// ignored; in particular MAINPID= is never honoured, so the supervisor's
// kill target cannot be redirected.
//
// Private keys, always with X_SUPERVISE_SESSION in the same datagram:
//
//	X_SUPERVISE_SESSION=<id>
//	X_SUPERVISE_EVENT=turn-begin|turn-end|waiting|phase|resumed|closed|heartbeat
//	X_SUPERVISE_TURN=<id>
//	X_SUPERVISE_OUTCOME=completed|failed|cancelled   (required with turn-end)
//	X_SUPERVISE_PHASE=model|tool|idle                (required with phase)
//	X_SUPERVISE_TOOL=<id>
//	X_SUPERVISE_PROMPT=<text>                        (kept up to MaxPromptLen bytes)
//
// Ids are 1 to MaxIDLen bytes without control characters; a session id may
// not begin with '-' (it lands in --resume-exec argv templates). A private key
// given twice is ErrMalformed; a private key without a session, an unknown
// event, outcome or phase, or a bad id is ErrProtocol. WATCHDOG=1 with a
// session and no event is a session heartbeat (EventHeartbeat).
//
// BARRIER=1 must be the only assignment of its datagram and carry exactly
// one file descriptor (SCM_RIGHTS), as in systemd; anything else is a
// protocol violation and is dropped.
//
// # Server
//
// Listen binds the socket in a private 0700 directory; Serve reads it and
// calls a handler for each accepted datagram, in order, on one goroutine.
// Datagrams without SCM_CREDENTIALS, from a sender Config.Accept rejects,
// truncated (MSG_TRUNC, MSG_CTRUNC) or failing Parse are dropped, counted
// in Stats and logged at most once a second per reason.
//
// On macOS (and on Linux built with -tags supervise_portable) datagrams
// carry no credentials: Credentials is false, messages have PID and UID 0,
// and the only sender check is the directory's mode, which admits every
// process of the same uid. docs/macos.md says what that changes.
//
// Every file descriptor received is closed by the Server, except the one
// of a valid BARRIER=1 message: that one is handed to the handler in
// Message.Fd, and the handler owns it. It must confirm it with Ack (one
// AckByte, then close) once every message received before the barrier is
// durable (journaled); the agent's Barrier call returns nil when it does.
// Acking early breaks the guarantee; never closing the fd leaks it and
// makes the agent time out. A bare close (as when the supervisor dies and
// the kernel closes its fds) is seen by Barrier as ErrBarrierUnconfirmed,
// so a supervisor killed before its commit can never look like an ack.
// When the Server refused a datagram from the same sender (pid) since its
// previous barrier, Message.Refused is set: the handler answers with Nack
// (NackByte, "0") instead, and Barrier returns ErrBarrierRefused. A
// handler that refuses messages itself keeps its own Refusals.
//
// The agent chose what the barrier fd is, so Ack and Nack never block on
// it: they write only to a pipe, a FIFO or a unix socket, only what fits at
// once, and without changing the flags of the agent's open file
// description (on Linux: splice(2) from a pipe of their own). An fd that is
// full (ErrBarrierWouldBlock) or of another kind (ErrBarrierNotPipe) is
// closed without a byte: the agent's Barrier reads "unconfirmed", outcome
// unknown, as the protocol already defines it. A barrier dropped unanswered
// is closed with Release. Those three, and the Server for every other fd it
// receives, turn off SO_LINGER on a socket before closing it, so that no
// close waits for the agent's peer either.
//
// Close must be called to release the socket and remove the socket file;
// it makes Serve return nil and is safe to call more than once. Datagrams
// still queued are discarded and their fds closed the same way.
//
// # Client
//
// Client sends each message on a new socket with a send deadline, so it
// survives supervisor restarts and never blocks the agent on a full queue.
// Its typed helpers check their datagram with Parse before sending it.
// Any sd_notify client works as well: libsystemd, go-systemd's SdNotify, or
// examples/python/agent.py in this repository.
package notify
