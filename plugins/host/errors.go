package host

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed: the Host was closed.
	ErrClosed = errors.New("host is closed")
	// ErrDigestMismatch: the binary's SHA-256 is not the pinned one; it was
	// not run. The error is a *DigestMismatchError.
	ErrDigestMismatch = errors.New("plugin binary does not match its pinned SHA-256")
	// ErrHandshake: the binary did not start as an ldpsql encoder plugin.
	ErrHandshake = errors.New("plugin handshake failed")
	// ErrReplaced: a later Get for the same name asked for another binary or
	// artifact; call Get again.
	ErrReplaced = errors.New("plugin was replaced")
	// ErrCrashed: the process exited or its connection broke during a call.
	// The next call starts it again.
	ErrCrashed = errors.New("plugin process crashed")
	// ErrTimeout: a call ran past its timeout; the process was killed. The
	// next call starts it again.
	ErrTimeout = errors.New("plugin call timed out")
	// ErrNoModel: the plugin declares no output set (no model loaded).
	ErrNoModel = errors.New("plugin has no model loaded")
	// ErrUnsupported: the plugin does not implement the operation
	// (Decode without has_decoder, Fit without can_fit).
	ErrUnsupported = errors.New("plugin does not support this operation")
	// ErrBadOutput: the plugin's answer has the wrong shape or is malformed.
	ErrBadOutput = errors.New("plugin returned a malformed result")
)

// DigestMismatchError reports a binary whose digest is not the pinned one.
type DigestMismatchError struct {
	Name, Path, Want, Got string
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("host: plugin %q: %s has SHA-256 %s but %s is pinned; refusing to run it", e.Name, e.Path, e.Got, e.Want)
}

// Is makes errors.Is(err, ErrDigestMismatch) true.
func (e *DigestMismatchError) Is(target error) bool { return target == ErrDigestMismatch }
