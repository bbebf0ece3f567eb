package host

import (
	"context"

	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// Handshake starts the binary at path (refusing it unless its SHA-256 is
// sha256hex), asks it to describe itself and stops it. Use it to check a binary
// when it is registered. The description is that of the plugin with no model
// loaded.
func Handshake(ctx context.Context, path, sha256hex string) (sdk.Description, error) {
	h := New(nil)
	defer h.Close()
	p, err := h.Get(ctx, Spec{Name: "handshake", Path: path, SHA256: sha256hex})
	if err != nil {
		return sdk.Description{}, err
	}
	return p.Describe(ctx)
}
