//go:build !linux

package engine

import "net"

// peerClosed is not implemented on this platform: statements of a disconnected client run to their end
// (GMS still stops one that streams rows, on its own check).
func peerClosed(net.Conn) (closed, supported bool) { return false, false }
